"""What the Spark engine needs beyond squall's core install: the ``spark`` extra."""

from __future__ import annotations

import importlib.util

from squall.spark.launch.session import SparkUnavailableError

#: The distributions the ``spark`` extra installs, by the module each provides.
SPARK_EXTRA_MODULES = ("pyspark", "pyarrow", "pandas")
INSTALL_HINT = "pip install 'squall[spark]'"


class SparkExtraMissingError(SparkUnavailableError, ImportError):
    """The Spark engine was asked for, but the ``spark`` extra is not installed.

    Both a :class:`~squall.model.errors.SquallError` (the ``squall`` command reports it
    as one line) and an ``ImportError`` (it is raised by ``import squall.spark``).
    """


def missing_spark_modules() -> list[str]:
    """The modules of the ``spark`` extra that cannot be imported, in install order.

    Looks them up without importing them (importing PySpark takes a while).
    """
    missing = []
    for module in SPARK_EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # ValueError: sys.modules[module] is None
            found = False
        if not found:
            missing.append(module)
    return missing


def require_spark_extra() -> None:
    """Check that the Spark engine's dependencies are installed.

    Runs when ``squall.spark`` is imported, before any of PySpark is.

    Raises:
        SparkExtraMissingError: one of them is missing; the message names them and the
            command that installs them.
    """
    missing = missing_spark_modules()
    if missing:
        raise SparkExtraMissingError(
            f"the Spark engine needs the 'spark' extra ({', '.join(missing)} not installed): "
            f"{INSTALL_HINT}"
        )
