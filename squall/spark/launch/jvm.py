"""Starting the JVM of a SparkSession squall creates, with its console output under
control.

Quiet (the default): Spark logs errors only (a log4j2 configuration shipped with squall,
``log4j2-quiet.properties``), shows no progress bars, and the JVM's standard error
reaches this process's through a pipe. The pipe drops the notice the JVM itself prints
at start (``WARNING: Using incubator modules``) and the tracebacks of PySpark's
streaming source runner when a query stops (see :mod:`squall.spark.launch.runnertraces`).
It holds what is printed while a session starts: released once it has started, kept out
of the console if it fails (the failure is then one line, see
:mod:`squall.spark.launch.javaerrors`).

Verbose: Spark's own defaults (log at WARN, progress bars) and the JVM writes to this
process's standard error directly.

One JVM serves a Python process for its whole life (PySpark starts it with the first
session): how it was started is what later sessions get too, apart from the log level
that :func:`~squall.spark.session.get_session` sets on each new session.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

from squall.spark.launch.runnertraces import RunnerTracebackFilter

#: Spark's log configuration for a quiet session: errors only.
QUIET_LOG_CONFIGURATION = Path(__file__).parents[1] / "log4j2-quiet.properties"
#: Lines the JVM prints at start whatever the log configuration; dropped when quiet.
START_NOTICES = ("WARNING: Using incubator modules",)
#: Lines of the JVM's standard error kept to explain a failed start.
TAIL_LINES = 200
EXTRA_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
SHOW_PROGRESS = "spark.ui.showConsoleProgress"


def has_own_log_configuration(spark_conf: dict[str, Any]) -> bool:
    """Whether the user configured Spark's logging: a log4j option of their own in
    ``spark.driver.extraJavaOptions``, or a log4j2 file in ``SPARK_CONF_DIR``."""
    if "log4j" in str(spark_conf.get(EXTRA_JAVA_OPTIONS, "")):
        return True
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if conf_dir and os.path.isdir(conf_dir):
        return any(name.startswith("log4j2") for name in os.listdir(conf_dir))
    return False


def output_conf(verbose: bool, spark_conf: dict[str, Any]) -> dict[str, str]:
    """The settings for Spark's console output, given the user's ``spark_conf`` (whose
    own settings win: they are applied after these).

    Quiet: no progress bars, and Spark's log configured by ``log4j2-quiet.properties``
    unless the user configured it. Verbose: progress bars.
    """
    if verbose:
        return {SHOW_PROGRESS: "true"}
    settings = {SHOW_PROGRESS: "false"}
    if not has_own_log_configuration(spark_conf):
        option = f"-Dlog4j.configurationFile={QUIET_LOG_CONFIGURATION.as_uri()}"
        given = str(spark_conf.get(EXTRA_JAVA_OPTIONS, "")).strip()
        settings[EXTRA_JAVA_OPTIONS] = f"{given} {option}".strip()
    return settings


class JvmOutput:
    """The JVM's standard error, read on a thread of its own and written to this
    process's (file descriptor 2) line by line, without :data:`START_NOTICES` and the
    streaming source runner's tracebacks.

    While a session starts (:meth:`hold`) lines are held; :meth:`release` writes them,
    :meth:`discard` drops them. The last :data:`TAIL_LINES` lines are kept either way.
    """

    def __init__(self, read_fd: int) -> None:
        self._lock = threading.Lock()
        self._held: list[bytes] | None = None
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._thread = threading.Thread(
            target=self._pump, args=(read_fd,), name="spark-jvm-stderr", daemon=True
        )
        self._thread.start()

    def _pump(self, read_fd: int) -> None:
        tracebacks = RunnerTracebackFilter()
        with os.fdopen(read_fd, "rb") as stream:
            for line in stream:
                for kept in tracebacks.feed(line):
                    self._pass(kept)
        for kept in tracebacks.end():
            self._pass(kept)

    def _pass(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if text.startswith(START_NOTICES):
            return
        with self._lock:
            self.tail.append(text)
            if self._held is not None:
                self._held.append(line)
                return
        _write(line)

    def hold(self) -> None:
        """Hold the lines printed from now on (a session is starting)."""
        with self._lock:
            if self._held is None:
                self._held = []

    def release(self) -> None:
        """Write the held lines and stop holding (the session started)."""
        with self._lock:  # written under the lock: no newer line goes before them
            for line in self._held or []:
                _write(line)
            self._held = None

    def discard(self, wait_secs: float = 0.0) -> list[str]:
        """Drop the held lines and stop holding (the session failed to start); returns
        the last lines printed, after waiting up to ``wait_secs`` for the JVM's output
        to end (when it has exited)."""
        if wait_secs > 0:
            self._thread.join(wait_secs)
        with self._lock:
            self._held = None
            return list(self.tail)


def _write(line: bytes) -> None:
    with contextlib.suppress(OSError):  # no standard error: the line is lost, as it would be
        os.write(2, line)


#: The output of the JVM this process started, if it started one quietly.
_output: JvmOutput | None = None


def start_quietly(settings: dict[str, str]) -> JvmOutput | None:
    """Start the JVM with ``settings`` (passed to spark-submit) and its standard error
    read by a :class:`JvmOutput`, holding its lines; unless a JVM is already running
    (then its output, if this module started it, is held again).

    Runs on the caller's thread, under the session lock.

    Returns:
        The JVM's output, or None when the JVM was not started here (it writes to the
        console directly).

    Raises:
        Exception: the JVM could not start (PySpark's error); ``last_output()`` holds
            what it printed.
    """
    global _output
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        if _output is not None:
            _output.hold()
        return _output
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    read_fd, write_fd = os.pipe()
    output = JvmOutput(read_fd)
    output.hold()
    _output = output
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_fd})
    finally:
        os.close(write_fd)  # the JVM has its own copy: the pipe ends when the JVM exits
    SparkContext._ensure_initialized(gateway=gateway)
    return output


def last_output(wait_secs: float = 2.0) -> list[str]:
    """What the JVM started here printed last, its held lines dropped (see
    :meth:`JvmOutput.discard`); empty if no JVM was started here."""
    return _output.discard(wait_secs) if _output is not None else []


__all__ = ["JvmOutput", "last_output", "output_conf", "start_quietly"]
