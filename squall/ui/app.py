"""The UI server's ASGI application: the REST API under ``/api/v1/`` (see
``docs/ui.md``), its OpenAPI description at ``/api/v1/openapi.json``, the Prometheus
metrics at ``/metrics`` (see :mod:`squall.ui.prometheus`), and the guard in front of
everything (see :class:`Guard`).

Every handler runs on the server's threads and only reads the cluster's figures or
calls its control methods (activate, deactivate, kill, rebalance): nothing a request
names is run, imported or read from disk.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from http import HTTPStatus
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Body, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client.exposition import choose_encoder
from starlette.exceptions import HTTPException as StarletteHTTPException

import squall
from squall.model.errors import SquallError, cut, excerpt
from squall.runtime.cluster import Cluster
from squall.runtime.rolling import WINDOWS
from squall.ui.guard import Guard
from squall.ui.guard import error_answer as _answer
from squall.ui.models import (
    ClusterSummary,
    ComponentPage,
    ComponentSeriesPage,
    ErrorAnswer,
    GraphNode,
    Operation,
    RebalanceRequest,
    TopologyPage,
    TopologySeries,
    TopologySummary,
)
from squall.ui.pages import pages_router
from squall.ui.prometheus import metrics_registry
from squall.ui.series import SeriesRecorder
from squall.ui.views import (
    ALL_TIME,
    UnknownName,
    cluster_summary,
    component_page,
    component_series,
    parse_window,
    topology_entries,
    topology_page,
    topology_series,
    visualization,
)

logger = logging.getLogger("squall")

API = "/api/v1"
#: What the pages may load: their own script, style sheet and API, nothing else.
CONTENT_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorAnswer} for status in (400, 401, 403, 404, 409, 422)
}
#: The ``window`` parameter's values: the rolling windows in seconds, or all time.
Window = Literal[":all-time", "600", "10800", "86400"]
assert set(get_args(Window)) == {ALL_TIME, *(str(w) for w in WINDOWS)}
WINDOW = Query(ALL_TIME, description='seconds ("600", "10800", "86400") or ":all-time"')
NAME = Path(description="the topology's name", min_length=1, max_length=512)
SYSTEM = Query(False, description="include system components (__acker) and streams")
#: How many problems of a request that does not validate its answer lists.
PROBLEMS_SHOWN = 5


def _problem(error: Any) -> str:
    """One problem of a request that does not validate: where (each part cut short) and
    what (``unknown key`` for a key the body may not have)."""
    where = ".".join(cut(str(part)) for part in error["loc"])
    what = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
    return f"{where}: {what}"


class Control:
    """The control requests of one cluster: kills wait on a thread of their own."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        #: Topologies deactivated and waiting to be killed (shown as KILLED).
        self.killing: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._waiting: list[threading.Thread] = []

    def stop(self) -> None:
        """The server stops: the kills still waiting are carried out now. (A rebalance
        still waiting goes on; a kill of its topology ends it.)"""
        self._stopping.set()
        for thread in self._waiting:
            thread.join(timeout=60.0)

    def _check(self, name: str) -> None:
        if name not in self.cluster.topology_names():
            raise UnknownName(f"no topology named {excerpt(name)} is running")

    def activate(self, name: str) -> None:
        self._check(name)
        self.cluster.activate(name)

    def deactivate(self, name: str) -> None:
        self._check(name)
        self.cluster.deactivate(name)

    def kill(self, name: str, wait_secs: int) -> None:
        """Deactivate ``name`` now, and kill it after ``wait_secs`` (Storm's kill)."""
        self._check(name)
        with self._lock:
            if name in self.killing:
                return
            self.killing.add(name)
        # A topology being rebalanced has its spouts stopped already; the kill ends that.
        with contextlib.suppress(SquallError):
            self.cluster.deactivate(name)
        thread = threading.Thread(
            target=self._kill_later, args=(name, wait_secs), name="squall-ui-kill", daemon=True
        )
        self._waiting = [t for t in self._waiting if t.is_alive()] + [thread]
        thread.start()

    def _kill_later(self, name: str, wait_secs: int) -> None:
        self._stopping.wait(wait_secs)
        try:
            self.cluster.kill_topology(name)
        except SquallError as exc:  # it ended during the wait: nothing left to kill
            logger.info("topology %r was gone when its kill came: %s", name, exc)
        finally:
            with self._lock:
                self.killing.discard(name)

    def rebalance(self, name: str, wait_secs: int, request: RebalanceRequest | None) -> None:
        """Rebalance ``name``: checked now; with a wait, carried out on a thread of its
        own (the topology is deactivated meanwhile, then its state restored)."""
        self._check(name)
        options = request.rebalanceOptions if request and request.rebalanceOptions else None
        num_workers = options.numWorkers if options else None
        executors = options.executors if options else None
        self.cluster.check_rebalance(name, num_workers, executors, wait_secs)
        if wait_secs == 0:
            self.cluster.rebalance(name, num_workers, executors)
            return
        thread = threading.Thread(
            target=self._rebalance_later,
            args=(name, num_workers, executors, wait_secs),
            name="squall-ui-rebalance",
            daemon=True,
        )
        thread.start()

    def _rebalance_later(
        self, name: str, num_workers: int | None, executors: dict[str, int] | None, wait: int
    ) -> None:
        try:
            self.cluster.rebalance(name, num_workers, executors, wait)
        except SquallError as exc:  # killed meanwhile
            logger.warning("rebalance of topology %r did not happen: %s", name, exc)


def _router(
    cluster: Cluster, control: Control, started: float, series: SeriesRecorder
) -> APIRouter:
    router = APIRouter(prefix=API, responses=ERRORS)

    def window_of(value: str) -> int | None:
        return parse_window(value, cluster.metric_windows)

    @router.get("/cluster/summary", response_model=ClusterSummary)
    def get_cluster_summary() -> ClusterSummary:
        """The cluster: engine, topologies, workers, executors and tasks."""
        return cluster_summary(cluster, started, control.killing)

    @router.get("/topology/summary", response_model=TopologySummary)
    def get_topology_summary() -> TopologySummary:
        """Every running topology, with its status and uptime."""
        return TopologySummary(topologies=topology_entries(cluster, control.killing))

    @router.get("/topology/{name}", response_model=TopologyPage)
    def get_topology(
        name: str = NAME,
        window: Window = WINDOW,
        sys: bool = SYSTEM,
    ) -> TopologyPage:
        """A topology's figures per spout and bolt over ``window``."""
        return topology_page(cluster, name, window_of(window), sys, control.killing)

    @router.get("/topology/{name}/component/{component}", response_model=ComponentPage)
    def get_component(
        name: str = NAME,
        component: str = Path(min_length=1, max_length=512),
        window: Window = WINDOW,
        sys: bool = SYSTEM,
    ) -> ComponentPage:
        """A component's figures per window, stream and task, and its recent errors."""
        return component_page(cluster, name, component, window_of(window), sys, control.killing)

    @router.get(
        "/topology/{name}/visualization",
        response_model=dict[str, GraphNode],
    )
    def get_visualization(name: str = NAME, window: Window = WINDOW) -> dict[str, GraphNode]:
        """The topology's graph: components, their inputs and figures."""
        return visualization(cluster, name, window_of(window))

    @router.get("/topology/{name}/series", response_model=TopologySeries)
    def get_series(name: str = NAME, window: Window = WINDOW) -> TopologySeries:
        """The samples the charts draw, of the topology and each user component, over
        ``window`` (squall's own endpoint)."""
        return topology_series(cluster, series, name, window_of(window))

    @router.get("/topology/{name}/component/{component}/series", response_model=ComponentSeriesPage)
    def get_component_series(
        name: str = NAME,
        component: str = Path(min_length=1, max_length=512),
        window: Window = WINDOW,
    ) -> ComponentSeriesPage:
        """The samples the charts of one component draw, over ``window`` (squall's own
        endpoint)."""
        return component_series(cluster, series, name, component, window_of(window))

    @router.post("/topology/{name}/activate", response_model=Operation)
    def post_activate(name: str = NAME) -> Operation:
        """Resume the spouts."""
        control.activate(name)
        return Operation(topologyOperation="activate", topologyId=name, status="success")

    @router.post("/topology/{name}/deactivate", response_model=Operation)
    def post_deactivate(name: str = NAME) -> Operation:
        """Stop the spouts; what is in flight still completes."""
        control.deactivate(name)
        return Operation(topologyOperation="deactivate", topologyId=name, status="success")

    @router.post("/topology/{name}/kill/{wait}", response_model=Operation)
    def post_kill(name: str = NAME, wait: int = Path(ge=0, le=86_400)) -> Operation:
        """Deactivate now, kill after ``wait`` seconds."""
        control.kill(name, wait)
        return Operation(topologyOperation="kill", topologyId=name, status="success")

    @router.post("/topology/{name}/rebalance/{wait}", response_model=Operation)
    def post_rebalance(
        name: str = NAME,
        wait: int = Path(ge=0, le=86_400),
        request: Annotated[RebalanceRequest | None, Body()] = None,
    ) -> Operation:
        """Change the workers and the executors per component."""
        control.rebalance(name, wait, request)
        return Operation(topologyOperation="rebalance", topologyId=name, status="success")

    return router


def _metrics_router(cluster: Cluster) -> APIRouter:
    """``GET /metrics``: the cluster's figures in Prometheus' text format (OpenMetrics
    when the scraper asks for it), read at each request."""
    router = APIRouter()
    registry = metrics_registry(cluster)

    @router.get("/metrics", include_in_schema=False)
    def get_metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), headers={"Content-Type": content_type})

    return router


def make_app(
    cluster: Cluster,
    token: str | None,
    host: str,
    port: int,
    allowed_hosts: Iterable[str] = (),
    metrics_only: bool = False,
    series: SeriesRecorder | None = None,
) -> FastAPI:
    """The application serving ``cluster`` (the server listens on ``host:port``; see
    :class:`~squall.ui.guard.Guard` for ``token`` and ``allowed_hosts``): the pages,
    the REST API and ``/metrics``, or ``/metrics`` alone if ``metrics_only``.
    ``series`` holds the samples the charts draw (the caller starts and stops it; by
    default one that samples nothing until started)."""
    guard = Guard(token, host, port, allowed_hosts)
    control = Control(cluster)
    app = FastAPI(
        title="squall",
        version=squall.__version__,
        description="The REST API of a squall cluster: topologies, their figures, control.",
        openapi_url=None if metrics_only else f"{API}/openapi.json",
        docs_url=None,
        redoc_url=None,
    )

    @app.middleware("http")
    async def guarded(request: Request, call_next: Any) -> Response:
        refusal = guard.refusal(request)
        if refusal is not None:
            return refusal
        response: Response = await call_next(request)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"
        response.headers["Content-Security-Policy"] = CONTENT_POLICY
        response.headers["X-Frame-Options"] = "DENY"
        return response

    @app.exception_handler(UnknownName)
    async def unknown(request: Request, exc: UnknownName) -> JSONResponse:
        return _answer(404, str(exc))

    @app.exception_handler(ValueError)
    async def bad_value(request: Request, exc: ValueError) -> JSONResponse:
        return _answer(400, str(exc))

    @app.exception_handler(SquallError)
    async def refused(request: Request, exc: SquallError) -> JSONResponse:
        return _answer(409, str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        problems = "; ".join(_problem(error) for error in errors[:PROBLEMS_SHOWN])
        if len(errors) > PROBLEMS_SHOWN:
            problems += f"; and {len(errors) - PROBLEMS_SHOWN} more"
        in_body = any(tuple(error["loc"][:1]) == ("body",) for error in errors)
        return _answer(400 if in_body else 422, problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        if exc.status_code == 404:
            message = f"no such path: {cut(request.url.path)}"
        return _answer(exc.status_code, message, dict(exc.headers or {}))

    recorder = series if series is not None else SeriesRecorder(cluster)
    app.include_router(_metrics_router(cluster))
    if not metrics_only:
        app.include_router(_router(cluster, control, time.monotonic(), recorder))
        app.include_router(pages_router(cluster))
    app.state.control = control
    app.state.series = recorder
    return app


__all__ = ["API", "Guard", "make_app"]
