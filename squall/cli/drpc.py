"""``squall drpc``: run a DRPC server in the foreground until Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click
from rich.console import Console

from squall.drpc import DEFAULT_PORT, DEFAULT_TIMEOUT_SECS, DRPCServer


@contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGTERM while inside (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve_drpc(
    host: str, port: int, timeout_secs: float, console: Console, stop: threading.Event
) -> None:
    """Serve DRPC on ``host:port`` until ``stop`` is set or Ctrl-C; runs on the caller's
    thread, which it blocks. Outstanding requests fail with a shutdown error at the end.

    Raises:
        click.ClickException: The address cannot be bound.
    """
    server = DRPCServer(host, port, timeout_secs)
    with _stop_on_sigterm(stop):
        try:
            server.start()
        except OSError as exc:
            raise click.ClickException(f"cannot serve DRPC on {host}:{port}: {exc}") from None
        try:
            console.print(
                f"DRPC server listening on {server.url} (request timeout {timeout_secs:g} s); "
                "press Ctrl-C to stop",
                markup=False,
            )
            console.file.flush()
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
    console.print("DRPC server stopped", markup=False)
    console.file.flush()


@click.command(short_help="Run a DRPC server until Ctrl-C.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; 0.0.0.0 listens on every interface.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to listen on; 0 picks a free port (printed at start).",
)
@click.option(
    "--timeout",
    "timeout_secs",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_SECS,
    show_default=True,
    metavar="SECS",
    help="Longest time a request waits for its result before the client gets a timeout.",
)
def drpc(host: str, port: int, timeout_secs: float) -> None:
    """Run a DRPC server in the foreground until Ctrl-C.

    Clients call DRPC functions with squall.drpc.DRPCClient(host, port), or with any
    HTTP client: POST /drpc/FUNCTION with the argument string as the body answers with
    the result text. Topologies in other processes serve the functions through
    squall.drpc.DRPCInvocationsClient(host, port). Requests still waiting when the
    server stops fail with a shutdown error. See docs/drpc.md for the protocol.

    \b
    Examples:
      squall drpc
      squall drpc --host 0.0.0.0 --port 3772 --timeout 60
    """
    serve_drpc(host, port, timeout_secs, Console(highlight=False), threading.Event())
