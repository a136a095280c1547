"""Starting Spark for squall, without starting it: master URLs checked before any JVM,
one-line causes out of Java traces, and the quiet console settings.

Nothing here starts a JVM (a test that would fails on the guard instead), so the whole
file runs in about a second.
"""

from __future__ import annotations

import os
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from squall.cli.main import main
from squall.spark.errors import SparkUnavailableError
from squall.spark.launch import session
from squall.spark.launch.javaerrors import innermost_cause, python_failure
from squall.spark.launch.javaoptions import QUICK_COMPILER, read_spark_defaults
from squall.spark.launch.jvm import QUIET_LOG_CONFIGURATION, JvmOutput, output_conf
from squall.spark.launch.masters import check_master
from squall.spark.launch.session import session_settings
from tests.helpers import wait_until

pytestmark = pytest.mark.spark  # imports the Spark engine (the 'spark' extra)

APP = """
from squall import BasicBolt, TopologyBuilder
from squall.testing import FixedTupleSpout


class Quiet(BasicBolt):
    def execute(self, tup, collector):
        pass


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1], [2]], ["n"]))
    builder.set_bolt("quiet", Quiet()).shuffle_grouping("numbers")
    return builder.create_topology()
"""


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail any attempt to go on to start Spark: checking Java is the first step."""
    attempts: list[str] = []

    def refuse() -> str:
        attempts.append("check_java")
        raise AssertionError("a JVM was about to start")

    monkeypatch.setattr(session, "check_java", refuse)
    yield attempts


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port with nothing listening (bound, so no one else takes it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


def run_on(master: str, tmp_path: Path) -> Result:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(APP), encoding="utf-8")
    arguments = ["run", str(app), "--engine", "spark", "--master", master, "--no-live"]
    return CliRunner().invoke(main, arguments, env={"COLUMNS": "200"})


# -- a master that cannot work fails at once, in one line ---------------------------------


def test_an_unknown_master_host_fails_in_one_line_without_a_jvm(
    no_jvm: list[str], tmp_path: Path
) -> None:
    result = run_on("spark://nohost.invalid:7077", tmp_path)
    assert result.exit_code == 1
    assert result.output == (
        "Error: cannot reach the Spark master spark://nohost.invalid:7077: "
        "unknown host 'nohost.invalid'\n"
    )
    assert no_jvm == []


def test_a_master_port_with_nothing_listening_fails_in_one_line_without_a_jvm(
    no_jvm: list[str], closed_port: int, tmp_path: Path
) -> None:
    result = run_on(f"spark://127.0.0.1:{closed_port}", tmp_path)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: cannot reach the Spark master spark://127.0.0.1:{closed_port}: connection "
        f"refused by 127.0.0.1:{closed_port} (no Spark master listens there)\n"
    )
    assert no_jvm == []


@pytest.mark.parametrize(
    ("master", "reason"),
    [
        ("local[x]", "a local master is written local, local[N], local[*]"),
        ("local[0]", "a local master needs at least one thread"),
        ("spark://host-without-port", "expected spark://HOST:PORT"),
        ("spark:/one-slash:7077", "expected spark://HOST:PORT"),
    ],
)
def test_a_malformed_master_url_is_refused_naming_the_form(master: str, reason: str) -> None:
    with pytest.raises(SparkUnavailableError, match="invalid Spark master URL") as raised:
        check_master(master)
    assert f"{master!r}" in str(raised.value) and reason in str(raised.value)


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[2]",
        "local[*]",
        "local[2, 4]",
        "local[*,4]",
        "local-cluster[2, 1, 1024]",
        "yarn",
        "k8s://https://kubernetes.example:443",
        "mycluster://anything",
    ],
)
def test_masters_that_python_cannot_check_are_left_to_spark(master: str) -> None:
    check_master(master, timeout_secs=0.01)  # no error, and no probe (nothing to reach)


def test_a_standalone_master_with_one_reachable_host_passes(closed_port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_master(f"spark://127.0.0.1:{closed_port},127.0.0.1:{port}")
        with pytest.raises(SparkUnavailableError) as raised:
            check_master(f"spark://nohost.invalid:7077,127.0.0.1:{closed_port}")
    assert str(raised.value) == (
        f"cannot reach any Spark master of spark://nohost.invalid:7077,127.0.0.1:{closed_port}: "
        "nohost.invalid:7077: unknown host 'nohost.invalid'; "
        f"127.0.0.1:{closed_port}: connection refused by 127.0.0.1:{closed_port} "
        "(no Spark master listens there)"
    )


# -- the innermost cause of a Java failure ---------------------------------------------


class FakePy4JError(Exception):
    """What a failed Py4J call raises: its text is the Java stack trace."""


STOPPED_CONTEXT = """An error occurred while calling o31.sparkContext.
: java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
This stopped SparkContext was created at:

org.apache.spark.api.java.JavaSparkContext.<init>(JavaSparkContext.scala:58)
\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:122)
\tat org.apache.spark.SparkContext.<init>(SparkContext.scala:700)
Caused by: org.apache.spark.SparkException: Exception thrown in awaitResult:
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)
\t... 12 more
Caused by: java.io.IOException: Failed to connect to nohost:7077
\tat org.apache.spark.network.client.TransportClientFactory.createClient(Factory.java:294)
Caused by: java.net.UnknownHostException: nohost
\tat java.base/java.net.InetAddress.getAllByName0(InetAddress.java:1301)
\t... 30 more
"""


def test_the_innermost_java_cause_is_the_one_line() -> None:
    assert innermost_cause(FakePy4JError(STOPPED_CONTEXT)) == "UnknownHostException: nohost"


def test_without_a_cause_the_java_exception_itself_is_named() -> None:
    text = (
        "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
        ": org.apache.spark.SparkException: Could not parse Master URL: 'foo://bar'\n"
        "\tat org.apache.spark.SparkContext$.createTaskScheduler(SparkContext.scala:3300)\n"
    )
    assert innermost_cause(FakePy4JError(text)) == (
        "SparkException: Could not parse Master URL: 'foo://bar'"
    )


def test_a_jvm_that_exited_is_explained_by_what_it_printed() -> None:
    exited = RuntimeError(
        "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number."
    )
    printed = [
        "Error: Master must either be yarn or start with spark, k8s, or local",
        "Run with --help for usage help or --verbose for debug output",
    ]
    assert innermost_cause(exited, printed) == (
        "Master must either be yarn or start with spark, k8s, or local"
    )
    assert innermost_cause(exited) == (
        "Java gateway process exited before sending its port number."
    )


def test_a_python_error_keeps_its_first_line() -> None:
    assert innermost_cause(OSError("no space left\nmore")) == "no space left"


# -- quiet by default --------------------------------------------------------------------


def test_a_quiet_session_logs_errors_only_and_shows_no_progress() -> None:
    settings = output_conf(verbose=False, spark_conf={})
    assert settings["spark.ui.showConsoleProgress"] == "false"
    option = f"-Dlog4j.configurationFile={QUIET_LOG_CONFIGURATION.as_uri()}"
    assert settings["spark.driver.extraJavaOptions"] == option
    lines = QUIET_LOG_CONFIGURATION.read_text().splitlines()
    assert "rootLogger.level = error" in lines


def test_the_users_java_options_and_log_configuration_are_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    settings = output_conf(False, {"spark.driver.extraJavaOptions": "-Dmine=1"})
    assert settings["spark.driver.extraJavaOptions"].startswith("-Dmine=1 -Dlog4j.configuration")
    own = output_conf(False, {"spark.driver.extraJavaOptions": "-Dlog4j.configurationFile=x"})
    assert "spark.driver.extraJavaOptions" not in own
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert "spark.driver.extraJavaOptions" not in output_conf(False, {})


def test_a_verbose_session_shows_progress_and_spark_logging() -> None:
    assert output_conf(verbose=True, spark_conf={}) == {"spark.ui.showConsoleProgress": "true"}


def test_the_jvm_output_drops_the_start_notice_and_holds_lines_while_starting(
    capfd: pytest.CaptureFixture[str],
) -> None:
    read_fd, write_fd = os.pipe()
    output = JvmOutput(read_fd)
    output.hold()
    os.write(write_fd, b"WARNING: Using incubator modules: jdk.incubator.vector\n")
    os.write(write_fd, b"held while starting\n")
    wait_until(lambda: "held while starting" in output.tail, timeout=10.0)
    assert capfd.readouterr().err == ""
    output.release()
    os.write(write_fd, b"after the start\n")
    os.close(write_fd)
    assert output.discard(wait_secs=10.0) == ["held while starting", "after the start"]
    assert capfd.readouterr().err == "held while starting\nafter the start\n"


def test_a_session_keeps_the_users_java_options_and_stays_quiet() -> None:
    option = f"-Dlog4j.configurationFile={QUIET_LOG_CONFIGURATION.as_uri()}"
    settings = session_settings(
        None, False, {"spark.driver.extraJavaOptions": "-Xss4m", "spark.ui.enabled": "true"}
    )
    assert settings["spark.driver.extraJavaOptions"] == f"-Xss4m {option} {QUICK_COMPILER}"
    assert settings["spark.ui.enabled"] == "true"  # the user's settings win
    assert settings["spark.ui.showConsoleProgress"] == "false"
    loud = session_settings("local[2]", True, {"spark.driver.extraJavaOptions": "-Xss4m"})
    assert loud["spark.driver.extraJavaOptions"] == f"-Xss4m {QUICK_COMPILER}"
    assert loud["spark.master"] == "local[2]"


def test_a_local_session_uses_the_quick_compiler_unless_the_user_chose() -> None:
    for master in ("local", "local[2]", "local[*, 4]"):
        settings = session_settings(master, True, None, defaults={})
        assert settings["spark.driver.extraJavaOptions"] == QUICK_COMPILER
        assert "spark.executor.extraJavaOptions" not in settings  # in the driver's JVM
    chosen = {"spark.driver.extraJavaOptions": "-XX:-TieredCompilation"}
    settings = session_settings("local[2]", True, chosen, defaults={})
    assert settings["spark.driver.extraJavaOptions"] == "-XX:-TieredCompilation"


def test_a_cluster_sessions_driver_and_executors_use_the_quick_compiler() -> None:
    for master in ("spark://10.0.0.5:7077", "yarn", "local-cluster[2, 1, 1024]"):
        settings = session_settings(master, True, None, defaults={})
        assert settings["spark.driver.extraJavaOptions"] == QUICK_COMPILER
        assert settings["spark.executor.extraJavaOptions"] == QUICK_COMPILER
    mine = {"spark.executor.extraJavaOptions": "-Xss4m"}
    settings = session_settings("yarn", True, mine, defaults={})
    assert settings["spark.executor.extraJavaOptions"] == f"-Xss4m {QUICK_COMPILER}"
    chosen = {"spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=4"}
    settings = session_settings("yarn", True, chosen, defaults={})
    assert settings["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=4"
    assert settings["spark.driver.extraJavaOptions"] == QUICK_COMPILER


def test_the_java_options_of_spark_defaults_are_kept_or_respected(tmp_path: Path) -> None:
    """Options from spark-defaults.conf are what the session's settings add to (the
    session's own would replace them); a compiler chosen there, or in an
    administrator's defaultJavaOptions, is left alone."""
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text(
        "# site settings\n"
        "spark.executor.extraJavaOptions   -Dsite=1 -Xss8m\n"
        "spark.driver.defaultJavaOptions=-XX:-TieredCompilation\n"
        "! another comment\n"
        "spark.executor.memory: 4g\n"
    )
    defaults = read_spark_defaults(str(conf))
    assert defaults == {
        "spark.executor.extraJavaOptions": "-Dsite=1 -Xss8m",
        "spark.driver.defaultJavaOptions": "-XX:-TieredCompilation",
        "spark.executor.memory": "4g",
    }
    settings = session_settings("spark://10.0.0.5:7077", True, None, defaults=defaults)
    assert settings["spark.executor.extraJavaOptions"] == f"-Dsite=1 -Xss8m {QUICK_COMPILER}"
    assert "spark.driver.extraJavaOptions" not in settings
    quiet = session_settings("spark://10.0.0.5:7077", False, None, defaults=defaults)
    assert "TieredStopAtLevel" not in quiet["spark.driver.extraJavaOptions"]
    assert quiet["spark.driver.extraJavaOptions"].startswith("-Dlog4j.configurationFile=")
    assert read_spark_defaults(None) == {}


def test_only_a_local_session_is_pinned_to_loopback_without_a_ui() -> None:
    """On a cluster, executors on other hosts connect back to the driver: its address,
    and whether the UI runs, are left to Spark's own configuration (spark-defaults.conf)
    unless the user sets them."""
    pinned = {
        "spark.ui.enabled": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    for master in ("local", "local[2]", "local[*, 4]", "local-cluster[2, 1, 1024]"):
        settings = session_settings(master, False, None)
        assert {key: settings[key] for key in pinned} == pinned
    for master in ("spark://10.0.0.5:7077", "yarn", "k8s://https://10.0.0.1:6443"):
        settings = session_settings(master, False, None)
        assert not set(pinned) & set(settings), master
        chosen = session_settings(master, False, {"spark.driver.host": "10.0.0.9"})
        assert chosen["spark.driver.host"] == "10.0.0.9"


QUERY_FAILURE = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: \
py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: \
Traceback (most recent call last):
  File "/site/pyspark/sql/utils.py", line 120, in call
    raise e
pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the \
Python worker:
Traceback (most recent call last):
  File "/site/squall/spark/execute/bolttasks.py", line 99, in _start
    raise RuntimeError(
RuntimeError: bolt 'store' task 3: prepare raised ConnectionError: database unreachable

\tat py4j.Protocol.getReturnValue(Protocol.java:476)
\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.run(x.scala:1)
"""


def test_a_query_failure_is_named_by_the_python_exception_it_comes_from() -> None:
    assert python_failure(QUERY_FAILURE) == (
        "RuntimeError: bolt 'store' task 3: prepare raised ConnectionError: database unreachable"
    )
    assert python_failure("mylib.errors.StoreError: disk full\n") == (
        "mylib.errors.StoreError: disk full"
    )
    java_only = "org.apache.spark.SparkException: Job aborted\nCaused by: java.io.IOException: gone"
    assert python_failure(java_only) == "IOException: gone"
    assert python_failure("[SOME_CLASS] something odd\nmore") == "something odd"
