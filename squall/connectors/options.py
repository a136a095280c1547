"""Submit-time checks of connector options: a wrong option is an
``InvalidTopologyError`` naming the component and the option."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import Any

from squall.model.errors import InvalidTopologyError


class OptionChecker:
    """Checks one component's connector options, raising at the first wrong one.

    Runs where the topology is submitted (from a connector's ``validate_submission``).
    """

    def __init__(self, component_id: str, connector: str) -> None:
        self.component_id = component_id
        self.connector = connector

    def fail(self, message: str) -> InvalidTopologyError:
        """The error for a wrong option: ``component 'x' (RedisStreamSpout): message``."""
        return InvalidTopologyError(
            f"component {self.component_id!r} ({self.connector}): {message}"
        )

    def positive_int(self, name: str, value: Any) -> int:
        """``value`` if it is an int > 0."""
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(f"{name} must be an int > 0, got {value!r}")
        return value

    def optional_positive_int(self, name: str, value: Any) -> int | None:
        """``value`` if it is None or an int > 0."""
        return None if value is None else self.positive_int(name, value)

    def positive_number(self, name: str, value: Any) -> float:
        """``value`` if it is a number > 0."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise self.fail(f"{name} must be a number > 0, got {value!r}")
        return float(value)

    def text(self, name: str, value: Any) -> str:
        """``value`` if it is a non-empty string."""
        if not isinstance(value, str) or not value:
            raise self.fail(f"{name} must be a non-empty string, got {value!r}")
        return value

    def choice(self, name: str, value: Any, choices: tuple[str, ...]) -> str:
        """``value`` if it is one of ``choices``."""
        if value not in choices:
            raise self.fail(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
        return str(value)

    def url(self, name: str, value: Any, schemes: tuple[str, ...]) -> str:
        """``value`` if it is a URL with one of ``schemes``."""
        if not isinstance(value, str) or urllib.parse.urlsplit(value).scheme not in schemes:
            wanted = ", ".join(f"{scheme}://" for scheme in schemes)
            raise self.fail(f"{name} must be a URL ({wanted}), got {value!r}")
        return value

    def field_names(self, name: str, fields: Any) -> tuple[str, ...]:
        """``fields`` if it is a non-empty list of distinct, non-empty field names."""
        if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
            raise self.fail(f"{name} must be a non-empty list of field names, got {fields!r}")
        for field in fields:
            self.text(f"a field of {name}", field)
        if len(set(fields)) != len(fields):
            raise self.fail(f"{name} names a field twice: {list(fields)}")
        return tuple(fields)
