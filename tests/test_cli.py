"""The ``squall`` command: help, version, info, run, and clean errors for bad user files."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import squall
from squall.cli.loader import TopologyLoadError, TopologyTarget, parse_conf_options
from squall.cli.main import main
from tests.helpers import table_row

ROOT = Path(__file__).resolve().parent.parent
WORD_COUNT = str(ROOT / "examples" / "word_count.py")

COMPONENTS = """
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


class Picky(BasicBolt):
    def execute(self, tup, collector):
        if tup["n"] % 5 == 0:
            raise ValueError(f"no multiples of five: {tup['n']}")
"""


def invoke(*args: str) -> Result:
    """Run ``squall *args`` with a wide console that writes no terminal codes."""
    env = {"COLUMNS": "200", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
    return CliRunner().invoke(main, list(args), env=env)


def write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return str(path)


# --- help and version -----------------------------------------------------------------


def test_help_lists_the_commands() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("run", "info", "version"):
        assert re.search(rf"^\s+{command}\s", result.output, re.MULTILINE)


def test_run_help_documents_every_option() -> None:
    result = invoke("run", "--help")
    assert result.exit_code == 0
    for option in ("FILE.py[:NAME]", "--seconds", "--conf", "--name", "--refresh", "--no-live"):
        assert option in result.output
    assert "build_topology" in result.output


def test_info_help() -> None:
    result = invoke("info", "--help")
    assert result.exit_code == 0
    assert "--conf" in result.output and "FILE.py[:NAME]" in result.output


def test_version_prints_the_package_version() -> None:
    result = invoke("version")
    assert result.exit_code == 0
    assert result.output.strip() == f"squall {squall.__version__}"


@pytest.mark.parametrize("option", ["-V", "--version"])
def test_version_options_print_what_the_version_command_prints(option: str) -> None:
    result = invoke(option)
    assert result.exit_code == 0
    assert result.output == f"squall {squall.__version__}\n"
    assert result.output == invoke("version").output


# --- run ------------------------------------------------------------------------------


def test_run_word_count_prints_a_summary_with_acked_sentences() -> None:
    result = invoke("run", WORD_COUNT, "--seconds", "1", "--no-live")
    assert result.exit_code == 0, result.output
    output = result.output
    assert "as 'word_count' on LocalCluster with 1 worker(s) for 1 s" in output
    assert "final metrics" in output
    spout = table_row(output, "sentences")
    split = table_row(output, "split")
    count = table_row(output, "count")
    assert int(spout["acked"]) > 0
    # The run drains before the summary: every sentence's tree completed, none failed.
    assert spout["acked"] == spout["emitted"] and spout["failed"] == "0"
    assert split["executed"] == spout["emitted"]
    assert count["executed"] == split["emitted"]
    assert (spout["kind"], spout["tasks"], count["tasks"]) == ("spout", "1", "4")
    assert "Most recent errors" not in output


def test_run_with_two_workers() -> None:
    result = invoke(
        "run",
        WORD_COUNT,
        "--seconds",
        "0.5",
        "--no-live",
        "--conf",
        "topology.workers=2",
        "--name",
        "wc2",
    )
    assert result.exit_code == 0, result.output
    output = result.output
    assert "as 'wc2' on LocalCluster with 2 worker(s)" in output
    assert "2 worker(s), 0 tree(s) pending" in output
    assert table_row(output, "__acker")["tasks"] == "2"  # one acker per worker by default
    assert int(table_row(output, "sentences")["acked"]) > 0


def test_run_picks_a_named_topology_and_shows_errors_with_user_frames(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "picky.py",
        COMPONENTS
        + """
builder = TopologyBuilder()
builder.set_spout("numbers", Numbers())
builder.set_bolt("picky", Picky()).shuffle_grouping("numbers")
picky_topology = builder.create_topology()
""",
    )
    result = invoke(
        "run", f"{path}:picky_topology", "--until-idle", "--seconds", "100", "--no-live"
    )
    assert result.exit_code == 0, result.output
    output = result.output
    assert "Running picky.py:picky_topology as 'picky'" in output
    numbers = table_row(output, "numbers")
    assert (numbers["acked"], numbers["failed"]) == ("16", "4")
    assert table_row(output, "picky")["errors"] == "4"
    assert "picky: 4 errors\n" in output and output.rstrip().endswith("4 errors in 1 component")
    assert "1x ValueError: no multiples of five: 20  (task 3)" in output
    assert 'picky.py", line' in output and "in execute" in output
    assert "squall/local" not in output  # the engine's own frames are left out


def test_run_uses_module_conf_and_conf_options_override_it(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "configured.py",
        COMPONENTS
        + """
conf = {"topology.workers": 2, "topology.acker.executors": 3}


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("picky", Picky(), 2).shuffle_grouping("numbers")
    return builder.create_topology()
""",
    )
    result = invoke("info", path)
    assert result.exit_code == 0, result.output
    assert "configured.py:build_topology: 2 worker(s), 3 acker executor(s)" in result.output
    result = invoke(
        "info", path, "--conf", "topology.workers=1", "--conf", "topology.acker.executors=0"
    )
    assert result.exit_code == 0, result.output
    assert "configured.py:build_topology: 1 worker(s), 0 acker executor(s)" in result.output
    assert "__acker" not in result.output


def test_info_shows_streams_groupings_and_task_ids() -> None:
    result = invoke("info", str(ROOT / "examples" / "multi_stream.py"))
    assert result.exit_code == 0, result.output
    output = result.output
    assert "audit: [number, parity] (direct)" in output
    assert "router:audit direct" in output
    assert "router:even shuffle" in output
    auditor = table_row(output, "auditor")
    assert (auditor["executors"], auditor["tasks"], auditor["task ids"]) == ("3", "3", "2-4")
    assert table_row(output, "__acker")["task ids"] == "1"


# --- errors in the user's file --------------------------------------------------------


def assert_clean_error(result: Result, *expected: str) -> str:
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") or "\nError: " in result.output
    assert "Traceback (most recent call last)" not in result.output
    assert "squall/cli" not in result.output
    for text in expected:
        assert text in result.output, result.output
    return result.output


def test_missing_file() -> None:
    assert_clean_error(invoke("run", "no/such/file.py"), "file 'no/such/file.py' does not exist")


def test_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.py", "def build_topology(:\n    pass\n")
    assert_clean_error(
        invoke("run", path, "--no-live"),
        "syntax error in broken.py, line 1",
        "def build_topology(:",
    )


def test_a_file_named_like_a_standard_module_is_refused_before_it_shadows_it(
    tmp_path: Path,
) -> None:
    import numbers

    path = write(tmp_path, "numbers.py", "raise SystemExit('imported')\n")
    assert_clean_error(
        invoke("run", path, "--no-live"),
        "numbers.py has the name of Python's standard module 'numbers'",
        "rename the file",
    )
    assert str(tmp_path) not in sys.path
    assert sys.modules["numbers"] is numbers


def test_exception_at_import_shows_only_the_users_frames(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "explodes.py",
        """
        def settings():
            return {}["missing"]

        SETTINGS = settings()
        """,
    )
    output = assert_clean_error(
        invoke("run", path),
        "explodes.py raised KeyError while being imported",
        "line 5, in <module>",
        "line 3, in settings",
        "KeyError: 'missing'",
    )
    assert "importlib" not in output and "frozen" not in output


def test_file_without_topology_lists_candidates(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.py", "def helper():\n    return 1\n\nVALUE = 3\n")
    assert_clean_error(invoke("run", path), "no topology found in empty.py", "candidates: helper")


def test_unknown_name_and_wrong_return_type(tmp_path: Path) -> None:
    path = write(tmp_path, "named.py", "def helper():\n    return 1\n")
    assert_clean_error(
        invoke("run", f"{path}:nothing"), "named.py has no attribute 'nothing'", "helper"
    )
    assert_clean_error(
        invoke("run", f"{path}:helper"), "named.py:helper() returned int, not a StormTopology"
    )


def test_invalid_topology_shows_the_validation_message(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "invalid.py",
        COMPONENTS
        + """
def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("picky", Picky()).fields_grouping("numbers", ["missing"])
    return builder.create_topology()
""",
    )
    assert_clean_error(
        invoke("run", path),
        "invalid topology: bolt 'picky': fields grouping on 'numbers' stream 'default' "
        "uses field(s) ['missing']",
    )


def test_invalid_configuration_is_a_clean_error() -> None:
    assert_clean_error(
        invoke("run", WORD_COUNT, "--conf", "topology.workers=0"),
        "configuration 'topology.workers' must be an integer >= 1, got 0",
    )
    assert_clean_error(invoke("run", WORD_COUNT, "--conf", "workers"), "--conf 'workers'")


def test_prepare_that_raises_is_a_component_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "unprepared.py",
        COMPONENTS
        + """
class NeedsDatabase(BasicBolt):
    def prepare(self, conf, context):
        raise ConnectionError("database unreachable")

    def execute(self, tup, collector):
        pass


def build_topology():
    builder = TopologyBuilder()
    builder.set_spout("numbers", Numbers())
    builder.set_bolt("store", NeedsDatabase()).shuffle_grouping("numbers")
    return builder.create_topology()
""",
    )
    output = assert_clean_error(
        invoke("run", path, "--no-live"),
        "the topology could not start: component 'store' task",
        "prepare raised ConnectionError: database unreachable",
        "unprepared.py",
        "in prepare",
    )
    assert "Running " not in output  # nothing ran


# --- the loader's parsing -------------------------------------------------------------


def test_conf_values_are_json_when_possible() -> None:
    parsed = parse_conf_options(
        ["a=1", "b=1.5", "c=true", "d=null", "e=text", 'f="2"', "g=[1, 2]", "h=", "i=x=y"]
    )
    assert parsed == {
        "a": 1,
        "b": 1.5,
        "c": True,
        "d": None,
        "e": "text",
        "f": "2",
        "g": [1, 2],
        "h": "",
        "i": "x=y",
    }
    with pytest.raises(TopologyLoadError):
        parse_conf_options(["=1"])


def test_target_parsing(tmp_path: Path) -> None:
    path = write(tmp_path, "app.py", "")
    assert TopologyTarget.parse(path) == TopologyTarget(Path(path).resolve(), None)
    assert TopologyTarget.parse(f"{path}:build") == TopologyTarget(Path(path).resolve(), "build")
    assert TopologyTarget.parse(path).default_topology_name == "app"


def test_run_until_idle_stops_once_a_finite_input_is_processed(tmp_path: Path) -> None:
    """--until-idle: the 20 numbers are processed whatever the machine's speed, and the run
    ends then, long before --seconds (the test would time out otherwise)."""
    path = write(tmp_path, "finite.py", COMPONENTS)
    with open(path, "a", encoding="utf-8") as source:
        source.write(
            "\n\ndef build_topology():\n"
            "    builder = TopologyBuilder()\n"
            "    builder.set_spout('numbers', Numbers())\n"
            "    builder.set_bolt('picky', Picky(), 2).shuffle_grouping('numbers')\n"
            "    return builder.create_topology()\n"
        )
    result = invoke("run", path, "--until-idle", "--seconds", "100", "--no-live")
    assert result.exit_code == 0, result.output
    assert "until idle or for 100 s" in result.output
    numbers = table_row(result.output, "numbers")
    picky = table_row(result.output, "picky")
    assert (numbers["emitted"], numbers["acked"], numbers["failed"]) == ("20", "16", "4")
    assert picky["executed"] == "20"
