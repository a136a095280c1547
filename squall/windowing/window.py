"""``TupleWindow``: the tuples a windowed bolt's ``execute`` receives."""

from __future__ import annotations

from collections.abc import Iterator

from squall.model.tuple import Tuple


class TupleWindow:
    """One activation of a window.

    ``get()`` is every tuple in the window (oldest timestamp first), ``get_new()`` the
    ones that were not in the previous activation, ``get_expired()`` the ones that left
    the window since the previous activation. ``start_timestamp``/``end_timestamp`` are
    the window's bounds in ms (``start < ts <= end``) for time-length windows, ``None``
    for count windows.
    """

    __slots__ = ("_expired", "_new", "_previous", "_tuples", "end_timestamp", "start_timestamp")

    def __init__(
        self,
        tuples: list[Tuple],
        new: list[Tuple] | None,
        expired: list[Tuple],
        start_timestamp: int | None = None,
        end_timestamp: int | None = None,
        previous: list[Tuple] | None = None,
    ) -> None:
        self._tuples = tuples
        #: Computed on first use from ``previous`` (the last window) when not given.
        self._new = new
        self._previous = previous
        self._expired = expired
        self.start_timestamp = start_timestamp
        self.end_timestamp = end_timestamp

    def get(self) -> list[Tuple]:
        """The tuples in the window."""
        return self._tuples

    def get_new(self) -> list[Tuple]:
        """Tuples in this window that were not in the previous one."""
        if self._new is None:
            before = {id(t) for t in self._previous or ()}
            self._new = [t for t in self._tuples if id(t) not in before]
            self._previous = None
        return self._new

    def get_expired(self) -> list[Tuple]:
        """Tuples that left the window since the previous activation."""
        return self._expired

    def __len__(self) -> int:
        return len(self._tuples)

    def __iter__(self) -> Iterator[Tuple]:
        return iter(self._tuples)

    def __repr__(self) -> str:
        bounds = (
            f", ({self.start_timestamp}, {self.end_timestamp}]"
            if self.end_timestamp is not None
            else ""
        )
        return (
            f"TupleWindow({len(self._tuples)} tuples, {len(self.get_new())} new, "
            f"{len(self._expired)} expired{bounds})"
        )
