"""Pickling user code for other processes without losing where it came from.

Code that travels by value (the module of a topology loaded from a file, or a test
module, which other processes cannot import) is rebuilt there from its code objects.
cloudpickle from 3.1.3 on writes every such code object's file name as
``"<dynamic-code>"``, so a traceback raised in a Spark worker would name no file and
show no source line. :class:`CodePickler` writes the real file name next to each code
object and puts it back on load: tracebacks read as they do in the process that
built the topology, with their source lines wherever the file is readable.
"""

from __future__ import annotations

import io
import pickle
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
