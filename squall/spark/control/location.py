"""Where a SparkCluster keeps its checkpoint: the ``checkpoint_dir`` a user gives, as the
name squall's files and Spark's checkpoint are written under.

A plain path and a ``file:`` URI name a directory of the driver's file system (on a
cluster it must be a shared mount every node sees). A URI of another scheme
(``hdfs://``, ``s3a://``, ``gs://`` ...) names a directory of that file system: Spark
writes its checkpoint there through Hadoop, squall its own files through ``pyarrow.fs``
(see ``control.storage``). A location squall cannot use is refused with a clear error
before anything is written.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from squall.model.errors import SquallError
from squall.spark.control import storage

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class CheckpointLocationError(SquallError):
    """A checkpoint location squall cannot use; the message says why."""


def checkpoint_location(location: str) -> str:
    """``location`` as squall names it: the absolute local path of a path or a ``file:``
    URI (``file:///data/squall``, ``file:/data/squall``), or a URI of another file
    system (``s3a://bucket/squall``) without a trailing ``/``.

    Raises:
        CheckpointLocationError: ``location`` is empty, a ``file:`` URI with a host, a
            URI without ``//`` or with a query, or a URI whose file system
            ``pyarrow.fs`` cannot open here (an unknown scheme, HDFS without
            ``libhdfs``).
    """
    if not location.strip():
        raise CheckpointLocationError("the checkpoint location is empty")
    match = _SCHEME.match(location)
    if match is None or len(match.group(1)) == 1:  # a path (a drive letter is no scheme)
        return os.path.abspath(location)
    scheme = match.group(1).lower()
    parts = urlsplit(location)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise CheckpointLocationError(
                f"checkpoint location {location!r}: a file: URI names a local path; its "
                f"host {parts.netloc!r} cannot be used (write file:///path)"
            )
        return os.path.abspath(unquote(parts.path))
    if not storage.is_uri(location) or parts.query or parts.fragment:
        raise CheckpointLocationError(
            f"checkpoint location {location!r}: write a URI as {scheme}://authority/path, "
            "without a query (a file system's settings come from its usual configuration)"
        )
    try:
        storage.filesystem(location)
    except Exception as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise CheckpointLocationError(
            f"checkpoint location {location!r}: squall cannot open the {scheme}: file "
            f"system here ({reason})"
        ) from error
    return location.rstrip("/")
