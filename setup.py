"""The build of squall's compiled core: the modules of the per-tuple path, compiled with
mypyc into C extensions installed beside their sources (README.md and
docs/architecture.md, "The compiled core"; bench/README.md for what it gains).

``SQUALL_PURE_PYTHON=1`` at install compiles nothing. A machine without a C compiler (or
where compilation fails) gets the pure-Python form, and the build says so in one line.
Everything else is in ``pyproject.toml``.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

#: The modules of the per-tuple path compiled with mypyc (squall/compiled.py lists them:
#: tuples, collectors, routing, task runners, acker, sinks, the local worker loop and its
#: exchange, and what they record figures with).
COMPILED = [
    name.replace(".", "/") + ".py"
    for name in runpy.run_path("squall/compiled.py")["COMPILED_MODULES"]
]
#: mypy's options for the compilation: the build environment has none of squall's
#: dependencies, whose types the compiled code treats as Any.
MYPY_OPTIONS = ["--ignore-missing-imports", "--follow-imports=silent"]
FALLBACK = "squall: installing the pure-Python engine, slower than the compiled one"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class BuildOrFallBack(build_ext):
    """Builds the compiled core; if compiling fails, installs without it."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # no compiler, no headers, a failed compilation
            say(f"{FALLBACK} (compiling failed: {str(error).strip() or type(error).__name__})")
            self.extensions = []
            return
        # An extension whose C did not change is not built again: dated now all the same,
        # the build is newer than the sources it was made from (the tests check that).
        for extension in self.extensions:
            path = self.get_ext_fullpath(extension.name)
            if os.path.exists(path):
                os.utime(path)


def compiled_extensions() -> list[Any]:
    if os.environ.get("SQUALL_PURE_PYTHON") == "1":
        say(f"{FALLBACK} (SQUALL_PURE_PYTHON=1)")
        return []
    try:
        from mypyc.build import mypycify

        return list(mypycify([*MYPY_OPTIONS, *COMPILED], opt_level="3", group_name="squall._core"))
    except (Exception, SystemExit) as error:  # mypy missing, or its check failed
        say(f"{FALLBACK} (mypyc could not translate the core: {error})")
        return []


setup(ext_modules=compiled_extensions(), cmdclass={"build_ext": BuildOrFallBack})
