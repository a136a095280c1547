"""``LocalCluster.rebalance``: Storm's ``storm rebalance`` on the local engine.

A rebalance changes the worker threads and the executors per component while the
topology runs; these tests check that it loses and repeats nothing (tuples, acks,
pending trees, ticks, windows, stateful and Trident state), keeps every task's object
and counters, restores the activation there was, keeps spouts quiet while it waits, and
reports the new layout. Everything waits for conditions, never for a time."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from squall import (
    BasicBolt,
    Config,
    Duration,
    Fields,
    InvalidTopologyError,
    LocalCluster,
    ManualClock,
    SquallError,
    TopologyBuilder,
)
from squall.testing import CapturingBolt, FeederSpout
from squall.trident import Count as TridentCount
from squall.trident import FixedBatchSpout, TridentTopology
from squall.trident.state import MemoryMapState, StateType
from tests.helpers import HoldingBolt, settle, wait_until
from tests.test_local_windowing import NAME as WINDOWS
from tests.test_local_windowing import Run, WindowLog
from tests.test_state_local import (
    SENTENCES,
    SentenceSpout,
    WordCount,
    conf_with,
    expected_counts,
    states_of,
    word_count,
)

NAME = "moving"
TIMEOUT = 60.0


class Relay(BasicBolt):
    """Passes ``[n, key]`` on, anchored (a basic bolt acks its input)."""

    outputs = ["n", "key"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup["n"], tup["key"]])


def relay_topology(spout: FeederSpout, sink: CapturingBolt) -> Any:
    """numbers -> relay (shuffle, 6 tasks) -> sink (fields on key, 4 tasks)."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("relay", Relay(), 2).set_num_tasks(6).shuffle_grouping("numbers")
    builder.set_bolt("sink", sink, 2).set_num_tasks(4).fields_grouping("relay", ["key"])
    return builder.create_topology()


def row(n: int) -> list[Any]:
    return [n, f"key-{n % 37}"]


def submit_relay(
    cluster: LocalCluster, conf: dict[str, Any] | None = None
) -> tuple[FeederSpout, CapturingBolt]:
    spout, sink = FeederSpout(["n", "key"]), CapturingBolt()
    cluster.submit_topology(NAME, conf or {}, relay_topology(spout, sink))
    return spout, sink


def layout(cluster: LocalCluster, name: str = NAME) -> tuple[int, dict[str, int]]:
    info = cluster.get_topology_info(name)
    return info.workers, info.extra["executors"]


# --- no loss, no duplicate ---------------------------------------------------------------


def test_rebalancing_under_load_acks_every_tuple_exactly_once(cluster: LocalCluster) -> None:
    total = 3000
    spout, sink = submit_relay(
        cluster,
        {
            Config.TOPOLOGY_WORKER_KIND: "thread",
            Config.TOPOLOGY_WORKERS: 1,
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 100,
        },
    )
    running = cluster.get_running(NAME)
    components = {task: runner.component for task, runner in running.runners.items()}
    inboxes = {task: runner.inbox for task, runner in running.runners.items()}
    layouts = [
        (3, {"relay": 6, "sink": 4}),
        (2, {"relay": 1, "sink": 2}),
        (3, {"relay": 3, "sink": 1}),
        (1, {"relay": 2, "sink": 3}),
        (2, {"relay": 6, "sink": 4}),
    ]
    chunk = total // (len(layouts) + 1)
    fed = 0
    for workers, executors in layouts:
        spout.feed_many([row(n) for n in range(fed, fed + chunk)], range(fed, fed + chunk))
        fed += chunk
        # Tuples of this chunk flow (some are acked, the rest queued or in flight).
        wait_until(lambda before=fed - chunk: len(spout.acked) > before, TIMEOUT)
        cluster.rebalance(NAME, num_workers=workers, executors=executors)
        assert layout(cluster) == (workers, {"__acker": 1, "numbers": 1, **executors})
    spout.feed_many([row(n) for n in range(fed, total)], range(fed, total))
    wait_until(lambda: len(spout.acked) >= total, TIMEOUT)
    assert cluster.wait_idle(NAME, TIMEOUT)

    assert sorted(spout.acked) == list(range(total))  # each id acked once
    assert spout.failed == []
    assert sorted(values[0] for values in sink.values()) == list(range(total))
    tasks_of_key: dict[str, set[int]] = {}
    for received in sink.received:
        tasks_of_key.setdefault(received.values[1], set()).add(received.task_id)
    assert all(len(tasks) == 1 for tasks in tasks_of_key.values())
    info = cluster.get_topology_info(NAME)
    assert info.components["numbers"].emitted == total
    assert info.components["numbers"].acked == total
    for component_id in ("relay", "sink"):
        stats = info.components[component_id]
        assert (stats.executed, stats.acked, stats.failed) == (total, total, 0)
    assert info.components["relay"].emitted == total
    assert info.extra["pending"] == 0
    # The same task objects and queues all along.
    assert all(running.runners[task].component is c for task, c in components.items())
    assert all(running.runners[task].inbox is inbox for task, inbox in inboxes.items())


def test_pending_trees_max_spout_pending_and_timeouts_survive_a_rebalance(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    spout, control, hold = FeederSpout(["v"]), FeederSpout(["command", "count"]), HoldingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_spout("control", control)
    builder.set_bolt("hold", hold, 2).shuffle_grouping("src").all_grouping("control")
    conf = {
        Config.TOPOLOGY_WORKER_KIND: "thread",
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
    }
    manual_cluster.submit_topology(NAME, conf, builder.create_topology())
    spout.feed_many([[v] for v in range(5)], range(5))
    wait_until(lambda: len(hold.record.get("held")) == 3)
    manual_cluster.rebalance(NAME, num_workers=1, executors={"hold": 1})
    settle(manual_cluster, NAME, rounds=20)
    assert len(hold.record.get("held")) == 3  # still at most 3 pending
    assert manual_cluster.get_topology_info(NAME).extra["pending"] == 3

    control.feed(["ack", 0])  # every task acks what it holds: the trees complete
    wait_until(lambda: sorted(spout.acked) == [0, 1, 2])
    wait_until(lambda: len(hold.record.get("held")) == 5)
    manual_cluster.rebalance(NAME, num_workers=3, executors={"hold": 2})
    assert manual_cluster.get_topology_info(NAME).extra["pending"] == 2
    clock.advance_secs(31)  # the two trees held time out
    wait_until(lambda: sorted(spout.failed) == [3, 4])
    assert sorted(spout.acked) == [0, 1, 2]
    stats = manual_cluster.get_topology_info(NAME).components["src"]
    assert (stats.acked, stats.failed, stats.timed_out) == (3, 2, 2)


def test_ticks_keep_their_period_across_rebalances(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    spout, ticked = FeederSpout(["v"]), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    (
        builder.set_bolt("ticked", ticked, 1)
        .set_num_tasks(3)
        .shuffle_grouping("src")
        .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    )
    manual_cluster.submit_topology(NAME, {}, builder.create_topology())
    tasks = manual_cluster.get_running(NAME).plan.component_tasks["ticked"]

    def ticks() -> Counter[int]:
        return Counter(r.task_id for r in ticked.received if r.source_component == "__system")

    settle(manual_cluster, NAME)
    clock.advance(1000)
    wait_until(lambda: ticks() == Counter(tasks))
    manual_cluster.rebalance(NAME, num_workers=3, executors={"ticked": 3})
    clock.advance(500)  # half a period: no tick is due
    settle(manual_cluster, NAME, rounds=20)
    assert ticks() == Counter(tasks)
    clock.advance(500)
    wait_until(lambda: ticks() == Counter(tasks * 2))
    manual_cluster.rebalance(NAME, num_workers=1, executors={"ticked": 1})
    clock.advance(1000)
    wait_until(lambda: ticks() == Counter(tasks * 3))
    settle(manual_cluster, NAME, rounds=20)
    assert ticks() == Counter(tasks * 3)  # none twice


def test_a_window_holds_its_tuples_across_a_rebalance(
    manual_cluster: LocalCluster, clock: ManualClock
) -> None:
    run = Run(manual_cluster, clock, WindowLog().with_tumbling_window(Duration(100)))
    run.feed("a")
    run.feed("b")
    manual_cluster.rebalance(WINDOWS, num_workers=2)
    run.feed("c")
    run.advance(100)
    assert [window[0] for window in run.windows()] == [["a", "b", "c"]]
    assert run.acked() == []  # acked as they leave the window
    manual_cluster.rebalance(WINDOWS, num_workers=1)
    run.advance(100)
    assert run.acked() == ["a", "b", "c"]
    assert run.failed() == []


def test_a_stateful_word_count_stays_exact_across_rebalances(cluster: LocalCluster) -> None:
    sentences = SENTENCES * 50
    spout, counter = SentenceSpout(sentences), WordCount()
    conf = conf_with()
    conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = 20
    cluster.submit_topology("words", conf, word_count(spout, counter, counters=2))
    for workers, executors in [(3, {"count": 2}), (2, {"count": 1, "split": 1}), (1, {})]:
        wait_until(lambda: spout.record.get("acked"), TIMEOUT)
        cluster.rebalance("words", num_workers=workers, executors=executors)
    wait_until(lambda: len(spout.record.get("acked")) >= len(sentences), TIMEOUT)
    assert sorted(spout.record.get("acked")) == list(range(len(sentences)))
    assert spout.record.get("failed") == []
    wait_until(lambda: states_of(cluster, "words") == expected_counts(sentences), TIMEOUT)
    calls = counter.record.get("calls")
    assert sorted(calls) == [(0, "init_state"), (0, "prepare"), (1, "init_state"), (1, "prepare")]


def test_a_trident_count_stays_exact_across_rebalances(cluster: LocalCluster) -> None:
    rows = [[f"w{i % 7} w{i % 11} w{i % 3}"] for i in range(120)]
    expected = Counter(word for (sentence,) in rows for word in sentence.split())
    factory = MemoryMapState.factory(StateType.TRANSACTIONAL)
    topology = TridentTopology()
    (
        topology.new_stream("sentences", FixedBatchSpout(Fields("sentence"), 5, *rows))
        .each(Fields("sentence"), lambda tup: tup[0].split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, TridentCount(), Fields("count"))
        .parallelism_hint(4)
    )
    conf = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 1,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
        Config.TOPOLOGY_WORKER_KIND: "thread",
        Config.TOPOLOGY_WORKERS: 2,
    }
    cluster.submit_topology("trident", conf, topology.build())
    plan = cluster.get_running("trident").plan
    spread = [cid for cid, tasks in plan.component_tasks.items() if len(tasks) == 4]
    assert spread

    def counts() -> dict[str, int]:
        return {key[0]: value for key, value in MemoryMapState.contents(factory).items()}

    for workers, executors in [(3, 1), (1, 4), (2, 2)]:
        wait_until(lambda: bool(counts()), TIMEOUT)
        cluster.rebalance(
            "trident", num_workers=workers, executors=dict.fromkeys(spread, executors)
        )
    wait_until(lambda: counts() == dict(expected), TIMEOUT)
    assert all(
        not stats.errors_total for stats in cluster.get_topology_info("trident").components.values()
    )


def test_local_or_shuffle_follows_the_new_workers(cluster: LocalCluster) -> None:
    spout, sink = FeederSpout(["v"]), CapturingBolt()
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("sink", sink, 4).local_or_shuffle_grouping("src")
    cluster.submit_topology(
        NAME,
        {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 2},
        builder.create_topology(),
    )
    plan = cluster.get_running(NAME).plan

    def local_tasks() -> set[int]:
        worker = plan.task_worker[plan.component_tasks["src"][0]]
        return {t for t in plan.component_tasks["sink"] if plan.task_worker[t] == worker}

    def receivers(first: int) -> set[int]:
        spout.feed_many([[v] for v in range(first, first + 20)], range(first, first + 20))
        wait_until(lambda: len(spout.acked) == first + 20)
        return {r.task_id for r in sink.received if r.values[0] >= first}

    before = local_tasks()
    assert receivers(0) <= before
    cluster.rebalance(NAME, num_workers=4)
    after = local_tasks()
    assert after and after != before
    assert receivers(20) <= after


# --- activation and waiting --------------------------------------------------------------


def test_a_deactivated_topology_stays_deactivated(cluster: LocalCluster) -> None:
    spout, sink = submit_relay(cluster)
    cluster.deactivate(NAME)
    cluster.rebalance(NAME, num_workers=2, executors={"relay": 3})
    assert cluster.get_topology_info(NAME).status == "INACTIVE"
    spout.feed(row(1), 1)
    settle(cluster, NAME, rounds=20)
    assert spout.acked == [] and sink.received == []
    cluster.activate(NAME)
    wait_until(lambda: spout.acked == [1])
    assert cluster.get_topology_info(NAME).status == "ACTIVE"


def test_an_active_topology_is_active_again_and_its_spouts_reactivated(
    cluster: LocalCluster,
) -> None:
    spout, _ = submit_relay(cluster)
    cluster.rebalance(NAME)
    assert cluster.get_topology_info(NAME).status == "ACTIVE"
    spout.feed(row(1), 1)
    wait_until(lambda: spout.acked == [1])


def test_spouts_emit_nothing_while_the_rebalance_waits(cluster: LocalCluster) -> None:
    spout, sink = submit_relay(cluster)
    wait_secs = 0.5
    errors: list[BaseException] = []

    def rebalance() -> None:
        try:
            cluster.rebalance(NAME, num_workers=2, executors={"sink": 4}, wait_secs=wait_secs)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=rebalance)
    thread.start()
    wait_until(lambda: cluster.get_topology_info(NAME).status == "REBALANCING")
    spout.feed_many([row(n) for n in range(10)], range(10))
    checks = 0
    while thread.is_alive():
        emitted = cluster.get_topology_info(NAME).components["numbers"].emitted
        # While the status says REBALANCING the spouts are deactivated: what was read
        # before it was read then.
        if cluster.get_topology_info(NAME).status == "REBALANCING":
            assert emitted == 0
            assert sink.received == []
            checks += 1
        time.sleep(0.01)
    thread.join()
    assert errors == []
    assert time.monotonic() - started >= wait_secs
    assert checks > 0
    wait_until(lambda: sorted(spout.acked) == list(range(10)))
    assert layout(cluster) == (2, {"__acker": 1, "numbers": 1, "relay": 2, "sink": 4})


def test_a_kill_cuts_the_wait_short(cluster: LocalCluster) -> None:
    submit_relay(cluster)
    errors: list[BaseException] = []

    def rebalance() -> None:
        try:
            cluster.rebalance(NAME, num_workers=3, wait_secs=300)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=rebalance)
    thread.start()
    wait_until(lambda: cluster.get_topology_info(NAME).status == "REBALANCING")
    cluster.kill_topology(NAME, wait_secs=0)
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], SquallError)
    assert "was killed before its rebalance ran" in str(errors[0])
    assert cluster.topology_names() == []


def test_a_topology_being_rebalanced_takes_no_other_change_until_it_is_done(
    cluster: LocalCluster,
) -> None:
    """As in Storm: activate, deactivate and another rebalance are refused at once while
    a rebalance waits (they do not wait it out); a kill ends it."""
    submit_relay(cluster)
    ended: list[BaseException] = []

    def rebalance() -> None:
        try:
            cluster.rebalance(NAME, wait_secs=300)
        except SquallError as exc:  # the kill below ends it
            ended.append(exc)

    thread = threading.Thread(target=rebalance)
    thread.start()
    wait_until(lambda: cluster.get_topology_info(NAME).status == "REBALANCING")
    for change, action in [
        (lambda: cluster.activate(NAME), "be activated"),
        (lambda: cluster.deactivate(NAME), "be deactivated"),
        (lambda: cluster.rebalance(NAME, num_workers=2), "be rebalanced again"),
    ]:
        with pytest.raises(SquallError, match=f"is rebalancing: it cannot {action} until"):
            change()
    assert cluster.get_topology_info(NAME).status == "REBALANCING"
    cluster.kill_topology(NAME, wait_secs=0)
    thread.join(TIMEOUT)
    assert not thread.is_alive() and len(ended) == 1


# --- what is reported --------------------------------------------------------------------


def test_the_new_layout_is_what_the_engine_reports(cluster: LocalCluster) -> None:
    spout, sink = FeederSpout(["n", "key"]), CapturingBolt()
    submitted = relay_topology(spout, sink)
    cluster.submit_topology(
        NAME, {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 1}, submitted
    )
    assert layout(cluster) == (1, {"__acker": 1, "numbers": 1, "relay": 2, "sink": 2})

    cluster.rebalance(NAME, num_workers=3, executors={"relay": 5, "sink": 1})
    info = cluster.get_topology_info(NAME)
    assert info.workers == 3
    assert info.extra["executors"] == {"__acker": 1, "numbers": 1, "relay": 5, "sink": 1}
    assert cluster.get_topology_conf(NAME)[Config.TOPOLOGY_WORKERS] == 3
    topology = cluster.get_topology(NAME)
    assert topology.get_component("relay").parallelism == 5
    assert topology.get_component("sink").parallelism == 1
    assert topology.get_component("numbers").parallelism == 1
    assert submitted.get_component("relay").parallelism == 2  # the user's object unchanged
    running = cluster.get_running(NAME)
    assert running.plan.num_workers == 3
    assert running.plan.component_executors() == info.extra["executors"]
    assert sorted(len(ex.tasks) for ex in running.plan.executors if ex.component_id == "relay") == [
        1,
        1,
        1,
        1,
        2,
    ]
    assert {running.plan.task_worker[t] for t in running.plan.task_component} == {0, 1, 2}
    assert [t.name for t in running.threads()] == [f"squall-{NAME}-worker-{i}" for i in range(3)]
    assert all(t.is_alive() for t in running.threads())
    context = running.runners[running.plan.component_tasks["sink"][0]].context
    assert context.worker == running.plan.task_worker[context.task_id]

    cluster.rebalance(NAME)  # neither argument: the same layout, dealt again
    assert layout(cluster) == (3, {"__acker": 1, "numbers": 1, "relay": 5, "sink": 1})
    spout.feed(row(1), 1)
    wait_until(lambda: spout.acked == [1])


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"num_workers": 0}, r"'moving': num_workers must be an integer >= 1, got 0"),
        ({"num_workers": 1.5}, r"num_workers must be an integer >= 1, got 1\.5"),
        (
            {"executors": {"nope": 1}},
            r"'moving': the topology has no component 'nope' \(components: \['__acker', "
            r"'numbers', 'relay', 'sink'\]\)",
        ),
        (
            {"executors": {"relay": 7}},
            r"component 'relay' has 6 task\(s\), so it runs in 1 to 6 executor\(s\); got 7",
        ),
        (
            {"executors": {"sink": 0}},
            r"component 'sink' has 4 task\(s\), so it runs in 1 to 4 executor\(s\); got 0",
        ),
        ({"executors": [("relay", 2)]}, r"executors must map component ids to executor counts"),
        ({"wait_secs": -1}, r"wait_secs must be a number >= 0, got -1"),
        ({"num_workers": True}, r"num_workers must be an integer >= 1, got True"),
        ({"num_workers": "2"}, r"num_workers must be an integer >= 1, got '2'"),
        (
            {"executors": {"relay": True}},
            r"component 'relay' has 6 task\(s\), so it runs in 1 to 6 executor\(s\); got True",
        ),
        (
            # What a caller gave is shown cut to its first 64 characters.
            {"executors": {"x" * 100_000: 1}},
            r"the topology has no component 'x{64}'\.\.\. \(components: ",
        ),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(
    cluster: LocalCluster, arguments: dict[str, Any], message: str
) -> None:
    submit_relay(cluster, {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 2})
    before = layout(cluster)
    with pytest.raises(InvalidTopologyError, match=message):
        cluster.rebalance(NAME, **arguments)
    assert layout(cluster) == before
    assert cluster.get_topology_info(NAME).status == "ACTIVE"


def test_an_unknown_topology_is_a_squall_error(cluster: LocalCluster) -> None:
    submit_relay(cluster)
    with pytest.raises(SquallError, match=r"no topology named 'ghost' is running") as caught:
        cluster.rebalance("ghost", num_workers=2)
    assert not isinstance(caught.value, InvalidTopologyError)


def test_more_workers_than_executors_are_refused_and_change_nothing(
    cluster: LocalCluster,
) -> None:
    """A worker without an executor would run nothing: a rebalance asks for at most as
    many workers as the topology has executors after it, its ``__acker`` executors
    included (as ``executorsTotal`` and Storm count them)."""
    spout, sink = submit_relay(
        cluster, {Config.TOPOLOGY_WORKER_KIND: "thread", Config.TOPOLOGY_WORKERS: 2}
    )
    # numbers 1 + relay 2 + sink 2 + __acker 2 (one per submitted worker) = 7 executors.
    before = layout(cluster)
    assert before == (2, {"__acker": 2, "numbers": 1, "relay": 2, "sink": 2})
    refusals = [
        ({"num_workers": 8}, 8, 7),
        ({"num_workers": 10**9}, 10**9, 7),
        ({"num_workers": 12, "executors": {"relay": 6}}, 12, 11),
    ]
    for arguments, asked, limit in refusals:
        for call in (cluster.check_rebalance, cluster.rebalance):
            with pytest.raises(InvalidTopologyError) as refused:
                call(NAME, **arguments)
            assert str(refused.value) == (
                f"rebalance of topology 'moving': num_workers {asked} is more than the "
                f"{limit} executors the topology would have (system executors such as "
                f"__acker included); a worker without an executor runs nothing, so "
                f"num_workers must be 1 to {limit}"
            )
        assert layout(cluster) == before
        assert cluster.get_topology_info(NAME).status == "ACTIVE"
    # The topology runs on as it was: its spout is called, and a kill ends it.
    spout.feed(row(1), 1)
    wait_until(lambda: spout.acked == [1])
    assert [values[0] for values in sink.values()] == [1]
    cluster.rebalance(NAME, num_workers=11, executors={"relay": 6})  # the limit is allowed
    assert layout(cluster) == (11, {"__acker": 2, "numbers": 1, "relay": 6, "sink": 2})
    spout.feed(row(2), 2)
    wait_until(lambda: spout.acked == [1, 2])
    cluster.kill_topology(NAME, wait_secs=0)
    assert cluster.topology_names() == []
