"""How the local engine keeps CPython's cyclic garbage collector off the latency path.

A full collection walks every object the collector tracks. In a worker, most of them
were made once, at start-up: imported modules (squall's own, the user's libraries), the
topology, the tasks. Measured on the word count of ``bench/latency.py`` on one worker
thread: a full collection took about 11 ms, a dozen ran in ten seconds, and each one
held every tuple in flight for its length (p99 complete latency 8.8 ms at 70% of
saturation; 2.6 ms with the start-up heap frozen). ``gc.freeze`` moves every object
alive now into a generation the collector never walks, so a full collection walks only
what the tasks made since.

Frozen objects are still freed by reference counting; only reference cycles among them
are never collected while they stay frozen. So:

* a worker process (the engine owns it) freezes once its tasks are open, by default;
* in the submitting process (worker threads), the heap is the user's: the engine
  freezes it only when ``topology.worker.gc.freeze`` is true. Each such topology holds
  the heap frozen from its start to its kill; a kill thaws it (what the topology left
  becomes collectable again) and, while another such topology runs, collects and
  freezes anew.

``topology.worker.gc.freeze``: true, false, or unset (the default: true in worker
processes, false for worker threads).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from squall.model.config import Config
from squall.model.errors import InvalidTopologyError

#: The configuration key.
GC_FREEZE_KEY = Config.TOPOLOGY_WORKER_GC_FREEZE

_lock = threading.Lock()
#: Running topologies of this process holding its heap frozen.
_holders: set[int] = set()


def freeze_wanted(conf: dict[str, Any], in_process_worker: bool) -> bool:
    """Whether the engine freezes the heap for a topology with ``conf``:
    ``topology.worker.gc.freeze`` when set, else ``in_process_worker`` (a worker
    process, owned by the engine). Pure; runs wherever it is called.

    Raises:
        InvalidTopologyError: the key holds something other than true, false or None.
    """
    value = conf.get(GC_FREEZE_KEY)
    if value is None:
        return in_process_worker
    if not isinstance(value, bool):
        raise InvalidTopologyError(
            f"{GC_FREEZE_KEY} must be true or false (or unset), not {value!r}"
        )
    return value


def freeze_now() -> None:
    """Collect what is garbage now, then freeze every object left alive.

    Runs on the calling thread; a full collection, a few milliseconds on a heap of
    start-up objects."""
    gc.collect()
    gc.freeze()


def hold(topology: object) -> None:
    """``topology`` (a running topology of this process) starts with the heap frozen
    for it: freeze now, the objects its tasks made while opening included. Called on
    the submitting thread before the workers run."""
    with _lock:
        _holders.add(id(topology))
        freeze_now()


def release(topology: object) -> None:
    """``topology`` (which called :func:`hold`) ended: thaw the heap, so what it left
    is collectable again, and freeze it anew while other holders run. Does nothing for
    a topology that did not hold it."""
    with _lock:
        if id(topology) not in _holders:
            return
        _holders.discard(id(topology))
        gc.unfreeze()
        if _holders:
            freeze_now()


__all__ = ["GC_FREEZE_KEY", "freeze_now", "freeze_wanted", "hold", "release"]
