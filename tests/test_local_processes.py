"""The local engine's worker processes: where tasks run, supervision (a worker killed
with SIGKILL comes back and its trees are replayed), stopping every process (also when
the submitting process is killed), clear errors for what cannot be pickled, and
backpressure and ``local_or_shuffle`` across workers.

Observation goes through ``SharedRecord`` (file-backed once pickled), as on Spark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall import BasicBolt, Bolt, Config, LocalCluster, Spout, StatefulBolt, TopologyBuilder
from squall.local.scratch import OWNER_FILE
from squall.local.supervisor import ProcessTopology
from squall.model.errors import InvalidTopologyError
from squall.runtime.rolling import MetricsHistory
from squall.state import KeyValueState
from squall.state.codec import decode
from squall.state.executors import state_namespace
from squall.state.providers import provider_for
from squall.testing import SharedRecord
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_WORKER_KIND: "process"}


def pid_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


class CountingSpout(Spout):
    """Emits ids ``0..count-1`` with themselves as msg ids; replays a failed id."""

    outputs = ["id"]

    def __init__(self, count: int) -> None:
        self.count = count
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.replay: list[int] = []
        self.record.append("open", (context.task_id, os.getpid()))

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop(0)
            self.collector.emit([msg_id], msg_id=msg_id)
            return
        if self.next < self.count:
            self.collector.emit([self.next], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("ack", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("fail", msg_id)
        self.replay.append(msg_id)


class WhereBolt(BasicBolt):
    """Records which task and process executed each id."""

    outputs: list[str] = []

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.task = context.task_id

    def execute(self, tup: Any, collector: Any) -> None:
        self.record.append("seen", (tup[0], tup.source_task, self.task, os.getpid()))


def spout_and_bolt(spout: Any, bolt: Any, grouping: str = "shuffle", spouts: int = 2) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout, spouts)
    declarer = builder.set_bolt("where", bolt, 2)
    if grouping == "shuffle":
        declarer.shuffle_grouping("numbers")
    else:
        declarer.local_or_shuffle_grouping("numbers")
    return builder.create_topology()


def test_two_workers_run_their_tasks_in_two_processes_and_every_tree_is_acked(
    cluster: LocalCluster,
) -> None:
    spout, bolt = CountingSpout(50), WhereBolt()
    cluster.submit_topology("two", PROCESSES, spout_and_bolt(spout, bolt))
    running = cluster.get_running("two")
    assert isinstance(running, ProcessTopology)
    wait_until(lambda: len(spout.record.get("ack")) == 100, timeout=20.0)
    assert cluster.wait_idle("two", 10.0)
    assert Counter(spout.record.get("ack")) == Counter({i: 2 for i in range(50)})
    workers = {p.pid for p in running.processes()}
    assert len(workers) == 2 and os.getpid() not in workers
    bolt_pids = {pid for _, _, _, pid in bolt.record.get("seen")}
    assert bolt_pids == workers
    info = cluster.get_topology_info("two")
    assert info.workers == 2
    assert info.components["where"].executed == 100
    assert info.components["numbers"].acked == 100
    assert info.components["numbers"].emitted == 100
    assert info.local is not None and info.local.worker_kind == "process"
    assert sorted(w.pid or 0 for w in info.local.worker_processes) == sorted(workers)
    assert [w.worker for w in info.local.worker_processes] == [0, 1]
    assert info.local.transferred_between_workers > 0
    cluster.kill_topology("two", wait_secs=0)
    for pid in workers:
        wait_until(lambda pid=pid: pid_gone(pid), timeout=10.0)  # type: ignore[misc]


def test_local_or_shuffle_sends_to_the_emitting_tasks_worker(cluster: LocalCluster) -> None:
    spout, bolt = CountingSpout(40), WhereBolt()
    cluster.submit_topology("local", PROCESSES, spout_and_bolt(spout, bolt, "local"))
    wait_until(lambda: len(bolt.record.get("seen")) == 80, timeout=20.0)
    plan = cluster.get_running("local").plan
    pairs = {(source, task) for _, source, task, _ in bolt.record.get("seen")}
    assert len(pairs) == 2
    assert all(plan.task_worker[source] == plan.task_worker[task] for source, task in pairs)


class HoldOnceBolt(Bolt):
    """Its task on worker 1 holds (never acks) what it gets in its first incarnation,
    recording the ids; every other incarnation and task acks at once."""

    outputs: list[str] = []

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.worker = context.worker
        self.record.append("prepare", (self.worker, os.getpid()))
        prepares = [w for w, _ in self.record.get("prepare") if w == self.worker]
        self.holding = self.worker == 1 and len(prepares) == 1

    def execute(self, tup: Any) -> None:
        if self.holding:
            self.record.append("held", tup[0])
            return
        self.collector.ack(tup)


def test_a_sigkilled_worker_comes_back_and_its_trees_are_replayed(
    cluster: LocalCluster,
) -> None:
    """The spout runs on worker 0; worker 1's bolt task holds some trees when worker 1
    is killed: it is started again (its task prepared again), the held trees time out
    at the spout, which replays them; every id is acked exactly once in the end."""
    spout, bolt = CountingSpout(30), HoldOnceBolt()
    conf = {**PROCESSES, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 2}
    cluster.submit_topology("crash", conf, spout_and_bolt(spout, bolt, spouts=1))
    running = cluster.get_running("crash")
    assert isinstance(running, ProcessTopology)
    [spout_task] = running.plan.component_tasks["numbers"]
    assert running.plan.task_worker[spout_task] == 0
    wait_until(lambda: len(bolt.record.get("held")) >= 3, timeout=20.0)
    holder = next(pid for worker, pid in bolt.record.get("prepare") if worker == 1)
    os.kill(holder, signal.SIGKILL)
    wait_until(lambda: sorted(spout.record.get("ack")) == list(range(30)), 30.0)
    assert cluster.wait_idle("crash", 10.0)
    assert sorted(spout.record.get("ack")) == list(range(30))  # each exactly once
    held = set(bolt.record.get("held"))
    failed = set(spout.record.get("fail"))
    assert held and held <= failed
    prepares = [pid for worker, pid in bolt.record.get("prepare") if worker == 1]
    assert len(prepares) == 2 and prepares[0] == holder and prepares[1] != holder
    info = cluster.get_topology_info("crash")
    assert info.local is not None
    restarted = [w for w in info.local.worker_processes if w.restarts]
    assert [w.restarts for w in restarted] == [1]
    assert restarted[0].pid == prepares[1]
    assert info.components["numbers"].timed_out >= len(held)


class EmitRecordingSpout(CountingSpout):
    """A :class:`CountingSpout` that records each emit with the emitting process."""

    def next_tuple(self) -> None:
        if self.next < self.count:
            self.record.append("emit", os.getpid())
        super().next_tuple()


def counts(cluster: LocalCluster, name: str, window_secs: int | None = None) -> tuple[int, ...]:
    """``(spout emitted, spout acked, bolt executed)`` of a ``spout_and_bolt`` topology."""
    components = cluster.get_topology_info(name, window_secs=window_secs).components
    spout, bolt = components["numbers"], components["where"]
    return spout.emitted, spout.acked, bolt.executed


def spout_worker_pid(spout: CountingSpout, running: Any) -> int:
    [spout_task] = running.plan.component_tasks["numbers"]
    [pid] = [pid for task, pid in spout.record.get("open") if task == spout_task]
    return int(pid)


def test_counts_keep_a_sigkilled_workers_figures(cluster: LocalCluster) -> None:
    """The spout's worker is killed after its tuples were counted: the counts after its
    restart are those before the kill plus what the new incarnation does, equal to what
    the spout emitted, and never lower than before the kill while it comes back; a
    rolling window taken across the restart holds what happened since its start."""
    count = 60
    spout, bolt = EmitRecordingSpout(count), WhereBolt()
    cluster.submit_topology("recount", PROCESSES, spout_and_bolt(spout, bolt, spouts=1))
    running = cluster.get_running("recount")
    wait_until(lambda: len(spout.record.get("ack")) == count, timeout=20.0)
    wait_until(lambda: counts(cluster, "recount") == (count, count, count), 20.0, 0.02)
    history = MetricsHistory(time.monotonic() - 1000.0, windows=[600])
    history.record(time.monotonic(), cluster.get_topology_info("recount"))
    before = spout_worker_pid(spout, running)
    os.kill(before, signal.SIGKILL)
    seen: list[tuple[int, ...]] = []

    def recounted() -> bool:
        seen.append(counts(cluster, "recount"))
        return seen[-1] == (2 * count, 2 * count, 2 * count)

    try:
        wait_until(recounted, timeout=30.0, interval=0.02)
    except AssertionError:
        pytest.fail(f"(emitted, acked, executed) after the restart: {seen[-1]}")
    assert all(figures >= (count, count, count) for figures in seen), seen
    emits = spout.record.get("emit")
    assert len(emits) == 2 * count and emits.count(before) == count
    assert len(spout.record.get("ack")) == 2 * count
    info = cluster.get_topology_info("recount")
    assert info.local is not None
    assert [w.restarts for w in info.local.worker_processes if w.restarts] == [1]
    window = history.window(time.monotonic(), info, 600).components
    assert (window["numbers"].emitted, window["numbers"].acked) == (count, count)
    assert window["where"].executed == count


def test_a_killed_workers_figures_are_kept_from_the_supervisors_polls(
    cluster: LocalCluster,
) -> None:
    """Nobody reads the figures before the spout's worker is killed: the supervisor's
    own polls, every ``METRICS_POLL_SECS``, kept them."""
    count = 40
    spout, bolt = EmitRecordingSpout(count), WhereBolt()
    cluster.submit_topology("polled", PROCESSES, spout_and_bolt(spout, bolt, spouts=1))
    running = cluster.get_running("polled")
    assert isinstance(running, ProcessTopology)
    wait_until(lambda: len(spout.record.get("ack")) == count, timeout=20.0)
    polls = running.metrics_polls
    wait_until(lambda: running.metrics_polls >= polls + 2, timeout=10.0)
    os.kill(spout_worker_pid(spout, running), signal.SIGKILL)
    wait_until(lambda: len(spout.record.get("ack")) == 2 * count, timeout=30.0)
    wait_until(lambda: counts(cluster, "polled") == (2 * count, 2 * count, 2 * count), 20.0, 0.02)
    assert len(spout.record.get("emit")) == 2 * count


def test_counts_keep_what_the_processes_stopped_by_a_rebalance_counted(
    cluster: LocalCluster,
) -> None:
    """A rebalance stops every worker process; their final figures are kept: the counts
    after it add what the new processes count (the spout, opened again, emits its ids
    again)."""
    count = 30
    spout, bolt = EmitRecordingSpout(count), WhereBolt()
    cluster.submit_topology("moved", PROCESSES, spout_and_bolt(spout, bolt, spouts=1))
    wait_until(lambda: len(spout.record.get("ack")) == count, timeout=20.0)
    assert cluster.wait_idle("moved", 10.0)
    cluster.rebalance("moved", num_workers=2)
    wait_until(lambda: len(spout.record.get("ack")) == 2 * count, timeout=20.0)
    wait_until(lambda: counts(cluster, "moved") == (2 * count, 2 * count, 2 * count), 20.0, 0.02)
    assert len(spout.record.get("emit")) == 2 * count


#: Changed by :class:`RememberingBolt` in the process that runs it.
REMEMBERED: list[int] = []


class RememberingBolt(BasicBolt):
    """Appends each id to the module-level :data:`REMEMBERED` and to a shared record."""

    outputs: list[str] = []

    def __init__(self) -> None:
        self.record = SharedRecord()

    def execute(self, tup: Any, collector: Any) -> None:
        REMEMBERED.append(tup[0])
        self.record.append("remembered", (tup[0], len(REMEMBERED)))


def test_objects_of_the_submitting_process_are_not_shared_with_workers(
    cluster: LocalCluster,
) -> None:
    """A module-level list a task changes is changed in its worker's copy only (what the
    conformance cases skipped on this engine read, such as a MemoryMapState)."""
    spout, bolt = CountingSpout(20), RememberingBolt()
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout, 1)
    builder.set_bolt("remember", bolt, 1).shuffle_grouping("numbers")
    cluster.submit_topology("copies", PROCESSES, builder.create_topology())
    wait_until(lambda: sorted(spout.record.get("ack")) == list(range(20)), timeout=20.0)
    assert sorted(bolt.record.get("remembered")) == [(n, n + 1) for n in range(20)]
    assert REMEMBERED == []


class PacedSpout(CountingSpout):
    """As :class:`CountingSpout`, one new id per ``pause`` seconds at most."""

    def __init__(self, count: int, pause: float) -> None:
        super().__init__(count)
        self.pause = pause

    def next_tuple(self) -> None:
        if not self.replay and self.next < self.count:
            time.sleep(self.pause)
        super().next_tuple()


class SeenCount(StatefulBolt):
    """Counts, in its state, how often it executed each id; records each ``init_state``
    with its worker and process."""

    outputs: list[str] = []

    def __init__(self) -> None:
        self.record = SharedRecord()

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.worker = context.worker

    def init_state(self, state: KeyValueState) -> None:
        self.seen = state
        self.record.append("init_state", (self.worker, os.getpid()))

    def execute(self, tup: Any) -> None:
        self.seen.put(tup[0], self.seen.get(tup[0], 0) + 1)
        self.collector.ack(tup)


def test_a_stateful_bolt_whose_worker_is_sigkilled_gets_its_state_back(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """The worker without the checkpoint spout is killed while its stateful task counts:
    the restarted task fails the next prepare, the recovery ends with INITSTATE, and the
    task gets its committed state back and counts on; every id is acked and is in the
    committed state (at least once: acks the dead task held until a commit are lost, so
    their trees are replayed)."""
    count = 400
    spout, counter = PacedSpout(count, 0.004), SeenCount()
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout, 1)
    builder.set_bolt("count", counter, 2).shuffle_grouping("numbers")
    conf = {
        **PROCESSES,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 2,
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 50,
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"directory": str(tmp_path)},
    }
    cluster.submit_topology("stateful", conf, builder.create_topology())
    plan = cluster.get_running("stateful").plan
    [checkpointer] = plan.component_tasks["$checkpointspout"]
    victim = 1 - plan.task_worker[checkpointer]
    assert victim in {plan.task_worker[task] for task in plan.component_tasks["count"]}
    wait_until(lambda: len(counter.record.get("init_state")) == 2, timeout=20.0)
    wait_until(lambda: len(set(spout.record.get("ack"))) >= 40, timeout=20.0)
    [(_, pid)] = [entry for entry in counter.record.get("init_state") if entry[0] == victim]
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: set(spout.record.get("ack")) == set(range(count)), timeout=60.0)
    inits = [entry for entry in counter.record.get("init_state") if entry[0] == victim]
    assert len(inits) == 2 and inits[1][1] != pid
    cluster.kill_topology("stateful", wait_secs=0)
    committed: dict[int, int] = {}
    provider = provider_for(conf, "stateful")
    for index in range(2):
        store = provider.make_store(state_namespace("count", index))
        try:
            committed.update((decode(key), decode(value)) for key, value in store.items())
        finally:
            store.close()
    assert set(committed) == set(range(count))
    assert all(seen >= 1 for seen in committed.values())


def owner_of(directory: Path) -> int | None:
    """The pid in ``directory``'s owner file (None without one)."""
    try:
        return int((directory / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None


def test_no_worker_process_outlives_a_sigkilled_submitter(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    """The workers stop with the submitter; its directories (sockets and board,
    coordination state) are removed by the next topology submitted in processes."""
    script = tmp_path / "submitter.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from squall import LocalCluster, Config
            from tests.test_local_processes import CountingSpout, WhereBolt, spout_and_bolt

            cluster = LocalCluster()
            cluster.submit_topology(
                "orphans",
                {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_WORKER_KIND: "process"},
                spout_and_bolt(CountingSpout(10), WhereBolt()),
            )
            pids = [p.pid for p in cluster.get_running("orphans").processes()]
            print(" ".join(map(str, pids)), flush=True)
            time.sleep(120)
            """
        )
    )
    child = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert child.stdout is not None
        pids = [int(pid) for pid in child.stdout.readline().split()]
        assert len(pids) == 2 and all(not pid_gone(pid) for pid in pids)
        child.kill()
        child.wait(10)
        for pid in pids:
            wait_until(lambda pid=pid: pid_gone(pid), timeout=15.0)  # type: ignore[misc]
        bases = {Path("/dev/shm"), Path(tempfile.gettempdir())}
        left = [d for base in bases for d in base.glob("squall-*") if owner_of(d) == child.pid]
        assert len(left) == 2
        topology = spout_and_bolt(CountingSpout(1), WhereBolt())
        cluster.submit_topology("next", PROCESSES, topology)
        assert not any(directory.exists() for directory in left)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)


class LockedBolt(BasicBolt):
    outputs: list[str] = []

    def __init__(self) -> None:
        self.guard = threading.Lock()

    def execute(self, tup: Any, collector: Any) -> None:
        """Never runs."""


def test_a_component_that_cannot_be_pickled_is_named_with_its_attribute(
    cluster: LocalCluster,
) -> None:
    with pytest.raises(
        InvalidTopologyError,
        match=r"component 'where' cannot be sent to a worker process: where\.guard \(lock",
    ):
        cluster.submit_topology("locked", PROCESSES, spout_and_bolt(CountingSpout(1), LockedBolt()))
    assert cluster.topology_names() == []


class OnceSpout(Spout):
    """Emits ids ``0..9`` once each (msg id: the id); id 3's value is a lock, which
    cannot be pickled."""

    outputs = ["id"]

    def __init__(self) -> None:
        self.record = SharedRecord()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0

    def next_tuple(self) -> None:
        if self.next < 10:
            value = threading.Lock() if self.next == 3 else self.next
            self.collector.emit([value], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self.record.append("ack", msg_id)

    def fail(self, msg_id: Any) -> None:
        self.record.append("fail", msg_id)


def test_a_tuple_that_cannot_reach_another_worker_is_dropped_and_reported(
    cluster: LocalCluster,
) -> None:
    """The spout (worker 0) emits to the bolt (worker 1) a tuple holding a lock: only
    that tuple is dropped, the error names the component, the stream and the type, and
    its tree times out; the tuples sent with it arrive."""
    spout, bolt = OnceSpout(), WhereBolt()
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout, 1)
    builder.set_bolt("where", bolt, 1).shuffle_grouping("numbers")
    conf = {**PROCESSES, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1}
    cluster.submit_topology("unsendable", conf, builder.create_topology())
    plan = cluster.get_running("unsendable").plan
    [spout_task], [bolt_task] = plan.component_tasks["numbers"], plan.component_tasks["where"]
    assert plan.task_worker[spout_task] != plan.task_worker[bolt_task]
    wait_until(lambda: spout.record.get("fail") == [3], timeout=20.0)
    assert sorted(spout.record.get("ack")) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert sorted(seen[0] for seen in bolt.record.get("seen")) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    [error] = cluster.get_topology_info("unsendable").components["numbers"].errors
    assert (
        "component 'numbers' emitted on stream 'default' to task "
        f"{bolt_task} of another worker process a tuple that cannot be sent there: "
        "a value of type _thread.lock cannot be sent"
    ) in error.error


class FastSpout(Spout):
    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([self.n])


class SlowBolt(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.0005)


def test_a_slow_bolt_on_another_worker_holds_the_spout_back(cluster: LocalCluster) -> None:
    """The spout runs on worker 0 and the bolt on worker 1: the bolt's queue stays
    bounded by the receive buffer while the spout emits far more than it holds."""
    buffer = 200
    builder = TopologyBuilder()
    builder.set_spout("fast", FastSpout(), 1)
    builder.set_bolt("slow", SlowBolt(), 1).shuffle_grouping("fast")
    conf = {
        **PROCESSES,
        Config.TOPOLOGY_ACKER_EXECUTORS: 0,
        Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: buffer,
    }
    cluster.submit_topology("pressure", conf, builder.create_topology())
    plan = cluster.get_running("pressure").plan
    [spout_task], [bolt_task] = plan.component_tasks["fast"], plan.component_tasks["slow"]
    assert plan.task_worker[spout_task] != plan.task_worker[bolt_task]
    deepest = 0
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        info = cluster.get_topology_info("pressure")
        assert info.local is not None
        deepest = max(deepest, info.local.queued)
        if info.components["slow"].executed > 4 * buffer:
            break
        time.sleep(0.01)
    info = cluster.get_topology_info("pressure")
    assert info.components["slow"].executed > 4 * buffer
    assert info.components["fast"].emitted > 4 * buffer
    assert deepest <= 2 * buffer
    assert info.components["fast"].emitted - info.components["slow"].executed <= 2 * buffer


def test_an_unknown_worker_kind_is_refused_naming_the_choices(cluster: LocalCluster) -> None:
    with pytest.raises(
        InvalidTopologyError,
        match=r"'topology.worker.kind' must be one of 'auto', 'process', 'thread', got 'fork'",
    ):
        cluster.submit_topology(
            "fork",
            {Config.TOPOLOGY_WORKER_KIND: "fork"},
            spout_and_bolt(CountingSpout(1), WhereBolt()),
        )
    assert cluster.topology_names() == []


def test_processes_are_refused_where_they_cannot_follow_the_submitter(
    manual_cluster: LocalCluster, cluster: LocalCluster
) -> None:
    """A manual clock and an emit listener live in the submitting process: asking for
    processes with either is an error naming the way out; ``auto`` runs threads."""
    topology = spout_and_bolt(CountingSpout(1), WhereBolt())
    with pytest.raises(InvalidTopologyError, match=r"ManualClock; run its workers as threads"):
        manual_cluster.submit_topology("manual", PROCESSES, topology)
    with pytest.raises(InvalidTopologyError, match=r"emit_listener runs in this process"):
        cluster.submit_topology("listened", PROCESSES, topology, emit_listener=print)
    auto = {Config.TOPOLOGY_WORKERS: 2}
    manual_cluster.submit_topology("manual", auto, topology)
    assert not isinstance(manual_cluster.get_running("manual"), ProcessTopology)
    cluster.submit_topology("auto", auto, topology)
    assert isinstance(cluster.get_running("auto"), ProcessTopology)
