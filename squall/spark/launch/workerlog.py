"""squall's log messages in the Python processes Spark starts (sources and workers).

Errors a task reports there are counted in its metrics, which the driver reads; their
log records would otherwise reach the console through the JVM (Python's last-resort
handler writes them to standard error). A session squall starts says in the
environment of those processes (``SQUALL_SPARK_LOG``) what to do with them:

* ``quiet``: drop them (the default; the metrics and ``squall run``'s summary have
  the errors);
* ``verbose``: write them to standard error, from INFO up.

Without the variable (a session of the user's own) nothing is changed.
"""

from __future__ import annotations

import logging
import os
import sys

ENVIRONMENT_KEY = "SQUALL_SPARK_LOG"

_configured = False


def mode(verbose: bool) -> str:
    """The value of :data:`ENVIRONMENT_KEY` for a session (driver side)."""
    return "verbose" if verbose else "quiet"


def configure_worker_logging() -> None:
    """Set up the ``squall`` logger of this Spark process as the session asked (once per
    process; later calls do nothing).

    Runs in a source's or worker's Python process, before the component code runs.
    """
    global _configured
    if _configured:
        return
    _configured = True
    chosen = os.environ.get(ENVIRONMENT_KEY)
    logger = logging.getLogger("squall")
    if chosen == "quiet":
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    elif chosen == "verbose":
        handler = logging.StreamHandler(sys.stderr)
        layout = "%(levelname)s squall (pid %(process)d): %(message)s"
        handler.setFormatter(logging.Formatter(layout))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
