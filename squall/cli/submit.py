"""``squall submit``: run a topology file on a Spark cluster through ``spark-submit``.

The command ``spark-submit`` is given runs ``squall run FILE --engine spark`` in the
driver it starts (client mode: this machine, this Python). squall itself goes to the
executors as a zip in ``--py-files``, so their Python needs only squall's
dependencies; the user's code is pickled by value, as with ``squall run``. The driver's
Python (``spark.pyspark.driver.python``) is the one running ``squall submit``; the
executors' (``spark.pyspark.python``) is ``--executor-python``, which may be a path
inside an archive shipped with ``--archives`` (``./env/bin/python``): the driver never
uses it.

Runs in the user's shell, on the machine that will be the driver.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import squall
from squall.cli.loader import TopologyTarget
from squall.spark.control.location import checkpoint_location
from squall.spark.launch.javaoptions import (
    DRIVER_OPTIONS,
    read_spark_defaults,
    spark_defaults_file,
    with_quick_compiler,
)

#: The name of the zip of squall shipped to executors; the driver program drops it
#: from its own import path (the driver imports the installed squall).
SQUALL_ZIP = "squall-for-executors.zip"
#: The program ``spark-submit`` runs as the driver.
DRIVER_PROGRAM = Path(__file__).resolve().parent / "submitted.py"


class SubmitError(Exception):
    """``squall submit`` cannot build the command; the message says why."""


def spark_submit_program() -> str:
    """``spark-submit`` of ``SPARK_HOME``, else of the installed PySpark, else the one on
    the ``PATH``.

    Raises:
        SubmitError: none is found.
    """
    candidates = []
    if os.environ.get("SPARK_HOME"):
        candidates.append(Path(os.environ["SPARK_HOME"]) / "bin" / "spark-submit")
    try:
        import pyspark

        candidates.append(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")
    except ImportError:
        pass
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("spark-submit")
    if found is None:
        raise SubmitError(
            "spark-submit is not found: set SPARK_HOME or install squall[spark] (PySpark)"
        )
    return found


def pack_squall(directory: Path) -> Path:
    """Zip the squall package this process imports (its sources, no caches) into
    ``directory`` for the executors' import path."""
    package = Path(squall.__file__).resolve().parent
    target = directory / SQUALL_ZIP
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            archive.write(path, Path("squall") / path.relative_to(package))
    return target


@dataclass
class Submission:
    """What ``squall submit`` was asked for."""

    target: str
    master: str | None = None
    checkpoint: str | None = None
    executor_python: str | None = None
    py_files: list[str] = field(default_factory=list)
    archives: list[str] = field(default_factory=list)
    spark_conf: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    #: Options passed on to ``squall run`` (``--seconds``, ``--until-idle``, ``--conf`` ...).
    run_options: Sequence[str] = ()


def submit_command(
    submission: Submission,
    squall_zip: Path,
    program: str,
    defaults: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``spark-submit`` command line of ``submission`` (``program``: spark-submit).

    The driver's JVM gets the JIT's quick compiler (see
    :mod:`squall.spark.launch.javaoptions`) after the driver options in effect: the
    submission's, else those of ``defaults`` (the ``spark-defaults.conf`` of
    ``program``'s Spark home, read when None). The executors get it from the session
    the driver starts."""
    if defaults is None:
        spark_home = str(Path(program).resolve().parent.parent)
        defaults = read_spark_defaults(spark_defaults_file(spark_home))
    executor_python = submission.executor_python or os.environ.get("PYSPARK_PYTHON")
    conf = {
        "spark.pyspark.driver.python": sys.executable,
        "spark.pyspark.python": executor_python or sys.executable,
        **submission.spark_conf,
    }
    driver_options = with_quick_compiler(DRIVER_OPTIONS, {**defaults, **submission.spark_conf})
    if driver_options is not None:
        conf[DRIVER_OPTIONS] = driver_options
    command = [program]
    if submission.master:
        command += ["--master", submission.master]
    command += ["--deploy-mode", "client"]
    if submission.name:
        command += ["--name", f"squall-{submission.name}"]
    command += ["--py-files", ",".join([str(squall_zip), *submission.py_files])]
    if submission.archives:
        command += ["--archives", ",".join(submission.archives)]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [str(DRIVER_PROGRAM), "run", submission.target, "--engine", "spark"]
    if submission.checkpoint:
        command += ["--checkpoint", submission.checkpoint]
    if submission.name:
        command += ["--name", submission.name]
    return [*command, *submission.run_options]


def _absolute(location: str) -> str:
    """``location`` made absolute when it is a local path (a URI stays as it is; an
    archive's ``#DIR`` is kept)."""
    if "://" in location or location.startswith("file:"):
        return location
    path, hash_sign, alias = location.partition("#")
    return os.path.abspath(path) + hash_sign + alias


def _absolute_target(target: str) -> str:
    """``FILE.py[:NAME]`` with FILE made absolute.

    Raises:
        TopologyLoadError: FILE does not exist or is not a file.
    """
    parsed = TopologyTarget.parse(target)
    return str(parsed.path) if parsed.name is None else f"{parsed.path}:{parsed.name}"


def driver_directory(submission: Submission, folder: Path) -> Path | None:
    """The working directory of the driver when ``--executor-python`` is a relative
    path (inside an archive): that path there runs this Python, because Spark also
    starts the data sources' Python processes on the driver with the executors' Python.
    None when the executors' Python is an absolute path (the driver keeps the current
    directory)."""
    executor_python = submission.executor_python
    if not executor_python or os.path.isabs(executor_python):
        return None
    directory = folder / "driver"
    launcher = directory / executor_python
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n', encoding="utf-8")
    launcher.chmod(0o755)
    return directory


def with_absolute_paths(submission: Submission) -> Submission:
    """``submission`` with its local paths (file, checkpoint, py-files, archives) made
    absolute, for a driver that runs in another directory.

    Raises:
        TopologyLoadError: the topology's file does not exist.
        CheckpointLocationError: the checkpoint is a location squall cannot use.
    """
    return Submission(
        _absolute_target(submission.target),
        submission.master,
        checkpoint_location(submission.checkpoint) if submission.checkpoint else None,
        submission.executor_python,
        [_absolute(path) for path in submission.py_files],
        [_absolute(path) for path in submission.archives],
        submission.spark_conf,
        submission.name,
        submission.run_options,
    )


def driver_environment() -> dict[str, str]:
    """The environment of ``spark-submit``: this one without the Python choices of an
    earlier local session (``spark.pyspark.*`` decide)."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT")
    }
