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

Young collections are the other cost: CPython collects its youngest generation after
every 700 new container objects, and a stream makes them fast (a tuple and its values
list per emit), so a collection ran every few hundred tuples and walked the tuples in
flight each time: 6-7% of a word count's instructions.
``topology.worker.gc.threshold`` (default 10000; 0 leaves Python's setting alone) is
the young-generation threshold while a worker runs: set once in a worker process;
raised (never lowered) in the submitting process from a topology's start to its kill,
and put back to what it was when the last such topology ends. Only cyclic garbage
waits longer to be freed; everything else is freed by reference counting as before.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from squall.model.config import Config
from squall.model.errors import InvalidTopologyError

#: The configuration keys.
GC_FREEZE_KEY = Config.TOPOLOGY_WORKER_GC_FREEZE
GC_THRESHOLD_KEY = Config.TOPOLOGY_WORKER_GC_THRESHOLD
#: ``topology.worker.gc.threshold`` when unset.
DEFAULT_YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
#: Running topologies of this process holding its heap frozen.
_holders: set[int] = set()
#: Running topologies of this process holding the young threshold raised, with their
#: thresholds; and the threshold found before the first of them.
_raisers: dict[int, int] = {}
_threshold_before: list[int] = []


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


def young_threshold_wanted(conf: dict[str, Any]) -> int:
    """The young-generation threshold for a topology with ``conf``:
    ``topology.worker.gc.threshold`` when set, else :data:`DEFAULT_YOUNG_THRESHOLD`;
    0 for "leave Python's setting alone". Pure; runs wherever it is called.

    Raises:
        InvalidTopologyError: the key holds something other than an integer >= 0.
    """
    value = conf.get(GC_THRESHOLD_KEY)
    if value is None:
        return DEFAULT_YOUNG_THRESHOLD
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidTopologyError(
            f"{GC_THRESHOLD_KEY} must be an integer >= 0 (0: Python's own), not {value!r}"
        )
    return value


def set_young_threshold(value: int) -> None:
    """Make ``value`` the young-generation threshold of this process (0: leave it).
    For a worker process, whose heap is the engine's; runs on the calling thread."""
    if value > 0:
        gc.set_threshold(value, *gc.get_threshold()[1:])


def raise_threshold(topology: object, value: int) -> None:
    """``topology`` (a running topology of this process) runs with the young threshold
    at least ``value`` (0: does nothing). Called on the submitting thread before the
    workers run; undone by :func:`restore_threshold`."""
    if value <= 0:
        return
    with _lock:
        if not _raisers:
            _threshold_before[:] = [gc.get_threshold()[0]]
        _raisers[id(topology)] = value
        _apply_threshold()


def restore_threshold(topology: object) -> None:
    """``topology`` (which called :func:`raise_threshold`) ended: the threshold is the
    highest of the topologies still running, or what it was before the first of them.
    Does nothing for a topology that did not raise it."""
    with _lock:
        if _raisers.pop(id(topology), None) is None:
            return
        _apply_threshold()


def _apply_threshold() -> None:
    before = _threshold_before[0] if _threshold_before else gc.get_threshold()[0]
    gc.set_threshold(max([before, *_raisers.values()]), *gc.get_threshold()[1:])


__all__ = [
    "DEFAULT_YOUNG_THRESHOLD",
    "GC_FREEZE_KEY",
    "GC_THRESHOLD_KEY",
    "freeze_now",
    "freeze_wanted",
    "hold",
    "raise_threshold",
    "release",
    "restore_threshold",
    "set_young_threshold",
    "young_threshold_wanted",
]
