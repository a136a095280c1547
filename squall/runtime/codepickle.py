"""Pickling user code for other processes without losing where it came from.

Code that travels by value (the module of a topology loaded from a file, or a test
module, which other processes cannot import) is rebuilt there from its code objects.
cloudpickle from 3.1.3 on writes every such code object's file name as
``"<dynamic-code>"``, so a traceback raised in a Spark worker would name no file and
show no source line. :class:`CodePickler` writes the real file name next to each code
object and puts it back on load: tracebacks read as they do in the process that
built the topology, with their source lines wherever the file is readable.

Values (tuple values, recorded items) travel the same way where they must:
:func:`dumps_value` is plain pickle, unless a value's class or function is one another
process cannot import (user code that travels by value), when it falls back to
cloudpickle.
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from collections import ChainMap
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import cloudpickle

T = TypeVar("T")

#: The protocol everything squall pickles for other processes uses.
PROTOCOL = cloudpickle.DEFAULT_PROTOCOL

_reduce_code: Callable[[types.CodeType], tuple[Any, ...]] = cloudpickle.Pickler.dispatch_table[
    types.CodeType
]


def _code_with_file(
    rebuild: Callable[..., types.CodeType], args: tuple[Any, ...], file: str
) -> types.CodeType:
    """Rebuild a code object as cloudpickle does, then give it back its file name.

    Runs in the process that unpickles."""
    code = rebuild(*args)
    return code if code.co_filename == file else code.replace(co_filename=file)


def _reduce_code_keeping_file(code: types.CodeType) -> tuple[Any, ...]:
    rebuild, args = _reduce_code(code)[:2]
    return _code_with_file, (rebuild, args, code.co_filename)


class CodePickler(cloudpickle.Pickler):
    """cloudpickle's pickler, keeping the file name of every code object it writes.

    Subclasses may add ``persistent_id`` and the like; the result loads with plain
    :func:`pickle.loads` wherever squall is importable.
    """

    dispatch_table = ChainMap(
        {types.CodeType: _reduce_code_keeping_file}, cloudpickle.Pickler.dispatch_table
    )

    def __init__(self, stream: io.BytesIO, protocol: int = PROTOCOL) -> None:
        super().__init__(stream, protocol=protocol)


def dumps(value: object) -> bytes:
    """Pickle ``value`` like ``cloudpickle.dumps``, keeping code objects' file names.

    Raises:
        Exception: whatever pickling raises for a part that cannot be pickled.
    """
    stream = io.BytesIO()
    CodePickler(stream).dump(value)
    return stream.getvalue()


class _ByValue(Exception):
    """Raised by :class:`_ValuePickler` at a class or function it must not write by
    reference."""


def _importable_elsewhere(obj: type | types.FunctionType) -> bool:
    """Whether another process can import ``obj`` by its module and name: False for
    code of ``__main__``, of a module made at run time (no import spec), or of a module
    registered with cloudpickle to travel by value (a topology's user modules, see
    :mod:`squall.runtime.shipping`)."""
    name = getattr(obj, "__module__", None)
    if not name or name == "__main__":
        return False
    registered = cloudpickle.list_registry_pickle_by_value()
    if registered:
        parts = name.split(".")
        if any(".".join(parts[:end]) in registered for end in range(1, len(parts) + 1)):
            return False
    module = sys.modules.get(name)
    return module is not None and (
        getattr(module, "__spec__", None) is not None or name in sys.builtin_module_names
    )


#: What :class:`_ValuePickler` looks at: classes and functions.
_CODE_KINDS = (type, types.FunctionType)


class _ValuePickler(pickle.Pickler):
    """Plain pickle that stops at a class or function other processes cannot import.

    Its ``reducer_override`` is not called for ``None``, ``bool``, ``int``, ``float``,
    ``str``, ``bytes``, ``list``, ``tuple``, ``dict``, ``set`` and ``frozenset``
    (Python's pickler saves them first), so plain values cost what ``pickle.dumps``
    costs."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _CODE_KINDS) and not _importable_elsewhere(obj):
            _send_module_by_value(obj)
            raise _ByValue
        return NotImplemented


def _send_module_by_value(obj: type | types.FunctionType) -> None:
    """Make cloudpickle write the code of ``obj``'s module with the values that use it,
    if that module was made at run time (cloudpickle writes ``__main__`` by value
    already, and would write such a module by reference because it is in
    ``sys.modules``, though no other process can import it)."""
    name = getattr(obj, "__module__", None)
    module = sys.modules.get(name) if name and name != "__main__" else None
    if module is not None and name not in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.register_pickle_by_value(module)


def dumps_value(value: object) -> bytes:
    """Pickle ``value`` (tuple values, a recorded item) for another process of this
    topology: with plain pickle (protocol 5), unless it holds an object plain pickle
    cannot write, or whose class or function another process could not import (a
    class of ``__main__`` or of a user module that travels by value); then with
    cloudpickle, which writes such classes with the value. Either loads with
    :func:`pickle.loads` wherever squall is importable.

    Pure; runs on any thread.

    Raises:
        Exception: whatever cloudpickle raises for a part that cannot be pickled.
    """
    stream = io.BytesIO()
    try:
        _ValuePickler(stream, pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception:  # _ByValue, or what plain pickle refuses (a lambda, a local class)
        return dumps(value)
    return stream.getvalue()


class Carried(Generic[T]):
    """``value``, pickled through :class:`CodePickler` whichever pickler carries it.

    A function Spark pickles with its own copy of cloudpickle (a ``mapInArrow``
    function) holds user code in a ``Carried`` so that code keeps its file names too.
    """

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return _load_carried, (dumps(self.value),)


def _load_carried(payload: bytes) -> Carried[Any]:
    """Runs in the process that unpickles a :class:`Carried`."""
    return Carried(pickle.loads(payload))
