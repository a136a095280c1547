"""squall.testing: complete_topology, FixedTupleSpout, FeederSpout, CapturingBolt."""

from __future__ import annotations

from typing import Any

import pytest

from squall import BasicBolt, Bolt, Config, LocalCluster, Spout, SquallError, TopologyBuilder
from squall.runtime.cluster import Cluster, EmitListener
from squall.testing import CapturingBolt, FeederSpout, FixedTupleSpout, complete_topology
from tests.conftest import Engine, on_engines
from tests.helpers import wait_until


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup["sentence"].split():
            collector.emit([word])


class Tagger(BasicBolt):
    """Routes numbers: evens to ``even``, odds to ``odd`` (both with the number doubled)."""

    outputs = {"even": ["n", "double"], "odd": ["n", "double"]}

    def execute(self, tup: Any, collector: Any) -> None:
        n = tup["n"]
        collector.emit([n, 2 * n], stream="even" if n % 2 == 0 else "odd")


class RealSpout(Spout):
    """A spout with no ``is_exhausted``: only usable with mock sources."""

    outputs = ["sentence"]

    def next_tuple(self) -> None:
        self.collector.emit(["never used"])


def word_topology(spout: Spout | None = None, split_tasks: int = 2) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout or RealSpout())
    builder.set_bolt("split", Split(), split_tasks).shuffle_grouping("sentences")
    builder.set_bolt("sink", CapturingBolt()).shuffle_grouping("split")
    return builder.create_topology()


def test_complete_topology_with_list_mock_source() -> None:
    result = complete_topology(
        word_topology(),
        mock_sources={"sentences": [["the cow"], ["jumped over"], ["the moon"]]},
    )
    assert sorted(result.read_tuples("sentences")) == [["jumped over"], ["the cow"], ["the moon"]]
    assert sorted(result.read_tuples("split")) == sorted(
        [[w] for w in ["the", "cow", "jumped", "over", "the", "moon"]]
    )
    assert result.read_tuples("sink") == []
    assert result.read_tuples("split", "other") == []
    assert result.streams() == [("sentences", "default"), ("split", "default")]
    assert result.info.components["sentences"].acked == 3
    assert result.info.components["split"].executed == 3
    assert result.info.components["sink"].executed == 6


def test_complete_topology_with_stream_mapping_mock_source() -> None:
    class TwoStreams(Spout):
        outputs = {"numbers": ["n"], "words": ["w"]}

    builder = TopologyBuilder()
    builder.set_spout("src", TwoStreams())
    builder.set_bolt("tag", Tagger(), 2).shuffle_grouping("src", "numbers")
    builder.set_bolt("echo", CapturingBolt()).shuffle_grouping("src", "words")
    builder.set_bolt("evens", CapturingBolt()).shuffle_grouping("tag", "even")
    result = complete_topology(
        builder.create_topology(),
        mock_sources={"src": {"numbers": [[1], [2], [3], [4]], "words": [["x"], ["y"]]}},
    )
    assert sorted(result.read_tuples("src", "numbers")) == [[1], [2], [3], [4]]
    assert sorted(result.read_tuples("src", "words")) == [["x"], ["y"]]
    assert result.read_tuples("src") == []  # nothing on the default stream
    assert sorted(result.read_tuples("tag", "even")) == [[2, 4], [4, 8]]
    assert sorted(result.read_tuples("tag", "odd")) == [[1, 2], [3, 6]]
    assert result.info.components["src"].acked == 6
    assert result.info.components["evens"].executed == 2
    assert result.info.components["echo"].executed == 2


def test_complete_topology_runs_fixed_tuple_spouts_unmocked() -> None:
    spout = FixedTupleSpout([["a b"], ["c"]], ["sentence"])
    result = complete_topology(word_topology(spout))
    assert sorted(result.read_tuples("split")) == [["a"], ["b"], ["c"]]
    assert sorted(spout.acked) == [0, 1]


def test_complete_topology_on_a_given_cluster(cluster: LocalCluster) -> None:
    result = complete_topology(
        word_topology(), mock_sources={"sentences": [["one two"]]}, cluster=cluster
    )
    assert sorted(result.read_tuples("split")) == [["one"], ["two"]]
    assert cluster.topology_names() == []  # killed after the run; the cluster stays usable


def test_complete_topology_passes_conf_through() -> None:
    result = complete_topology(
        word_topology(),
        mock_sources={"sentences": [["a b c"]]},
        conf={Config.TOPOLOGY_ACKER_EXECUTORS: 0, Config.TOPOLOGY_WORKERS: 2},
    )
    assert "__acker" not in result.info.components
    assert result.info.workers == 2
    assert sorted(result.read_tuples("split")) == [["a"], ["b"], ["c"]]
    assert result.info.components["sentences"].acked == 1  # acked at emit: acking is off


def test_complete_topology_needs_is_exhausted() -> None:
    with pytest.raises(SquallError, match="'sentences'") as caught:
        complete_topology(word_topology())
    assert "is_exhausted" in str(caught.value)


def test_complete_topology_rejects_bad_mock_sources() -> None:
    with pytest.raises(SquallError, match="'split', which is a bolt"):
        complete_topology(word_topology(), mock_sources={"split": [["x"]]})
    with pytest.raises(SquallError, match="unknown spout") as caught:
        complete_topology(word_topology(), mock_sources={"sentences": [["x"]], "nope": [["y"]]})
    assert "nope" in str(caught.value)


def test_fixed_tuple_spout_with_two_tasks_emits_each_tuple_once(cluster: LocalCluster) -> None:
    rows = [[n, f"v{n}"] for n in range(11)]
    spout = FixedTupleSpout(rows, ["n", "v"])
    sink = CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout, 2)
    builder.set_bolt("sink", sink, 2).shuffle_grouping("src")
    cluster.submit_topology("fixed", {}, builder.create_topology())
    wait_until(lambda: len(spout.acked) == 11)
    assert cluster.wait_idle("fixed", 5.0)

    assert sorted(sink.values()) == sorted(rows)
    assert sorted(spout.acked) == list(range(11))
    assert spout.failed == []
    running = cluster.get_running("fixed")
    first, second = running.plan.component_tasks["src"]
    by_source = {first: [], second: []}
    for item in sink.received:
        by_source[item.source_task].append(item.values[0])
    assert sorted(by_source[first]) == [0, 2, 4, 6, 8, 10]
    assert sorted(by_source[second]) == [1, 3, 5, 7, 9]
    assert all(running.runners[t].component.is_exhausted() for t in (first, second))


def test_fixed_tuple_spout_records_failures(cluster: LocalCluster) -> None:
    spout = FixedTupleSpout([[n] for n in range(6)], "n")
    sink = CapturingBolt(fail_first=2)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("src")
    cluster.submit_topology("fixed-fail", {}, builder.create_topology())
    wait_until(lambda: len(spout.acked) + len(spout.failed) == 6)
    assert spout.failed == [0, 1]  # not replayed
    assert spout.acked == [2, 3, 4, 5]


def test_feeder_spout_feed_acked_failed(cluster: LocalCluster) -> None:
    spout = FeederSpout(["word"])
    sink = CapturingBolt(fail_first=1)
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("feed")
    cluster.submit_topology("feeder", {}, builder.create_topology())

    spout.feed(["a"], msg_id="m-a")
    wait_until(lambda: spout.failed == ["m-a"])
    spout.feed(["b"], msg_id="m-b")
    spout.feed(["untracked"])
    spout.feed_many([["c"], ["d"]], msg_ids=["m-c", "m-d"])
    wait_until(lambda: len(sink.received) == 5)
    wait_until(lambda: len(spout.acked) == 3)
    assert cluster.wait_idle("feeder", 5.0)
    assert spout.acked == ["m-b", "m-c", "m-d"]
    assert spout.failed == ["m-a"]
    assert sink.values() == [["a"], ["b"], ["untracked"], ["c"], ["d"]]
    (feed_task,) = cluster.get_running("feeder").plan.component_tasks["feed"]
    assert {(r.source_component, r.source_stream, r.source_task) for r in sink.received} == {
        ("feed", "default", feed_task)
    }


@pytest.mark.parametrize("engine", on_engines(), indirect=True)
def test_a_feeder_spout_emits_what_is_fed_before_and_after_submit(engine: Engine) -> None:
    """On every engine: the spout the test holds is the one fed, wherever its task runs
    (a worker process, Spark's source process); a failed tuple is replayed."""
    spout = FeederSpout(["word"], replay_failed=True)
    sink = CapturingBolt(fail_first=1)
    spout.feed(["before"], msg_id="m-before")
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("feed")
    timeout = engine.pick(engine.timeout, 180.0)  # Spark: its workers start first
    with engine.running(builder.create_topology(), name="feeder") as run:
        run.wait_until(lambda: spout.acked == ["m-before"], timeout)
        spout.feed(["after"], msg_id="m-after")
        spout.feed_many([["c"], ["d"]], msg_ids=["m-c", "m-d"])
        run.wait_until(lambda: len(spout.acked) == 4, timeout)
    assert spout.failed == ["m-before"]
    assert spout.acked == ["m-before", "m-after", "m-c", "m-d"]
    assert sink.values() == [["before"], ["before"], ["after"], ["c"], ["d"]]


def test_feeder_spout_replays_when_asked(cluster: LocalCluster) -> None:
    spout = FeederSpout(["word"], replay_failed=True)
    sink = CapturingBolt(fail_first=2)
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", sink).shuffle_grouping("feed")
    cluster.submit_topology("replay", {}, builder.create_topology())
    spout.feed(["x"], msg_id="x")
    wait_until(lambda: spout.acked == ["x"])
    assert spout.failed == ["x", "x"]
    assert sink.values() == [["x"], ["x"], ["x"]]


def test_feeder_spout_on_a_named_stream_with_complete_topology() -> None:
    spout = FeederSpout(["n"], stream="numbers")
    spout.feed_many([[1], [2], [3]], msg_ids=[1, 2, 3])
    builder = TopologyBuilder()
    builder.set_spout("feed", spout)
    builder.set_bolt("sink", CapturingBolt()).shuffle_grouping("feed", "numbers")
    result = complete_topology(builder.create_topology())
    assert sorted(result.read_tuples("feed", "numbers")) == [[1], [2], [3]]
    assert sorted(spout.acked) == [1, 2, 3]


def test_capturing_bolt_by_task_and_fail_first(cluster: LocalCluster) -> None:
    spout = FixedTupleSpout([[n] for n in range(12)], ["n"])
    sink = CapturingBolt(fail_first=1)
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 3).fields_grouping("src", ["n"])
    cluster.submit_topology("capture", {}, builder.create_topology())
    wait_until(lambda: len(spout.acked) + len(spout.failed) == 12)
    assert cluster.wait_idle("capture", 5.0)

    by_task = sink.by_task()
    tasks = cluster.get_running("capture").plan.component_tasks["sink"]
    assert sorted(by_task) == [t for t in tasks if t in by_task]
    assert sum(len(v) for v in by_task.values()) == 12
    # Each task failed its first tuple: one failure per task that got anything.
    first_of_each = sorted(values[0][0] for values in by_task.values())
    assert sorted(spout.failed) == first_of_each
    assert sorted(spout.acked + spout.failed) == list(range(12))
    assert sorted(v[0] for v in sink.values()) == list(range(12))
    assert sink.values("other") == []
    assert all(r.source_component == "src" for r in sink.received)


def test_capturing_bolt_instances_are_per_task(cluster: LocalCluster) -> None:
    class Relay(Bolt):
        outputs = ["n"]

        def execute(self, tup: Any) -> None:
            self.collector.emit(list(tup.values), anchors=tup)
            self.collector.ack(tup)

    spout = FixedTupleSpout([[n] for n in range(8)], ["n"])
    first, second = CapturingBolt(), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("relay", Relay()).shuffle_grouping("src")
    builder.set_bolt("first", first, 2).shuffle_grouping("relay")
    builder.set_bolt("second", second).all_grouping("src")
    cluster.submit_topology("two-captures", {}, builder.create_topology())
    wait_until(lambda: len(spout.acked) == 8)
    assert sorted(v[0] for v in first.values()) == list(range(8))
    assert sorted(v[0] for v in second.values()) == list(range(8))
    assert {r.source_component for r in first.received} == {"relay"}
    assert {r.source_component for r in second.received} == {"src"}
    assert len(first.by_task()) == 2


def test_complete_topology_says_which_clusters_it_runs_on() -> None:
    class OtherCluster:
        """An object that does not implement the Cluster interface."""

    builder = TopologyBuilder()
    builder.set_spout("numbers", FixedTupleSpout([[1]], ["n"]))
    expected = r"runs on a Cluster \(LocalCluster, SparkCluster\), not on OtherCluster"
    with pytest.raises(SquallError, match=expected):
        complete_topology(builder.create_topology(), cluster=OtherCluster())  # type: ignore[arg-type]


class Recording(Cluster):
    """A Cluster of its own that runs topologies on a LocalCluster and records which of
    its methods are called: neither a LocalCluster nor a SparkCluster, nor named like
    one."""

    def __init__(self) -> None:
        self.inner = LocalCluster()
        self.calls: list[str] = []

    @property
    def engine(self) -> str:
        return "recording"

    @property
    def resources(self) -> str:
        return self.inner.resources

    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: Any,
        *,
        fresh: bool = False,
        emit_listener: EmitListener | None = None,
    ) -> None:
        self.calls.append(f"submit_topology(fresh={fresh}, listener={emit_listener is not None})")
        self.inner.submit_topology(name, conf, topology, fresh=fresh, emit_listener=emit_listener)

    def wait_complete(self, name: str, timeout_secs: float) -> None:
        self.calls.append("wait_complete")
        self.inner.wait_complete(name, timeout_secs)

    def get_topology_info(self, name: str, window_secs: int | None = None) -> Any:
        self.calls.append("get_topology_info")
        return self.inner.get_topology_info(name, window_secs)

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        self.calls.append(f"kill_topology(wait_secs={wait_secs})")
        self.inner.kill_topology(name, wait_secs)

    def shutdown(self) -> None:
        self.calls.append("shutdown")
        self.inner.shutdown()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"complete_topology used {name!r}")

    wait_idle = activate = deactivate = rebalance = check_rebalance = None  # type: ignore[assignment]
    get_topology = get_topology_conf = topology_names = in_window = None  # type: ignore[assignment]
    metric_windows = None  # type: ignore[assignment]


def test_complete_topology_runs_on_any_cluster_through_the_interface_only() -> None:
    cluster = Recording()
    try:
        result = complete_topology(
            word_topology(), {"sentences": [["a b"], ["c"]]}, cluster=cluster, timeout_secs=10
        )
    finally:
        cluster.inner.shutdown()
    assert sorted(result.read_tuples("split")) == [["a"], ["b"], ["c"]]
    assert result.info.components["sentences"].acked == 2
    assert cluster.calls == [
        "submit_topology(fresh=True, listener=True)",
        "wait_complete",
        "get_topology_info",
        "kill_topology(wait_secs=0)",
    ]


def test_local_wait_complete_needs_worker_threads() -> None:
    spout = FixedTupleSpout([["a"]], ["sentence"])
    conf = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_WORKER_KIND: "process"}
    with LocalCluster() as cluster:
        cluster.submit_topology("p", conf, word_topology(spout))
        with pytest.raises(SquallError, match=r"wait_complete\('p'\): the topology runs in worker"):
            cluster.wait_complete("p", 5)


class NeverDone(FixedTupleSpout):
    """A fixed spout that never says it is exhausted."""

    def is_exhausted(self) -> bool:
        return False


def test_local_wait_complete_names_the_spouts_not_exhausted() -> None:
    with LocalCluster() as cluster:
        cluster.submit_topology("f", {}, word_topology(NeverDone([["x y"]], ["sentence"])))
        with pytest.raises(TimeoutError, match=r"spouts not exhausted: \['sentences'\]"):
            cluster.wait_complete("f", 0.2)
