"""``squall run --show`` and a file's ``show``: the last tuples a component emitted,
printed under the final metrics, exactly."""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from squall.cli.main import main

NUMBERS = """
from squall import BasicBolt, Spout, TopologyBuilder


class Numbers(Spout):
    outputs = ["n"]

    def open(self, conf, context, collector):
        self.collector = collector
        self.next_number = 1

    def next_tuple(self):
        if self.next_number <= 20:
            self.collector.emit([self.next_number], msg_id=self.next_number)
            self.next_number += 1

    def is_exhausted(self):
        return self.next_number > 20


class Router(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare_stream("even", ["n", "double"])
        declarer.declare_stream("odd", ["n", "triple"])

    def execute(self, tup, collector):
        n = tup["n"]
        if n % 2:
            collector.emit([n, 3 * n], stream="odd")
        else:
            collector.emit([n, 2 * n], stream="even")


class Quiet(BasicBolt):
    def execute(self, tup, collector):
        pass


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("router", Router()).shuffle_grouping("numbers")
    builder.set_bolt("quiet", Quiet()).shuffle_grouping("router", "even")
    return builder.create_topology()
"""


def invoke(*args: str) -> Result:
    env = {"COLUMNS": "200", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner().invoke(main, list(args), env=env)


def numbers_file(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "numbered.py"
    path.write_text(textwrap.dedent(NUMBERS) + extra, encoding="utf-8")
    return str(path)


def run(path: str, *options: str) -> Result:
    return invoke("run", path, "--until-idle", "--seconds", "60", "--drain", "5", *options)


def shown_lines(output: str) -> list[str]:
    """The lines between the final metrics' caption (or the components' own metrics
    under it) and the closing line."""
    lines = output.rstrip().splitlines()
    start = max(i for i, line in enumerate(lines) if "tuple(s) queued" in line) + 1
    if start < len(lines) and lines[start].strip() == "components' own metrics":
        start = next(i for i in range(start, len(lines)) if lines[i].startswith("└")) + 1
    return [line.rstrip() for line in lines[start:-1]]


def test_show_prints_the_last_tuples_of_each_stream_with_their_count(tmp_path: Path) -> None:
    result = run(numbers_file(tmp_path), "--show", "router", "--show-last", "3")
    assert result.exit_code == 0, result.output
    assert shown_lines(result.output) == [
        "router emitted 10 tuples on stream even; the last 3:",
        "  [16, 32]",
        "  [18, 36]",
        "  [20, 40]",
        "router emitted 10 tuples on stream odd; the last 3:",
        "  [15, 45]",
        "  [17, 51]",
        "  [19, 57]",
    ]
    assert result.output.rstrip().splitlines()[-1] == "no errors"


def test_show_by_field_keeps_the_latest_tuple_of_each_recent_value(tmp_path: Path) -> None:
    """``@FIELD``: each value of FIELD keeps its latest tuple, the values seen last."""
    extra = textwrap.dedent(
        """
        class Tens(BasicBolt):
            outputs = ["ten", "n"]

            def execute(self, tup, collector):
                collector.emit([tup["n"] // 10 * 10, tup["n"]])


        def by_tens():
            builder = TopologyBuilder()
            builder.set_spout("numbers", Numbers())
            builder.set_bolt("tens", Tens()).shuffle_grouping("numbers")
            return builder.create_topology()
        """
    )
    path = numbers_file(tmp_path, extra)
    result = run(path + ":by_tens", "--show", "tens@ten", "--show-last", "2")
    assert result.exit_code == 0, result.output
    assert shown_lines(result.output) == [
        "tens emitted 20 tuples on stream default; the latest of each of the last 2 values of ten:",
        "  [10, 19]",
        "  [20, 20]",
    ]


def test_show_one_stream_and_several_components(tmp_path: Path) -> None:
    result = run(
        numbers_file(tmp_path), "--show", "router:odd", "--show", "quiet", "--show", "numbers"
    )
    assert result.exit_code == 0, result.output
    assert shown_lines(result.output) == [
        "router emitted 10 tuples on stream odd:",
        *[f"  [{n}, {3 * n}]" for n in range(1, 20, 2)],
        "quiet emitted no tuples",
        "numbers emitted 20 tuples on stream default; the last 10:",
        *[f"  [{n}]" for n in range(11, 21)],
    ]


def test_the_files_show_is_the_default_and_show_replaces_it(tmp_path: Path) -> None:
    path = numbers_file(tmp_path, '\nshow = "router:even"\n')
    result = run(path, "--show-last", "2")
    assert result.exit_code == 0, result.output
    assert shown_lines(result.output) == [
        "router emitted 10 tuples on stream even; the last 2:",
        "  [18, 36]",
        "  [20, 40]",
    ]
    replaced = run(path, "--show", "numbers", "--show-last", "1")
    assert shown_lines(replaced.output) == [
        "numbers emitted 20 tuples on stream default; the last 1:",
        "  [20]",
    ]


def test_show_works_with_several_workers(tmp_path: Path) -> None:
    result = run(numbers_file(tmp_path), "--show", "router:even", "--conf", "topology.workers=2")
    assert result.exit_code == 0, result.output
    lines = shown_lines(result.output)
    assert lines[0] == "router emitted 10 tuples on stream even:"
    assert sorted(lines[1:]) == sorted(f"  [{n}, {2 * n}]" for n in range(2, 21, 2))


def test_the_files_show_runs_several_workers_as_threads_and_no_show_keeps_processes(
    tmp_path: Path,
) -> None:
    path = numbers_file(tmp_path, '\nshow = "router:even"\n')
    shown = run(path, "--conf", "topology.workers=2")
    assert shown.exit_code == 0, shown.output
    assert "with 2 worker(s) as threads" in shown.output
    assert shown_lines(shown.output)[0] == "router emitted 10 tuples on stream even:"
    plain = run(path, "--conf", "topology.workers=2", "--no-show")
    assert plain.exit_code == 0, plain.output
    assert "with 2 worker(s) as processes" in plain.output
    assert shown_lines(plain.output) == []
    both = run(path, "--no-show", "--show", "router")
    assert both.exit_code == 2
    assert "--no-show and --show exclude each other" in both.output


def test_without_show_nothing_is_shown(tmp_path: Path) -> None:
    result = run(numbers_file(tmp_path))
    assert result.exit_code == 0, result.output
    assert shown_lines(result.output) == []


@pytest.mark.parametrize(
    ("show", "message"),
    [
        (
            "nope",
            "Invalid value for '--show': 'nope' is not a component of the topology "
            "(its components: numbers, router, quiet)",
        ),
        (
            "router:default",
            "Invalid value for '--show': component 'router' declares no stream 'default' "
            "(its streams: even, odd)",
        ),
        ("__acker", "Invalid value for '--show': '__acker' is a system component"),
        ("router:", "Invalid value for '--show': 'router:' is not COMPONENT[:STREAM][@FIELD]"),
        ("router@", "Invalid value for '--show': 'router@' is not COMPONENT[:STREAM][@FIELD]"),
        (
            "router@triple",
            "Invalid value for '--show': stream 'even' of component 'router' has no field "
            "'triple' (its fields: n, double)",
        ),
    ],
)
def test_show_names_what_is_wrong(tmp_path: Path, show: str, message: str) -> None:
    result = run(numbers_file(tmp_path), "--show", show)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_a_files_show_of_the_wrong_type_is_an_error(tmp_path: Path) -> None:
    result = run(numbers_file(tmp_path, "\nshow = 3\n"))
    assert result.exit_code == 1
    assert (
        "Error: module-level 'show' must be a component id (COMPONENT or COMPONENT:STREAM) "
        "or a list of them, got 3"
    ) in result.output


def test_a_function_named_show_is_not_a_default(tmp_path: Path) -> None:
    result = run(numbers_file(tmp_path, "\ndef show():\n    pass\n"))
    assert result.exit_code == 0, result.output
    assert shown_lines(result.output) == []


def test_show_is_refused_where_it_cannot_watch_the_emits(tmp_path: Path) -> None:
    path = numbers_file(tmp_path)
    spark = invoke("run", path, "--engine", "spark", "--show", "router")
    assert spark.exit_code == 2
    assert "--show applies to the local engine only, not with --engine spark" in spark.output
    processes = run(path, "--show", "router", "--conf", 'topology.worker.kind="process"')
    assert processes.exit_code == 2
    assert (
        '--show applies to the local engine only, not with topology.worker.kind = "process"'
        in " ".join(processes.output.split())
    )
    # The file's show is a default: left out where it cannot be shown.
    default = run(
        numbers_file(tmp_path, '\nshow = "router"\n'),
        "--conf",
        'topology.worker.kind="process"',
        "--conf",
        "topology.workers=2",
    )
    assert default.exit_code == 0, default.output
    assert shown_lines(default.output) == []


LOGGING = """
import logging

LOG = logging.getLogger("numbers_app")


class Logged(BasicBolt):
    def execute(self, tup, collector):
        if tup["n"] == 20:
            LOG.info("reached %d", tup["n"])
            LOG.debug("not shown")


def logged():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("logged", Logged()).shuffle_grouping("numbers")
    return builder.create_topology()
"""


def test_the_files_loggers_show_their_info_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Storm's local mode shows a topology's logs: the file's module-level loggers'
    INFO lines appear (debug ones do not), while logging is not configured."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    path = numbers_file(tmp_path, LOGGING)
    result = run(path + ":logged")
    assert result.exit_code == 0, result.output
    logged = [line.split()[-3:] for line in result.output.splitlines() if "reached" in line]
    assert logged == [["INFO", "reached", "20"]]
    assert "not shown" not in result.output
    assert logging.getLogger("numbers_app").handlers == []  # restored after the run


def test_a_configured_logging_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = logging.NullHandler()
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])
    result = run(numbers_file(tmp_path, LOGGING) + ":logged")
    assert result.exit_code == 0, result.output
    assert "reached" not in result.output


TRIDENT = """
from squall import Config, Fields
from squall.trident import Count, FixedBatchSpout, Function, TridentTopology
from squall.trident.state import MemoryMapState

CONF = Config({Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 5})


class Split(Function):
    def execute(self, tup, collector):
        for word in tup[0].split():
            collector.emit([word])


def word_counts(topology):
    spout = FixedBatchSpout(Fields("sentence"), 3, ["the cow jumped"], ["the man"], ["a cow"])
    spout.set_cycle(True)  # every batch: the three sentences
    return (
        topology.new_stream("sentences", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .name("split")
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.factory(), Count(), Fields("count"))
    )


def named():
    topology = TridentTopology()
    word_counts(topology).new_values_stream().name("counts")
    return topology.build()


def unnamed():
    topology = TridentTopology()
    word_counts(topology)
    return topology.build()
"""


def new_values(batches: int) -> list[str]:
    """What the word counts' state received from ``batches`` batches, as shown: after
    batch ``k``, the new count of each word of the batch, in the order the words came."""
    return [
        f"  [{word!r}, {times * k}]"
        for k in range(1, batches + 1)
        for word, times in [("the", 2), ("cow", 2), ("jumped", 1), ("man", 1), ("a", 1)]
    ]


def numbered(lines: list[str]) -> list[str]:
    """``lines`` with the segments' stream ids (``s<node id>``, numbered over the whole
    process) written ``s<N>``."""
    return [re.sub(r"\bs\d+\b", "s<N>", line) for line in lines]


def trident_file(tmp_path: Path) -> str:
    path = tmp_path / "words.py"
    path.write_text(textwrap.dedent(TRIDENT), encoding="utf-8")
    return str(path)


def run_trident(path: str, *options: str) -> tuple[list[str], int]:
    """Run a Trident file for a while (a Trident topology is idle between its batches,
    so ``--until-idle`` would stop it early): the lines shown, and how many batches
    the state received (from the tuples counted in the first line, five a batch)."""
    result = invoke("run", path, "--seconds", "5", "--drain", "5", *options)
    assert result.exit_code == 0, result.output
    lines = numbered(shown_lines(result.output))
    total = re.match(r"\S+ emitted ([\d,]+) tuples", lines[0])
    assert total, lines
    emitted = int(total[1].replace(",", ""))
    assert emitted % 5 == 0 and emitted > 0, lines
    return lines, emitted // 5


def test_show_a_trident_name_shows_the_new_values_of_its_persistent_aggregate(
    tmp_path: Path,
) -> None:
    """``counts`` (``new_values_stream().name("counts")``) is the persistent aggregate of
    component ``b2-counts``: what its state received in each batch, without the batch's
    attempt, in order; ``@word`` keeps each word's latest count."""
    path = trident_file(tmp_path) + ":named"
    lines, batches = run_trident(path, "--show", "counts", "--show-last", "7")
    which = "; the last 7" if batches > 1 else ""
    assert lines == [
        f"b2-counts emitted {5 * batches:,} tuples on stream s<N>{which}:",
        *new_values(batches)[-7:],
    ]
    lines, batches = run_trident(path, "--show", "counts@word")
    assert lines[0] == (
        f"b2-counts emitted {5 * batches:,} tuples on stream s<N>; the latest of each of "
        "the last 5 values of word:"
    )
    assert lines[1:] == new_values(batches)[-5:]


def test_an_unnamed_persistent_aggregate_shows_its_new_values_by_component_id(
    tmp_path: Path,
) -> None:
    path = trident_file(tmp_path) + ":unnamed"
    shown = "b2-persistent_aggregate(Count)@word"
    lines, batches = run_trident(path, "--show", shown, "--show-last", "2")
    assert lines == [
        f"b2-persistent_aggregate(Count) emitted {5 * batches:,} tuples on stream s<N>; the "
        "latest of each of the last 2 values of word:",
        f"  ['man', {batches}]",
        f"  ['a', {batches}]",
    ]


@pytest.mark.parametrize(
    ("show", "message"),
    [
        (
            "nope",
            "'nope' is not a component of the topology (its components: "
            "sentences/coordinator, sentences, b1-split, b2-counts) nor a Trident name "
            "(its names: split, counts)",
        ),
        (
            "split",
            "Trident name 'split' names an operation of component 'b1-split' whose "
            "tuples go on to the next operation inside that component, on no stream; "
            "show 'b1-split' for what the component emits",
        ),
        (
            "counts:other",
            "Trident name 'counts' shows its operation's output (stream 's<N>' of "
            "component 'b2-counts'); it takes no :STREAM",
        ),
        (
            "counts@nope",
            "stream 's<N>' of component 'b2-counts' has no field 'nope' (its fields: word, count)",
        ),
    ],
)
def test_show_of_a_trident_name_says_what_is_wrong(tmp_path: Path, show: str, message: str) -> None:
    result = run(trident_file(tmp_path) + ":named", "--show", show)
    assert result.exit_code == 2, result.output
    (output,) = numbered([" ".join(result.output.split())])
    assert f"Invalid value for '--show': {message}" in output
