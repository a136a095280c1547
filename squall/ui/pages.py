"""The UI's pages: one HTML shell for the cluster, topology and component pages (its
script renders the REST API into it and refreshes it), the script and style sheet,
and the topology graph as SVG. The files are read from squall's package once; no path
of a request reaches the file system.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Path, Query
from fastapi.responses import HTMLResponse, Response

from squall.model.errors import excerpt
from squall.runtime.cluster import Cluster
from squall.ui.graph import topology_svg
from squall.ui.series import queue_capacity, queues
from squall.ui.views import ALL_TIME, UnknownName, parse_window

#: The files the pages are made of, by the path they are served at.
STATIC = {
    "/static/ui.js": "text/javascript",
    "/static/ui.css": "text/css",
    # uPlot (MIT, https://github.com/leeoniya/uPlot), vendored: it draws the charts.
    "/static/uPlot.iife.min.js": "text/javascript",
    "/static/uPlot.min.css": "text/css",
    "/static/uPlot.LICENSE": "text/plain",
}


def _read(name: str) -> str:
    return (
        resources.files("squall.ui").joinpath("static").joinpath(name).read_text(encoding="utf-8")
    )


def pages_router(cluster: Cluster) -> APIRouter:
    """The routes of the pages of ``cluster``'s UI (left out of the API description)."""
    router = APIRouter(include_in_schema=False)
    shell = _read("index.html")
    files = {path: (_read(path.rsplit("/", 1)[1]), kind) for path, kind in STATIC.items()}

    def page() -> HTMLResponse:
        return HTMLResponse(shell)

    router.add_api_route("/", page, methods=["GET"])
    router.add_api_route("/topology/{name}", page, methods=["GET"])
    router.add_api_route("/topology/{name}/component/{component}", page, methods=["GET"])

    for path, (text, kind) in files.items():

        def serve(text: str = text, kind: str = kind) -> Response:
            return Response(text, media_type=kind)

        router.add_api_route(path, serve, methods=["GET"])

    @router.get("/topology/{name}/graph.svg")
    def graph(
        name: str = Path(min_length=1, max_length=512),
        window: str = Query(ALL_TIME),
    ) -> Response:
        if name not in cluster.topology_names():
            raise UnknownName(f"no topology named {excerpt(name)} is running")
        seconds = parse_window(window, cluster.metric_windows)
        topology = cluster.get_topology(name)
        now = cluster.get_topology_info(name)
        info = cluster.in_window(name, now, seconds)
        queued = queues(now, queue_capacity(cluster, name))
        return Response(topology_svg(name, topology, info, queued), media_type="image/svg+xml")

    return router


__all__ = ["pages_router"]
