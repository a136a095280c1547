"""Sending components to other Python processes (Spark's workers, the local engine's
worker processes): by value where they cannot be imported, with clear errors for what
cannot be pickled.

Runs where the topology is submitted, before anything starts.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import cloudpickle

from squall.model.errors import InvalidTopologyError
from squall.model.topology import StormTopology


def find_unpicklable(value: Any, path: str, depth: int = 0) -> str | None:
    """The path of the first attribute of ``value`` that cannot be pickled, or None."""
    try:
        cloudpickle.dumps(value)
        return None
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    if depth < 8:
        children: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, types.FunctionType):
            # A function component's closure and defaults travel with it.
            cells = zip(value.__code__.co_freevars, value.__closure__ or (), strict=False)
            children = [(f"{path}[closure {name!r}]", _cell_value(cell)) for name, cell in cells]
            children += [
                (f"{path}[default {i}]", v) for i, v in enumerate(value.__defaults__ or ())
            ]
        elif hasattr(value, "__dict__"):
            children = [(f"{path}.{k}", v) for k, v in vars(value).items()]
        for child_path, child in children:
            found = find_unpicklable(child, child_path, depth + 1)
            if found:
                return found
    return f"{path} ({type(value).__name__}; {reason})"


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _made_in_memory(module: Any) -> bool:
    """Whether ``module`` was made at run time (no file, no import spec: code executed
    from a string), so no other process can import it."""
    return (
        module is not None
        and getattr(module, "__file__", None) is None
        and getattr(module, "__spec__", None) is None
        and module.__name__ not in sys.builtin_module_names
        and module.__name__ not in ("__main__", "builtins")
    )


def _user_modules(value: Any, found: dict[str, Any], seen: set[int], depth: int = 0) -> None:
    """Collect the modules of user code reachable from ``value`` (classes and functions
    defined outside installed packages and squall)."""
    if id(value) in seen or depth > 8:
        return
    seen.add(id(value))
    for candidate in (value, type(value)):
        module = sys.modules.get(getattr(candidate, "__module__", "") or "")
        path = getattr(module, "__file__", None) or ""
        if _made_in_memory(module):
            found[module.__name__] = module  # type: ignore[union-attr]
            continue
        if (
            module is not None
            and path
            and "site-packages" not in path
            and not module.__name__.startswith(("squall", "pyspark", "builtins"))
            and not path.startswith(sys.base_prefix)
        ):
            found[module.__name__] = module
    if isinstance(value, dict):
        children: list[Any] = list(value.values())
    elif isinstance(value, list | tuple | set | frozenset):
        children = list(value)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        children = list(vars(value).values())
    else:
        children = []
    for child in children:
        _user_modules(child, found, seen, depth + 1)


def user_modules(topology: StormTopology) -> dict[str, Any]:
    """Module name -> module, for the user modules the topology's components come
    from (a topology loaded from a file, a test module): modules other processes may
    not be able to import."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for spec in topology:
        _user_modules(spec.component, found, seen)
    return found


def pickle_by_value(topology: StormTopology) -> list[str]:
    """Make the user modules of ``topology`` travel by value with the pickled
    components (see :func:`user_modules`); returns their names."""
    found = user_modules(topology)
    for module in found.values():
        cloudpickle.register_pickle_by_value(module)
    return sorted(found)


def check_picklable(component: Any, component_id: str, destination: str) -> None:
    """Raise a clear error if ``component`` cannot travel to ``destination`` (words
    such as ``"Spark executors"``).

    Raises:
        InvalidTopologyError: naming the component and the attribute that cannot be
            pickled.
    """
    culprit = find_unpicklable(component, component_id)
    if culprit:
        where = (
            "inside the function, not in a variable it closes over"
            if "[closure " in culprit or "[default " in culprit
            else "in prepare/open instead of __init__"
        )
        raise InvalidTopologyError(
            f"component {component_id!r} cannot be sent to {destination}: "
            f"{culprit} cannot be pickled; create such resources {where}"
        )


__all__ = ["check_picklable", "find_unpicklable", "pickle_by_value", "user_modules"]
