"""squall's word count beside Bytewax and Pathway: the same data, one process each.

The data: ``--sentences`` sentences (200,000 by default) of 6.4 words on average (exactly
``sentences * 32 // 5`` words: 1,280,000), generated from a seeded random generator: a
vocabulary of 1,000 made-up words drawn with Zipf weights (the word of rank ``r`` with
weight ``1/r``), sentence lengths from 1 to 12, no word twice in one sentence (so that a
system that updates its counts once per sentence, as Pathway does below, still emits one
count per word). It is written to one file that every system reads.

The pipeline, in every system: sentence source -> split into words -> running count per
word, each word's new count emitted downstream -> a sink that takes every (word, count).
The sink of every system does the same per record (:class:`Tally`): it counts the record,
checks that each word's counts arrive as 1, 2, 3, ..., and keeps the last count. Every run
is checked in the parent process: exactly one record per word of the data, none out of
order, and final counts equal to a ``collections.Counter`` over the sentences; a run that
fails the check stops the benchmark with an error, never giving a figure.

The systems, each in a fresh process of its own, inheriting the environment (so
``SQUALL_PURE_PYTHON=1`` measures squall's pure-Python form):

* ``squall-noack``: ``LocalCluster``, one worker, ``topology.acker.executors`` 0; spout
  -> split (shuffle) -> count (fields grouping on the word) -> sink, one task each,
  ``BasicBolt`` bolts. The spout emits without message ids.
* ``squall-ack``: the same with one acker and message ids on the spout's emits (the
  ``BasicBolt`` emits are anchored); the run is checked for every tree acked, none failed.
* ``bytewax-1``, ``bytewax-1000``: Bytewax 0.21 (``bench/.venv-bytewax``), ``python -m
  bytewax.run`` with one worker (``-w 1``): ``TestingSource`` over the sentences with a
  batch size of 1 (its default) or 1,000 -> ``flat_map`` split -> ``key_on`` the word ->
  ``stateful_map`` running count -> a ``DynamicSink`` whose ``write_batch`` takes the
  (word, count) pairs.
* ``pathway``: Pathway 0.33 (``bench/.venv-pathway``) with ``PATHWAY_THREADS=1`` and
  ``PATHWAY_PROCESSES=1`` (what ``pathway spawn --threads 1 --processes 1`` sets): a
  Python connector (``pw.io.python.ConnectorSubject``, no autocommit) sends each sentence
  and commits after it, so every sentence is a minibatch of its own -> a UDF split and
  ``flatten`` -> ``groupby(word).reduce(count=pw.reducers.count())`` ->
  ``pw.io.subscribe``. What that sink receives: per minibatch, for each word whose count
  changed, the retraction of the word's previous row (``is_addition=False``, the old
  count; none for a word's first occurrence) and the insertion of its new row
  (``is_addition=True``, the new count). The additions are the (word, count) records
  counted and checked; the retractions are counted apart and checked to be one per
  record less the distinct words. Pathway consolidates updates within a minibatch: with
  larger minibatches (several sentences per commit, or a static table) a word's count
  moves by several per update and the sink sees fewer records than words, so this
  benchmark keeps to one sentence per minibatch.

The clock: in each system from the moment its source hands out the first sentence (the
spout's first ``next_tuple`` that emits; the ``TestingSource`` iterator's start; the
connector subject's ``run`` start) to the moment its sink takes the last expected record
(the sink compares its record count with the total on each record and reads
``time.perf_counter`` when they meet), in the same process. Interpreter and library
start-up, reading the data file, building and submitting the dataflow are outside it;
the time from the module's import to the first sentence is reported as ``setup_secs``.
``cores`` is the process's CPU time (all its threads) over the same interval divided by
its wall time: 1.0 is one core kept busy.

Runs alternate between the systems (run 1 of every system, then run 2, ...); figures are
medians of ``--runs`` runs with their minimum and maximum, in words per second.

    python bench/peers.py --sentences 20000 --runs 1            # a quick look
    python bench/peers.py --json                                 # 5 runs each, medians
    python bench/peers.py --systems squall-noack,bytewax-1000 --runs 3
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from venvs import BENCH, bytewax_python, installed_version, pathway_python

IMPORTED = time.perf_counter()
SEED = 37
VOCABULARY_SIZE = 1000
MAX_WORDS = 12
SYSTEMS = ("squall-noack", "squall-ack", "bytewax-1", "bytewax-1000", "pathway")
RATIOS = (
    ("squall-noack", "bytewax-1000"),
    ("squall-noack", "pathway"),
    ("squall-ack", "bytewax-1000"),
)
RUN_TIMEOUT_SECS = 1800
STALL_SECS = 5.0  # a squall sink taking no record for this long has taken its last
DRAIN_SECS = 60.0  # the longest wait for a squall topology to drain after the clock
SQUALL_EDGES = (("sentences", "split"), ("split", "count"), ("count", "sink"))

# The data ------------------------------------------------------------------------------


def total_words(sentences: int) -> int:
    """The words in ``sentences`` sentences: 6.4 per sentence, rounded down."""
    return sentences * 32 // 5


def make_vocabulary(rng: random.Random) -> list[str]:
    """``VOCABULARY_SIZE`` distinct made-up words of one to three syllables."""
    syllables = "ka lo mi ne su ta ri po ve du an el or is um".split()
    words: dict[str, None] = {}
    while len(words) < VOCABULARY_SIZE:
        words["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3)))] = None
    return list(words)


def make_sentences(sentences: int, seed: int = SEED) -> list[str]:
    """The benchmark's sentences: ``total_words(sentences)`` words in all, Zipf-weighted
    words, 1 to ``MAX_WORDS`` words per sentence, no word twice in a sentence."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    lengths = [rng.randint(1, MAX_WORDS) for _ in range(sentences)]
    excess = sum(lengths) - total_words(sentences)
    while excess:
        index = rng.randrange(sentences)
        if excess > 0 and lengths[index] > 1:
            lengths[index] -= 1
            excess -= 1
        elif excess < 0 and lengths[index] < MAX_WORDS:
            lengths[index] += 1
            excess += 1
    weights = list(itertools.accumulate(1 / rank for rank in range(1, VOCABULARY_SIZE + 1)))

    def draws() -> Iterator[str]:
        while True:
            yield from rng.choices(vocabulary, cum_weights=weights, k=65536)

    drawn = draws()
    result = []
    for length in lengths:
        words: dict[str, None] = {}
        while len(words) < length:
            words[next(drawn)] = None
        result.append(" ".join(words))
    return result


def read_sentences(path: str) -> list[str]:
    """The sentences of a data file, one per line."""
    return Path(path).read_text().splitlines()


# The sink, the same in every system ------------------------------------------------------


class Tally:
    """What each system's sink does with every (word, count) it takes: counts it, checks
    that each word's counts come as 1, 2, 3, ..., keeps the last count, and reads the
    clocks when the record count reaches ``expected``. :meth:`start` is called by the
    source, :meth:`add` by the sink, each on its own thread."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.records = 0
        self.out_of_order = 0
        self.counts: dict[str, int] = {}
        self.started: tuple[float, float] | None = None
        self.ended: tuple[float, float] | None = None
        self.done = threading.Event()

    def start(self) -> None:
        """The source hands out its first sentence: read the wall and CPU clocks."""
        self.started = (time.perf_counter(), time.process_time())

    def add(self, word: str, count: int) -> None:
        """Take one record."""
        counts = self.counts
        if count != counts.get(word, 0) + 1:
            self.out_of_order += 1
        counts[word] = count
        self.records += 1
        if self.records == self.expected:
            self.ended = (time.perf_counter(), time.process_time())
            self.done.set()

    def result(self, **extra: Any) -> dict[str, Any]:
        """The run's figures and what the parent checks, as one JSON-able dict: wall
        seconds and the process's CPU seconds (all its threads) from the first sentence
        to the last record, and the wall seconds from the module's import to the first
        sentence."""
        started, ended = self.started, self.ended
        result = {
            "seconds": None if started is None or ended is None else ended[0] - started[0],
            "cpu_secs": None if started is None or ended is None else ended[1] - started[1],
            "setup_secs": None if started is None else started[0] - IMPORTED,
            "records": self.records,
            "out_of_order": self.out_of_order,
            "counts": self.counts,
        }
        return result | extra


# squall ----------------------------------------------------------------------------------

SQUALL_TALLY: Tally | None = None  # the squall run's tally (one worker thread, this process)


def run_squall(data: str, expected: int, ackers: int) -> dict[str, Any]:
    """One squall run: one worker, spout -> split -> count -> sink, ``ackers`` ackers."""
    global SQUALL_TALLY
    import squall
    from squall import BasicBolt, Config, Fields, LocalCluster, Spout, TopologyBuilder

    class SentenceSpout(Spout):
        outputs = ["sentence"]

        def __init__(self, path: str, tracked: bool) -> None:
            self.path = path
            self.tracked = tracked

        def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
            self.collector = collector
            self.sentences = read_sentences(self.path)
            self.next_index = 0

        def next_tuple(self) -> None:
            index = self.next_index
            if index < len(self.sentences):
                if index == 0:
                    assert SQUALL_TALLY is not None
                    SQUALL_TALLY.start()
                self.next_index = index + 1
                if self.tracked:
                    self.collector.emit([self.sentences[index]], index)
                else:
                    self.collector.emit([self.sentences[index]])

    class Split(BasicBolt):
        outputs = ["word"]

        def execute(self, tup: Any, collector: Any) -> None:
            emit = collector.emit
            for word in tup.values[0].split():
                emit([word])

    class Count(BasicBolt):
        outputs = ["word", "count"]

        def prepare(self, conf: dict[str, Any], context: Any) -> None:
            self.counts: dict[str, int] = {}

        def execute(self, tup: Any, collector: Any) -> None:
            word = tup.values[0]
            count = self.counts[word] = self.counts.get(word, 0) + 1
            collector.emit([word, count])

    class Sink(BasicBolt):
        def prepare(self, conf: dict[str, Any], context: Any) -> None:
            assert SQUALL_TALLY is not None
            self.add = SQUALL_TALLY.add

        def execute(self, tup: Any, collector: Any) -> None:
            word, count = tup.values
            self.add(word, count)

    tally = SQUALL_TALLY = Tally(expected)
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(data, ackers > 0), 1)
    builder.set_bolt("split", Split(), 1).shuffle_grouping("sentences")
    builder.set_bolt("count", Count(), 1).fields_grouping("split", Fields("word"))
    builder.set_bolt("sink", Sink(), 1).shuffle_grouping("count")
    conf = Config().set_num_workers(1).set_num_ackers(ackers)
    sentences = len(read_sentences(data))
    with LocalCluster() as cluster:
        cluster.submit_topology("peers", conf, builder.create_topology())
        records = -1
        while not tally.done.wait(STALL_SECS) and tally.records != records:
            records = tally.records  # a sink short of records stops after STALL_SECS
        # Outside the clock: let the topology drain (every tree acked, every emitted
        # tuple executed), so that a record beyond the expected ones is seen too.
        deadline = time.monotonic() + DRAIN_SECS
        while time.monotonic() < deadline:
            info = cluster.get_topology_info("peers")
            stats = info.components
            drained = [stats[a].emitted == stats[b].executed for a, b in SQUALL_EDGES]
            if all(drained) and (not ackers or stats["sentences"].acked >= sentences):
                break
            time.sleep(0.01)
    spout = info.components["sentences"]
    compiled = getattr(squall, "compiled_core", None)
    core = "unknown" if compiled is None else ("compiled" if compiled() else "pure Python")
    return tally.result(acked=spout.acked, failed=spout.failed, core=core)


# Bytewax ---------------------------------------------------------------------------------


def bytewax_flow(data: str, expected: int, batch: int) -> Any:
    """The Bytewax dataflow (``python -m bytewax.run "peers:bytewax_flow(...)" -w 1``); its
    sink prints the run's figures as one JSON line when it closes."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.outputs import DynamicSink, StatelessSinkPartition
    from bytewax.testing import TestingSource

    sentences = read_sentences(data)
    tally = Tally(expected)

    def source() -> Iterator[str]:
        tally.start()
        yield from sentences

    class Partition(StatelessSinkPartition[tuple[str, int]]):
        def write_batch(self, items: list[tuple[str, int]]) -> None:
            add = tally.add
            for word, count in items:
                add(word, count)

        def close(self) -> None:
            print(json.dumps(tally.result()), flush=True)

    class Sink(DynamicSink[tuple[str, int]]):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Partition:
            return Partition()

    def running_count(state: int | None, _word: str) -> tuple[int, int]:
        count = (state or 0) + 1
        return count, count

    flow = Dataflow("peers")
    lines = op.input("sentences", flow, TestingSource(source(), batch))
    words = op.flat_map("split", lines, str.split)
    keyed = op.key_on("key", words, lambda word: word)
    counts = op.stateful_map("count", keyed, running_count)
    op.output("sink", counts, Sink())
    return flow


# Pathway ---------------------------------------------------------------------------------


def run_pathway(data: str, expected: int) -> dict[str, Any]:
    """One Pathway run: one sentence per minibatch, split, groupby/reduce count, subscribe."""
    import pathway as pw

    sentences = read_sentences(data)
    tally = Tally(expected)
    retractions = [0]

    class Subject(pw.io.python.ConnectorSubject):
        def run(self) -> None:
            tally.start()
            for sentence in sentences:
                self.next(sentence=sentence)
                self.commit()

        @property
        def _deletions_enabled(self) -> bool:
            return False

    class Schema(pw.Schema):
        sentence: str

    def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        if is_addition:
            tally.add(row["word"], row["count"])
        else:
            retractions[0] += 1

    table = pw.io.python.read(Subject(), schema=Schema, autocommit_duration_ms=None)
    split = pw.apply_with_type(str.split, list[str], pw.this.sentence)
    words = table.select(word=split).flatten(pw.this.word)
    counts = words.groupby(pw.this.word).reduce(pw.this.word, count=pw.reducers.count())
    pw.io.subscribe(counts, on_change=on_change)
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    return tally.result(retractions=retractions[0])


# Running and checking --------------------------------------------------------------------


def command(system: str, data: str, expected: int) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run of ``system``."""
    env = dict(os.environ)
    child = [__file__, "--child", system, "--data", data, "--expected", str(expected)]
    if system.startswith("squall-"):
        return [sys.executable, *child], env
    if system.startswith("bytewax-"):
        batch = int(system.removeprefix("bytewax-"))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), env.get("PYTHONPATH")]))
        flow = f"peers:bytewax_flow({data!r}, {expected}, {batch})"
        return [str(bytewax_python()), "-m", "bytewax.run", flow, "-w", "1"], env
    env |= {"PATHWAY_THREADS": "1", "PATHWAY_PROCESSES": "1"}
    return [str(pathway_python()), *child], env


def run_once(system: str, data: str, expected: collections.Counter[str]) -> dict[str, Any]:
    """One run of ``system`` in a fresh process, checked against ``expected``.

    Raises:
        RuntimeError: the run failed or its sink's records are not the expected ones.
    """
    words = expected.total()
    argv, env = command(system, data, words)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECS)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{system} exited with {done.returncode}: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    problems = []
    if result["records"] != words:
        problems.append(f"the sink took {result['records']} records, not {words}")
    if result["out_of_order"]:
        problems.append(f"{result['out_of_order']} counts out of order")
    if result["counts"] != dict(expected):
        wrong = sum(result["counts"].get(w) != n for w, n in expected.items())
        problems.append(f"final counts differ from the Counter's for {wrong} words")
    if system == "squall-ack" and (result["acked"] != result["sentences"] or result["failed"]):
        problems.append(f"{result['acked']} trees acked, {result['failed']} failed")
    if system == "pathway" and result["retractions"] != words - len(expected):
        problems.append(f"{result['retractions']} retractions, not {words - len(expected)}")
    if result["seconds"] is None:
        problems.append("no time measured")
    if problems:
        raise RuntimeError(f"{system}: " + "; ".join(problems))
    del result["counts"]
    result["words_per_sec"] = words / result["seconds"]
    return result


def measure(systems: list[str], sentences: int, runs: int) -> dict[str, Any]:
    """Generate the data, run every system ``runs`` times round robin; the report."""
    data = make_sentences(sentences)
    expected = collections.Counter(word for sentence in data for word in sentence.split())
    report: dict[str, Any] = {
        "sentences": sentences,
        "words": expected.total(),
        "distinct_words": len(expected),
        "words_per_sentence": expected.total() / sentences,
        "seed": SEED,
        "runs": runs,
        "cpus": len(os.sched_getaffinity(0)),
        "versions": {},
    }
    if any(s.startswith("bytewax-") for s in systems):
        report["versions"]["bytewax"] = installed_version(bytewax_python(), "bytewax")
    if "pathway" in systems:
        report["versions"]["pathway"] = installed_version(pathway_python(), "pathway")
    results: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as directory:
        path = str(Path(directory) / "sentences.txt")
        Path(path).write_text("\n".join(data) + "\n")
        for _ in range(runs):
            for system in systems:
                results[system].append(run_once(system, path, expected))
    for system, done in results.items():
        rates = [r["words_per_sec"] for r in done]
        report[system] = {
            "words_per_sec": round(statistics.median(rates)),
            "min": round(min(rates)),
            "max": round(max(rates)),
            "runs": [round(rate) for rate in rates],
            "setup_secs": round(statistics.median(r["setup_secs"] for r in done), 2),
            "cores": round(statistics.median(r["cpu_secs"] / r["seconds"] for r in done), 2),
        }
        if system.startswith("squall-"):
            report[system]["core"] = done[0]["core"]
    report["ratios"] = {
        f"{a}/{b}": round(report[a]["words_per_sec"] / report[b]["words_per_sec"], 2)
        for a, b in RATIOS
        if a in results and b in results
    }
    return report


def print_report(report: dict[str, Any], systems: list[str]) -> None:
    """The report as a table."""
    print(f"{'system':<14}{'words/s':>12}{'min':>12}{'max':>12}{'cores':>7}{'setup s':>9}")
    for system in systems:
        figures = report[system]
        row = [figures["words_per_sec"], figures["min"], figures["max"]]
        print(f"{system:<14}" + "".join(f"{value:>12,}" for value in row), end="")
        print(f"{figures['cores']:>7.2f}{figures['setup_secs']:>9.2f}", figures.get("core", ""))
    for name, ratio in report["ratios"].items():
        print(f"{name}: {ratio:.2f}x")


def child_main(args: argparse.Namespace) -> None:
    """A run in this process: print its result as one JSON line."""
    if args.child == "pathway":
        result = run_pathway(args.data, args.expected)
    else:
        result = run_squall(args.data, args.expected, 1 if args.child == "squall-ack" else 0)
        result["sentences"] = len(read_sentences(args.data))
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--sentences", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    systems = args.systems.split(",")
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; known: {', '.join(SYSTEMS)}")
    if not args.json:
        words = total_words(args.sentences)
        print(f"{args.sentences:,} sentences, {words:,} words, seed {SEED}", flush=True)
    report = measure(systems, args.sentences, args.runs)
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report, systems)


if __name__ == "__main__":
    main()
