"""State shared by every task copy of a test component.

The engines give each task its own copy of a component (``copy.deepcopy``). Test
helpers still need one place where all copies record what happened, readable by the
test: a :class:`SharedRecord` is kept (not copied) when its owner is deep-copied.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any


class SharedRecord:
    """Thread-safe lists shared by every copy of the component holding it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lists: dict[str, list[Any]] = {}
        self.queue: deque[Any] = deque()

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedRecord:
        return self

    def __copy__(self) -> SharedRecord:
        return self

    def append(self, name: str, item: Any) -> None:
        """Append ``item`` to list ``name``."""
        with self._lock:
            self._lists.setdefault(name, []).append(item)

    def get(self, name: str) -> list[Any]:
        """A copy of list ``name`` (empty if nothing was recorded)."""
        with self._lock:
            return list(self._lists.get(name, ()))

    def clear(self) -> None:
        """Forget everything recorded (the queue included)."""
        with self._lock:
            self._lists.clear()
            self.queue.clear()
