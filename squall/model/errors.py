"""Exceptions that squall raises to users, the one users raise to squall, and how
their messages show what a caller gave (:func:`excerpt`)."""

from __future__ import annotations

#: How many characters of a value a caller gave an error message repeats (see
#: :func:`excerpt`).
EXCERPT_CHARS = 64


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """``repr(value)`` for an error message, cut short: a string longer than ``limit``
    characters shows as the ``repr`` of its first ``limit`` followed by ``...``
    (``'xxxx'...``), any other value as the first ``limit`` characters of its ``repr``
    followed by ``...``. So a message naming what a caller gave (a component id, a
    topology name, a key) stays short whatever was given. Runs anywhere; pure.
    """
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}..."
    try:
        text = repr(value)
    except ValueError:  # an integer with more digits than Python converts to text
        return "an integer too long to show"
    return cut(text, limit)


def cut(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit``
    followed by ``...``: :func:`excerpt` for text shown without quotes (a path)."""
    return text if len(text) <= limit else f"{text[:limit]}..."


class SquallError(Exception):
    """Base class of every error squall raises on its own account."""


class InvalidTopologyError(SquallError):
    """A topology cannot be built or submitted.

    Raised by ``TopologyBuilder.create_topology()`` and by the clusters at submit time.
    The message names the component and what is wrong with it.
    """


class TopologyOrderError(InvalidTopologyError):
    """Components cannot be put in topological order: they are on a cycle of
    subscriptions, downstream of one, or subscribe to a component that is neither being
    ordered nor upstream.

    Raised by ``StormTopology.topological_order``; ``components`` lists them, sorted.
    """

    def __init__(self, components: list[str]) -> None:
        super().__init__(f"components {components} cannot be put in topological order")
        self.components = components


class ComponentError(SquallError):
    """A component's lifecycle method (``open``/``prepare``) raised, so a task cannot start.

    The message names the component, the task and the original exception; the original
    is chained as ``__cause__``.
    """


class FailedException(Exception):
    """Raised by user code in a ``BasicBolt.execute`` to fail the input tuple.

    The input is failed (its spout tuple is replayed by a reliable spout) and nothing is
    reported as an error. Raise :class:`ReportedFailedException` to also report it.
    """


class ReportedFailedException(FailedException):
    """A :class:`FailedException` that is also recorded with ``report_error``."""
