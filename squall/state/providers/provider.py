"""The base of the state providers, and how namespaces are qualified and named.

A provider carries only its options (it is pickled with the topology and sent wherever
a task runs) and connects nothing until a task makes a store from it. Every store of a
provider lives under the provider's *prefix* (by default the topology's name), so two
topologies sharing one database, server or directory never see each other's keys.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from squall.state.base import BufferedKeyValueState, StateStore

#: The configuration key naming the provider.
PROVIDER_KEY = "topology.state.provider"
#: The configuration key of the provider's options.
PROVIDER_CONFIG_KEY = "topology.state.provider.config"
#: Separates the prefix from the store's namespace in a qualified namespace.
NAMESPACE_SEPARATOR = ":"
#: Longest file name stem :func:`file_name_stem` returns (file systems allow 255 bytes).
_MAX_STEM = 200


class StateProvider(ABC):
    """Makes the stores of a topology's stateful bolts (one store per namespace: a bolt
    task, the checkpoint spout).

    Where it runs: made where the topology is submitted or where a task starts; pickled
    with its options only. :meth:`make_store` runs in the task that will use the store
    and is the only place that touches the backend.

    A subclass is named in ``topology.state.provider`` by a short name of
    :data:`~squall.state.providers.registry.PROVIDERS` or by its dotted class path
    (``package.module.Class``), imported where the topology is submitted and in each
    task. It is made as ``cls(prefix=<namespace option or topology name>, **options)``
    (the other options of ``topology.state.provider.config`` as keyword arguments), so
    a frozen dataclass with a ``prefix`` field is the usual shape; it must pickle.
    """

    #: The provider's name in ``topology.state.provider``.
    name: ClassVar[str]
    #: Whether a store's data outlives its process (a new store on the same namespace
    #: sees the committed entries, the prepared transaction and the committed txid).
    durable: ClassVar[bool]

    #: Separates this topology's stores from other topologies' on a shared backend.
    prefix: str

    @classmethod
    @abstractmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` (``topology.state.provider.config``) are not options of this
        provider, naming the option, or None. Connects to nothing."""

    @abstractmethod
    def make_store(self, namespace: str) -> StateStore:
        """The store of ``namespace`` (e.g. ``count-0`` for task 0 of bolt ``count``),
        under this provider's prefix. Runs in the task that uses the store. Connects
        nothing yet: a durable store connects (and creates its file or tables) at its
        first operation, and again after a lost connection.

        Raises:
            ValueError: ``namespace`` is not a non-empty string.
        """

    def make_state(self, namespace: str, label: str) -> BufferedKeyValueState:
        """A key-value state over :meth:`make_store` of ``namespace``; errors name it
        ``label`` (``bolt 'count' task 2``). Runs in the task that uses the state; reads
        the store's prepared transaction, so a durable store connects here.

        Raises:
            StateConnectionError: (durable providers) the backend cannot be reached.
            StateError: (durable providers) the backend failed otherwise (a file that
                cannot be made, a table of other columns).
        """
        return BufferedKeyValueState(self.make_store(namespace), label)


def raise_if_problem(problem: str | None) -> None:
    """Raise if ``problem`` (from a provider's option checks) is not None.

    Raises:
        ValueError: ``topology.state.provider.config: <problem>``.
    """
    if problem is not None:
        raise ValueError(f"{PROVIDER_CONFIG_KEY}: {problem}")


def check_namespace(namespace: object) -> str:
    """``namespace`` if it is a non-empty string.

    Raises:
        ValueError: it is not.
    """
    if not isinstance(namespace, str) or not namespace:
        raise ValueError(f"a state namespace must be a non-empty string, got {namespace!r}")
    return namespace


def _escape(text: str) -> str:
    """``text`` with ``%`` and the separator percent-encoded (an injective mapping)."""
    return text.replace("%", "%25").replace(NAMESPACE_SEPARATOR, "%3A")


def qualified_namespace(prefix: str, namespace: str) -> str:
    """The name of ``namespace`` under ``prefix`` on a shared backend:
    ``<prefix>:<namespace>``, with ``%`` and ``:`` in either part percent-encoded, so no
    two (prefix, namespace) pairs share one name (``wordcount:count-0``)."""
    return f"{_escape(prefix)}{NAMESPACE_SEPARATOR}{_escape(check_namespace(namespace))}"


def file_name_stem(prefix: str) -> str:
    """A file name stem for ``prefix``: letters, digits and ``_.-~`` as they are, any
    other character percent-encoded (``my/topo`` -> ``my%2Ftopo``), so distinct
    prefixes get distinct names; a stem that would be longer than 200 characters is cut
    and ends with a hash of the whole prefix instead."""
    stem = urllib.parse.quote(prefix, safe="")
    if stem.startswith("."):  # no hidden files, and never "." or ".."
        stem = "%2E" + stem[1:]
    if len(stem) > _MAX_STEM:
        digest = hashlib.sha256(prefix.encode("utf-8")).hexdigest()[:16]
        stem = f"{stem[: _MAX_STEM - 17]}-{digest}"
    return stem


__all__ = [
    "NAMESPACE_SEPARATOR",
    "PROVIDER_CONFIG_KEY",
    "PROVIDER_KEY",
    "StateProvider",
    "check_namespace",
    "file_name_stem",
    "qualified_namespace",
    "raise_if_problem",
]
