"""Which form of squall's core (compiled or pure Python, see :mod:`squall.compiled`)
the driver and the executors run, and how the driver's choice reaches the executors.

``SQUALL_PURE_PYTHON=1`` is read when squall is first imported. A session squall starts
passes the driver's choice to Spark's Python processes (``spark.executorEnv`` and, on a
local master, the environment its JVM inherits), so executors run the form the driver
chose; each process reports the form it runs (a task's report carries it), and
``get_topology_info(name).spark`` says both.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from squall.compiled import PURE_PYTHON_ENV, SourceOnlyFinder, compiled_core, pure_python_chosen

#: The forms a process runs.
COMPILED, PURE = "compiled", "pure"


def core_form() -> str:
    """The form of the core this process runs: ``"compiled"`` or ``"pure"`` (any
    process; cheap after the first call)."""
    return COMPILED if compiled_core() else PURE


def pure_chosen() -> bool:
    """Whether this process chose the pure-Python form: the variable is set, or was
    when squall was imported (its source-only importer is installed)."""
    return pure_python_chosen() or any(isinstance(f, SourceOnlyFinder) for f in sys.meta_path)


def executor_environment() -> dict[str, str]:
    """The variables Spark's Python processes get so they run the driver's choice:
    ``{"SQUALL_PURE_PYTHON": "1"}`` when the driver chose the pure form, else none (an
    executor then runs the compiled core where it is installed)."""
    return {PURE_PYTHON_ENV: "1"} if pure_chosen() else {}


def describe(forms: Iterable[str]) -> str:
    """One word for the forms the executors reported: ``"compiled"``, ``"pure"``,
    ``"compiled and pure"`` when they differ, ``""`` before any task reported."""
    seen = set(forms)
    if len(seen) > 1:
        return f"{COMPILED} and {PURE}"
    return next(iter(seen), "")


__all__ = ["COMPILED", "PURE", "core_form", "describe", "executor_environment", "pure_chosen"]
