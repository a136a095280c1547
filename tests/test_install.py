"""The core install (no ``spark`` extra): the embedded engine works without PySpark,
and asking for the Spark engine names the extra to install.

Each test runs Python in a subprocess in which the extra's modules cannot be imported
(``sys.modules[name] = None``), as on a machine where only ``pip install squall`` ran.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WITHOUT_EXTRA = (
    "import sys\nfor name in ('pyspark', 'pyarrow', 'pandas'):\n    sys.modules[name] = None\n"
)
HINT = "pip install 'squall[spark]'"


def run_without_extra(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (after blocking the extra's modules) with ``args`` as ``sys.argv[1:]``."""
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA + code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_embedded_engine_runs_without_the_spark_extra() -> None:
    code = (
        "from squall.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print('loaded:', sorted(n for n in ('pyspark', 'pyarrow', 'pandas')\n"
        "        if sys.modules.get(n) is not None))\n"
    )
    done = run_without_extra(
        code, "run", "examples/word_count.py", "--seconds", "0.5", "--no-live", "--drain", "5"
    )
    assert done.returncode == 0, done.stderr
    assert "final metrics" in done.stdout
    assert "loaded: []" in done.stdout


def test_importing_the_spark_engine_without_the_extra_names_it() -> None:
    code = (
        "from squall.model.errors import SquallError\n"
        "try:\n"
        "    from squall.spark import SparkCluster\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, SquallError), exc)\n"
    )
    done = run_without_extra(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "SparkExtraMissingError True the Spark engine needs the 'spark' extra "
        f"(pyspark, pyarrow, pandas not installed): {HINT}"
    )


def test_squall_run_on_spark_without_the_extra_fails_with_one_line() -> None:
    code = "from squall.cli.main import main\nmain()\n"
    done = run_without_extra(code, "run", "examples/word_count.py", "--engine", "spark")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: the Spark engine needs the 'spark' extra (pyspark, pyarrow, pandas not "
        f"installed): {HINT}"
    ]
