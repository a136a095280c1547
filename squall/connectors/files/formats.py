"""Record formats of the file connectors: how a line of a file becomes a tuple's values
(:class:`LineParser`) and how a tuple becomes a line (:class:`LineEncoder`).

* ``lines``: a line is one value, its text (without the line end).
* ``jsonl``: a line is a JSON object; with ``fields`` the tuple holds those keys' values
  (a missing key makes the record malformed), without them one value, the object.
* ``csv``: a line is a CSV row; with ``header`` (the default) the file's first line
  names the columns and ``fields`` picks columns by name (without ``fields``, one value:
  the row as a dict of column -> text); without a header ``fields`` names the columns
  in order. A record is one line: a quoted value cannot hold a line end.

Lines end with ``\\n`` (a ``\\r`` before it is dropped). Blank lines (only white space)
of ``jsonl`` and ``csv`` files are skipped; of ``lines`` files they are records.

Everything here is pure (no I/O): it runs wherever a connector reads or writes.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

FORMATS = ("lines", "jsonl", "csv")
#: The single field of a ``lines`` record when no field name is given.
LINE_FIELD = "line"
#: The single field of a ``jsonl`` or ``csv`` record when no fields are given.
RECORD_FIELD = "record"
#: File name extension of each format (the sink bolt's files).
EXTENSIONS = {"lines": "txt", "jsonl": "jsonl", "csv": "csv"}


class MalformedRecord(ValueError):
    """A line that is not a record of the format; the message says why."""


def output_fields(format_name: str, fields: Sequence[str] | None) -> tuple[str, ...]:
    """The fields of the records a format reads: ``fields`` if given, else ``("line",)``
    for ``lines`` and ``("record",)`` for ``jsonl`` and ``csv``."""
    if fields:
        return tuple(fields)
    return (LINE_FIELD,) if format_name == "lines" else (RECORD_FIELD,)


def check_fields(format_name: str, fields: Any) -> str | None:
    """Why ``fields`` cannot go with ``format_name`` (None if they can)."""
    if fields is None:
        return None
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        return f"fields must be a list of names, got {fields!r}"
    if not fields or not all(isinstance(name, str) and name for name in fields):
        return f"fields must be non-empty names, got {list(fields)!r}"
    if len(set(fields)) != len(fields):
        return f"fields must be distinct, got {list(fields)!r}"
    if format_name == "lines" and len(fields) != 1:
        return f"the lines format has one field, got {list(fields)!r}"
    return None


class LineParser:
    """Turns the lines of one file into records (make one per file: a CSV header is
    per file).

    Args:
        format_name: ``lines``, ``jsonl`` or ``csv``.
        fields: the record's fields (see the module docstring), or None.
        header: CSV only: the first line names the columns.
        delimiter: CSV only: the column separator.
        quotechar: CSV only: the quote character.
        encoding: the files' text encoding.
    """

    def __init__(
        self,
        format_name: str,
        fields: Sequence[str] | None = None,
        header: bool = True,
        delimiter: str = ",",
        quotechar: str = '"',
        encoding: str = "utf-8",
    ) -> None:
        self.format = format_name
        self.fields = tuple(fields) if fields else None
        self.header = header and format_name == "csv"
        self.delimiter = delimiter
        self.quotechar = quotechar
        self.encoding = encoding
        #: The CSV header's column names, once read.
        self.columns: list[str] | None = None

    def read_header(self, raw: bytes) -> None:
        """Take the column names from the header line.

        Raises:
            MalformedRecord: the header is not a CSV row.
        """
        self.columns = self._csv_row(self._text(raw))

    def skips(self, raw: bytes) -> bool:
        """Whether the line is skipped (a blank line of a ``jsonl`` or ``csv`` file)."""
        return self.format != "lines" and not raw.strip()

    def parse(self, raw: bytes) -> list[Any]:
        """The record's values.

        Raises:
            MalformedRecord: the line is not a record of the format.
        """
        text = self._text(raw)
        if self.format == "lines":
            return [text]
        if self.format == "jsonl":
            return self._json(text)
        return self._csv(text)

    def _text(self, raw: bytes) -> str:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            return raw.decode(self.encoding)
        except UnicodeDecodeError as error:
            raise MalformedRecord(f"not {self.encoding} text ({error.reason})") from None

    def _json(self, text: str) -> list[Any]:
        try:
            value = json.loads(text)
        except ValueError as error:
            raise MalformedRecord(f"invalid JSON: {error}") from None
        if not isinstance(value, dict):
            raise MalformedRecord(f"not a JSON object but {type(value).__name__}")
        if self.fields is None:
            return [value]
        missing = [name for name in self.fields if name not in value]
        if missing:
            raise MalformedRecord(f"missing field(s) {missing}")
        return [value[name] for name in self.fields]

    def _csv_row(self, text: str) -> list[str]:
        try:
            return next(
                csv.reader((text,), delimiter=self.delimiter, quotechar=self.quotechar, strict=True)
            )
        except (csv.Error, StopIteration) as error:
            raise MalformedRecord(f"invalid CSV: {error}") from None

    def _csv(self, text: str) -> list[Any]:
        row = self._csv_row(text)
        columns = self.columns if self.header else self.fields
        if columns is None:  # a header that was malformed itself
            raise MalformedRecord("the file's CSV header is malformed")
        if len(row) != len(columns):
            raise MalformedRecord(f"{len(row)} columns, expected {len(columns)}")
        if not self.header:
            return row
        record = dict(zip(columns, row, strict=True))
        if self.fields is None:
            return [record]
        missing = [name for name in self.fields if name not in record]
        if missing:
            raise MalformedRecord(f"the header has no column(s) {missing}")
        return [record[name] for name in self.fields]


class LineEncoder:
    """Turns tuples into lines of a format (the sink bolt's side).

    ``lines`` writes one value's ``str``; ``jsonl`` one JSON object of the fields;
    ``csv`` one row (the header, the field names, is :meth:`header`).
    """

    def __init__(
        self,
        format_name: str,
        delimiter: str = ",",
        quotechar: str = '"',
        encoding: str = "utf-8",
    ) -> None:
        self.format = format_name
        self.delimiter = delimiter
        self.quotechar = quotechar
        self.encoding = encoding

    def header(self, fields: Sequence[str]) -> bytes:
        """A CSV file's first line: the field names."""
        return self._csv_line(list(fields))

    def encode(self, fields: Sequence[str], values: Sequence[Any]) -> bytes:
        """One line, with its ``\\n``.

        Raises:
            ValueError: the values cannot be written in this format (a ``lines`` value
                with a line end or several fields; a value JSON cannot encode).
        """
        if self.format == "jsonl":
            try:
                text = json.dumps(
                    dict(zip(fields, values, strict=True)),
                    ensure_ascii=False,
                    separators=(",", ":"),
                )
            except TypeError as error:
                raise ValueError(f"cannot write as JSON: {error}") from None
            return (text + "\n").encode(self.encoding)
        if self.format == "csv":
            return self._csv_line(list(values))
        if len(values) != 1:
            raise ValueError(
                f"the lines format writes one field, the tuple has {list(fields)}: "
                "choose one with fields=[...]"
            )
        text = str(values[0])
        if "\n" in text or "\r" in text:
            raise ValueError("a value of the lines format cannot hold a line end")
        return (text + "\n").encode(self.encoding)

    def _csv_line(self, row: list[Any]) -> bytes:
        buffer = io.StringIO()
        csv.writer(
            buffer, delimiter=self.delimiter, quotechar=self.quotechar, lineterminator="\n"
        ).writerow(row)
        text = buffer.getvalue()
        if text.count("\n") != 1:
            raise ValueError("a CSV value cannot hold a line end (a record is one line)")
        return text.encode(self.encoding)
