"""A hash of tuple values that is the same in every process and every run.

Python's ``hash(str)`` is salted per process (``PYTHONHASHSEED``), so fields and
partial-key groupings cannot use it: Spark's Python workers, other interpreters and
restarted topologies must send a key to the same task index as before. This module
defines :func:`stable_hash`, which never calls Python's ``hash``.

The rule: values that are equal in Python hash equally.

- ``str`` (and subclasses) by their characters; ``bytes``, ``bytearray`` and byte
  ``memoryview`` objects by their contents.
- Numbers by value: ``1 == 1.0 == True == Decimal(1) == Fraction(1) == 1 + 0j`` all hash
  alike, ``-0.0`` like ``0.0``, ``Decimal("0.5")`` like ``0.5``; numbers no float equals
  (``Fraction(1, 3)``) by their exact ratio. Every NaN hashes alike.
- ``None``; ``tuple`` and ``list`` (namedtuples included) item by item, in order.
- Mappings (``dict``, ``OrderedDict``, any ``collections.abc.Mapping``) and sets
  (``set``, ``frozenset``, any ``collections.abc.Set``) whatever their order: the
  hashes of their items are summed, so insertion order does not matter. A ``Counter``
  hashes without its zero counts, as it compares.
- Enum members: those mixed with a value type (``IntEnum``, ``StrEnum``) as that value,
  which they equal; the others by class and member name.
- Dataclass instances (with generated equality) by class and compared fields.
- ``datetime`` (aware ones by the instant, so equal instants in different time zones
  hash alike), ``date``, ``time``, ``timedelta`` and ``uuid.UUID``.
- An object whose class defines ``stable_hash_key()`` hashes as the value that method
  returns (the opt-in for other classes; equal objects must return equal keys).

Anything else raises :class:`StableHashError`: in particular objects whose equality is
their identity (which differs in every process) and classes with their own ``__eq__``
but no ``stable_hash_key()``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import numbers
import struct
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from decimal import Decimal
from fractions import Fraction
from typing import Any

_MASK = (1 << 64) - 1

#: The method a class defines to opt in: it returns a stably hashable value.
KEY_METHOD = "stable_hash_key"

# Type tags, mixed into the hashes of values of different kinds.
_SEQUENCE = 0x736571
_MAPPING = 0x6D6170
_SET = 0x736574
_RATIO = 0x726174
_COMPLEX = 0x63706C
_ENUM = 0x656E75
_DATACLASS = 0x646174
_DATETIME = 0x647469
_AWARE_DATETIME = 0x647461
_DATE = 0x646174E
_TIME = 0x74696D
_AWARE_TIME = 0x746961
_TIMEDELTA = 0x746463
_UUID = 0x757569
_MEMORYVIEW = 0x6D7669


class StableHashError(TypeError):
    """A value of a type that cannot be hashed the same way in every process.

    Attributes:
        type_name: The class name of the offending value.
        reason: Why it cannot be hashed, and what to do about it.
        path: Where the value sits inside the hashed value, as subscripts: ``[2]`` an item
            of a sequence, ``['a']`` the value of a mapping's key ``'a'``, ``.x`` field
            ``x`` of a dataclass, ``{...}`` a member of a set or a key of a mapping.
            Empty for the hashed value itself.
        context: What was hashing it (set by the fields and partial-key routers: the
            grouping and the field), empty if unknown.
    """

    def __init__(self, type_name: str, reason: str) -> None:
        super().__init__(type_name, reason)
        self.type_name = type_name
        self.reason = reason
        self.path: list[str] = []
        self.context = ""

    def __str__(self) -> str:
        where = f" at {''.join(self.path)}" if self.path else ""
        message = f"value of type {self.type_name}{where} cannot be hashed stably ({self.reason})"
        return f"{self.context}: {message}" if self.context else message


def _mix(value: int) -> int:
    """splitmix64 finaliser: spreads the bits of a 64-bit integer."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def stable_hash(value: Any) -> int:
    """A non-negative 64-bit hash of ``value`` that does not depend on the process.

    Runs wherever a tuple is routed (the emitting task's thread or Spark worker). Values
    equal in Python get equal hashes, in any process and with any ``PYTHONHASHSEED``;
    see the module docstring for the supported types.

    Raises:
        StableHashError: ``value`` is, or contains, a value of an unsupported type (for
            example an object that compares by identity), or it contains itself.
    """
    cls = value.__class__
    if cls is str:
        return _mix(zlib.crc32(value.encode("utf-8", "surrogatepass")) ^ 0x5354)
    if cls is int:
        return _mix(value & _MASK)
    try:
        return _hash(value)
    except RecursionError:
        raise StableHashError(
            cls.__qualname__, "it is nested too deeply, or contains itself"
        ) from None


def hash_values(values: Sequence[Any]) -> int:
    """Stable hash of a sequence of values (order matters): ``stable_hash`` of the
    tuple of the values.

    Raises:
        StableHashError: as :func:`stable_hash`, for any of the values.
    """
    acc = _SEQUENCE
    for item in values:
        acc = _mix(acc ^ stable_hash(item))
    return acc


# --- the hash of each kind of value -----------------------------------------------------


def _hash(value: Any) -> int:
    handler = _EXACT.get(value.__class__)
    if handler is not None:
        return handler(value)
    return _hash_other(value)


def _str(value: str) -> int:
    return _mix(zlib.crc32(str.__str__(value).encode("utf-8", "surrogatepass")) ^ 0x5354)


def _int(value: int) -> int:
    return _mix(value & _MASK)


def _float(value: float) -> int:
    if value.is_integer():
        return _mix(int(value) & _MASK)
    if value != value:
        return _NAN
    return _mix(int.from_bytes(struct.pack("<d", value), "little"))


_NAN = _mix(0x4E614E)


def _none(value: None) -> int:
    return _NONE


_NONE = _mix(0x4E6F6E65)


def _bytes(value: bytes | bytearray) -> int:
    return _mix(zlib.crc32(value) ^ 0x4259)


def _sequence(value: Sequence[Any]) -> int:
    acc = _SEQUENCE
    for index, item in enumerate(value):
        try:
            acc = _mix(acc ^ _hash(item))
        except StableHashError as error:
            error.path.insert(0, f"[{index}]")
            raise
    return acc


def _unordered(tag: int, hashes: Iterable[int], length: int) -> int:
    """Combine item hashes whatever their order: a sum, mixed with the tag and length."""
    return _mix((sum(hashes) & _MASK) ^ _mix(tag + length))


def _mapping(value: Mapping[Any, Any]) -> int:
    hashes = []
    for key, item in value.items():
        try:
            key_hash = _hash(key)
        except StableHashError as error:
            error.path.insert(0, "{...}")
            raise
        try:
            hashes.append(_mix(_mix(_SEQUENCE ^ key_hash) ^ _hash(item)))
        except StableHashError as error:
            error.path.insert(0, f"[{_short_repr(key)}]")
            raise
    return _unordered(_MAPPING, hashes, len(hashes))


def _set(value: AbstractSet[Any]) -> int:
    hashes = []
    for item in value:
        try:
            hashes.append(_hash(item))
        except StableHashError as error:
            error.path.insert(0, "{...}")
            raise
    return _unordered(_SET, hashes, len(hashes))


def _short_repr(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _complex(value: complex) -> int:
    if not value.imag:
        return _float(value.real)
    return _mix(_mix(_mix(_COMPLEX) ^ _float(value.real)) ^ _float(value.imag))


def _real(value: Any) -> int:
    """A real number of another type (Decimal, Fraction, numpy scalars...): as the int
    or float it equals, else by its exact ratio, so equal numbers hash alike."""
    if isinstance(value, numbers.Integral):
        return _int(int(value))
    if isinstance(value, Decimal) and value.is_nan():
        return _NAN
    try:
        as_float = float(value)
    except OverflowError:
        as_float = None
    if as_float is not None:
        if as_float == value:
            return _float(as_float)
        if as_float != as_float:
            return _NAN
    if isinstance(value, numbers.Rational):
        numerator, denominator = int(value.numerator), int(value.denominator)
    elif hasattr(value, "as_integer_ratio"):
        numerator, denominator = value.as_integer_ratio()
    else:
        raise StableHashError(
            value.__class__.__qualname__,
            "a real number that is not exactly a float and has no as_integer_ratio()",
        )
    if denominator == 1:
        return _int(numerator)
    return _mix(_mix(_mix(_RATIO) ^ _int(numerator)) ^ _int(denominator))


def _memoryview(value: memoryview) -> int:
    """A memoryview equals bytes with the same items, whatever its format, so its items
    decide: all of them bytes-sized integers, it hashes as those bytes."""
    if value.format == "B" and value.ndim == 1:
        return _bytes(value.tobytes())
    items = value.tolist()
    if value.ndim == 1 and all(
        isinstance(item, int | float) and item in _BYTE_VALUES for item in items
    ):
        return _bytes(bytes(int(item) for item in items))
    return _mix(_mix(_MEMORYVIEW ^ _hash(value.shape)) ^ _hash(items))


_BYTE_VALUES = range(256)


def _class_hash(cls: type) -> int:
    return _str(f"{cls.__module__}.{cls.__qualname__}")


def _enum(value: enum.Enum) -> int:
    name = value.name
    member = _str(name) if name is not None else _hash(value.value)
    return _mix(_mix(_ENUM ^ _class_hash(value.__class__)) ^ member)


def _dataclass(value: Any) -> int:
    acc = _mix(_DATACLASS ^ _class_hash(value.__class__))
    for field in dataclasses.fields(value):
        if not field.compare:
            continue
        try:
            acc = _mix(acc ^ _hash(getattr(value, field.name)))
        except StableHashError as error:
            error.path.insert(0, f".{field.name}")
            raise
    return acc


_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_MICROS_PER_DAY = 86_400_000_000


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(value: dt.time | dt.datetime) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _datetime(value: dt.datetime) -> int:
    micros = (value.toordinal() - _EPOCH_ORDINAL) * _MICROS_PER_DAY + _time_micros(value)
    offset = value.utcoffset()
    if offset is None:  # naive: equal to naive datetimes with the same fields
        return _mix(_mix(_DATETIME) ^ (micros & _MASK))
    # Aware: equal to aware datetimes of the same instant, whatever their zone.
    return _mix(_mix(_AWARE_DATETIME) ^ ((micros - _micros(offset)) & _MASK))


def _date(value: dt.date) -> int:
    return _mix(_mix(_DATE) ^ (value.toordinal() & _MASK))


def _time(value: dt.time) -> int:
    offset = value.utcoffset()
    if offset is None:
        return _mix(_mix(_TIME) ^ _time_micros(value))
    return _mix(_mix(_AWARE_TIME) ^ ((_time_micros(value) - _micros(offset)) & _MASK))


def _timedelta(value: dt.timedelta) -> int:
    return _mix(_mix(_TIMEDELTA) ^ (_micros(value) & _MASK))


def _uuid(value: uuid.UUID) -> int:
    return _mix(_mix(_mix(_UUID) ^ (value.int & _MASK)) ^ (value.int >> 64))


def _by_key(value: Any, method: Callable[[Any], Any]) -> int:
    key = method(value)
    if key.__class__ is value.__class__:
        raise StableHashError(
            value.__class__.__qualname__,
            f"its {KEY_METHOD}() returned a value of its own class; return a value of a "
            "supported type, such as a tuple of the fields its equality compares",
        )
    return _hash(key)


_EXACT: dict[type, Callable[[Any], int]] = {
    str: _str,
    int: _int,
    bool: _int,
    float: _float,
    type(None): _none,
    bytes: _bytes,
    bytearray: _bytes,
    tuple: _sequence,
    list: _sequence,
    dict: _mapping,
    set: _set,
    frozenset: _set,
    complex: _complex,
    Decimal: _real,
    Fraction: _real,
    memoryview: _memoryview,
    dt.datetime: _datetime,
    dt.date: _date,
    dt.time: _time,
    dt.timedelta: _timedelta,
    uuid.UUID: _uuid,
}


def _hash_other(value: Any) -> int:
    """Subclasses of the supported types, other numbers, enums, dataclasses and classes
    that opt in; anything else raises. The order follows Python's equality: an
    ``IntEnum`` member equals its int, a namedtuple the tuple of its items."""
    cls = value.__class__
    method = getattr(cls, KEY_METHOD, None)
    if method is not None:
        return _by_key(value, method)
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, int):  # bool, IntEnum, IntFlag...
        return _int(int.__int__(value))
    if isinstance(value, float):
        return _float(float.__float__(value))
    if isinstance(value, bytes | bytearray):
        return _bytes(value)
    if isinstance(value, tuple | list):
        return _sequence(value)
    if isinstance(value, Counter):  # a Counter equals one without its zero counts
        return _mapping({key: count for key, count in value.items() if count != 0})
    if isinstance(value, Mapping):
        return _mapping(value)
    if isinstance(value, AbstractSet):
        return _set(value)
    if isinstance(value, numbers.Real | Decimal):
        return _real(value)
    if isinstance(value, numbers.Complex):
        return _complex(complex(value))
    if isinstance(value, dt.datetime):
        return _datetime(value)
    if isinstance(value, dt.date):
        return _date(value)
    if isinstance(value, dt.time):
        return _time(value)
    if isinstance(value, dt.timedelta):
        return _timedelta(value)
    if isinstance(value, uuid.UUID):
        return _uuid(value)
    if isinstance(value, enum.Enum):
        return _enum(value)
    if cls.__module__ == "numpy" and cls.__name__ in ("bool", "bool_"):  # no numbers ABC
        return _int(int(value))
    if (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and value.__dataclass_params__.eq  # type: ignore[attr-defined]
    ):
        return _dataclass(value)
    raise StableHashError(cls.__qualname__, _unsupported_reason(cls))


def _unsupported_reason(cls: type) -> str:
    opt_in = f"give the class a {KEY_METHOD}() method returning a supported value"
    if cls.__eq__ is object.__eq__:
        return (
            "it compares by identity, which differs in every process; group by a field "
            f"that identifies it, or {opt_in} that identifies it"
        )
    if cls.__module__ == "builtins":
        return "its type is not supported"
    return f"its type is not supported; {opt_in} that equal objects share"
