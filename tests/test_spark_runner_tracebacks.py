"""The JVM's standard error without the streaming source runner's tracebacks at stop."""

from __future__ import annotations

from squall.spark.launch.runnertraces import RunnerTracebackFilter

RUNNER = (
    "/venv/lib/python3.11/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py"
)

#: What the runner prints when the JVM closes its socket as the query stops.
RUNNER_TRACEBACK = f"""Traceback (most recent call last):
  File "{RUNNER}", line 265, in main
    func_id = read_int(infile)
              ^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/pyspark/serializers.py", line 597, in read_int
    raise EOFError
EOFError

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "{RUNNER}", line 312, in <module>
    main(sock_file, sock_file)
BrokenPipeError: [Errno 32] Broken pipe
"""

#: Any other traceback, from a user's code for instance.
OTHER_TRACEBACK = """Traceback (most recent call last):
  File "/app/bolt.py", line 9, in execute
    raise ValueError("no")
ValueError: no
"""


def kept(text: str) -> str:
    tracebacks = RunnerTracebackFilter()
    lines = [
        line for raw in text.splitlines(keepends=True) for line in tracebacks.feed(raw.encode())
    ]
    return b"".join(lines + tracebacks.end()).decode()


def test_the_runners_traceback_at_stop_is_dropped_with_its_chained_traceback() -> None:
    text = "before\n" + RUNNER_TRACEBACK + "after\n"
    assert kept(text) == "before\nafter\n"


def test_other_tracebacks_and_lines_pass_whole_and_in_order() -> None:
    text = "ERROR a log record\n" + OTHER_TRACEBACK + RUNNER_TRACEBACK + OTHER_TRACEBACK + "end\n"
    assert kept(text) == "ERROR a log record\n" + OTHER_TRACEBACK + OTHER_TRACEBACK + "end\n"


def test_a_traceback_line_at_the_end_of_the_stream_is_written() -> None:
    assert (
        kept("x\nTraceback (most recent call last):\n") == "x\nTraceback (most recent call last):\n"
    )


def test_a_cut_runner_traceback_drops_what_came() -> None:
    """The runner stopped mid-traceback, as when the JVM ends it: its lines are dropped."""
    text = "Traceback (most recent call last):\n" + f'  File "{RUNNER}", line 265, in main\n'
    assert kept(text) == ""
