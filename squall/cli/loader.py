"""Loading a user's topology file and finding the topology in it.

Runs in the ``squall`` command's process, before any cluster exists. Everything that can
go wrong in the user's file (a missing file, a syntax error, an exception at import, no
topology, an invalid topology) is raised as :class:`TopologyLoadError` with a message
meant for the user: tracebacks are cut down to the frames of the user's own file.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from squall.model.errors import InvalidTopologyError
from squall.model.topology import StormTopology

#: Module-level names tried, in order, when no name is given.
DEFAULT_NAMES = ("topology", "build_topology")
#: Module-level names of an optional base configuration.
CONF_NAMES = ("conf", "CONF")


class TopologyLoadError(Exception):
    """The user's file cannot be loaded or holds no usable topology (message for users)."""


@dataclass(frozen=True)
class TopologyTarget:
    """What ``FILE.py[:NAME]`` names: a file and, optionally, a name inside it."""

    path: Path
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> TopologyTarget:
        """Split ``FILE.py[:NAME]``; the name is taken only if it is a Python identifier.

        Raises:
            TopologyLoadError: the file does not exist or is not a file.
        """
        path_text, name = text, None
        head, colon, tail = text.rpartition(":")
        if colon and head and tail.isidentifier():
            path_text, name = head, tail
        path = Path(path_text).expanduser()
        if not path.exists():
            raise TopologyLoadError(f"file {path_text!r} does not exist")
        if not path.is_file():
            raise TopologyLoadError(f"{path_text!r} is not a file")
        return cls(path.resolve(), name)

    @property
    def default_topology_name(self) -> str:
        """The name a topology from this file runs under unless told otherwise."""
        return self.path.stem


@dataclass(frozen=True)
class LoadedTopology:
    """A topology found in a user's file.

    Attributes:
        topology: the topology.
        source: where it was found, as ``FILE.py:NAME``.
        conf: the file's base configuration (its ``conf``/``CONF`` dict, or empty).
        default_name: the name to run it under unless told otherwise (the file's stem).
        show: the file's ``show``: the ``COMPONENT[:STREAM][@FIELD]`` whose tuples
            ``squall run`` shows unless ``--show`` is given (empty: none).
        loggers: the names of the loggers the file defines at module level (``LOG =
            logging.getLogger(...)``), but squall's own.
    """

    topology: StormTopology
    source: str
    conf: dict[str, Any]
    default_name: str
    show: tuple[str, ...] = ()
    loggers: tuple[str, ...] = ()


def load_module(path: Path) -> ModuleType:
    """Import the Python file at ``path`` as a fresh module.

    The file's directory is put first on ``sys.path`` (so it can import its neighbours)
    and the module is registered in ``sys.modules`` under the file's stem, or a unique
    variant of it when that name is taken by another module.

    Raises:
        TopologyLoadError: the file has a syntax error or raised while being imported,
            or has the name of a module of Python's standard library (first on
            ``sys.path``, it would replace that module for every later import, in this
            process and in the worker and Spark processes that inherit the path).
    """
    if path.stem in sys.stdlib_module_names:
        raise TopologyLoadError(
            f"{path.name} has the name of Python's standard module {path.stem!r}: its "
            "directory goes first on the module path, so it would replace that module "
            "wherever it is imported; rename the file"
        )
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module_name = _free_module_name(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TopologyLoadError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise TopologyLoadError(_describe_syntax_error(exc)) from None
    except InvalidTopologyError as exc:
        sys.modules.pop(module_name, None)
        raise TopologyLoadError(f"invalid topology: {exc}") from None
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise TopologyLoadError(
            f"{path.name} raised {type(exc).__name__} while being imported:\n"
            + user_traceback(exc, path)
        ) from None
    return module


def load_topology(target: TopologyTarget) -> LoadedTopology:
    """Import ``target``'s file and find its topology and base configuration.

    With a name, that module attribute must be a :class:`StormTopology` or a function
    taking no arguments that returns one. Without, the first of :data:`DEFAULT_NAMES`
    present is used, else the only ``StormTopology`` defined at module level.

    Raises:
        TopologyLoadError: loading failed, no topology was found, building it raised, or
            it is invalid (the message of :class:`InvalidTopologyError` is kept).
    """
    module = load_module(target.path)
    name = target.name or _default_name(module, target.path)
    if not hasattr(module, name):
        raise TopologyLoadError(
            f"{target.path.name} has no attribute {name!r}; " + _candidates_sentence(module)
        )
    topology = _resolve(getattr(module, name), name, target.path)
    return LoadedTopology(
        topology,
        f"{target.path.name}:{name}",
        find_conf(module),
        target.default_topology_name,
        find_show(module),
        find_loggers(module),
    )


def find_loggers(module: ModuleType) -> tuple[str, ...]:
    """The names of the ``logging.Logger`` objects among the module's attributes, but
    those of the ``squall`` hierarchy (the ``-v`` option's)."""
    names = {
        value.name
        for value in vars(module).values()
        if isinstance(value, logging.Logger)
        and value.name != "squall"
        and not value.name.startswith("squall.")
    }
    return tuple(sorted(names))


#: The module-level name of what ``squall run`` shows by default.
SHOW_NAME = "show"


def find_show(module: ModuleType) -> tuple[str, ...]:
    """The module's ``show``: a ``COMPONENT[:STREAM]`` string or a list of them (empty
    without one). A function, class or module of that name is not one and is ignored.

    Raises:
        TopologyLoadError: ``show`` is neither a string nor a list of strings.
    """
    value = getattr(module, SHOW_NAME, None)
    if value is None or callable(value) or isinstance(value, ModuleType):
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise TopologyLoadError(
        f"module-level {SHOW_NAME!r} must be a component id (COMPONENT or COMPONENT:STREAM) "
        f"or a list of them, got {value!r}"
    )


def find_conf(module: ModuleType) -> dict[str, Any]:
    """The module's ``conf``/``CONF`` dict (a copy), or an empty dict.

    Raises:
        TopologyLoadError: ``conf``/``CONF`` exists but is not a dict.
    """
    for name in CONF_NAMES:
        if hasattr(module, name):
            value = getattr(module, name)
            if not isinstance(value, dict):
                raise TopologyLoadError(
                    f"module-level {name!r} must be a dict (a squall.Config), "
                    f"got {type(value).__name__}"
                )
            return dict(value)
    return {}


def parse_conf_options(options: Iterable[str]) -> dict[str, Any]:
    """Parse ``key=value`` options; values are JSON when they parse, else strings.

    ``topology.workers=2`` gives ``2``, ``topology.debug=true`` gives ``True``,
    ``x=null`` gives ``None`` and ``name=abc`` gives ``"abc"``.

    Raises:
        TopologyLoadError: an option has no ``=`` or an empty key.
    """
    parsed: dict[str, Any] = {}
    for option in options:
        key, equals, raw = option.partition("=")
        key = key.strip()
        if not equals or not key:
            raise TopologyLoadError(
                f"--conf {option!r} is not of the form key=value (e.g. topology.workers=2)"
            )
        try:
            parsed[key] = json.loads(raw)
        except ValueError:
            parsed[key] = raw
    return parsed


def format_frames(exc: BaseException, keep: Callable[[Path], bool]) -> str:
    """The traceback of ``exc`` with only the frames whose file ``keep`` accepts.

    Ends with the exception's own line (``ValueError: ...``), as a traceback does.
    """
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if keep(Path(frame.filename).resolve())
    ]
    lines = traceback.format_list(frames)
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines).rstrip("\n")


def user_traceback(exc: BaseException, path: Path) -> str:
    """The traceback of ``exc`` reduced to the frames in the file ``path``."""
    return format_frames(exc, lambda frame_path: frame_path == path)


def _free_module_name(path: Path) -> str:
    stem = path.stem if path.stem.isidentifier() else "squall_user_topology"
    name, number = stem, 1
    while name in sys.modules:
        existing = getattr(sys.modules[name], "__file__", None)
        if existing is not None and Path(existing).resolve() == path:
            return name
        number += 1
        name = f"{stem}_{number}"
    return name


def _describe_syntax_error(exc: SyntaxError) -> str:
    where = f"{Path(exc.filename).name}, line {exc.lineno}" if exc.filename else "the file"
    text = f"syntax error in {where}: {exc.msg}"
    if exc.text:
        text += f"\n    {exc.text.rstrip()}"
        if exc.offset:
            indent = len(exc.text) - len(exc.text.lstrip())
            text += "\n    " + " " * max(0, exc.offset - 1 - indent) + "^"
    return text


def _candidates(module: ModuleType) -> list[str]:
    found = []
    for attribute, value in vars(module).items():
        if attribute.startswith("_"):
            continue
        if isinstance(value, StormTopology) or (
            callable(value)
            and not isinstance(value, type)
            and getattr(value, "__module__", None) == module.__name__
        ):
            found.append(attribute)
    return found


def _candidates_sentence(module: ModuleType) -> str:
    candidates = _candidates(module)
    if not candidates:
        return "it defines no StormTopology and no function that could build one"
    return "candidates: " + ", ".join(candidates) + " (pick one with FILE.py:NAME)"


def _default_name(module: ModuleType, path: Path) -> str:
    for name in DEFAULT_NAMES:
        if hasattr(module, name):
            return name
    topologies = [
        attribute
        for attribute, value in vars(module).items()
        if isinstance(value, StormTopology) and not attribute.startswith("_")
    ]
    if len(topologies) == 1:
        return topologies[0]
    if topologies:
        raise TopologyLoadError(
            f"{path.name} defines several topologies ({', '.join(topologies)}); "
            f"name one: {path.name}:NAME"
        )
    raise TopologyLoadError(
        f"no topology found in {path.name}: define build_topology() returning a "
        f"StormTopology, or name one with {path.name}:NAME; " + _candidates_sentence(module)
    )


def _resolve(value: Any, name: str, path: Path) -> StormTopology:
    if isinstance(value, StormTopology):
        return value
    if not callable(value):
        raise TopologyLoadError(
            f"{path.name}:{name} is a {type(value).__name__}, not a StormTopology or a "
            "function returning one"
        )
    try:
        result = value()
    except InvalidTopologyError as exc:
        raise TopologyLoadError(f"invalid topology: {exc}") from None
    except Exception as exc:
        raise TopologyLoadError(
            f"{path.name}:{name}() raised {type(exc).__name__}:\n" + user_traceback(exc, path)
        ) from None
    if not isinstance(result, StormTopology):
        hint = (
            " (did you forget to call create_topology()?)"
            if type(result).__name__ == "TopologyBuilder"
            else ""
        )
        raise TopologyLoadError(
            f"{path.name}:{name}() returned {type(result).__name__}, not a StormTopology{hint}"
        )
    return result
