"""The compiled core and its pure-Python form: which one runs, the switch between them,
and the build's fallback on a machine that cannot compile."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import squall
from squall import compiled
from squall.compiled import COMPILED_MODULES, PURE_PYTHON_ENV, pure_python_chosen

ROOT = Path(__file__).resolve().parent.parent


def compiled_files() -> list[Path]:
    return [
        path
        for name in COMPILED_MODULES
        for path in (ROOT / name.replace(".", "/")).parent.glob(name.rsplit(".", 1)[1] + ".*.so")
    ]


def python(code: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_compiled_core_runs_unless_the_pure_form_is_chosen() -> None:
    if not compiled_files():
        pytest.skip("this install has no compiled core (built without a C compiler)")
    assert squall.compiled_core() is not pure_python_chosen()


def test_squall_pure_python_imports_every_module_from_its_source() -> None:
    code = (
        "import importlib, squall\n"
        "from squall.compiled import COMPILED_MODULES\n"
        "print(squall.compiled_core())\n"
        "for name in COMPILED_MODULES:\n"
        "    print(importlib.import_module(name).__file__.rsplit('.', 1)[1])\n"
    )
    lines = python(code, **{PURE_PYTHON_ENV: "1"}).split()
    assert lines == ["False"] + ["py"] * len(COMPILED_MODULES)


def test_a_pure_topology_runs_in_worker_processes_of_the_same_form(tmp_path: Path) -> None:
    """Worker processes inherit the choice: the tasks there run the sources too."""
    seen = tmp_path / "forms"
    code = (
        "import time, pathlib\n"
        "from squall import LocalCluster, TopologyBuilder, BasicBolt, Config\n"
        "from squall.testing import FixedTupleSpout\n"
        "class Where(BasicBolt):\n"
        "    def execute(self, tup, collector):\n"
        "        import squall\n"
        f"        with open({str(seen)!r}, 'a') as out:\n"
        "            out.write(f'{squall.compiled_core()}\\n')\n"
        "builder = TopologyBuilder()\n"
        "builder.set_spout('s', FixedTupleSpout([[n] for n in range(8)], ['n']))\n"
        "builder.set_bolt('where', Where(), 2).shuffle_grouping('s')\n"
        "with LocalCluster() as cluster:\n"
        "    cluster.submit_topology('t', Config().set_num_workers(2), builder.create_topology())\n"
        f"    path, deadline = pathlib.Path({str(seen)!r}), time.monotonic() + 90\n"
        "    while time.monotonic() < deadline and (\n"
        "        not path.exists() or len(path.read_text().split()) < 8\n"
        "    ):\n"
        "        time.sleep(0.05)\n"
    )
    python(code, **{PURE_PYTHON_ENV: "1"})
    assert seen.read_text().split() == ["False"] * 8


def test_an_interpreted_core_not_chosen_is_reported_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)
    monkeypatch.setattr(compiled, "compiled_core", lambda: False)
    monkeypatch.setattr(compiled, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="squall.compiled"):
        compiled.warn_if_interpreted()
        compiled.warn_if_interpreted()
    assert [record.getMessage() for record in caplog.records] == [
        "squall's compiled core is not installed (it is built by pip install on a machine "
        "with a C compiler and Python's headers): the engine runs as pure Python, "
        "slower; set SQUALL_PURE_PYTHON=1 to choose this and hide this line"
    ]


def source_tree(destination: Path) -> Path:
    """A copy of the project's files as a fresh checkout has them."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not name.endswith(".so"):
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return destination


@pytest.mark.parametrize(
    ("env", "why"),
    [({"CC": "false"}, "compiling failed"), ({PURE_PYTHON_ENV: "1"}, "SQUALL_PURE_PYTHON=1")],
    ids=["no-compiler", "chosen"],
)
def test_a_build_that_cannot_or_must_not_compile_installs_the_sources(
    tmp_path: Path, env: dict[str, str], why: str
) -> None:
    tree = source_tree(tmp_path / "tree")
    command = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*command, "-w", str(tmp_path / "wheels"), str(tree)],
        # The build's own reason, whatever the environment running the tests chose.
        env={**{k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "squall: installing the pure-Python engine, slower than the compiled one" in output
    assert why in output
    (wheel,) = (tmp_path / "wheels").glob("squall-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "squall/runtime/tasks.py" in names
    assert not [name for name in names if name.endswith((".so", ".pyd"))]
