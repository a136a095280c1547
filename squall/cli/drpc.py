"""``squall drpc``: run a DRPC server in the foreground until Ctrl-C (or SIGTERM)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import click
from rich.console import Console

from squall.drpc import (
    DEFAULT_INVOCATIONS_PORT,
    DEFAULT_PORT,
    DEFAULT_TIMEOUT_SECS,
    DRPCLimits,
    DRPCServer,
)

CLIENT_TOKEN_ENV = "SQUALL_DRPC_CLIENT_TOKEN"
"""Environment variable holding the client port's token (when no file is given)."""
INVOCATIONS_TOKEN_ENV = "SQUALL_DRPC_INVOCATIONS_TOKEN"
"""Environment variable holding the invocations port's token (when no file is given)."""

_DEFAULTS = DRPCLimits()


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


def serve_drpc(server: DRPCServer, console: Console, stop: threading.Event) -> None:
    """Start ``server`` and serve until ``stop`` is set or Ctrl-C; runs on the caller's
    thread, which it blocks. Outstanding requests fail with a shutdown error at the end.

    Raises:
        click.ClickException: A port cannot be bound.
    """
    with _stop_on_sigterm(stop):
        try:
            server.start()
        except OSError as exc:
            raise click.ClickException(f"cannot serve DRPC: {exc}") from None
        try:
            console.print(
                f"DRPC server listening on {server.url} (request timeout "
                f"{server.timeout_secs:g} s), invocations on {server.invocations_url}; "
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


def read_token(path: Path | None, env_var: str) -> str | None:
    """The token in ``path`` (surrounding whitespace removed), else in ``env_var``, else
    ``None``.

    Raises:
        click.ClickException: The file cannot be read or holds no token.
    """
    if path is None:
        return os.environ.get(env_var) or None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read the token file {path}: {exc}") from None
    if not token:
        raise click.ClickException(f"the token file {path} is empty")
    return token


_POSITIVE = click.IntRange(min=1)


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
    help="Client port (execute); 0 picks a free port (printed at start).",
)
@click.option(
    "--invocations-port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_INVOCATIONS_PORT,
    show_default=True,
    help="Invocations port (fetch, result, fail: the topologies' side); 0 picks a free port.",
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
@click.option(
    "--client-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help=f"File holding the token clients must send (else ${CLIENT_TOKEN_ENV}; none if unset).",
)
@click.option(
    "--invocations-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help=(
        f"File holding the token topologies must send (else ${INVOCATIONS_TOKEN_ENV}; "
        "none if unset)."
    ),
)
@click.option(
    "--handlers",
    type=_POSITIVE,
    default=_DEFAULTS.handlers,
    show_default=True,
    help="Handler threads of the client port: the most execute calls in progress at once.",
)
@click.option(
    "--invocations-handlers",
    type=_POSITIVE,
    default=_DEFAULTS.invocations_handlers,
    show_default=True,
    help="Handler threads of the invocations port.",
)
@click.option(
    "--backlog",
    type=_POSITIVE,
    default=_DEFAULTS.backlog,
    show_default=True,
    help="Connections per port waiting for a handler; more get 503 server busy at once.",
)
@click.option(
    "--max-body",
    "max_body_bytes",
    type=_POSITIVE,
    default=_DEFAULTS.max_body_bytes,
    show_default=True,
    metavar="BYTES",
    help="Largest request body (413 above it).",
)
@click.option(
    "--body-budget",
    "body_budget_bytes",
    type=_POSITIVE,
    default=_DEFAULTS.body_budget_bytes,
    show_default=True,
    metavar="BYTES",
    help="Request-body bytes each port holds at once (503 for a body over it).",
)
@click.option(
    "--read-timeout",
    "read_timeout_secs",
    type=click.FloatRange(min=0, min_open=True),
    default=_DEFAULTS.read_timeout_secs,
    show_default=True,
    metavar="SECS",
    help="Deadline for receiving a request's headers and body (408 after it).",
)
def drpc(
    host: str,
    port: int,
    invocations_port: int,
    timeout_secs: float,
    client_token_file: Path | None,
    invocations_token_file: Path | None,
    handlers: int,
    invocations_handlers: int,
    backlog: int,
    max_body_bytes: int,
    body_budget_bytes: int,
    read_timeout_secs: float,
) -> None:
    """Run a DRPC server in the foreground until Ctrl-C.

    Clients call DRPC functions on the client port with
    squall.drpc.DRPCClient(host, port), or with any HTTP client: POST /drpc/FUNCTION
    with the argument string as the body answers with the result text. Topologies in
    other processes serve the functions on the invocations port through
    squall.drpc.DRPCInvocationsClient(host, invocations_port). With a token, a port
    answers 401 to requests without 'Authorization: Bearer TOKEN'. Requests still
    waiting when the server stops fail with a shutdown error. See docs/drpc.md.

    \b
    Examples:
      squall drpc
      squall drpc --host 0.0.0.0 --timeout 60 --invocations-token-file drpc.token
    """
    try:
        limits = DRPCLimits(
            handlers,
            invocations_handlers,
            backlog,
            max_body_bytes,
            body_budget_bytes,
            read_timeout_secs,
        )
        server = DRPCServer(
            host,
            port,
            timeout_secs,
            invocations_port=invocations_port,
            client_token=read_token(client_token_file, CLIENT_TOKEN_ENV),
            invocations_token=read_token(invocations_token_file, INVOCATIONS_TOKEN_ENV),
            limits=limits,
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    serve_drpc(server, Console(highlight=False), threading.Event())
