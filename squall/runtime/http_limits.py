"""What squall's HTTP servers (the DRPC server, the UI server) share about their bounds:
the checks of a limit's value and the words of the answers that enforce them (``413``
body too large, ``408`` request too slow), so both servers say the same thing."""

from __future__ import annotations


def check_count(value: object, what: str) -> None:
    """Raise ``ValueError`` naming ``what`` unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer, not {value!r}")


def check_seconds(value: object, what: str) -> None:
    """Raise ``ValueError`` naming ``what`` unless ``value`` is a positive number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{what} must be a positive number of seconds, not {value!r}")


def body_too_large(length: int | None, limit: int) -> str:
    """The message of a ``413``: a body of ``length`` bytes (``None``: not announced,
    counted as it came) is over ``limit``."""
    size = "" if length is None else f"{length} bytes, "
    return f"the body is too large: {size}over the {limit} bytes a request may send"


def request_too_slow(seconds: float) -> str:
    """The message of a ``408``: the request did not arrive whole in time."""
    return f"the request did not arrive whole within {seconds:g} s"


__all__ = ["body_too_large", "check_count", "check_seconds", "request_too_slow"]
