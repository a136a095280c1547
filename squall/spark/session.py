"""The SparkSession squall runs on: started once per process, or the user's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import Any

from squall.model.errors import SquallError

_lock = threading.Lock()
DEFAULT_MASTER = "local[*, 4]"  # all cores; a failed task is retried up to 4 times


class SparkUnavailableError(SquallError):
    """PySpark cannot start: Java is missing, or the session failed to start."""


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


def get_session(master: str | None = None, spark_conf: dict[str, Any] | None = None) -> Any:
    """The active SparkSession, or a new local one (loopback only, no UI).

    The Python workers run the same interpreter as this process (``PYSPARK_PYTHON``), so
    squall and the user's code are importable there.

    Raises:
        SparkUnavailableError: Java is missing or the session cannot start.
    """
    with _lock:
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:  # pragma: no cover - pyspark is a dependency
            raise SparkUnavailableError(f"pyspark is not installed: {exc}") from exc
        active = SparkSession.getActiveSession()
        if active is not None and master is None and not spark_conf:
            return active
        check_java()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        # Spark's Python processes inherit the JVM's environment: give them this
        # process's import path, so modules next to the user's files import there too.
        paths = [p for p in sys.path if p and os.path.isdir(p)]
        inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *inherited]))
        builder = SparkSession.builder.master(master or DEFAULT_MASTER).appName("squall")
        defaults = {
            "spark.ui.enabled": "false",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.python.worker.reuse": "true",
            "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        }
        for key, value in {**defaults, **(spark_conf or {})}.items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        except Exception as exc:
            raise SparkUnavailableError(f"Spark could not start: {exc}") from exc
        session.sparkContext.setLogLevel("ERROR")
        return session
