"""Where a SparkCluster keeps its checkpoint: the ``checkpoint_dir`` a user gives, as a
path squall's files can be written under.

A plain path and a ``file:`` URI name a directory of the driver's file system (on a
cluster it must be one every executor sees: a shared mount). Other schemes (``hdfs:``,
``s3a:``, ...) are refused with a clear error rather than taken for relative paths.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from squall.model.errors import SquallError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class CheckpointLocationError(SquallError):
    """A checkpoint location squall cannot use; the message says why."""


def local_checkpoint_path(location: str) -> str:
    """The absolute local path of ``location`` (a path, or a ``file:`` URI such as
    ``file:///data/squall`` or ``file:/data/squall``).

    Raises:
        CheckpointLocationError: ``location`` is empty, a ``file:`` URI with a host, or a
            URI of another scheme.
    """
    if not location.strip():
        raise CheckpointLocationError("the checkpoint location is empty")
    match = _SCHEME.match(location)
    if match is None or len(match.group(1)) == 1:  # a path (a drive letter is no scheme)
        return os.path.abspath(location)
    scheme = match.group(1).lower()
    if scheme != "file":
        raise CheckpointLocationError(
            f"checkpoint location {location!r}: the {scheme}: scheme is not supported; use "
            "a path or a file: URI of a directory that the driver and every executor see "
            "(on a cluster, a shared mount)"
        )
    parts = urlsplit(location)
    if parts.netloc not in ("", "localhost"):
        raise CheckpointLocationError(
            f"checkpoint location {location!r}: a file: URI names a local path; its host "
            f"{parts.netloc!r} cannot be used (write file:///path)"
        )
    return os.path.abspath(unquote(parts.path))
