"""Choosing a state provider from a topology's configuration: the defaults, the
``namespace`` prefix, the exact messages of ``check_provider`` (which connects to
nothing), the providers' pickling and reprs (passwords hidden), the names the prefix
gives to files and rows, and that importing the package imports no backend."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from squall.connectors.sqlite.store import database_path
from squall.state.providers import (
    PROVIDER_CONFIG_KEY,
    PROVIDER_KEY,
    MemoryStateProvider,
    PostgresStateProvider,
    RedisStateProvider,
    SqliteStateProvider,
    check_provider,
    provider_for,
    qualified_namespace,
)
from squall.state.providers.provider import file_name_stem
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
CONFIG = f"{PROVIDER_CONFIG_KEY}: "
TABLE_NAME_RULE = (
    "must be a SQL [schema.]name of letters, digits, _ and $ (not starting with a digit, "
    "at most 63 characters)"
)


def conf(provider: Any = None, options: Any = None) -> dict[str, Any]:
    """A topology configuration choosing ``provider`` with ``options`` (None: unset)."""
    settings: dict[str, Any] = {"topology.workers": 1}
    if provider is not None:
        settings[PROVIDER_KEY] = provider
    if options is not None:
        settings[PROVIDER_CONFIG_KEY] = options
    return settings


def test_memory_is_the_default_and_the_prefix_is_the_topology_name() -> None:
    assert provider_for(conf(), "wordcount") == MemoryStateProvider(prefix="wordcount")
    assert provider_for({PROVIDER_KEY: None, PROVIDER_CONFIG_KEY: None}, "wc") == (
        MemoryStateProvider(prefix="wc")
    )
    assert provider_for(conf("memory", {"namespace": "shared"}), "wordcount") == (
        MemoryStateProvider(prefix="shared")
    )


def test_each_provider_is_made_from_its_options(tmp_path: Path) -> None:
    directory = str(tmp_path / "states")
    assert provider_for(conf("sqlite", {"directory": directory}), "wc") == (
        SqliteStateProvider(prefix="wc", directory=directory)
    )
    redis_options = {"url": "redis://db:6379/2", "connect_timeout": 1, "socket_timeout": 2.5}
    assert provider_for(conf("redis", {**redis_options, "namespace": "n"}), "wc") == (
        RedisStateProvider(
            prefix="n", url="redis://db:6379/2", connect_timeout=1, socket_timeout=2.5
        )
    )
    assert provider_for(conf("redis", {"url": "redis://db"}), "wc") == (
        RedisStateProvider(prefix="wc", url="redis://db", connect_timeout=5.0, socket_timeout=10.0)
    )
    postgres = provider_for(conf("postgres", {"dsn": "host=db dbname=app"}), "wc")
    assert postgres == PostgresStateProvider(
        prefix="wc", dsn="host=db dbname=app", table="squall_state", connect_timeout=None
    )
    options = {"dsn": "postgresql://db/app", "table": "app.states", "connect_timeout": 3}
    assert provider_for(conf("postgres", options), "wc") == PostgresStateProvider(
        prefix="wc", dsn="postgresql://db/app", table="app.states", connect_timeout=3
    )


def test_the_sqlite_directory_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default = provider_for(conf("sqlite"), "my/topology")
    relative = provider_for(conf("sqlite", {"directory": "data/states"}), "wc")
    assert isinstance(default, SqliteStateProvider)
    assert isinstance(relative, SqliteStateProvider)
    assert default.directory == str(tmp_path / "squall-state")
    assert relative.directory == str(tmp_path / "data" / "states")
    assert not (tmp_path / "squall-state").exists()  # made with the first store
    state = default.make_state("count-0", "bolt 'count' task 0")
    try:
        state.prepare_commit(1)
    finally:
        state.close()
    assert os.listdir(tmp_path / "squall-state") == ["my%2Ftopology.sqlite"]


@pytest.mark.parametrize(
    ("prefix", "stem"),
    [
        ("wordcount", "wordcount"),
        ("Word_Count-2.v1~x", "Word_Count-2.v1~x"),
        ("my/topo:1", "my%2Ftopo%3A1"),
        ("100%", "100%25"),
        ("..", "%2E."),
        (".hidden", "%2Ehidden"),
        ("naïve space", "na%C3%AFve%20space"),
    ],
)
def test_a_prefix_gives_a_file_name_of_its_own(prefix: str, stem: str) -> None:
    assert file_name_stem(prefix) == stem
    assert database_path("/states", prefix) == f"/states/{stem}.sqlite"


def test_a_long_prefix_gives_a_short_file_name_ending_in_its_hash() -> None:
    first, second = file_name_stem("t" * 300), file_name_stem("t" * 299 + "u")
    assert len(first) == len(second) == 200
    assert first[:183] == second[:183] == "t" * 183
    assert first[183] == "-"
    assert first != second


@pytest.mark.parametrize(
    ("prefix", "namespace", "qualified"),
    [
        ("wordcount", "count-0", "wordcount:count-0"),
        ("wordcount", "$checkpointspout", "wordcount:$checkpointspout"),
        ("a:b", "c", "a%3Ab:c"),
        ("a", "b:c", "a:b%3Ac"),
        ("50%", "x%3A", "50%25:x%253A"),
        ("my/topo", "count 1", "my/topo:count 1"),
    ],
)
def test_a_namespace_is_qualified_by_its_prefix(
    prefix: str, namespace: str, qualified: str
) -> None:
    assert qualified_namespace(prefix, namespace) == qualified


def test_a_store_namespace_must_be_a_non_empty_string() -> None:
    provider = MemoryStateProvider(prefix="wc")
    for namespace in ("", None, 3):
        with pytest.raises(ValueError) as raised:
            provider.make_store(namespace)  # type: ignore[arg-type]
        assert str(raised.value) == (
            f"a state namespace must be a non-empty string, got {namespace!r}"
        )


REDIS_URL_RULE = "'url' must be a redis://, rediss:// or unix:// URL"

PROBLEMS: list[tuple[dict[str, Any], str]] = [
    (conf("mongo"), f"{PROVIDER_KEY}: unknown provider 'mongo' (one of "),
    (conf("Redis"), f"{PROVIDER_KEY}: unknown provider 'Redis' (one of "),
    (conf(["redis"]), f"{PROVIDER_KEY}: unknown provider ['redis'] (one of "),
    (conf("memory", ["namespace"]), f"{CONFIG}must be a dict of options, got ['namespace']"),
    (conf("redis", "redis://db"), f"{CONFIG}must be a dict of options, got 'redis://db'"),
    (
        conf("memory", {"directory": "x"}),
        f"{CONFIG}unknown option 'directory' for provider 'memory' (its options: 'namespace')",
    ),
    (
        conf("sqlite", {"path": "x"}),
        f"{CONFIG}unknown option 'path' for provider 'sqlite' "
        "(its options: 'directory', 'namespace')",
    ),
    (
        conf("redis", {"url": "redis://db", "timeout": 1}),
        f"{CONFIG}unknown option 'timeout' for provider 'redis' "
        "(its options: 'connect_timeout', 'namespace', 'socket_timeout', 'url')",
    ),
    (
        conf("postgres", {"dsn": "host=db", 1: 2}),
        f"{CONFIG}unknown option 1 for provider 'postgres' "
        "(its options: 'connect_timeout', 'dsn', 'namespace', 'table')",
    ),
    (conf("memory", {"namespace": ""}), f"{CONFIG}'namespace' must be a non-empty string, got ''"),
    (
        conf("redis", {"url": "redis://db", "namespace": 5}),
        f"{CONFIG}'namespace' must be a non-empty string, got 5",
    ),
    (
        conf("sqlite", {"directory": 5}),
        f"{CONFIG}'directory' must be a directory path (a non-empty string), got 5",
    ),
    (
        conf("sqlite", {"directory": ""}),
        f"{CONFIG}'directory' must be a directory path (a non-empty string), got ''",
    ),
    (conf("redis"), f"{CONFIG}provider 'redis' needs option 'url'"),
    (conf("redis", {"namespace": "n"}), f"{CONFIG}provider 'redis' needs option 'url'"),
    (conf("redis", {"url": 5}), f"{CONFIG}{REDIS_URL_RULE}, got 5"),
    (conf("redis", {"url": "http://db"}), f"{CONFIG}{REDIS_URL_RULE}, got 'http://db'"),
    (conf("redis", {"url": "db:6379"}), f"{CONFIG}{REDIS_URL_RULE}, got 'db:6379'"),
    (
        conf("redis", {"url": "redis://db", "connect_timeout": 0}),
        f"{CONFIG}'connect_timeout' must be a number of seconds > 0, got 0",
    ),
    (
        conf("redis", {"url": "redis://db", "socket_timeout": True}),
        f"{CONFIG}'socket_timeout' must be a number of seconds > 0, got True",
    ),
    (
        conf("redis", {"url": "redis://db", "socket_timeout": float("inf")}),
        f"{CONFIG}'socket_timeout' must be a number of seconds > 0, got inf",
    ),
    (
        conf("redis", {"url": "redis://db", "socket_timeout": "5"}),
        f"{CONFIG}'socket_timeout' must be a number of seconds > 0, got '5'",
    ),
    (conf("postgres"), f"{CONFIG}provider 'postgres' needs option 'dsn'"),
    (
        conf("postgres", {"dsn": 5}),
        f"{CONFIG}'dsn' must be a PostgreSQL connection string (postgresql://... or key=value "
        "pairs), got 5",
    ),
    (
        conf("postgres", {"dsn": "  "}),
        f"{CONFIG}'dsn' must be a PostgreSQL connection string (postgresql://... or key=value "
        "pairs), got '  '",
    ),
    (
        conf("postgres", {"dsn": "host=db password=secret nonsense"}),
        f"{CONFIG}'dsn' must be a PostgreSQL connection string, got "
        "'host=db password=*** nonsense': ",
    ),
    (
        conf("postgres", {"dsn": "host=db", "table": "2fast"}),
        f"{CONFIG}'table' {TABLE_NAME_RULE}, got '2fast'",
    ),
    (
        conf("postgres", {"dsn": "host=db", "table": "a.b.c"}),
        f"{CONFIG}'table' {TABLE_NAME_RULE}, got 'a.b.c'",
    ),
    (
        conf("postgres", {"dsn": "host=db", "table": "s." + "t" * 55}),
        f"{CONFIG}'table' must be at most 54 characters (the provider adds _prepared and _tx "
        f"for its other tables), got 's.{'t' * 55}'",
    ),
    (
        conf("postgres", {"dsn": "host=db", "connect_timeout": 0.5}),
        f"{CONFIG}'connect_timeout' must be a whole number of seconds >= 1, got 0.5",
    ),
]


@pytest.mark.parametrize(
    ("settings", "message"), PROBLEMS, ids=[f"problem-{index}" for index in range(len(PROBLEMS))]
)
def test_check_provider_names_the_wrong_setting(settings: dict[str, Any], message: str) -> None:
    problem = check_provider(settings, "wc")
    assert problem is not None
    if message.endswith((" (one of ", ": ")):  # a list, or libpq's words, follow
        assert problem.startswith(message), problem
    else:
        assert problem == message
    with pytest.raises(ValueError) as raised:
        provider_for(settings, "wc")
    assert str(raised.value) == problem


def test_an_unknown_provider_lists_the_providers() -> None:
    assert check_provider(conf("mongo"), "wc") == (
        f"{PROVIDER_KEY}: unknown provider 'mongo' (one of 'memory', 'sqlite', 'redis', "
        "'postgres') and not the dotted path of a StateProvider class (package.module.Class)"
    )


def test_the_default_prefix_needs_a_topology_name() -> None:
    assert check_provider(conf(), "") == (
        f"{CONFIG}'namespace' defaults to the topology's name, which must be a non-empty "
        "string, got ''"
    )
    assert check_provider(conf("memory", {"namespace": "given"}), "") is None


def test_check_provider_connects_to_nothing() -> None:
    """Nothing listens on these addresses: the settings are still right."""
    port = free_port()
    assert check_provider(conf("redis", {"url": f"redis://127.0.0.1:{port}/0"}), "wc") is None
    dsn = f"postgresql://squall:secret@127.0.0.1:{port}/app"
    assert check_provider(conf("postgres", {"dsn": dsn}), "wc") is None
    assert check_provider(conf("sqlite", {"directory": "/nonexistent/place"}), "wc") is None


def test_postgres_without_psycopg_is_refused_at_submit_and_where_imported() -> None:
    """psycopg missing (its import fails): the settings are refused, and the provider
    class cannot be imported, each saying what to install."""
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if psycopg were not installed\n"
        "from squall.state import providers\n"
        "print(providers.check_provider({'topology.state.provider': 'postgres', "
        "'topology.state.provider.config': {'dsn': 'host=db'}}, 'wc'))\n"
        "try:\n"
        "    providers.PostgresStateProvider\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    missing = (
        "squall.connectors.postgres needs psycopg 3, the 'postgres' extra: "
        "pip install 'squall[postgres]'"
    )
    assert result.stdout == (
        f"{PROVIDER_KEY}: cannot import provider 'postgres' "
        f"(squall.connectors.postgres.provider.PostgresStateProvider): {missing} "
        "(known providers: 'memory', 'sqlite', 'redis', 'postgres')\n"
        f"{missing}\n"
    )


def test_providers_made_directly_check_their_options() -> None:
    with pytest.raises(ValueError) as raised:
        RedisStateProvider(prefix="wc", url=5)  # type: ignore[arg-type]
    assert str(raised.value) == f"{CONFIG}{REDIS_URL_RULE}, got 5"
    with pytest.raises(ValueError) as raised:
        MemoryStateProvider(prefix="")
    assert str(raised.value) == f"{CONFIG}'namespace' must be a non-empty string, got ''"
    with pytest.raises(ValueError) as raised:
        PostgresStateProvider(prefix="wc", dsn="host=db", table="bad name")
    assert str(raised.value) == f"{CONFIG}'table' {TABLE_NAME_RULE}, got 'bad name'"


def test_providers_pickle_and_hide_passwords() -> None:
    providers = [
        MemoryStateProvider(prefix="wc"),
        SqliteStateProvider(prefix="wc", directory="/states"),
        RedisStateProvider(prefix="wc", url="redis://user:secret@db:6379/0"),
        PostgresStateProvider(prefix="wc", dsn="postgresql://squall:secret@db/app"),
        PostgresStateProvider(prefix="wc", dsn="host=db password=secret", table="s.t"),
    ]
    for provider in providers:
        assert pickle.loads(pickle.dumps(provider)) == provider
    assert [repr(provider) for provider in providers] == [
        "MemoryStateProvider(prefix='wc')",
        "SqliteStateProvider(prefix='wc', directory='/states')",
        "RedisStateProvider(prefix='wc', url='redis://user:***@db:6379/0', "
        "connect_timeout=5.0, socket_timeout=10.0)",
        "PostgresStateProvider(prefix='wc', dsn='postgresql://squall:***@db/app', "
        "table='squall_state', connect_timeout=None)",
        "PostgresStateProvider(prefix='wc', dsn='host=db password=***', table='s.t', "
        "connect_timeout=None)",
    ]
    assert [provider.durable for provider in providers] == [False, True, True, True, True]


def test_importing_the_providers_imports_no_backend() -> None:
    code = (
        "import sys, squall.state.providers as providers\n"
        "provider = providers.provider_for({}, 'wc')\n"
        "names = ('redis', 'psycopg', 'squall.trident', 'squall.connectors')\n"
        "print(sorted(name for name in names if name in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout == "[]\n"
