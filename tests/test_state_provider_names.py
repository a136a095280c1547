"""How ``topology.state.provider`` finds a stateful-bolt provider: a short name maps to
a dotted class path imported when used, a dotted class path is accepted too (as Storm's
``topology.state.provider`` is a class name), and an unknown name or path is refused at
submit with a message naming it and the known names. Also: the backends filed with
their systems stay importable where they were."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from squall import Config, LocalCluster
from squall.model.errors import InvalidTopologyError
from squall.state.base import StateStore
from squall.state.providers import (
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    PROVIDERS,
    MemoryStateProvider,
    StateProvider,
    check_provider,
    provider_for,
)
from squall.state.providers.memory_store import MemoryStore
from tests import state_topologies

ROOT = Path(__file__).resolve().parent.parent
KNOWN = "'memory', 'sqlite', 'redis', 'postgres'"


@dataclass(frozen=True)
class LabelledProvider(StateProvider):
    """A provider of this test module, named by its dotted path: in-memory stores whose
    namespace carries a label."""

    name: ClassVar[str] = "labelled"
    durable: ClassVar[bool] = False

    prefix: str
    label: str = "none"

    @classmethod
    def options_problem(cls, options: Mapping[Any, Any]) -> str | None:
        unknown = [name for name in options if name not in ("namespace", "label")]
        return f"unknown option {unknown[0]!r} for provider 'labelled'" if unknown else None

    def make_store(self, namespace: str) -> StateStore:
        return MemoryStore(f"{self.label}/{self.prefix}/{namespace}")


class NotAProvider:
    """A class that is not a :class:`StateProvider`."""


#: This module's name: the dotted paths of its classes start with it.
HERE = __name__


def conf(provider: Any, options: Any = None) -> dict[str, Any]:
    settings: dict[str, Any] = {PROVIDER_KEY: provider}
    if options is not None:
        settings[PROVIDER_CONFIG_KEY] = options
    return settings


def test_each_short_name_is_the_dotted_path_of_its_systems_provider() -> None:
    assert PROVIDERS == {
        "memory": "squall.state.providers.registry.MemoryStateProvider",
        "sqlite": "squall.connectors.sqlite.provider.SqliteStateProvider",
        "redis": "squall.connectors.redis.provider.RedisStateProvider",
        "postgres": "squall.connectors.postgres.provider.PostgresStateProvider",
    }
    from squall.connectors.postgres.provider import PostgresStateProvider
    from squall.connectors.redis.provider import RedisStateProvider
    from squall.connectors.sqlite.provider import SqliteStateProvider

    assert type(provider_for(conf("sqlite", {"directory": "/states"}), "wc")) is (
        SqliteStateProvider
    )
    assert type(provider_for(conf("redis", {"url": "redis://db"}), "wc")) is RedisStateProvider
    assert type(provider_for(conf("postgres", {"dsn": "host=db"}), "wc")) is (PostgresStateProvider)
    assert type(provider_for(conf("memory"), "wc")) is MemoryStateProvider


def test_a_dotted_class_path_names_a_provider() -> None:
    by_name = provider_for(conf("sqlite", {"directory": "/states"}), "wc")
    by_path = provider_for(conf(PROVIDERS["sqlite"], {"directory": "/states"}), "wc")
    assert by_path == by_name
    path = f"{HERE}.LabelledProvider"
    assert check_provider(conf(path, {"label": "x"}), "wc") is None
    provider = provider_for(conf(path, {"label": "x", "namespace": "shared"}), "wc")
    assert provider == LabelledProvider(prefix="shared", label="x")
    assert provider.make_store("count-0").namespace == "x/shared/count-0"  # type: ignore[attr-defined]


def test_a_dotted_path_providers_options_are_checked_by_its_class() -> None:
    problem = check_provider(conf(f"{HERE}.LabelledProvider", {"colour": "red"}), "wc")
    assert problem == f"{PROVIDER_CONFIG_KEY}: unknown option 'colour' for provider 'labelled'"


UNKNOWN: list[tuple[Any, str]] = [
    ("mongo", f"unknown provider 'mongo' (one of {KNOWN}) and not the dotted path of a "),
    (["redis"], f"unknown provider ['redis'] (one of {KNOWN}) and not the dotted path of a "),
    ("squall.", f"unknown provider 'squall.' (one of {KNOWN}) and not the dotted path of a "),
    (
        "nowhere_at_all.Provider",
        "cannot import provider 'nowhere_at_all.Provider': No module named 'nowhere_at_all' "
        f"(known providers: {KNOWN})",
    ),
    (
        f"{HERE}.MissingProvider",
        f"unknown provider '{HERE}.MissingProvider': module '{HERE}' has no attribute "
        f"'MissingProvider' (known providers: {KNOWN})",
    ),
    (
        f"{HERE}.NotAProvider",
        f"provider '{HERE}.NotAProvider' is not a StateProvider class (a subclass of "
        "squall.state.providers.StateProvider), got <class "
        f"'{HERE}.NotAProvider'> (known providers: {KNOWN})",
    ),
    (
        "squall.state.providers.provider.StateProvider",
        "provider 'squall.state.providers.provider.StateProvider' is an abstract class: it "
        f"does not implement make_store, options_problem (known providers: {KNOWN})",
    ),
]


@pytest.mark.parametrize(("name", "message"), UNKNOWN, ids=[str(name) for name, _ in UNKNOWN])
def test_an_unknown_name_or_path_is_named_with_the_known_names(name: Any, message: str) -> None:
    problem = check_provider(conf(name), "wc")
    assert problem is not None
    assert problem.startswith(f"{PROVIDER_KEY}: {message}"), problem
    if "dotted path of a" in message:
        assert problem.endswith("StateProvider class (package.module.Class)"), problem
    with pytest.raises(ValueError) as raised:
        provider_for(conf(name), "wc")
    assert str(raised.value) == problem


def test_an_unknown_provider_is_refused_at_submit_naming_the_bolts(tmp_path: Path) -> None:
    settings = state_topologies.conf(str(tmp_path))
    settings[Config.TOPOLOGY_STATE_PROVIDER] = "nowhere_at_all.Provider"
    topology = state_topologies.topology(str(tmp_path))
    with LocalCluster() as cluster, pytest.raises(InvalidTopologyError) as raised:
        cluster.submit_topology("wc", settings, topology)
    assert str(raised.value) == (
        "stateful bolt(s) 'count': topology.state.provider: cannot import provider "
        "'nowhere_at_all.Provider': No module named 'nowhere_at_all' "
        f"(known providers: {KNOWN})"
    )


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return result.stdout


def test_a_provider_whose_package_cannot_be_imported_says_why() -> None:
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if psycopg were not installed\n"
        "from squall.state.providers import check_provider\n"
        "print(check_provider({'topology.state.provider': 'postgres', "
        "'topology.state.provider.config': {'dsn': 'host=db'}}, 'wc'))\n"
    )
    assert run(code) == (
        f"{PROVIDER_KEY}: cannot import provider 'postgres' "
        "(squall.connectors.postgres.provider.PostgresStateProvider): "
        "squall.connectors.postgres needs psycopg 3, the 'postgres' extra: "
        f"pip install 'squall[postgres]' (known providers: {KNOWN})\n"
    )


def test_the_moved_backends_are_importable_where_they_were() -> None:
    import squall.state.providers as providers
    import squall.trident.state as trident_state
    from squall.connectors.postgres.provider import DEFAULT_POSTGRES_TABLE, PostgresStateProvider
    from squall.connectors.redis import state as redis_state
    from squall.connectors.redis.provider import RedisStateProvider
    from squall.connectors.sqlite import state as sqlite_state
    from squall.connectors.sqlite.provider import DEFAULT_SQLITE_DIRECTORY, SqliteStateProvider
    from squall.runtime import state_errors

    assert trident_state.RedisMapState is redis_state.RedisMapState
    assert trident_state.RedisMapStateFactory is redis_state.RedisMapStateFactory
    assert trident_state.SqliteMapState is sqlite_state.SqliteMapState
    assert trident_state.SqliteMapStateFactory is sqlite_state.SqliteMapStateFactory
    for name in ("StateError", "StateConnectionError", "NotInCommitError", "ReadOnlyStateError"):
        assert getattr(trident_state, name) is getattr(state_errors, name)
    assert providers.RedisStateProvider is RedisStateProvider
    assert providers.PostgresStateProvider is PostgresStateProvider
    assert providers.SqliteStateProvider is SqliteStateProvider
    assert providers.DEFAULT_SQLITE_DIRECTORY == DEFAULT_SQLITE_DIRECTORY == "squall-state"
    assert providers.DEFAULT_POSTGRES_TABLE == DEFAULT_POSTGRES_TABLE == "squall_state"
    for module in (providers, trident_state):
        assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        _ = providers.Nothing
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        _ = trident_state.Nothing


def test_importing_the_state_packages_imports_no_connector() -> None:
    code = (
        "import sys, squall.state.providers, squall.trident.state, squall.state\n"
        "print(sorted(name for name in sys.modules if name.startswith('squall.connectors')))\n"
    )
    assert run(code) == "[]\n"
