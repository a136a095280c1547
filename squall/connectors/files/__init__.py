"""Directories of files as sources and sinks, on both engines.

* :class:`FileSpout`: a reliable spout reading each file of a directory once, line by
  line (at-least-once; progress kept in the directory).
* :class:`FileBolt`: a sink appending tuples to rotating files, acking after ``fsync``
  (at-least-once).
* :class:`FileTridentSpout`: the files of a directory as the partitions of a
  transactional Trident spout (exactly-once into transactional or opaque state).

Records are lines in one of three formats, ``lines``, ``jsonl`` and ``csv`` (see
:mod:`squall.connectors.files.formats`).
"""

from squall.connectors.files.bolt import FileBolt
from squall.connectors.files.formats import FORMATS, MalformedRecord
from squall.connectors.files.progress import PROGRESS_DIRECTORY, ProgressRecord, ProgressStore
from squall.connectors.files.spout import ERROR_FIELDS, ERRORS_STREAM, FileSpout
from squall.connectors.files.trident import FileTridentSpout

__all__ = [
    "ERRORS_STREAM",
    "ERROR_FIELDS",
    "FORMATS",
    "PROGRESS_DIRECTORY",
    "FileBolt",
    "FileSpout",
    "FileTridentSpout",
    "MalformedRecord",
    "ProgressRecord",
    "ProgressStore",
]
