"""Connectors and the state layer's executors before their task starts: a component
that was never opened/prepared (a submission refused, a worker that failed before it)
still answers ``metrics()`` and closes cleanly, also after pickling (as Spark and
worker processes receive it)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squall.connectors.files import FileBolt, FileSpout
from squall.connectors.kafka import KafkaBolt, KafkaSpout
from squall.connectors.postgres import PostgresInsertBolt, PostgresLookupBolt
from squall.connectors.redis import RedisStreamBolt, RedisStreamSpout
from squall.model.components import Bolt, Spout
from squall.model.hooks import ReportsMetrics, implements
from squall.state import StatefulBolt, StatefulWindowedBolt
from squall.state.checkpoint_spout import CheckpointSpout
from squall.state.executors import CheckpointedBolt, StatefulBoltExecutor
from squall.state.micro_batches import MicroBatchStatefulBolt
from squall.windowing import Count, TupleWindow

URL = "redis://127.0.0.1:1/0"
DSN = "postgresql://squall@127.0.0.1:1/squall"
KAFKA = "127.0.0.1:1"


class Counter(StatefulBolt):
    def init_state(self, state: Any) -> None:
        pass

    def execute(self, tup: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        pass


class Plain(Bolt):
    def execute(self, tup: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        pass


class Windows(StatefulWindowedBolt):
    def init_state(self, state: Any) -> None:
        pass

    def execute(self, window: TupleWindow) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def components(directory: Path) -> dict[str, Callable[[], Spout | Bolt]]:
    return {
        "RedisStreamSpout": lambda: RedisStreamSpout(URL, "in", "group"),
        "RedisStreamBolt": lambda: RedisStreamBolt(URL, "out"),
        "PostgresInsertBolt": lambda: PostgresInsertBolt(DSN, "t", ["a"]),
        "PostgresLookupBolt": lambda: PostgresLookupBolt(DSN, "SELECT 1", ["one"]),
        "FileSpout": lambda: FileSpout(directory),
        "FileBolt": lambda: FileBolt(directory),
        "KafkaSpout": lambda: KafkaSpout(KAFKA, "in", "group"),
        "KafkaBolt": lambda: KafkaBolt(KAFKA, "out"),
        "CheckpointSpout": CheckpointSpout,
        "CheckpointedBolt": lambda: CheckpointedBolt(Plain()),
        "StatefulBoltExecutor": lambda: StatefulBoltExecutor(Counter()),
        "MicroBatchStatefulBolt": lambda: MicroBatchStatefulBolt(Counter()),
        "PersistentWindowedBoltExecutor": lambda: (
            Windows().with_tumbling_window(Count(2)).with_persistence().to_bolt()
        ),
    }


EXPECTED_METRICS = {
    "RedisStreamSpout": {"malformed": 0, "replayed": 0, "reclaimed": 0, "in_flight": 0},
    "RedisStreamBolt": {"entries_written": 0, "failed_writes": 0},
    "PostgresInsertBolt": {"rows_written": 0, "failed_writes": 0},
    "FileSpout": {},
    "FileBolt": {},
    "KafkaSpout": {},
    "KafkaBolt": {"delivered": 0, "failed": 0, "skipped": 0, "in_flight": 0},
    "CheckpointedBolt": {},
    "StatefulBoltExecutor": {},
    "MicroBatchStatefulBolt": {},
}
#: Its window manager is made by ``prepare``: only the clean-up is checked.
UNCHECKED_METRICS = {"PersistentWindowedBoltExecutor"}


@pytest.mark.parametrize("pickled", [False, True], ids=["as made", "unpickled"])
@pytest.mark.parametrize("name", sorted(components(Path("."))))
def test_a_component_never_opened_reports_no_figures_and_closes(
    name: str, pickled: bool, tmp_path: Path
) -> None:
    component = components(tmp_path)[name]()
    if pickled:
        component = pickle.loads(pickle.dumps(component))
    if name not in UNCHECKED_METRICS:
        if implements(component, ReportsMetrics):
            assert dict(component.metrics()) == EXPECTED_METRICS[name]
        else:
            assert name not in EXPECTED_METRICS
    if isinstance(component, Spout):
        component.close()
    else:
        component.cleanup()
    assert list(tmp_path.iterdir()) == []  # nothing written
