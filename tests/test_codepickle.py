"""User code pickled by value keeps its file names: tracebacks from other processes
name the user's file and line and show the source line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import cloudpickle
import pytest

from squall.runtime import codepickle

SOURCE = textwrap.dedent(
    """
    def outer(value):
        def inner():
            raise ValueError(f"cannot handle {value}")
        return inner


    class Handler:
        def handle(self, value):
            outer(value)()
    """
)


@pytest.fixture
def user_module(tmp_path: Path) -> Iterator[ModuleType]:
    """A module Python loaded from a file and other processes cannot import: the
    shape of a topology file given to ``squall run``."""
    path = tmp_path / "user_topology_code.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("user_topology_code", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module.__name__] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    try:
        yield module
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        del sys.modules[module.__name__]


def _trace_in_another_process(payload: bytes, handler: str, tmp_path: Path) -> str:
    """The traceback of ``handler.handle("x-1")`` in a new Python process, where
    ``handler`` is an expression over ``loaded``, the unpickled ``payload``."""
    pickled = tmp_path / "payload.pickle"
    pickled.write_bytes(payload)
    script = textwrap.dedent(
        f"""
        import pickle, sys, traceback
        loaded = pickle.loads(open({str(pickled)!r}, "rb").read())
        try:
            ({handler}).handle("x-1")
        except ValueError:
            sys.stdout.write(traceback.format_exc())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.startswith("Traceback"), result.stderr
    return result.stdout


def _assert_names_the_user_file(trace: str, module: ModuleType) -> None:
    path = module.__file__
    assert f'File "{path}", line 10, in handle' in trace
    assert f'File "{path}", line 4, in inner' in trace
    assert 'raise ValueError(f"cannot handle {value}")' in trace
    assert "<dynamic-code>" not in trace


def test_code_pickled_by_value_keeps_its_file_names(
    user_module: ModuleType, tmp_path: Path
) -> None:
    payload = codepickle.dumps(user_module.Handler())

    trace = _trace_in_another_process(payload, "loaded", tmp_path)

    _assert_names_the_user_file(trace, user_module)


def test_a_carried_value_keeps_file_names_inside_another_pickler(
    user_module: ModuleType, tmp_path: Path
) -> None:
    payload = cloudpickle.dumps({"stage": codepickle.Carried(user_module.Handler())})

    trace = _trace_in_another_process(payload, "loaded['stage'].value", tmp_path)

    _assert_names_the_user_file(trace, user_module)
