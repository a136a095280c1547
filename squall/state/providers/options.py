"""Checks of the state providers' options (``topology.state.provider.config``) that
every provider shares: each says why a value is wrong, naming the option, or returns
None. A backend's own checks (a Redis URL, a PostgreSQL connection string) live with its
provider in :mod:`squall.connectors`.

Pure functions, run where a topology is submitted and where a provider is made; none
connects to anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

#: Checks an option's value: why it is wrong, or None.
OptionCheck = Callable[[Any], "str | None"]


def text_problem(name: str, value: Any) -> str | None:
    """Why option ``name`` is not a non-empty string, or None."""
    if not isinstance(value, str) or not value:
        return f"{name!r} must be a non-empty string, got {value!r}"
    return None


def common_checks() -> dict[str, OptionCheck]:
    """The checks of the options every provider takes (``namespace``)."""
    return {"namespace": lambda value: text_problem("namespace", value)}


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
    "OptionCheck",
    "common_checks",
    "options_problem_of",
    "seconds_problem",
    "text_problem",
]
