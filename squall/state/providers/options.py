"""Checks of the state providers' options (``topology.state.provider.config``): each
says why a value is wrong, naming the option, or returns None.

Pure functions, run where a topology is submitted and where a provider is made; none
connects to anything (the PostgreSQL checks parse the connection string with psycopg,
imported only for them).
"""

from __future__ import annotations

import importlib.util
import math
import os
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

#: The URL schemes of a Redis server.
REDIS_SCHEMES = ("redis", "rediss", "unix")
#: Characters the PostgreSQL provider appends to its table's name for its other tables
#: (``_prepared``, ``_tx``): a table's name is shorter by this much than SQL allows.
_POSTGRES_SUFFIX_ROOM = len("_prepared")
_POSTGRES_NAME_LIMIT = 63

#: Checks an option's value: why it is wrong, or None.
OptionCheck = Callable[[Any], "str | None"]


def text_problem(name: str, value: Any) -> str | None:
    """Why option ``name`` is not a non-empty string, or None."""
    if not isinstance(value, str) or not value:
        return f"{name!r} must be a non-empty string, got {value!r}"
    return None


def directory_problem(value: Any) -> str | None:
    """Why ``directory`` is not a directory path, or None (it need not exist)."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        return f"'directory' must be a directory path (a non-empty string), got {value!r}"
    return None


def seconds_problem(name: str, value: Any) -> str | None:
    """Why option ``name`` is not a finite number of seconds > 0, or None."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        return f"{name!r} must be a number of seconds > 0, got {value!r}"
    return None


def redis_url_problem(value: Any) -> str | None:
    """Why ``url`` is not a Redis URL (``redis://``, ``rediss://``, ``unix://``), or
    None."""
    if not isinstance(value, str) or urllib.parse.urlsplit(value).scheme not in REDIS_SCHEMES:
        schemes = ", ".join(f"{scheme}://" for scheme in REDIS_SCHEMES[:-1])
        return f"'url' must be a {schemes} or {REDIS_SCHEMES[-1]}:// URL, got {value!r}"
    return None


def psycopg_problem() -> str | None:
    """Why the ``postgres`` provider cannot be used here (psycopg is not installed),
    or None. Looks for the package without importing it."""
    if importlib.util.find_spec("psycopg") is None:
        return (
            "provider 'postgres' needs psycopg 3, the 'postgres' extra: "
            "pip install 'squall[postgres]'"
        )
    return None


def postgres_dsn_problem(value: Any) -> str | None:
    """Why ``dsn`` is not a connection string libpq reads (a ``postgresql://`` URL or
    ``key=value`` pairs), or None; its password hidden in the message. Needs psycopg."""
    import psycopg

    from squall.connectors.postgres.connection import one_line, redact_dsn

    if not isinstance(value, str) or not value.strip():
        return (
            "'dsn' must be a PostgreSQL connection string (postgresql://... or key=value "
            f"pairs), got {value!r}"
        )
    try:
        psycopg.conninfo.conninfo_to_dict(value)
    except psycopg.Error as error:
        return (
            f"'dsn' must be a PostgreSQL connection string, got {redact_dsn(value)!r}: "
            f"{one_line(error)}"
        )
    return None


def postgres_table_problem(value: Any) -> str | None:
    """Why ``table`` is not a usable ``[schema.]name`` (short enough for the
    ``_prepared`` and ``_tx`` tables beside it), or None."""
    from squall.connectors.postgres.connection import name_problem

    problem = name_problem("'table'", value, qualified=True)
    if problem is not None:
        return problem
    last = str(value).rsplit(".", 1)[-1]
    if len(last) > _POSTGRES_NAME_LIMIT - _POSTGRES_SUFFIX_ROOM:
        return (
            f"'table' must be at most {_POSTGRES_NAME_LIMIT - _POSTGRES_SUFFIX_ROOM} "
            f"characters (the provider adds _prepared and _tx for its other tables), "
            f"got {value!r}"
        )
    return None


def postgres_timeout_problem(value: Any) -> str | None:
    """Why the PostgreSQL ``connect_timeout`` is not a whole number of seconds >= 1,
    or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"'connect_timeout' must be a whole number of seconds >= 1, got {value!r}"
    return None


def options_problem_of(
    provider: str,
    options: Mapping[Any, Any],
    checks: Mapping[str, OptionCheck],
    required: tuple[str, ...] = (),
) -> str | None:
    """Why ``options`` are not options of ``provider`` (checked by ``checks``), or None."""
    for name in options:
        if name not in checks:
            known = ", ".join(repr(known) for known in sorted(checks))
            return f"unknown option {name!r} for provider {provider!r} (its options: {known})"
    for name in required:
        if name not in options:
            return f"provider {provider!r} needs option {name!r}"
    for name, check in checks.items():
        if name in options:
            problem = check(options[name])
            if problem is not None:
                return problem
    return None


__all__ = [
    "REDIS_SCHEMES",
    "OptionCheck",
    "directory_problem",
    "options_problem_of",
    "postgres_dsn_problem",
    "postgres_table_problem",
    "postgres_timeout_problem",
    "psycopg_problem",
    "redis_url_problem",
    "seconds_problem",
    "text_problem",
]
