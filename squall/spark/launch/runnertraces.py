"""Dropping, from the JVM's standard error, the tracebacks PySpark's streaming source
runner prints when its query stops.

Spark runs a Python data source's stream reader in a process of its own (PySpark's
``python_streaming_source_runner``) whose output the JVM copies to its standard error.
When the query stops, the JVM closes that process's socket: the runner reads the end of
its input, fails to report it on the closed socket, and prints the resulting traceback
before it is stopped. Nothing is lost by dropping it: an error while the query runs
reaches the driver through the socket and is reported as the query's failure.
"""

from __future__ import annotations

#: The first line of every Python traceback.
TRACEBACK_START = "Traceback (most recent call last):"
#: The lines that chain one traceback to the next.
CHAIN_LINES = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
#: The file of PySpark's streaming source runner, as its frames name it.
RUNNER_FILE = "pyspark/sql/streaming/python_streaming_source_runner.py"


class RunnerTracebackFilter:
    """The lines of a stream to write, without the tracebacks whose first frame is in
    PySpark's streaming source runner (with their chained tracebacks).

    Fed line by line on the one thread that reads the stream. A traceback's first line is
    held until the next line shows its first frame; every other line is passed on at once
    unless it belongs to a dropped traceback.
    """

    def __init__(self) -> None:
        self._header: bytes | None = None  # a traceback's first line, its frame not yet seen
        self._dropping = False  # inside a traceback being dropped
        self._after_exception = False  # a dropped traceback's exception line was seen
        self._chained = False  # ... and a line chaining another traceback to it

    def feed(self, line: bytes) -> list[bytes]:
        """The lines to write now, given the next ``line`` of the stream."""
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if self._header is not None:
            header, self._header = self._header, None
            if RUNNER_FILE in text:
                self._dropping, self._after_exception, self._chained = True, False, False
                return []
            return [header, *self.feed(line)]
        if self._dropping:
            if self._continues_dropped_traceback(text):
                return []
            self._dropping = False
        if text.startswith(TRACEBACK_START):
            self._header = line
            return []
        return [line]

    def end(self) -> list[bytes]:
        """The lines still to write when the stream has ended: a traceback's first line
        whose frame never came."""
        header, self._header = self._header, None
        return [header] if header is not None else []

    def _continues_dropped_traceback(self, text: str) -> bool:
        """Whether ``text`` still belongs to the traceback being dropped: its frames and
        source lines (indented), its exception line, and the tracebacks chained to it."""
        if not self._after_exception:
            if text.startswith(" ") or text.startswith(TRACEBACK_START):
                return True
            self._after_exception = True  # the exception's own line
            return True
        if not text.strip():
            return True
        if text.startswith(CHAIN_LINES):
            self._chained = True
            return True
        if self._chained and text.startswith(TRACEBACK_START):
            self._after_exception = self._chained = False
            return True
        return False


__all__ = ["RUNNER_FILE", "RunnerTracebackFilter"]
