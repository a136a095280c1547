"""squall's files under a checkpoint location, on a local directory and on an S3 server
(URIs ``s3a://bucket/...``, as a cluster would use): what one process writes, another
reads back the same way, whichever file system holds it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from squall.spark.control import storage
from squall.spark.control.location import checkpoint_location
from squall.spark.control.rundir import Polls, QueryDirectory
from squall.spark.execute.ledger import LedgerPart
from squall.spark.execute.packets import Packet, packets_from_arrow
from squall.spark.execute.snapshots import SnapshotStore, TaskSnapshot
from squall.spark.sources.coordination import FileCoordinationStore
from squall.spark.sources.spoutlog import LoggedBatch, LoggedPartition, SpoutLog
from tests.servers import S3Server


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    server = S3Server().start()
    saved = {key: os.environ.get(key) for key in server.environment()}
    os.environ.update(server.environment())
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh directory: a local path, or a URI on the S3 server."""
    if request.param == "local":
        return str(tmp_path / "checkpoint")
    server: S3Server = request.getfixturevalue("s3_server")
    return f"s3a://{server.BUCKET}/{uuid.uuid4().hex}/checkpoint"


def test_files_are_replaced_read_listed_and_removed(location: str) -> None:
    directory = storage.join(location, "files")
    storage.makedirs(directory)
    assert storage.listdir(directory) == []
    storage.write_bytes(storage.join(directory, "a"), b"first")
    storage.write_bytes(storage.join(directory, "a"), b"second")
    storage.write_bytes(storage.join(directory, "b.txt"), "héllo".encode(), durable=False)
    assert storage.read_bytes(storage.join(directory, "a")) == b"second"
    assert storage.read_text(storage.join(directory, "b.txt")) == "héllo"
    assert sorted(storage.listdir(directory)) == ["a", "b.txt"]
    assert storage.exists(storage.join(directory, "a"))
    storage.remove(storage.join(directory, "a"))
    storage.remove(storage.join(directory, "a"))  # already gone: nothing happens
    assert not storage.exists(storage.join(directory, "a"))
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(storage.join(directory, "a"))
    assert storage.listdir(storage.join(location, "nothing-here")) == []
    storage.remove_tree(location)
    assert not storage.exists(storage.join(directory, "b.txt"))
    storage.remove_tree(location)  # already gone: nothing happens


def test_a_spout_log_written_by_one_process_is_read_back_by_another(location: str) -> None:
    writer = SpoutLog(storage.join(location, "spout-log"))
    writer.append(0, LoggedBatch([["a"], ["b"]]))
    writer.append(1, LoggedBatch(partitions=2, transaction={"offset": 7}))
    writer.write_partition(1, 0, LoggedPartition({"next": 3}, 3))
    writer.write_partition(1, 1, LoggedPartition({"next": 4}, 4))
    writer.set_attempt(1, 2)
    packets = [
        Packet(0, task, "spout", "default", 5, 1, f"tuple {task}".encode()) for task in range(4)
    ]
    writer.write_slices(2, packets, 2)
    writer.write_inits(2, LedgerPart.of({11: 12, 13: 14}))
    writer.append(2, LoggedBatch(tuples=4))
    writer.write_outcome(2, {13})

    reader = SpoutLog(storage.join(location, "spout-log"))  # as another host opens it
    assert (reader.first(), reader.size()) == (0, 3)
    assert reader.batch(0).rows == [["a"], ["b"]]
    assert reader.emitted(0) == 2
    assert reader.batch(1).transaction == {"offset": 7}
    assert (reader.partitions(1), reader.emitted(1), reader.attempt(1)) == (2, 7, 2)
    assert reader.partition(1, 1) == LoggedPartition({"next": 4}, 4)
    assert reader.previous_partition_meta(5, 0) == {"next": 3}
    sliced = [p for batch in reader.slice(2, 1) for p in packets_from_arrow(batch)]
    assert sliced == [packets[1], packets[3]]
    assert reader.inits(2).as_dict() == {11: 12, 13: 14}
    assert (reader.outcome(2), reader.outcome(1)) == ({13}, None)

    reader.forget_before(2)
    assert (reader.first(), reader.size()) == (2, 3)
    assert reader.summary(1) is None
    assert reader.emitted(2) == 4


def test_task_snapshots_keep_the_newest_before_a_batch(location: str) -> None:
    store = SnapshotStore(storage.join(location, "state", "count", "0"))
    for batch_id in (3, 4, 5):
        store.write(batch_id, TaskSnapshot(f"state {batch_id}".encode(), None))
    again = SnapshotStore(storage.join(location, "state", "count", "0"))
    assert again.latest_before(5) == 4  # older ones (3) were committed: removed
    assert again.batches() == [4, 5]
    assert again.read(4) == TaskSnapshot(b"state 4", None)


def test_the_coordination_store_keeps_values_per_namespace_and_key(location: str) -> None:
    store = FileCoordinationStore(storage.join(location, "coordination"))
    store.put("topology/one", "00000000000000000002", {"partitions": 2})
    store.put("topology/one", "00000000000000000001", [1, 2])
    store.put("other", "a/b", "slashes stay in the key")
    other = FileCoordinationStore(storage.join(location, "coordination"))
    assert other.keys("topology/one") == ["00000000000000000001", "00000000000000000002"]
    assert other.get("topology/one", "00000000000000000002") == {"partitions": 2}
    assert other.get("other", "a/b") == "slashes stay in the key"
    assert other.get("other", "missing", "default") == "default"
    other.delete("topology/one", "00000000000000000001")
    other.delete("topology/one", "00000000000000000001")
    assert store.keys("topology/one") == ["00000000000000000002"]
    assert store.keys("never used") == []


def test_a_query_directory_steers_its_sources_and_reads_sparks_checkpoint(location: str) -> None:
    query = QueryDirectory.of(location, "words", "core")
    query.make()
    source = query.source("sentences")
    source.make()
    assert not query.is_paused() and not query.is_closing()
    query.pause()
    query.close()
    assert QueryDirectory(query.path).is_paused() and QueryDirectory(query.path).is_closing()
    query.resume()
    assert not query.is_paused()
    source.write_polls(Polls(7, 0, 1))
    source.mark_closed()
    assert (source.read_polls(), source.is_closed()) == (Polls(7, 0, 1), True)
    source.clear_markers()
    assert (source.read_polls(), source.is_closed()) == (None, False)

    checkpoint = query.checkpoint
    storage.makedirs(storage.join(checkpoint.path, "offsets"))
    storage.makedirs(storage.join(checkpoint.path, "commits"))
    for batch_id, end in ((0, 2), (1, 5)):
        offsets = f'v1\n{{"batchWatermarkMs":0}}\n{{"source": "sentences", "batch": {end}}}\n'
        storage.write_bytes(
            storage.join(checkpoint.path, "offsets", str(batch_id)), offsets.encode()
        )
    storage.write_bytes(storage.join(checkpoint.path, "commits", "0"), b"v1\n{}\n")
    assert checkpoint.ranges(1) == {"sentences": range(2, 5)}
    assert checkpoint.ranges(0) == {"sentences": range(0, 2)}
    assert checkpoint.last_committed_batch() == 0

    query.pause()
    storage.write_bytes(query.core_setup("words-1"), b"set-up")
    query.make()  # a new run: the markers and earlier runs' set-ups are cleared
    assert not query.is_paused() and not storage.exists(query.core_setup("words-1"))


def test_an_s3a_checkpoint_location_is_taken_as_given(s3_server: S3Server) -> None:
    location = f"s3a://{s3_server.BUCKET}/squall/"
    assert checkpoint_location(location) == f"s3a://{s3_server.BUCKET}/squall"
