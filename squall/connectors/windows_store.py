"""A durable Trident windows store over squall's state providers (the role of Storm's
``HBaseWindowsStoreFactory``).

:class:`StateProviderWindowsStoreFactory` keeps a window task's tuples, fired results
and bookkeeping in the stores of a state provider (``sqlite``, ``redis``, ``postgres``,
or ``memory`` for tests; see :mod:`squall.state.providers`), chosen like a stateful
bolt's: by ``topology.state.provider`` and ``topology.state.provider.config``, unless
the factory names its own. Every window task has a namespace of its own
(``<namespace>-<window id>-<task index>``, under the provider's prefix: by default the
topology's name), so a topology submitted again with the same name, provider and
window operations finds its windows again. Each write is committed to the provider at
once.

Delivery: what a window task added, fired or emitted before a restart is resumed from
the store (see :mod:`squall.trident.windowing.processor`); a batch that was not
committed is replayed and emits its windows' results again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from squall.model.config import Config
from squall.state.base import BufferedKeyValueState
from squall.state.providers.provider import PROVIDER_CONFIG_KEY, PROVIDER_KEY, StateProvider
from squall.state.providers.registry import check_provider, provider_for
from squall.trident.windowing.store import (
    KEY_SEPARATOR,
    Entry,
    WindowsStore,
    WindowsStoreFactory,
)

#: The namespace of keys that name no window task.
_SHARED = "shared"


class StateProviderWindowsStore(WindowsStore):
    """A :class:`WindowsStore` over a state provider: one key-value state per window
    task (keys ``<kind>|<window id>|<task index>|...``), each write committed at once.

    Args:
        provider: the provider (not yet connected).
        namespace: the start of every state's namespace.
    """

    def __init__(self, provider: StateProvider, namespace: str) -> None:
        self.provider = provider
        self.namespace = namespace
        self._states: dict[str, BufferedKeyValueState] = {}

    def _state_of(self, key: str) -> BufferedKeyValueState:
        parts = key.split(KEY_SEPARATOR)
        task = "-".join(parts[1:3]) if len(parts) >= 4 else _SHARED
        state = self._states.get(task)
        if state is None:
            namespace = f"{self.namespace}-{task}"
            state = self.provider.make_state(namespace, f"Trident windows store {namespace!r}")
            self._states[task] = state
        return state

    @staticmethod
    def _save(states: Iterable[BufferedKeyValueState]) -> None:
        for state in {id(s): s for s in states}.values():
            txid = (state.committed_txid() or 0) + 1
            state.prepare_commit(txid)
            state.commit(txid)

    def get(self, key: str | list[str]) -> Any:
        if isinstance(key, list):
            return [self.get(k) for k in key]
        return self._state_of(key).get(key)

    def get_all_keys(self) -> Iterable[str]:
        """The keys of the window tasks this store has read or written (a window task
        reads its own first, when it starts)."""
        return [key for state in list(self._states.values()) for key, _ in state]

    def put(self, key: str, value: Any) -> None:
        Entry(key, value)  # checks
        state = self._state_of(key)
        state.put(key, value)
        self._save([state])

    def put_all(self, entries: Iterable[Entry]) -> None:
        touched = []
        for entry in entries:
            state = self._state_of(entry.key)
            state.put(entry.key, entry.value)
            touched.append(state)
        self._save(touched)

    def remove(self, key: str) -> None:
        self.remove_all([key])

    def remove_all(self, keys: Iterable[str]) -> None:
        touched = []
        for key in keys:
            state = self._state_of(key)
            state.delete(key)
            touched.append(state)
        self._save(touched)

    def shutdown(self) -> None:
        states, self._states = list(self._states.values()), {}
        for state in states:
            state.close()

    def __repr__(self) -> str:
        return f"StateProviderWindowsStore({self.provider!r}, namespace={self.namespace!r})"


class StateProviderWindowsStoreFactory(WindowsStoreFactory):
    """Makes a :class:`StateProviderWindowsStore`: windows that survive a restart.

    Args:
        provider: a provider's short name (``"sqlite"``, ``"redis"``, ``"postgres"``,
            ``"memory"``) or class path; ``None``: the topology's
            ``topology.state.provider``.
        config: that provider's options (as ``topology.state.provider.config``, e.g.
            ``{"directory": "state"}`` for ``sqlite``); ``None``: the topology's
            ``topology.state.provider.config`` (with ``provider`` given: no options).
        namespace: the start of the window tasks' namespaces.

    Raises:
        ValueError: (at once) a provider or options the registry refuses, naming the
            setting or option.
    """

    def __init__(
        self,
        provider: str | None = None,
        config: dict[str, Any] | None = None,
        namespace: str = "trident-windows",
    ) -> None:
        self.provider = provider
        self.config = dict(config) if config is not None else None
        self.namespace = namespace
        self._store: StateProviderWindowsStore | None = None
        if provider is not None:
            problem = check_provider(self._settings({}), "windows")
            if problem is not None:
                raise ValueError(f"StateProviderWindowsStoreFactory: {problem}")

    def _settings(self, conf: dict[str, Any]) -> dict[str, Any]:
        settings = dict(conf)
        if self.provider is not None:
            settings[PROVIDER_KEY] = self.provider
            settings[PROVIDER_CONFIG_KEY] = self.config or {}
        elif self.config is not None:
            settings[PROVIDER_CONFIG_KEY] = self.config
        return settings

    def create(self, conf: dict[str, Any]) -> StateProviderWindowsStore:
        """The task's store (made at the first call; connects at its first use).

        Raises:
            ValueError: the provider settings are wrong (naming the setting).
        """
        if self._store is None:
            name = str(conf.get(Config.TOPOLOGY_NAME, ""))
            provider = provider_for(self._settings(conf), name)
            self._store = StateProviderWindowsStore(provider, self.namespace)
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_store"] = None  # a copy (another task) makes a store of its own
        return state

    def __repr__(self) -> str:
        return (
            f"StateProviderWindowsStoreFactory(provider={self.provider!r}, "
            f"config={self.config!r}, namespace={self.namespace!r})"
        )


__all__ = ["StateProviderWindowsStore", "StateProviderWindowsStoreFactory"]
