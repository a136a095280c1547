"""The checkpoint location a SparkCluster takes: paths and file: URIs, other schemes
refused before any JVM starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from squall.cli.main import main
from squall.spark.control.location import CheckpointLocationError, local_checkpoint_path


def test_paths_and_file_uris_name_local_directories(tmp_path: Path) -> None:
    assert local_checkpoint_path(str(tmp_path)) == str(tmp_path)
    assert local_checkpoint_path("relative/dir") == os.path.abspath("relative/dir")
    assert local_checkpoint_path(f"file://{tmp_path}") == str(tmp_path)
    assert local_checkpoint_path(f"file:{tmp_path}") == str(tmp_path)
    assert local_checkpoint_path("file://localhost/data/my%20dir") == "/data/my dir"


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("hdfs://namenode:8020/squall", "the hdfs: scheme is not supported"),
        ("s3a://bucket/squall", "the s3a: scheme is not supported"),
        ("file://otherhost/data", "its host 'otherhost' cannot be used"),
        (" ", "the checkpoint location is empty"),
    ],
)
def test_other_locations_are_refused_naming_the_problem(location: str, message: str) -> None:
    with pytest.raises(CheckpointLocationError, match=message):
        local_checkpoint_path(location)


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
    assert "Error: checkpoint location 'hdfs://nn:8020/squall': the hdfs: scheme" in result.output
    assert not (Path.cwd() / "hdfs:").exists()
