"""The coordination store a transactional topology's emitters use on Spark: one file per
key under the source's directory, so it lives wherever the checkpoint does (a local
directory, a shared mount, HDFS, S3) and emitters on any executor share it.

Each emitter task writes keys of its own (its partitions' metadata); a key's file is
replaced whole (see ``control.storage.write_bytes``), so a reader sees the old or the
new value.

Runs on executors (the emitters' tasks).
"""

from __future__ import annotations

import pickle
from typing import Any
from urllib.parse import quote, unquote

import cloudpickle

from squall.runtime.coordination import CoordinationStore
from squall.spark.control import storage
from squall.spark.control.storage import join


class FileCoordinationStore(CoordinationStore):
    """Values in ``<directory>/<namespace>/<key>`` (names percent-encoded), pickled."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def _namespace(self, namespace: str) -> str:
        return join(self.directory, quote(namespace, safe=""))

    def _path(self, namespace: str, key: str) -> str:
        return join(self._namespace(namespace), quote(key, safe=""))

    def get(self, namespace: str, key: str, default: Any = None) -> Any:
        try:
            payload = storage.read_bytes(self._path(namespace, key))
        except FileNotFoundError:
            return default
        return pickle.loads(payload)

    def put(self, namespace: str, key: str, value: Any) -> None:
        # cloudpickle: metadata classes of user code pickled by value are not importable
        # by name where they are read.
        storage.makedirs(self._namespace(namespace))
        storage.write_bytes(self._path(namespace, key), cloudpickle.dumps(value))

    def delete(self, namespace: str, key: str) -> None:
        storage.remove(self._path(namespace, key))

    def keys(self, namespace: str) -> list[str]:
        names = storage.listdir(self._namespace(namespace))
        return sorted(unquote(name) for name in names if not name.endswith(".tmp"))
