"""Exceptions that squall raises to users, and the one users raise to squall."""

from __future__ import annotations


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
