"""The table of a PostgreSQL map state: its columns for each state type, and the
conversion of stored values to rows and back.

Every layout starts with the key: ``key TEXT PRIMARY KEY``, the compact JSON array of
the group-by values (``["cow"]``; ``[]`` for a global aggregate; the text Redis and
SQLite states use), and ``key_values JSONB``, the same array as JSONB, computed by
PostgreSQL from ``key`` (a generated column), so SQL can read the group-by values
(``key_values->>0``). Then, per state type:

==================  =================================================
non-transactional   ``value JSONB``
transactional       ``txid BIGINT NOT NULL``, ``value JSONB``
opaque              ``txid BIGINT NOT NULL``, ``curr JSONB``, ``prev JSONB``
==================  =================================================

``txid`` is the transaction that last changed the row; ``curr``/``prev`` the values after
and before it. A ``None`` value is stored as SQL ``NULL``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from squall.runtime.state_errors import StateError
from squall.trident.state.base import OpaqueValue, StateType, TransactionalValue

_SEPARATORS = (",", ":")


def to_json(value: Any) -> str | None:
    """The JSON text of a stored value, ``None`` for ``None`` (stored as SQL NULL).

    Raises:
        StateError: the value is not JSON-serialisable (NaN and infinities included:
            JSONB has no such numbers).
    """
    if value is None:
        return None
    try:
        return json.dumps(value, separators=_SEPARATORS, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise StateError(
            f"state value {value!r} is not JSON-serialisable ({error}); values of durable "
            "states must be JSON types (None, bool, int, finite float, str, list, dict with "
            "str keys)"
        ) from error


@dataclass(frozen=True)
class Layout:
    """The value columns of a state type's table and how a stored value maps onto them.

    Attributes:
        state_type: the state type the layout stores.
        columns: the value columns after ``key`` and ``key_values``, in order.
        types: each column's SQL type.
    """

    state_type: StateType
    columns: tuple[str, ...]
    types: tuple[str, ...]

    def create_table(self, table: sql.Composable) -> sql.Composed:
        """``CREATE TABLE IF NOT EXISTS`` of this layout."""
        definitions = [
            sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(kind))
            for column, kind in zip(self.columns, self.types, strict=True)
        ]
        return sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (key TEXT PRIMARY KEY, "
            "key_values JSONB GENERATED ALWAYS AS (key::jsonb) STORED, {})"
        ).format(table, sql.SQL(", ").join(definitions))

    def select(self, table: sql.Composable) -> sql.Composed:
        """The rows of a list of keys (one parameter: a text array)."""
        return sql.SQL("SELECT key, {} FROM {} WHERE key = ANY(%s::text[])").format(
            sql.SQL(", ").join(sql.Identifier(column) for column in self.columns), table
        )

    def upsert(self, table: sql.Composable) -> sql.Composed:
        """Insert or replace rows given as one array parameter per column (keys first):
        one statement, so all rows are written or none."""
        arrays = [sql.SQL("%s::text[]")] + [
            sql.SQL("%s::{}[]").format(sql.SQL(kind.split()[0])) for kind in self.types
        ]
        updates = [
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(column)) for column in self.columns
        ]
        return sql.SQL(
            "INSERT INTO {} (key, {}) SELECT * FROM unnest({}) ON CONFLICT (key) DO UPDATE SET {}"
        ).format(
            table,
            sql.SQL(", ").join(sql.Identifier(column) for column in self.columns),
            sql.SQL(", ").join(arrays),
            sql.SQL(", ").join(updates),
        )

    def to_row(self, stored: Any) -> tuple[Any, ...]:
        """The column values of a stored value (JSON columns as JSON text).

        Raises:
            StateError: the value is not what this state type stores, or not JSON.
        """
        if self.state_type is StateType.OPAQUE:
            if not isinstance(stored, OpaqueValue):
                raise StateError(f"an opaque state stores OpaqueValue, got {stored!r}")
            return (stored.txid, to_json(stored.curr), to_json(stored.prev))
        if self.state_type is StateType.TRANSACTIONAL:
            if not isinstance(stored, TransactionalValue):
                raise StateError(f"a transactional state stores TransactionalValue, got {stored!r}")
            return (stored.txid, to_json(stored.value))
        return (to_json(stored),)

    def from_row(self, row: tuple[Any, ...]) -> Any:
        """The stored value of a row's value columns (JSONB already decoded)."""
        if self.state_type is StateType.OPAQUE:
            return OpaqueValue(row[0], row[1], row[2])
        if self.state_type is StateType.TRANSACTIONAL:
            return TransactionalValue(row[0], row[1])
        return row[0]


LAYOUTS: dict[StateType, Layout] = {
    StateType.NON_TRANSACTIONAL: Layout(StateType.NON_TRANSACTIONAL, ("value",), ("JSONB",)),
    StateType.TRANSACTIONAL: Layout(
        StateType.TRANSACTIONAL, ("txid", "value"), ("BIGINT NOT NULL", "JSONB")
    ),
    StateType.OPAQUE: Layout(
        StateType.OPAQUE, ("txid", "curr", "prev"), ("BIGINT NOT NULL", "JSONB", "JSONB")
    ),
}


def layout_of_columns(columns: set[str]) -> StateType | None:
    """The state type whose table has exactly ``columns`` (``None``: no state's)."""
    for state_type, layout in LAYOUTS.items():
        if columns == {"key", "key_values", *layout.columns}:
            return state_type
    return None
