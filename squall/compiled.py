"""Whether squall's per-tuple core runs compiled, and the switch to its pure-Python form.

``pip install`` compiles the modules of the per-tuple path (:data:`COMPILED_MODULES`:
collectors, routing, task runners, acker, tuples, the local worker loop)
with mypyc when the machine has a C compiler, and installs them beside their Python
sources. Without a compiler the build says so in one line and installs the sources
alone. Both forms behave the same; the compiled one is faster (2.1x fewer instructions
per tuple on a word count without acking, 1.8x with it: bench/README.md).

``SQUALL_PURE_PYTHON=1`` in the environment chooses the pure-Python form: at install, no
compilation; at run time, squall's modules are imported from their sources even where
compiled ones are installed (set it before ``squall`` is first imported; worker
processes inherit it).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import SOURCE_SUFFIXES
from pathlib import Path
from types import ModuleType

#: The environment variable choosing the pure-Python form.
PURE_PYTHON_ENV = "SQUALL_PURE_PYTHON"
#: The modules ``setup.py`` compiles (this module imports only the standard library, so
#: that the build can read this list without squall's dependencies).
COMPILED_MODULES = (
    "squall.model.tuple",
    "squall.runtime.acker",
    "squall.runtime.collectors",
    "squall.runtime.latency",
    "squall.runtime.metrics",
    "squall.runtime.routing",
    "squall.runtime.sinks",
    "squall.runtime.tasks",
    "squall.local.backpressure",
    "squall.local.exchange",
    "squall.local.worker",
)
#: A module of the compiled core: compiled exactly when the core is.
PROBE_MODULE = "squall.runtime.tasks"

logger = logging.getLogger(__name__)
_warned = False


def pure_python_chosen() -> bool:
    """Whether ``SQUALL_PURE_PYTHON=1`` is set."""
    return os.environ.get(PURE_PYTHON_ENV) == "1"


class SourceOnlyFinder(importlib.abc.MetaPathFinder):
    """Finds squall's submodules among Python sources only, never a compiled module."""

    def __init__(self) -> None:
        self._finders: dict[str, importlib.machinery.FileFinder] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("squall.") or not path:
            return None
        for entry in path:
            finder = self._finders.get(entry)
            if finder is None:
                sources = (importlib.machinery.SourceFileLoader, SOURCE_SUFFIXES)
                finder = self._finders[entry] = importlib.machinery.FileFinder(entry, sources)
            spec = finder.find_spec(fullname)
            if spec is not None:
                return spec
        return None


def use_sources_if_chosen() -> None:
    """Import squall's modules from their sources from now on, if the environment chooses
    the pure-Python form. Called once, by ``squall/__init__.py`` before its imports."""
    if pure_python_chosen() and not any(isinstance(f, SourceOnlyFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceOnlyFinder())


def compiled_core() -> bool:
    """Whether the per-tuple core runs compiled in this process."""
    module = sys.modules.get(PROBE_MODULE) or importlib.import_module(PROBE_MODULE)
    return not str(getattr(module, "__file__", "")).endswith(".py")


def stale_modules() -> list[str]:
    """The compiled modules whose source changed after they were compiled (in a source
    checkout installed with ``pip install -e .``, which compiles them in place): they run
    the old code until ``pip install -e .`` runs again."""
    package = Path(__file__).resolve().parent
    stale = []
    for name in COMPILED_MODULES:
        source = package.parent / (name.replace(".", "/") + ".py")
        built = list(source.parent.glob(source.stem + ".*.so")) + list(
            source.parent.glob(source.stem + ".*.pyd")
        )
        if source.exists() and any(b.stat().st_mtime < source.stat().st_mtime for b in built):
            stale.append(name)
    return stale


def warn_if_interpreted() -> None:
    """Log once per process that the core runs as pure Python, unless the environment
    chose it: the install found no C compiler (or could not compile). Called when an
    engine starts."""
    global _warned
    if _warned or pure_python_chosen():
        return
    _warned = True
    if not compiled_core():
        logger.warning(
            "squall's compiled core is not installed (it is built by pip install on a "
            "machine with a C compiler and Python's headers): the engine runs as pure "
            "Python, slower; set %s=1 to choose this and hide this line",
            PURE_PYTHON_ENV,
        )


__all__ = [
    "COMPILED_MODULES",
    "PURE_PYTHON_ENV",
    "SourceOnlyFinder",
    "compiled_core",
    "pure_python_chosen",
    "stale_modules",
    "use_sources_if_chosen",
    "warn_if_interpreted",
]
