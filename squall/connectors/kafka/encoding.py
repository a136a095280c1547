"""Tuples as Kafka records, for the Kafka sinks (``KafkaBolt`` and ``KafkaState``).

A tuple becomes one record (Storm's ``FieldNameBasedTupleToKafkaMapper`` with a topic
selector):

* **topic**: the ``topic`` option, or what a callable ``topic(tuple)`` returns (Storm's
  ``KafkaTopicSelector``). A selector that returns None skips the tuple: no record is
  written (the sink counts it as skipped). A selector that raises, or returns anything
  but a non-empty string, makes the tuple unwritable.
* **key**: the value of ``key_field`` (None: records have no key): a ``str`` as UTF-8,
  ``bytes`` (or ``bytearray``) as they are, None as no key, anything else as its
  ``str()``.
* **value**: the value of ``value_field``, by ``value_format``: ``"str"``: a ``str`` as
  UTF-8, anything else as its ``str()``; ``"bytes"``: ``bytes`` or ``bytearray`` as
  they are (anything else makes the tuple unwritable); ``"json"``: its JSON text
  (``json.dumps``) as UTF-8 (a value JSON cannot hold makes the tuple unwritable). A
  None value is a record without a value (a tombstone) in every format, as the spouts
  read it back. With ``value_field=None`` (``value_format="json"`` only) the value is
  the whole tuple as a JSON object of its fields, ``{"field": value, ...}`` in the
  tuple's order.

An unwritable tuple (a field it lacks, a value its format refuses, a failing selector)
raises :class:`RecordEncodingError`, whose message says which and why; the sink fails
that tuple alone (the bolt) or the batch (the Trident state).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from squall.connectors.errors import ConnectorError
from squall.connectors.kafka.records import FORMATS
from squall.connectors.options import OptionChecker

#: Selects a tuple's topic; None skips the tuple.
TopicSelector = Callable[[Any], "str | None"]


class RecordEncodingError(ConnectorError, ValueError):
    """A tuple cannot be written as a record: it lacks a field, its value does not fit
    ``value_format``, or the topic selector failed."""


def encode_key(key: Any) -> bytes | None:
    """A key as bytes (see the module docstring)."""
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, bytearray):
        return bytes(key)
    return (key if isinstance(key, str) else str(key)).encode("utf-8")


def encode_value(value: Any, fmt: str, field: str) -> bytes | None:
    """A value as bytes by ``fmt`` (see the module docstring); ``field`` names it in
    errors.

    Raises:
        RecordEncodingError: a non-bytes value with ``"bytes"``, a value JSON cannot
            hold with ``"json"``.
    """
    if value is None:
        return None
    if fmt == "bytes":
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        raise RecordEncodingError(
            f"field {field!r} holds a {type(value).__name__}, not bytes "
            f'(value_format="bytes" writes bytes or bytearray only)'
        )
    if fmt == "json":
        try:
            text = json.dumps(value)
        except (TypeError, ValueError) as error:
            raise RecordEncodingError(
                f'field {field!r} cannot be written as JSON (value_format="json"): {error}'
            ) from None
        return text.encode("utf-8")
    return (value if isinstance(value, str) else str(value)).encode("utf-8")


class RecordEncoder:
    """Turns tuples (core ``Tuple`` or ``TridentTuple``: anything read by field name
    with ``tup[name]``) into ``(topic, key, value)``.

    Picklable when its selector is; used where the sink runs.
    """

    def __init__(
        self,
        topic: str | TopicSelector,
        key_field: str | None,
        value_field: str | None,
        value_format: str,
    ) -> None:
        self.topic = topic
        self.key_field = key_field
        self.value_field = value_field
        self.value_format = value_format

    def select_topic(self, tup: Any) -> str | None:
        """The tuple's topic; None if the selector skips it.

        Raises:
            RecordEncodingError: the selector raised, or returned no topic name.
        """
        topic = self.topic
        if isinstance(topic, str):
            return topic
        try:
            chosen = topic(tup)
        except Exception as error:
            raise RecordEncodingError(
                f"topic selector {selector_name(topic)} raised {type(error).__name__}: {error}"
            ) from None
        if chosen is None or (isinstance(chosen, str) and chosen):
            return chosen
        raise RecordEncodingError(
            f"topic selector {selector_name(topic)} returned {chosen!r}, "
            "not a topic name (or None to skip the tuple)"
        )

    def encode(self, tup: Any) -> tuple[str | None, bytes | None, bytes | None]:
        """``(topic, key, value)`` of the tuple; topic None: skip it (no key, no value
        are read then).

        Raises:
            RecordEncodingError: see the module docstring.
        """
        topic = self.select_topic(tup)
        if topic is None:
            return None, None, None
        key = None if self.key_field is None else encode_key(self._field(tup, self.key_field))
        if self.value_field is None:
            whole = dict(zip(tup.fields, tup.values, strict=True))
            return topic, key, encode_value(whole, "json", "(the whole tuple)")
        value = encode_value(
            self._field(tup, self.value_field), self.value_format, self.value_field
        )
        return topic, key, value

    @staticmethod
    def _field(tup: Any, name: str) -> Any:
        try:
            return tup[name]
        except (KeyError, IndexError, ValueError):
            fields = list(getattr(tup, "fields", []) or [])
            raise RecordEncodingError(
                f"the tuple has no field {name!r} (its fields: {fields})"
            ) from None


def selector_name(selector: Any) -> str:
    """How errors name a topic selector."""
    return str(getattr(selector, "__name__", type(selector).__name__))


def check_encoding(
    checker: OptionChecker, topic: Any, key_field: Any, value_field: Any, value_format: Any
) -> None:
    """Check the options of a tuple's record; raise the checker's error at the first
    wrong one."""
    if not callable(topic):
        checker.text("topic", topic)
    if key_field is not None:
        checker.text("key_field", key_field)
    checker.choice("value_format", value_format, FORMATS)
    if value_field is None:
        if value_format != "json":
            raise checker.fail(
                "value_field=None writes the whole tuple as a JSON object: it needs "
                f'value_format="json", got {value_format!r}'
            )
    else:
        checker.text("value_field", value_field)


__all__ = [
    "RecordEncoder",
    "RecordEncodingError",
    "TopicSelector",
    "check_encoding",
    "encode_key",
    "encode_value",
    "selector_name",
]
