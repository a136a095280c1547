"""Reading and writing squall's files under a checkpoint location: a local directory or
a URI of a file system every node of a cluster reaches.

Every file squall keeps for a topology on Spark (spout logs, task snapshots, set-ups,
markers) goes through these functions, given its full name: a local path (written
with ``os``, atomically, fsynced) or a URI (``s3://``, ``s3a://``, ``gs://``,
``hdfs://`` ...) written through a ``pyarrow.fs`` file system. ``s3a:`` and ``s3n:``,
Hadoop's names, are S3 (``s3:``) for pyarrow, so one URI serves Spark's checkpoint and
squall's files.

A URI's file system is made once per process and scheme and authority, from pyarrow's
defaults: S3 takes its credentials, region and endpoint from the standard AWS settings
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL``, instance roles), HDFS needs ``libhdfs`` and Hadoop's
``CLASSPATH``. Executors need the same settings as the driver (``spark.executorEnv.*``).

Runs wherever squall's files are read or written: the driver, the sources' processes
and executors.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

#: Hadoop's names of schemes pyarrow knows by another.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}
#: File systems whose objects appear whole when written: no temporary file and rename
#: (which they do by copying) is needed for a reader never to see a part.
_OBJECT_STORES = {"s3", "gcs"}

_filesystems: dict[str, tuple[FileSystem, str]] = {}
_filesystems_lock = threading.Lock()


def is_uri(path: str) -> bool:
    """Whether ``path`` is a URI (``scheme://...``) rather than a local path."""
    return "://" in path


def join(base: str, *parts: str) -> str:
    """``base`` with ``parts`` appended, ``/``-separated (a local path or a URI)."""
    if not is_uri(base):
        return os.path.join(base, *parts)
    return "/".join([base.rstrip("/"), *(part.strip("/") for part in parts)])


def basename(path: str) -> str:
    """The last component of ``path``."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def filesystem(uri: str) -> tuple[FileSystem, str]:
    """The ``pyarrow.fs`` file system of ``uri`` (made once per process and authority)
    and the path of ``uri`` on it.

    Raises:
        ValueError, OSError: pyarrow cannot make a file system for the URI (an unknown
            scheme, HDFS without ``libhdfs``); the message is pyarrow's.
    """
    parts = urlsplit(uri)
    scheme = _SCHEME_ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    root = f"{scheme}://{parts.netloc}"
    with _filesystems_lock:
        found = _filesystems.get(root)
        if found is None:
            from pyarrow.fs import FileSystem

            fs, root_path = FileSystem.from_uri(root + "/")
            found = _filesystems[root] = (fs, root_path.rstrip("/"))
    fs, root_path = found
    return fs, f"{root_path}/{parts.path.lstrip('/')}".rstrip("/")


def read_bytes(path: str) -> bytes:
    """The content of file ``path``.

    Raises:
        FileNotFoundError: there is no such file.
    """
    if not is_uri(path):
        with open(path, "rb") as handle:
            return handle.read()
    fs, inner = filesystem(path)
    from pyarrow.fs import FileType

    try:
        with fs.open_input_stream(inner) as stream:
            data: bytes = stream.readall()
    except OSError as error:
        if fs.get_file_info(inner).type == FileType.NotFound:
            raise FileNotFoundError(path) from error
        raise
    return data


def read_text(path: str) -> str:
    """The content of text file ``path`` (UTF-8).

    Raises:
        FileNotFoundError: there is no such file.
    """
    return read_bytes(path).decode("utf-8")


def write_bytes(path: str, payload: bytes, durable: bool = True) -> None:
    """Replace file ``path`` with ``payload``: readers see the old or the new content,
    never a part. ``durable``: on disk before it replaces the old one (a local file; a
    remote file system stores what it acknowledged)."""
    if not is_uri(path):
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(payload)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
        return
    fs, inner = filesystem(path)
    if fs.type_name in _OBJECT_STORES:
        with fs.open_output_stream(inner) as stream:
            stream.write(payload)
        return
    temporary = f"{inner}.{os.getpid()}.{threading.get_ident()}.tmp"
    with fs.open_output_stream(temporary) as stream:
        stream.write(payload)
    fs.move(temporary, inner)


def exists(path: str) -> bool:
    """Whether a file or directory ``path`` exists."""
    if not is_uri(path):
        return os.path.exists(path)
    from pyarrow.fs import FileType

    fs, inner = filesystem(path)
    return bool(fs.get_file_info(inner).type != FileType.NotFound)


def listdir(path: str) -> list[str]:
    """The names in directory ``path`` (none if it does not exist)."""
    if not is_uri(path):
        try:
            return os.listdir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []
    from pyarrow.fs import FileSelector

    fs, inner = filesystem(path)
    infos = fs.get_file_info(FileSelector(inner, allow_not_found=True))
    return [info.base_name for info in infos]


def makedirs(path: str) -> None:
    """Create directory ``path`` and its parents (nothing if it exists)."""
    if not is_uri(path):
        os.makedirs(path, exist_ok=True)
        return
    fs, inner = filesystem(path)
    fs.create_dir(inner, recursive=True)


def remove(path: str) -> None:
    """Remove file ``path`` (nothing if it does not exist)."""
    if not is_uri(path):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    fs, inner = filesystem(path)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(inner)


def remove_tree(path: str) -> None:
    """Remove directory ``path`` and everything under it (nothing if it does not
    exist)."""
    if not is_uri(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    fs, inner = filesystem(path)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(inner)
