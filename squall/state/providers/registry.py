"""How a topology's configuration picks its state provider, and the in-memory one.

``topology.state.provider`` names the provider: a short name of :data:`PROVIDERS`
(``memory``, the default, ``sqlite``, ``redis`` or ``postgres``) or the dotted path of
a :class:`~squall.state.providers.provider.StateProvider` class
(``package.module.Class``, as Storm's setting is a class name).
``topology.state.provider.config`` is a dict of its options. Every provider takes
``namespace``: the prefix that keeps this topology's stores apart from other
topologies' on a shared backend (default: the topology's name).

A short name maps to a dotted class path, imported (with :mod:`importlib`) when the
provider is resolved: the durable providers live with their systems in
:mod:`squall.connectors`, which this package does not import, so a topology using
``memory`` imports no backend, and ``psycopg`` is needed only where ``postgres`` is used.

Where it runs: :func:`check_provider` where a topology is submitted (it imports the
provider's class and checks the options; it connects to nothing); :func:`provider_for`
wherever the provider is needed (the providers carry only options and connect in
:meth:`~StateProvider.make_store`, in the task).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from squall.state.base import StateStore
from squall.state.providers.options import common_checks, options_problem_of
from squall.state.providers.provider import (
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    StateProvider,
    check_namespace,
    raise_if_problem,
)

#: The provider used when ``topology.state.provider`` is not set.
DEFAULT_PROVIDER = "memory"


@dataclass(frozen=True)
class MemoryStateProvider(StateProvider):
    """In-process stores, one per :meth:`make_store` call, lost when their process ends
    (Storm's ``InMemoryKeyValueStateProvider``). A store pickles with its data: on Spark,
    where a bolt is snapshotted by pickling, its state goes with it."""

    name: ClassVar[str] = "memory"
    durable: ClassVar[bool] = False

    prefix: str

    def __post_init__(self) -> None:
        raise_if_problem(options_problem_of(self.name, {"namespace": self.prefix}, common_checks()))

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        """Why ``options`` are not this provider's options, or None."""
        return options_problem_of(cls.name, options, common_checks())

    def make_store(self, namespace: str) -> StateStore:
        """A new, empty in-memory store (nothing is shared with other stores)."""
        from squall.state.providers.memory_store import MemoryStore

        return MemoryStore(check_namespace(namespace))


#: Provider short name -> the dotted path of its class (imported when used).
PROVIDERS: dict[str, str] = {
    "memory": f"{__name__}.MemoryStateProvider",
    "sqlite": "squall.connectors.sqlite.provider.SqliteStateProvider",
    "redis": "squall.connectors.redis.provider.RedisStateProvider",
    "postgres": "squall.connectors.postgres.provider.PostgresStateProvider",
}


def _known() -> str:
    return ", ".join(repr(known) for known in PROVIDERS)


def _is_dotted_path(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and all(part.isidentifier() for part in parts)


def _why(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


def resolve_provider(name: Any) -> type[StateProvider] | str:
    """The provider class ``name`` (a short name of :data:`PROVIDERS` or a dotted class
    path) names, its module imported; or why there is none, a message naming ``name``
    and the known names. Runs where a topology is submitted and where a provider is
    made."""
    known = f"(known providers: {_known()})"
    if isinstance(name, str) and name in PROVIDERS:
        path, shown = PROVIDERS[name], f"{name!r} ({PROVIDERS[name]})"
    elif isinstance(name, str) and _is_dotted_path(name):
        path, shown = name, repr(name)
    else:
        return (
            f"{PROVIDER_KEY}: unknown provider {name!r} (one of {_known()}) and not the "
            "dotted path of a StateProvider class (package.module.Class)"
        )
    module_name, _, attribute = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # an import error, or any error the module raises
        return f"{PROVIDER_KEY}: cannot import provider {shown}: {_why(error)} {known}"
    if not hasattr(module, attribute):
        return (
            f"{PROVIDER_KEY}: unknown provider {shown}: module {module_name!r} has no "
            f"attribute {attribute!r} {known}"
        )
    found = getattr(module, attribute)
    if not isinstance(found, type) or not issubclass(found, StateProvider):
        return (
            f"{PROVIDER_KEY}: provider {shown} is not a StateProvider class (a subclass of "
            f"squall.state.providers.StateProvider), got {found!r} {known}"
        )
    if inspect.isabstract(found):
        missing = ", ".join(sorted(found.__abstractmethods__))
        return (
            f"{PROVIDER_KEY}: provider {shown} is an abstract class: it does not implement "
            f"{missing} {known}"
        )
    return found


def _settings(conf: Mapping[str, Any]) -> tuple[Any, Any]:
    name = conf.get(PROVIDER_KEY)
    options = conf.get(PROVIDER_CONFIG_KEY)
    return (DEFAULT_PROVIDER if name is None else name), ({} if options is None else options)


def _checked(
    conf: Mapping[str, Any], topology_name: str
) -> tuple[type[StateProvider] | None, str | None]:
    name, options = _settings(conf)
    provider = resolve_provider(name)
    if isinstance(provider, str):
        return None, provider
    if not isinstance(options, Mapping):
        return None, f"{PROVIDER_CONFIG_KEY}: must be a dict of options, got {options!r}"
    problem = provider.options_problem(options)
    if problem is not None:
        return None, f"{PROVIDER_CONFIG_KEY}: {problem}"
    if "namespace" not in options and (not isinstance(topology_name, str) or not topology_name):
        return None, (
            f"{PROVIDER_CONFIG_KEY}: 'namespace' defaults to the topology's name, which "
            f"must be a non-empty string, got {topology_name!r}"
        )
    return provider, None


def check_provider(conf: Mapping[str, Any], topology_name: str) -> str | None:
    """Why the state provider settings of ``conf`` are wrong, or None: an unknown
    provider name, a class path that cannot be imported or is no provider class, options
    that are not a dict, an unknown, missing or ill-typed option (as the provider class
    checks them), a package the provider needs that is missing (``psycopg`` for
    ``postgres``). The message names the setting or option.

    Runs where the topology is submitted; imports the provider's module, connects to
    nothing.
    """
    return _checked(conf, topology_name)[1]


def provider_for(conf: Mapping[str, Any], topology_name: str) -> StateProvider:
    """The state provider ``conf`` asks for, its prefix the ``namespace`` option or
    else ``topology_name``. Connects to nothing (see :func:`check_provider` for what is
    checked).

    Raises:
        ValueError: the settings are wrong; the message is :func:`check_provider`'s.
    """
    provider, problem = _checked(conf, topology_name)
    if provider is None:
        raise ValueError(problem)
    _, options = _settings(conf)
    arguments = {key: value for key, value in options.items() if key != "namespace"}
    prefix = options.get("namespace", topology_name)
    make: Callable[..., StateProvider] = provider
    return make(prefix=prefix, **arguments)


__all__ = [
    "DEFAULT_PROVIDER",
    "PROVIDERS",
    "PROVIDER_CONFIG_KEY",
    "PROVIDER_KEY",
    "MemoryStateProvider",
    "check_provider",
    "provider_for",
    "resolve_provider",
]
