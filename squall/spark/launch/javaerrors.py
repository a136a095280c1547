"""One line naming the cause of a Spark failure, out of a Py4J error's Java traces.

A Spark call that fails in the JVM raises a Python exception whose text holds the whole
Java stack trace, the real cause often at the bottom (``Caused by: ...``) under the
exceptions that wrapped it; a JVM that exits at start leaves its reason on its standard
error instead. :func:`innermost_cause` finds that one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A Java exception line: ``[Caused by: ]java.net.UnknownHostException[: message]``.
_JAVA_EXCEPTION = re.compile(
    r"^(?:Caused by: |: |Exception in thread \"[^\"]*\" )?"
    r"((?:[a-zA-Z_$][\w$]*\.)*([A-Z][\w$]*(?:Exception|Error|Failure|Throwable)))"
    r"(?::\s*(.*))?$"
)
#: What spark-submit prints before it exits: ``Error: Master must start with ...``.
_SUBMIT_ERROR = re.compile(r"^(?:Error|Exception): (.+)$")
#: Lines of the Python side's own explanation, without Java (PySpark error classes).
_PYSPARK_CLASS = re.compile(r"^\[[A-Z_]+\]\s*")
#: The last line of a Python traceback: ``[module.]SomeError: message``.
_PYTHON_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.+)$")
#: Exception names of the layers a Python worker's error travels through to the
#: query's end: Java's, Scala's, Py4J's, PySpark's own.
_WRAPPERS = ("org.", "java.", "javax.", "scala.", "py4j.", "pyspark.")


def python_failure(text: str) -> str:
    """The Python exception a query's failure comes from, as one line (``RuntimeError:
    bolt 'store' task 3: prepare raised ...``): the last line of the last Python
    traceback in ``text`` (Spark's message of a query that stopped with an error),
    skipping the exceptions that wrap it on its way; else the innermost Java cause, else
    the first line. Pure text work."""
    found = ""
    for raw in text.splitlines():
        match = _PYTHON_EXCEPTION.match(raw.strip())
        if match and not match.group(1).startswith(_WRAPPERS):
            found = raw.strip()
    if found:
        return found
    java = _from_java_trace(text)
    if java:
        return java
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return _PYSPARK_CLASS.sub("", first)


def innermost_cause(error: BaseException, output: Sequence[str] = ()) -> str:
    """The innermost cause of ``error`` as one line, e.g. ``UnknownHostException: nohost``.

    Runs anywhere (pure text work). Looks, in order, for the last ``Caused by:`` of the
    Java traces in the error's text (or in its chained causes), the first Java
    exception there, a line spark-submit printed before the JVM exited (in ``output``,
    the JVM's standard error), and otherwise returns the first line of the error.
    """
    texts: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(texts) < 10:
        texts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    for text in texts:
        found = _from_java_trace(text)
        if found:
            return found
    for line in output:
        match = _SUBMIT_ERROR.match(line.strip())
        if match:
            return match.group(1).strip()
    for line in reversed(output):
        found = _from_java_trace(line)
        if found:
            return found
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return _PYSPARK_CLASS.sub("", first) or type(error).__name__


def _from_java_trace(text: str) -> str:
    """``Name: message`` of the innermost Java exception in ``text``, or ``""``."""
    innermost = ""
    outermost = ""
    for raw in text.splitlines():
        line = raw.strip()
        match = _JAVA_EXCEPTION.match(line)
        if match is None:
            continue
        name, message = match.group(2), (match.group(3) or "").strip()
        found = f"{name}: {message}" if message else name
        if line.startswith("Caused by: "):
            innermost = found
        elif not outermost:
            outermost = found
    return innermost or outermost
