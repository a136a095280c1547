"""The Python data source every spout is read through (``squall_spout``).

``spark.readStream.format("squall_spout").option("setup", path)...``: the set-up file
the cluster wrote says what the source is, and the data source makes its reader: a
core topology's spout (:class:`~squall.spark.sources.coresource.CoreSpoutReader`) for a
core set-up, else the reader the source's set-up names (see ``sources.batchreaders``).

Runs in the Python processes Spark starts for the source (the driver side).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from squall.spark.execute.packets import PACKET_SCHEMA
from squall.spark.execute.taskstate import CoreSetup
from squall.spark.sources.batchreaders import READERS
from squall.spark.sources.setup import read_setup

SOURCE_NAME = "squall_spout"


class SpoutSource(DataSource):
    """``spark.readStream.format("squall_spout").option("setup", ...)...``"""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        """Every source's rows are packets (see ``execute.packets``)."""
        return PACKET_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """The reader of the source the set-up file describes."""
        options = dict(self.options)
        setup = read_setup(options["setup"])
        if isinstance(setup, CoreSetup):
            from squall.spark.sources.coresource import CoreSpoutReader

            return CoreSpoutReader(options, setup)
        return READERS[setup.kind](options, setup)
