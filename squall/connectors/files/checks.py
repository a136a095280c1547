"""Submit-time checks of the file connectors' options (see
:class:`~squall.connectors.options.OptionChecker`)."""

from __future__ import annotations

import codecs
import os
from typing import Any

from squall.connectors.files.formats import FORMATS, check_fields
from squall.connectors.options import OptionChecker


def path_text(value: Any) -> Any:
    """``value`` as a string if it is a path (``str`` or ``os.PathLike``), else as is
    (the checks then report it)."""
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else value


def existing_directory(checker: OptionChecker, name: str, value: Any) -> str:
    """``value`` if it names an existing directory."""
    path = checker.text(name, value)
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "does not exist"
        raise checker.fail(f"{name} {path!r} {what}")
    return path


def not_a_file(checker: OptionChecker, name: str, value: Any) -> str:
    """``value`` if it names a directory or nothing yet (it is made when needed)."""
    path = checker.text(name, value)
    if os.path.exists(path) and not os.path.isdir(path):
        raise checker.fail(f"{name} {path!r} is not a directory")
    return path


def record_options(
    checker: OptionChecker,
    format_name: Any,
    fields: Any,
    delimiter: Any,
    quotechar: Any,
    encoding: Any,
) -> None:
    """The format, fields, CSV and encoding options a reader or writer shares."""
    checker.choice("format", format_name, FORMATS)
    problem = check_fields(format_name, fields)
    if problem is not None:
        raise checker.fail(problem)
    for name, value in (("delimiter", delimiter), ("quotechar", quotechar)):
        if not isinstance(value, str) or len(value) != 1 or value in "\r\n":
            raise checker.fail(f"{name} must be one character (not a line end), got {value!r}")
    if delimiter == quotechar:
        raise checker.fail(f"delimiter and quotechar must differ, both are {delimiter!r}")
    try:
        codecs.lookup(checker.text("encoding", encoding))
    except LookupError:
        raise checker.fail(f"unknown encoding {encoding!r}") from None
