"""Kafka records as tuple values, for the Kafka spouts.

A record's key and value arrive as bytes (or None) and are decoded by the spout's
``key_format`` and ``value_format``:

* ``"str"``: UTF-8 text (bytes that are not UTF-8 make the record malformed);
* ``"bytes"``: as they are;
* ``"json"``: the JSON document the bytes hold (a record whose bytes are not JSON is
  malformed).

A None key or value (a record without one, a tombstone) stays None in every format.

With the default fields ``("topic", "partition", "offset", "key", "value")`` (Storm's
``DefaultRecordTranslator``) a tuple holds those five; with other fields, each is read
by name from ``topic``, ``partition``, ``offset``, ``key``, ``value``, ``timestamp``
(milliseconds, None if the record has none) and ``headers`` (a list of ``(name,
bytes)``), and a field of another name is read from the value, which must then be a
JSON object (``value_format="json"``) holding it.

A ``translator`` replaces all that: it is called with a :class:`KafkaRecord` (key and
value decoded) and returns the tuple's values (a list, on the default stream with the
spout's ``fields``) or None to skip the record (it is then counted as done at once). A
translator with an ``output_fields`` attribute (a mapping of stream -> field names)
declares those streams instead and returns ``(stream, values)``, as Storm's
``RecordTranslator`` with several streams.

A malformed record (undecodable key or value, a field missing from a JSON value, a
translator that raises) is never dropped silently: :meth:`RecordReader.read` raises
:class:`MalformedRecordError` and the core spout emits the record on stream
``"errors"`` with :data:`ERROR_FIELDS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from squall.connectors.errors import ConnectorError
from squall.model.declarer import DEFAULT_STREAM

#: Storm's default fields of a Kafka record's tuple.
RECORD_FIELDS = ("topic", "partition", "offset", "key", "value")
#: The fields read from the record itself (any other field is read from a JSON value).
RECORD_ATTRIBUTES = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")
#: The stream a core spout emits malformed records on.
ERRORS_STREAM = "errors"
#: Its fields: where the record is, its key and value as text (see :func:`raw_text`), and
#: what is wrong.
ERROR_FIELDS = ("topic", "partition", "offset", "key", "value", "error")
#: The formats of keys and values.
FORMATS = ("str", "bytes", "json")


class MalformedRecordError(ConnectorError):
    """A record's key or value cannot be decoded, it lacks a declared field, or the
    translator raised."""


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One record, as a translator sees it.

    Attributes:
        topic: its topic.
        partition: its partition.
        offset: its offset in the partition.
        key: the key, decoded by ``key_format`` (None: no key).
        value: the value, decoded by ``value_format`` (None: no value).
        timestamp: its timestamp in milliseconds since the epoch; None if it has none.
        headers: its headers, ``(name, value bytes)`` in order.
    """

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def decode(data: bytes | None, fmt: str, what: str) -> Any:
    """``data`` decoded by ``fmt`` (see the module docstring).

    Raises:
        MalformedRecordError: the bytes are not UTF-8 text (``str``) or not JSON
            (``json``); ``what`` (``"key"``, ``"value"``) names them.
    """
    if data is None or fmt == "bytes":
        return data
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        raise MalformedRecordError(f"the {what} is not UTF-8 text: {error}") from None
    if fmt == "str":
        return text
    try:
        return json.loads(text)
    except ValueError as error:
        raise MalformedRecordError(f"the {what} is not JSON: {error}") from None


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedRecordError(f"the {what} is not UTF-8 text: {error}") from None


def _json(data: bytes, what: str) -> Any:
    return decode(data, "json", what)


#: The decoder of each format's non-None bytes (None: kept as they are).
DECODERS: dict[str, Callable[[bytes, str], Any] | None] = {
    "str": _text,
    "bytes": None,
    "json": _json,
}


def record_timestamp(message: Any) -> int | None:
    """A message's timestamp in milliseconds (None when the broker gave none)."""
    kind, value = message.timestamp()
    return int(value) if kind and value is not None and value >= 0 else None


Translator = Callable[[KafkaRecord], Any]


class RecordReader:
    """Turns confluent-kafka messages into the stream and values of tuples (see the
    module docstring).

    Picklable when its translator is; used where the spout runs.
    """

    def __init__(
        self,
        fields: Sequence[str],
        key_format: str,
        value_format: str,
        translator: Translator | None,
    ) -> None:
        self.fields = tuple(fields)
        self.key_format = key_format
        self.value_format = value_format
        self.translator = translator
        self.routed = translator is not None and hasattr(translator, "output_fields")
        self.default_fields = self.fields == RECORD_FIELDS
        self._key_decoder = DECODERS.get(key_format)
        self._value_decoder = DECODERS.get(value_format)

    def read(self, message: Any) -> tuple[str, list[Any]] | None:
        """The ``(stream, values)`` of a message; None if the translator skips it.

        Raises:
            MalformedRecordError: see the module docstring.
        """
        key = message.key()
        if key is not None and self._key_decoder is not None:
            key = self._key_decoder(key, "key")
        value = message.value()
        if value is not None and self._value_decoder is not None:
            value = self._value_decoder(value, "value")
        translator = self.translator
        if translator is not None:
            return self._translate(translator, message, key, value)
        if self.default_fields:
            return DEFAULT_STREAM, [
                message.topic(),
                message.partition(),
                message.offset(),
                key,
                value,
            ]
        return DEFAULT_STREAM, [self._field(name, message, key, value) for name in self.fields]

    def _field(self, name: str, message: Any, key: Any, value: Any) -> Any:
        if name == "topic":
            return message.topic()
        if name == "partition":
            return message.partition()
        if name == "offset":
            return message.offset()
        if name == "key":
            return key
        if name == "value":
            return value
        if name == "timestamp":
            return record_timestamp(message)
        if name == "headers":
            return list(message.headers() or [])
        if not isinstance(value, Mapping):
            raise MalformedRecordError(
                f"field {name!r} is read from the value, which is not a JSON object: "
                f"{type(value).__name__}"
            )
        try:
            return value[name]
        except KeyError:
            raise MalformedRecordError(f"the value has no field {name!r}") from None

    def _translate(
        self, translator: Translator, message: Any, key: Any, value: Any
    ) -> tuple[str, list[Any]] | None:
        record = KafkaRecord(
            message.topic(),
            message.partition(),
            message.offset(),
            key,
            value,
            record_timestamp(message),
            tuple(message.headers() or ()),
        )
        try:
            result = translator(record)
        except Exception as error:
            label = getattr(translator, "__name__", type(translator).__name__)
            raise MalformedRecordError(
                f"translator {label} raised {type(error).__name__}: {error}"
            ) from None
        if result is None:
            return None
        if self.routed:
            stream, values = result
            return str(stream), list(values)
        return DEFAULT_STREAM, list(result)

    def output_streams(self) -> dict[str, tuple[str, ...]]:
        """The streams the spout declares for its records: ``output_fields`` of a
        routing translator, else the default stream with ``fields``."""
        if self.routed:
            declared = self.translator.output_fields  # type: ignore[union-attr]
            return {str(stream): tuple(names) for stream, names in declared.items()}
        return {DEFAULT_STREAM: self.fields}


def raw_text(data: bytes | None) -> str | None:
    """A malformed record's key or value as text for the errors stream, so any sink can
    write it (a JSON file, a table): UTF-8, with bytes that are not UTF-8 as ``\\xNN``
    escapes (``b"a\\xff"`` is ``"a\\\\xff"``); None stays None."""
    if data is None:
        return None
    return data.decode("utf-8", errors="backslashreplace")


def error_values(message: Any, error: BaseException) -> list[Any]:
    """The values of a malformed record's tuple on the errors stream."""
    return [
        message.topic(),
        message.partition(),
        message.offset(),
        raw_text(message.key()),
        raw_text(message.value()),
        str(error),
    ]


__all__ = [
    "DECODERS",
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "FORMATS",
    "RECORD_ATTRIBUTES",
    "RECORD_FIELDS",
    "KafkaRecord",
    "MalformedRecordError",
    "RecordReader",
    "Translator",
    "decode",
    "error_values",
    "raw_text",
    "record_timestamp",
]
