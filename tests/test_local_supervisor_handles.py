"""The supervisor's handle on a worker process: closing it (the process died) waits for
a request another thread has under way, so that request never reads a closed
connection or a new worker's pipe that took over the closed one's descriptor."""

from __future__ import annotations

import threading
from multiprocessing import Pipe

from squall.local.supervisor import _Handle
from tests.helpers import wait_until


class DyingProcess:
    """A worker process that is alive until told it died; joins at once."""

    def __init__(self) -> None:
        self.dead = False
        self.events: list[str] = []

    def is_alive(self) -> bool:
        return not self.dead

    def join(self, timeout: float | None = None) -> None:
        self.events.append("joined")

    def kill(self) -> None:
        self.dead = True


def test_closing_a_handle_waits_for_the_request_under_way_on_another_thread() -> None:
    ours, theirs = Pipe()
    process = DyingProcess()
    handle = _Handle(0, process, ours)
    answers: list[object] = []

    def ask() -> None:
        answers.append(handle.request(("info",)))
        process.events.append("request ended")

    asking = threading.Thread(target=ask)
    asking.start()
    wait_until(theirs.poll, timeout=30.0)  # the request is sent; no answer will come
    assert theirs.recv() == ("info",)
    process.dead = True
    handle.close()
    asking.join(30.0)
    assert answers == [None]  # the process is gone: no answer, no error
    assert process.events == ["request ended", "joined"]
    assert ours.closed
    theirs.close()
