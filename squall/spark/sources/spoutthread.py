"""The one thread every call into a core spout's tasks runs on.

A spout's tasks are made (``open``), polled, acked and closed on one thread, as a
Storm spout executor calls its spout, so a spout may keep thread-bound resources (a
SQLite connection, a client that is not thread-safe) from ``open`` on. The source
hands calls to the thread either waiting for their result (:meth:`SpoutThread.call`)
or not (:meth:`SpoutThread.submit`: the poll of the next batch that runs while the
driver runs the current micro-batch).

Runs in the source's driver-side Python process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_Call = tuple[Callable[[], Any], "Future[Any]"] | None


class SpoutThread:
    """A daemon thread running the calls handed to it one at a time, in order.

    Args:
        name: the thread's name (shown in stack dumps).
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, action: Callable[[], T]) -> Future[T]:
        """Run ``action`` on the thread after the calls handed over before it; its
        future holds what it returns or raises."""
        future: Future[T] = Future()
        self._calls.put((action, future))
        return future

    def call(self, action: Callable[[], T]) -> T:
        """Run ``action`` on the thread and wait for it.

        Raises:
            Exception: whatever ``action`` raised.
        """
        if threading.current_thread() is self._thread:
            return action()
        return self.submit(action).result()

    def stop(self) -> None:
        """End the thread once the calls handed over so far have run (without waiting
        for them: a spout stuck in ``next_tuple`` does not hold up its process)."""
        self._calls.put(None)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            action, future = call
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = action()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
