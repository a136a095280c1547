"""The checkpoint location a SparkCluster takes: paths, file: URIs and URIs of file
systems pyarrow opens; what it cannot use is refused before any JVM starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from squall.cli.main import main
from squall.spark.control.location import CheckpointLocationError, checkpoint_location


def test_paths_and_file_uris_name_local_directories(tmp_path: Path) -> None:
    assert checkpoint_location(str(tmp_path)) == str(tmp_path)
    assert checkpoint_location("relative/dir") == os.path.abspath("relative/dir")
    assert checkpoint_location(f"file://{tmp_path}") == str(tmp_path)
    assert checkpoint_location(f"file:{tmp_path}") == str(tmp_path)
    assert checkpoint_location("file://localhost/data/my%20dir") == "/data/my dir"


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("hdfs://namenode:8020/squall", "cannot open the hdfs: file system here"),
        ("nosuch://place/squall", "cannot open the nosuch: file system here"),
        ("s3a:/bucket/squall", r"write a URI as s3a://authority/path"),
        ("s3a://bucket/squall?region=x", r"write a URI as s3a://authority/path, without a query"),
        ("file://otherhost/data", "its host 'otherhost' cannot be used"),
        (" ", "the checkpoint location is empty"),
    ],
)
def test_other_locations_are_refused_naming_the_problem(location: str, message: str) -> None:
    with pytest.raises(CheckpointLocationError, match=message):
        checkpoint_location(location)


def test_squall_run_refuses_such_a_checkpoint_before_starting_spark(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(
        "from squall import TopologyBuilder\n"
        "from squall.testing import FixedTupleSpout\n"
        "builder = TopologyBuilder()\n"
        "builder.set_spout('numbers', FixedTupleSpout([[1]], ['n']))\n"
        "topology = builder.create_topology()\n",
        encoding="utf-8",
    )
    arguments = ["run", str(app), "--engine", "spark", "--checkpoint", "hdfs://nn:8020/squall"]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 1
    assert (
        "Error: checkpoint location 'hdfs://nn:8020/squall': squall cannot open the hdfs: file "
        "system here" in result.output
    )
    assert not (Path.cwd() / "hdfs:").exists()
