"""The SparkSession squall runs on: started once per process, or the user's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

from squall.spark.errors import SparkUnavailableError
from squall.spark.launch.coreform import executor_environment
from squall.spark.launch.javaerrors import innermost_cause
from squall.spark.launch.javaoptions import (
    DRIVER_OPTIONS,
    EXECUTOR_OPTIONS,
    read_spark_defaults,
    spark_defaults_file,
    with_quick_compiler,
)
from squall.spark.launch.jvm import (
    EXTRA_JAVA_OPTIONS,
    has_own_log_configuration,
    last_output,
    output_conf,
    start_quietly,
)
from squall.spark.launch.masters import check_master
from squall.spark.launch.pythonexec import is_local_master, worker_python
from squall.spark.launch.workerlog import ENVIRONMENT_KEY, mode

_lock = threading.Lock()
DEFAULT_MASTER = "local[*, 4]"  # all cores; a failed task is retried up to 4 times


def check_java() -> str:
    """The ``java`` that Spark will use.

    Raises:
        SparkUnavailableError: no Java runtime is installed (Spark 4 needs Java 17+).
    """
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise SparkUnavailableError(
            "the Spark engine needs a Java 17+ runtime and none was found (no JAVA_HOME, "
            "no java on PATH): install one (e.g. apt-get install openjdk-17-jre-headless) "
            "or run the topology on LocalCluster"
        )
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SparkUnavailableError(f"the Java runtime at {java} does not run: {exc}") from exc
    return java


def session_settings(
    master: str | None,
    verbose: bool,
    spark_conf: dict[str, Any] | None,
    defaults: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The Spark configuration of a session squall starts: squall's defaults, the console
    output settings (quiet unless ``verbose``), then ``spark_conf``, whose settings win.
    The executors' Python processes get the driver's choice of the core's form
    (``SQUALL_PURE_PYTHON``, see :mod:`squall.spark.launch.coreform`).

    JVM options are added to, not replaced: the quiet log configuration goes after the
    user's own ``spark.driver.extraJavaOptions``, and the JIT's quick compiler (see
    :mod:`squall.spark.launch.javaoptions`) after the driver's and, where executors
    are JVMs of their own, the executors' options. The options in effect are the
    user's, else those of ``defaults`` (Spark's configuration before this session's
    settings: ``spark-defaults.conf``, or what ``spark-submit`` was given; read when
    None). Under ``spark-submit`` the driver's JVM already runs: its options are left
    to spark-submit.
    """
    if defaults is None:
        defaults = configured_defaults()
    user_conf = {key: str(value) for key, value in (spark_conf or {}).items()}
    effective = {**defaults, **user_conf}
    output_settings = output_conf(verbose, effective)
    master = master or DEFAULT_MASTER
    # A local session serves this process only: no UI, the driver on loopback. On a
    # cluster, executors on other hosts connect back to the driver, and the UI is the
    # operator's: Spark's own configuration (spark-defaults.conf) decides.
    local_only = (
        {
            "spark.ui.enabled": "false",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
        }
        if is_local_master(master)
        else {}
    )
    settings = {
        "spark.master": master,
        "spark.app.name": "squall",
        **local_only,
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        f"spark.executorEnv.{ENVIRONMENT_KEY}": mode(verbose),
        **{f"spark.executorEnv.{key}": value for key, value in executor_environment().items()},
        **output_settings,
        **user_conf,
    }
    if EXTRA_JAVA_OPTIONS in output_settings:  # the user's Java options, and quiet logs
        settings[EXTRA_JAVA_OPTIONS] = output_settings[EXTRA_JAVA_OPTIONS]
    jvms = [] if launched_by_spark_submit() else [DRIVER_OPTIONS]
    if not is_local_master(master) or master.startswith("local-cluster"):
        jvms.append(EXECUTOR_OPTIONS)  # executors of their own
    for key in jvms:
        in_effect = {**effective, key: settings.get(key, effective.get(key, ""))}
        options = with_quick_compiler(key, in_effect)
        if options is not None:
            settings[key] = options
    return settings


def configured_defaults() -> dict[str, str]:
    """Spark's configuration before a session's settings: under ``spark-submit``, what
    its JVM was given (its command line and properties file); otherwise the
    ``spark-defaults.conf`` a new JVM would read."""
    if launched_by_spark_submit():
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # joins spark-submit's JVM: its settings load
        return dict(SparkConf().getAll())
    return read_spark_defaults(spark_defaults_file())


def get_session(
    master: str | None = None, spark_conf: dict[str, Any] | None = None, verbose: bool = False
) -> Any:
    """The active SparkSession, or a new local one (loopback only, no UI).

    Runs on the caller's thread; one session starts at a time. An active session is
    returned as it is (never reconfigured) when neither ``master`` nor ``spark_conf``
    is given.

    A new session is quiet unless ``verbose``: Spark logs errors only and shows no
    progress bars, the JVM's start-up notices are dropped, and squall's log records in
    Spark's Python processes are dropped (the metrics carry the errors). Verbose: Spark
    logs at WARN with progress bars, and those records go to standard error. A log4j2
    configuration of the user's own (``SPARK_CONF_DIR``, or a ``-Dlog4j...`` option in
    ``spark.driver.extraJavaOptions``) is left alone, and ``spark_conf`` settings win.

    The Python workers run the same interpreter as this process (``PYSPARK_PYTHON``), so
    squall and the user's code are importable there; on a local master they import
    PySpark from its installed files (see :mod:`squall.spark.launch.pythonexec`).

    Raises:
        SparkUnavailableError: Java is missing, ``master`` is malformed or cannot be
            reached (checked before any JVM starts, see
            :func:`~squall.spark.masters.check_master`), or the session cannot start;
            the message is one line naming the cause.
    """
    with _lock:
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:  # pragma: no cover - pyspark is a dependency
            raise SparkUnavailableError(f"pyspark is not installed: {exc}") from exc
        active = SparkSession.getActiveSession()
        if active is not None and master is None and not spark_conf:
            return active
        if master is None and active is None:
            master = submitted_master()
        if master is not None:
            check_master(master)
        check_java()
        settings = session_settings(master, verbose, spark_conf)
        _prepare_environment(verbose, settings)
        output = None
        if not verbose and active is None:
            try:
                output = start_quietly(settings)
            except Exception as exc:
                cause = innermost_cause(exc, last_output())
                raise SparkUnavailableError(f"Spark could not start: {cause}") from exc
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        except Exception as exc:
            lines = output.discard() if output is not None else []
            cause = innermost_cause(exc, lines)
            raise SparkUnavailableError(f"Spark could not start: {cause}") from exc
        if output is not None:
            output.release()
        if active is None and not has_own_log_configuration(spark_conf or {}):
            session.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
        return session


def launched_by_spark_submit() -> bool:
    """Whether ``spark-submit`` started this process: its JVM already runs, with the
    settings spark-submit was given (``PYSPARK_GATEWAY_PORT`` is set)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def submitted_master() -> str | None:
    """The master ``spark-submit`` was given, when it started this process, so a
    session squall starts keeps it (None otherwise)."""
    if not launched_by_spark_submit():
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # joins spark-submit's JVM: its settings load
    master: str | None = SparkConf().get("spark.master", None)
    return master


#: The ``PYSPARK_PYTHON`` squall chose for the last session it started (None: none).
_chosen_python: str | None = None


def _prepare_environment(verbose: bool, settings: dict[str, str]) -> None:
    """The environment Spark's processes inherit from this one (local masters).

    ``PYSPARK_PYTHON`` is squall's choice (see :mod:`squall.spark.launch.pythonexec`) unless the
    user set it, or ``spark.pyspark.python``, themselves.
    """
    global _chosen_python
    current = os.environ.get("PYSPARK_PYTHON")
    if "spark.pyspark.python" in settings:
        os.environ.setdefault("PYSPARK_PYTHON", settings["spark.pyspark.python"])
    elif current is None or current == _chosen_python:
        _chosen_python = os.environ["PYSPARK_PYTHON"] = worker_python(settings["spark.master"])
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ[ENVIRONMENT_KEY] = mode(verbose)
    # The form of the core the driver chose, for the processes that inherit it.
    os.environ.update(executor_environment())
    # Spark's Python processes inherit the JVM's environment: give them this
    # process's import path, so modules next to the user's files import there too.
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *inherited]))


__all__ = ["DEFAULT_MASTER", "SparkUnavailableError", "check_java", "get_session"]
