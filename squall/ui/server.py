"""``UIServer``: the web UI and REST API of a running cluster, served from this process.

The server runs uvicorn (an ASGI server) on a daemon thread of its own, on a socket
bound when :meth:`UIServer.start` is called, so a port in use is an error there and
then, and ``port=0`` picks a free one (:attr:`UIServer.url` tells which). Who it answers
is decided by :mod:`squall.ui.guard`; its bounds (connections, bodies, read times) by
:mod:`squall.ui.limits` and :mod:`squall.ui.connections`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from squall.model.errors import SquallError
from squall.ui.connections import protocol_class
from squall.ui.guard import Guard, is_loopback
from squall.ui.limits import BodyLimit, UILimits
from squall.ui.series import SeriesRecorder

if TYPE_CHECKING:
    from squall.runtime.cluster import Cluster

logger = logging.getLogger("squall")

#: How long :meth:`UIServer.start` waits for the server to serve.
START_TIMEOUT_SECS = 30.0


class UIServer:
    """Serves the web UI (``/``), the REST API (``/api/v1/``) and the Prometheus
    metrics (``/metrics``) of ``cluster``: a :class:`~squall.runtime.cluster.Cluster`
    of this process (a :class:`~squall.LocalCluster` or a
    :class:`~squall.spark.SparkCluster`).

    Args:
        cluster: the cluster whose topologies are shown and steered.
        host: the address to listen on. The default, ``127.0.0.1``, serves this
            machine only. Any other address (``0.0.0.0``: every interface) needs a
            ``token``, or ``allow_unauthenticated_remote=True``.
        port: the port (0: a free one).
        token: if given, every request needs ``Authorization: Bearer <token>`` (a
            browser opens ``/?token=<token>`` once; a cookie carries it afterwards).
        allowed_hosts: more names the ``Host`` header of a request may give, besides
            the loopback names and the address listened on (on ``0.0.0.0``, also this
            machine's host names and IP addresses): ``NAME`` (with the server's port,
            or none, as a reverse proxy forwards it) or ``NAME:PORT``; ``"*"`` turns the
            Host check off. See :class:`~squall.ui.guard.Guard`.
        allow_unauthenticated_remote: serve an address beyond loopback without a token
            (anyone who reaches the port may then kill topologies); a warning is
            logged when the server starts.
        limits: the bounds on connections, request bodies and read times
            (:class:`~squall.ui.limits.UILimits`; its defaults if None).
        metrics_only: serve ``/metrics`` alone (no pages, no REST API), under the
            same rules (host, token, limits).
        sample_secs: how often the figures the charts draw are sampled (see
            :class:`~squall.ui.series.SeriesRecorder`).

    Raises:
        SquallError: ``host`` is beyond loopback with neither a token nor
            ``allow_unauthenticated_remote``.
        ValueError: an ``allowed_hosts`` entry is malformed.

    Example::

        with LocalCluster() as cluster, UIServer(cluster, port=0) as ui:
            print(ui.url)
    """

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 8080,
        token: str | None = None,
        *,
        allowed_hosts: Sequence[str] = (),
        allow_unauthenticated_remote: bool = False,
        limits: UILimits | None = None,
        metrics_only: bool = False,
        sample_secs: float = 2.0,
    ) -> None:
        if token is None and not is_loopback(host) and not allow_unauthenticated_remote:
            what = "metrics server" if metrics_only else "UI server"
            risk = "read every topology's figures" if metrics_only else "kill topologies"
            raise SquallError(
                f"the {what} would listen on {host}, beyond this machine, without a "
                f"token: anyone reaching it could {risk}. Give a token (token=..., "
                "squall run --ui-token-file or SQUALL_UI_TOKEN), listen on 127.0.0.1, or "
                "allow it explicitly with allow_unauthenticated_remote=True "
                "(--ui-allow-unauthenticated-remote)"
            )
        self.cluster = cluster
        self.host = host
        self.port = port
        self.token = token
        self.allowed_hosts = tuple(allowed_hosts)
        Guard(token, host, port, self.allowed_hosts)  # an invalid entry is refused now
        self.allow_unauthenticated_remote = allow_unauthenticated_remote
        self.limits = limits or UILimits()
        self.metrics_only = metrics_only
        self.series = SeriesRecorder(cluster, sample_secs)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._app: Any = None

    @property
    def url(self) -> str:
        """The server's base URL, e.g. ``http://127.0.0.1:8080/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> UIServer:
        """Bind the socket and start serving on a daemon thread; returns once requests
        are answered.

        Raises:
            SquallError: the address cannot be bound (the port is in use, say), or the
                server did not start.
        """
        import uvicorn

        from squall.ui.app import make_app

        if self._thread is not None:
            raise SquallError(f"the UI server at {self.url} is already running")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise SquallError(
                f"the UI server cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        self.port = sock.getsockname()[1]
        if self.token is None and not is_loopback(self.host):
            logger.warning(
                "the UI server at %s serves every client that reaches it without a token: "
                "anyone may kill its topologies",
                self.url,
            )
        app = self._app = make_app(
            self.cluster,
            self.token,
            self.host,
            self.port,
            self.allowed_hosts,
            self.metrics_only,
            self.series,
        )
        limits = self.limits
        config = uvicorn.Config(
            BodyLimit(app, limits.max_body_bytes),
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=protocol_class(limits),
            backlog=limits.backlog,
            timeout_keep_alive=limits.idle_timeout_secs,  # type: ignore[arg-type]
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="squall-ui-server",
            daemon=True,
        )
        self._thread.start()
        if not self.metrics_only:  # the charts' samples: only the pages draw them
            self.series.start()
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise SquallError(f"the UI server at {self.url} did not start")
            time.sleep(0.01)
        return self

    def open_connections(self) -> int:
        """Connections the server holds open now (0 when it is not running)."""
        server = self._server
        return 0 if server is None else len(server.server_state.connections)

    def stop(self) -> None:
        """Stop serving (requests in progress finish) and wait for the thread; kills
        asked for with a wait still running are carried out now."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self.series.stop()
        if self._app is not None:
            self._app.state.control.stop()
        self._server = None
        self._thread = None
        self._app = None

    def __enter__(self) -> UIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


__all__ = ["UIServer"]
