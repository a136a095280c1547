"""The record options every file connector shares (format, fields, CSV dialect,
encoding): kept, checked at submit and turned into a parser or an encoder.

Runs where the connector runs: the checks where the topology is submitted, the parser
and encoder in the task that reads or writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squall.connectors.files.checks import existing_directory, record_options
from squall.connectors.files.formats import LineEncoder, LineParser
from squall.connectors.options import OptionChecker


class RecordOptions:
    """A mixin holding a connector's record options (see
    :mod:`squall.connectors.files.formats`)."""

    format: str
    fields: tuple[str, ...] | str | None
    header: bool
    delimiter: str
    quotechar: str
    encoding: str

    def keep_record_options(
        self,
        format: str,
        fields: Sequence[str] | None,
        header: bool,
        delimiter: str,
        quotechar: str,
        encoding: str,
    ) -> None:
        """Keep the options as given (a list of fields as a tuple); they are checked at
        submit."""
        self.format = format
        self.fields = fields if fields is None or isinstance(fields, str) else tuple(fields)
        self.header = header
        self.delimiter = delimiter
        self.quotechar = quotechar
        self.encoding = encoding

    def check_record_options(self, checker: OptionChecker) -> None:
        """The format, fields, CSV dialect and encoding (a writer's checks)."""
        record_options(
            checker, self.format, self.fields, self.delimiter, self.quotechar, self.encoding
        )

    def check_reader_options(self, checker: OptionChecker, directory: Any, pattern: Any) -> None:
        """A reader's checks: an existing ``directory``, a ``pattern``, the record
        options, and fields naming the columns of a CSV file without header."""
        existing_directory(checker, "directory", directory)
        checker.text("pattern", pattern)
        self.check_record_options(checker)
        if self.format == "csv" and not self.header and not self.fields:
            raise checker.fail("a CSV file without header needs fields=[...] naming its columns")

    def line_parser(self) -> LineParser:
        """A new parser of this connector's records (one per file: it keeps the file's
        CSV header)."""
        return LineParser(
            self.format, self.fields, self.header, self.delimiter, self.quotechar, self.encoding
        )

    def line_encoder(self) -> LineEncoder:
        """The encoder of this connector's records."""
        return LineEncoder(self.format, self.delimiter, self.quotechar, self.encoding)
