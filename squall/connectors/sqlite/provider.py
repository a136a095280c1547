"""The SQLite state provider (``topology.state.provider: sqlite``): stateful bolts'
states in a database file per topology prefix (see :mod:`squall.connectors.sqlite.store`).

Options (``topology.state.provider.config``): ``directory`` (default
``squall-state``), ``namespace``. Checked where the topology is submitted and where the
provider is made; nothing is opened before a task makes a store.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from squall.state.base import StateStore
from squall.state.providers.options import OptionCheck, common_checks, options_problem_of
from squall.state.providers.provider import StateProvider, check_namespace, raise_if_problem

#: The SQLite provider's directory unless ``directory`` is given.
DEFAULT_SQLITE_DIRECTORY = "squall-state"


def directory_problem(value: Any) -> str | None:
    """Why ``directory`` is not a directory path, or None (it need not exist)."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        return f"'directory' must be a directory path (a non-empty string), got {value!r}"
    return None


def _sqlite_checks() -> dict[str, OptionCheck]:
    return {**common_checks(), "directory": directory_problem}


@dataclass(frozen=True)
class SqliteStateProvider(StateProvider):
    """Stores in SQLite files: ``<directory>/<prefix>.sqlite``, one file per prefix
    (see :mod:`squall.connectors.sqlite.store`). Durable across restarts of the
    process; processes on one machine share a file, one writing at a time.

    ``directory`` is made absolute when the provider is made (relative to that
    process's working directory) and created when the first store is made."""

    name: ClassVar[str] = "sqlite"
    durable: ClassVar[bool] = True

    prefix: str
    directory: str = DEFAULT_SQLITE_DIRECTORY

    def __post_init__(self) -> None:
        options = {"namespace": self.prefix, "directory": self.directory}
        raise_if_problem(options_problem_of(self.name, options, _sqlite_checks()))
        object.__setattr__(self, "directory", os.path.abspath(os.fspath(self.directory)))

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, _sqlite_checks())

    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` in this prefix's file (opened at first use)."""
        from squall.connectors.sqlite.store import SqliteStore

        return SqliteStore(self, check_namespace(namespace))


__all__ = ["DEFAULT_SQLITE_DIRECTORY", "SqliteStateProvider", "directory_problem"]
