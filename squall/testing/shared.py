"""State shared by every task copy of a test component, in any process.

The engines give each task its own copy of a component: ``copy.deepcopy`` on the local
engine, pickling to other processes on the Spark engine. Test helpers still need one
place where all copies record what happened, readable by the test: a
:class:`SharedRecord`.

Within one process, a record is kept (not copied) when its owner is deep-copied, and its
lists live in memory. Once a record is pickled, it moves to a directory of append-only
files, and from then on every copy (the original, and each unpickled copy in any
process on this machine) appends to and reads from those files.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import pickle
import shutil
import struct
import tempfile
import threading
from collections import deque
from typing import Any

from squall.runtime.codepickle import dumps_value

#: Each entry of a record file: its length (8 bytes, big-endian), then the pickle.
_HEADER = struct.Struct(">Q")
_SUFFIX = ".record"
#: The shared queue's file, and the file of its read offset (the bytes taken): names no
#: list of a user has (they cannot hold a NUL).
_QUEUE, _TAKEN = "\0queue", "\0taken"
#: A read offset: 8 bytes, big-endian (an empty file: 0).
_OFFSET = struct.Struct(">Q")

#: Record directories -> the id of the process that created them (which removes them
#: when it exits; a forked child inherits the entries of its parent, not the duty).
_OWNED: dict[str, int] = {}


def _remove_owned() -> None:
    pid = os.getpid()
    for directory, owner in list(_OWNED.items()):
        if owner == pid:
            shutil.rmtree(directory, ignore_errors=True)
            del _OWNED[directory]


atexit.register(_remove_owned)


class SharedRecord:
    """Lists of items, one per name, shared by every copy of the component holding it.

    Where it runs and what is guaranteed:

    * Never pickled (the local engine): the lists are in this process's memory, behind a
      lock. ``copy.copy`` and ``copy.deepcopy`` return the record itself, so every task
      copy appends to the same lists. Appends and reads are cheap.
    * Pickled (the Spark engine pickles components to its Python workers, and the
      driver runs some segments in its own process): the first pickling moves the
      lists into a new directory (``tempfile.mkdtemp``, prefix ``squall-record-``),
      one append-only file per name. From then on the original and every unpickled
      copy, in any process of this machine, append to and read from those files.
      Each append is one length-prefixed pickle written in one ``write`` under an
      exclusive ``flock``, so appends from concurrent processes never interleave.
      The directory is removed when the process that created it exits.

    In both cases ``get`` returns a list's items in append order (the order in which
    appends completed, over all copies and processes), and an item appended before a
    ``get`` starts is in its result. Items must be picklable once the record is
    file-backed, and ``get`` then returns unpickled copies of them; in memory it
    returns a new list of the same items.

    The record also holds one queue that every copy shares, in any process
    (:meth:`put`, :meth:`take`, :meth:`queued`; the tuples a
    :class:`~squall.testing.FeederSpout` is fed): in memory while the record is, then
    one append-only file, each item taken once, by whichever copy takes first (under
    the file's ``flock``), in the order put. Items put before the record moved to files
    move with it.

    Attributes:
        queue: a deque shared by the copies in one process only. It is not file-backed:
            an unpickled copy starts with an empty deque of its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists: dict[str, list[Any]] = {}
        self._directory: str | None = None
        self._queued: deque[Any] = deque()
        self.queue: deque[Any] = deque()

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedRecord:
        return self

    def __copy__(self) -> SharedRecord:
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Move the record to files (the first time only, in the pickling process);
        the pickle holds only the directory's path."""
        with self._lock:
            if self._directory is None:
                directory = tempfile.mkdtemp(prefix="squall-record-")
                _OWNED[directory] = os.getpid()
                for name, items in self._lists.items():
                    for item in items:
                        _append_file(self._path_in(directory, name), item)
                for item in self._queued:
                    _append_file(self._path_in(directory, _QUEUE), item)
                self._lists.clear()
                self._queued.clear()
                self._directory = directory
            return {"directory": self._directory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._lists = {}
        self._directory = state["directory"]
        self._queued = deque()
        self.queue = deque()

    @property
    def directory(self) -> str | None:
        """The directory of the record's files, or None while it is in memory."""
        return self._directory

    @staticmethod
    def _path_in(directory: str, name: str) -> str:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
        return os.path.join(directory, digest + _SUFFIX)

    def append(self, name: str, item: Any) -> None:
        """Append ``item`` to list ``name``."""
        with self._lock:
            directory = self._directory
            if directory is None:
                self._lists.setdefault(name, []).append(item)
                return
        _append_file(self._path_in(directory, name), item)

    def get(self, name: str) -> list[Any]:
        """A copy of list ``name`` (empty if nothing was recorded), in append order."""
        with self._lock:
            directory = self._directory
            if directory is None:
                return list(self._lists.get(name, ()))
        return _read_file(self._path_in(directory, name))

    def put(self, item: Any) -> None:
        """Add ``item`` to the end of the shared queue (any copy, any process)."""
        with self._lock:
            directory = self._directory
            if directory is None:
                self._queued.append(item)
                return
        _append_file(self._path_in(directory, _QUEUE), item)

    def take(self) -> Any:
        """Remove and return the first item of the shared queue; every item is taken
        once, by one copy.

        Raises:
            IndexError: the queue is empty.
        """
        with self._lock:
            directory = self._directory
            if directory is None:
                return self._queued.popleft()
        return _take_file(self._path_in(directory, _QUEUE), self._path_in(directory, _TAKEN))

    def queued(self) -> int:
        """How many items the shared queue holds now."""
        with self._lock:
            directory = self._directory
            if directory is None:
                return len(self._queued)
        return _count_file(self._path_in(directory, _QUEUE), self._path_in(directory, _TAKEN))

    def clear(self) -> None:
        """Forget everything recorded: every list and the shared queue (in memory or in
        the files, for every copy) and this process's ``queue``."""
        with self._lock:
            self._lists.clear()
            self._queued.clear()
            self.queue.clear()
            directory = self._directory
        if directory is None:
            return
        for entry in os.listdir(directory):
            if entry.endswith(_SUFFIX):
                _truncate_file(os.path.join(directory, entry))


def _append_file(path: str, item: Any) -> None:
    """Append one entry to ``path`` in one write, under an exclusive lock (the item
    pickled as tuple values are, so objects of the user's classes load in any process)."""
    payload = dumps_value(item)
    data = _HEADER.pack(len(payload)) + payload
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)  # releases the lock


def _read_file(path: str) -> list[Any]:
    """Every entry of ``path``, in order (none if the file does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    chunks: list[bytes] = []
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    items: list[Any] = []
    position = 0
    while position + _HEADER.size <= len(data):
        (size,) = _HEADER.unpack_from(data, position)
        start = position + _HEADER.size
        if start + size > len(data):
            break
        items.append(pickle.loads(data[start : start + size]))
        position = start + size
    return items


def _entry_at(fd: int, offset: int, size: int) -> tuple[bytes, int] | None:
    """The pickle of the entry at ``offset`` of an open record file of ``size`` bytes
    and the offset after it, or None if no whole entry starts there."""
    if offset + _HEADER.size > size:
        return None
    (length,) = _HEADER.unpack(os.pread(fd, _HEADER.size, offset))
    start = offset + _HEADER.size
    if start + length > size:
        return None
    return os.pread(fd, length, start), start + length


def _read_offset(path: str) -> int:
    try:
        with open(path, "rb") as file:
            data = file.read(_OFFSET.size)
    except FileNotFoundError:
        return 0
    return _OFFSET.unpack(data)[0] if len(data) == _OFFSET.size else 0


def _take_file(path: str, taken: str) -> Any:
    """Take the first entry of queue file ``path`` not taken yet (``taken`` holds the
    bytes taken so far), under an exclusive lock of ``path``.

    Raises:
        IndexError: every entry is taken.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entry = _entry_at(fd, _read_offset(taken), os.fstat(fd).st_size)
        if entry is None:
            raise IndexError("take from an empty queue")
        payload, after = entry
        offset_fd = os.open(taken, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(offset_fd, _OFFSET.pack(after), 0)
        finally:
            os.close(offset_fd)
    finally:
        os.close(fd)  # releases the lock
    return pickle.loads(payload)


def _count_file(path: str, taken: str) -> int:
    """The entries of queue file ``path`` not taken yet."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    count = 0
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size, offset = os.fstat(fd).st_size, _read_offset(taken)
        while (entry := _entry_at(fd, offset, size)) is not None:
            count, offset = count + 1, entry[1]
    finally:
        os.close(fd)
    return count


def _truncate_file(path: str) -> None:
    """Empty ``path`` under an exclusive lock (kept, so open writers stay in sync)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
