"""Running a topology for ``squall run`` on an engine (``LocalCluster`` or
``SparkCluster``): watch it, stop it, report.

Runs on the command's main thread; the topology runs on the engine's own threads.
Ctrl-C (``KeyboardInterrupt``) while watching ends the run early but still stops the
topology cleanly and returns its final metrics.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.logging import RichHandler

from squall.cli.display import live_view
from squall.cli.shown import EmitListener
from squall.model.config import ConfigWarning
from squall.model.errors import SquallError
from squall.model.topology import StormTopology
from squall.runtime.cluster import Cluster
from squall.runtime.metrics import TopologyInfo


@dataclass(frozen=True)
class RunOptions:
    """How ``squall run`` runs a topology.

    Attributes:
        seconds: how long to run; 0 runs until Ctrl-C.
        refresh_secs: seconds between refreshes of the live table.
        live: show a live table (only on a terminal; otherwise nothing until the end).
        drain_secs: after deactivating the spouts, how long to wait at most for in-flight
            tuple trees to finish before killing the topology.
        until_idle: stop as soon as the topology is idle (its spouts emit nothing more and
            no tuple is queued or pending), ``seconds`` being then the longest it runs.
        fresh: Spark only: discard what the checkpoint holds for the topology's name
            and start afresh (``submit_topology(..., fresh=True)``).
    """

    seconds: float = 10.0
    refresh_secs: float = 1.0
    live: bool = True
    drain_secs: float = 10.0
    until_idle: bool = False
    fresh: bool = False


@contextmanager
def squall_logging(console: Console, verbose: bool) -> Iterator[None]:
    """Route the ``squall`` logger for the duration of a run.

    Errors are shown in the metrics tables, so by default the logger is silenced (its
    records would otherwise reach stderr and garble the live table). With ``verbose``
    its records, including ``topology.debug`` emit logs, go to ``console``. The logger's
    previous handlers, level and propagation are restored afterwards.
    """
    logger = logging.getLogger("squall")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    handler: logging.Handler = (
        RichHandler(console=console, show_path=False) if verbose else logging.NullHandler()
    )
    logger.handlers = [handler]
    logger.propagate = False
    if verbose:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.handlers, level, logger.propagate = saved
        logger.setLevel(level)


@contextmanager
def file_logging(console: Console, names: tuple[str, ...]) -> Iterator[None]:
    """Show the ``INFO`` records (and above) of the user's file's loggers (``names``)
    on ``console`` for the duration of a run, as Storm's local mode shows its
    topologies' logs: above the live table, which they do not garble.

    Only while Python's logging is not configured (the root logger has no handler)
    and for loggers without handlers of their own: a configuration of the user's
    wins. Records of tasks in worker processes stay there. The loggers' handlers,
    levels and propagation are restored afterwards.
    """
    if logging.getLogger().handlers:
        yield
        return
    saved: list[tuple[logging.Logger, list[logging.Handler], int, bool]] = []
    for name in names:
        logger = logging.getLogger(name)
        if logger.handlers:
            continue
        saved.append((logger, list(logger.handlers), logger.level, logger.propagate))
        logger.handlers = [RichHandler(console=console, show_path=False)]
        logger.propagate = False
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(level)


def run_topology(
    cluster: Cluster,
    name: str,
    conf: dict[str, Any],
    topology: StormTopology,
    options: RunOptions,
    console: Console,
    source: str = "",
    final: Callable[[TopologyInfo], RenderableType] | None = None,
    emit_listener: EmitListener | None = None,
) -> TopologyInfo:
    """Submit ``topology``, watch it for ``options.seconds`` (or until it is idle, with
    ``options.until_idle``), then stop it.

    Runs on the command's thread. On a terminal (with ``options.live``) a live table is
    redrawn every ``options.refresh_secs`` while the topology runs, and ``final(info)``
    (the summary) takes its place at the end: one table stays on the screen, whatever
    the terminal's height. Elsewhere ``final(info)`` is printed once the run is over.
    ``emit_listener`` is passed to the engine's ``submit_topology`` (it sees every
    emit of a user component).

    Once the topology has started, a line saying what runs (``source``, the name, where:
    the Spark session's resources such as its cores, or the workers) and for how long
    is printed; and one more when it resumed from a checkpoint (Spark's
    ``resumed_from_batch``).

    Stopping deactivates the spouts, waits up to ``options.drain_secs`` for in-flight
    tuples (a second Ctrl-C skips the wait), takes the final metrics and kills the
    topology.

    Returns:
        The metrics taken just before the kill.

    Raises:
        InvalidTopologyError: the topology or configuration is invalid.
        ComponentError: a task's ``open``/``prepare`` raised; nothing was left running.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)  # the command reported them already
        extra: dict[str, Any] = {}
        if options.fresh:  # SparkCluster's (squall run refuses --fresh on the local engine)
            extra["fresh"] = True
        if emit_listener is not None:
            extra["emit_listener"] = emit_listener
        if extra:
            submit: Callable[..., None] = cluster.submit_topology
            submit(name, conf, topology, **extra)
        else:
            cluster.submit_topology(name, conf, topology)
    started = cluster.get_topology_info(name)
    until = f"for {options.seconds:g} s" if options.seconds > 0 else "until Ctrl-C"
    if options.until_idle:
        until = "until idle" + (f" or for {options.seconds:g} s" if options.seconds > 0 else "")
    console.print(
        f"Running {source or 'topology'} as {name!r} on {type(cluster).__name__}"
        f"{_where(started)} {until}; Ctrl-C stops it.",
        markup=False,
    )
    spark = started.spark
    if spark is not None and spark.first.resumed_from_batch is not None:
        console.print(
            f"Resuming {name!r} from checkpoint {spark.checkpoint_dir} "
            f"after batch {spark.first.resumed_from_batch} (its spouts continue from there).",
            markup=False,
        )
    seen = _Seen(started)
    live = options.live and console.is_terminal
    order = cluster.get_topology(name).component_ids() if live else []
    with _Display(console, live, live_view(seen.info, order=order)) as display:
        try:
            _watch(cluster, name, options, display, order, seen)
        except KeyboardInterrupt:
            console.print("[yellow]Interrupted: stopping the topology.[/yellow]")
        if _gone(cluster, name):
            console.print(f"Topology {name!r} was killed while it ran.", markup=False)
            info = replace(seen.info, status="KILLED")
        else:
            info = _stop(cluster, name, options.drain_secs, console)
        if final is not None:
            display.finish(final(info))
    return info


class _Display:
    """Where the run's figures go: a rich ``Live`` display on a terminal, else nowhere
    until :meth:`finish` prints the summary.

    Used on the command's thread. The live display is not transient: its last frame is
    the summary given to :meth:`finish`, drawn in place of the live table, so the
    table shown while running never stays on the screen above the final one (a
    transient display cannot erase lines that scrolled off a short terminal).
    """

    def __init__(self, console: Console, live: bool, first: RenderableType) -> None:
        self.console = console
        self.live = (
            Live(first, console=console, auto_refresh=False, transient=False) if live else None
        )

    def __enter__(self) -> _Display:
        if self.live is not None:
            self.live.start(refresh=True)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.live is not None:
            self.live.stop()

    def update(self, renderable: RenderableType) -> None:
        """Redraw the live table (nothing without a terminal)."""
        if self.live is not None:
            self.live.update(renderable, refresh=True)

    def finish(self, summary: RenderableType) -> None:
        """Show ``summary``: in place of the live table, else printed."""
        if self.live is not None:
            self.live.update(summary, refresh=True)
        else:
            self.console.print(summary)


def _where(info: TopologyInfo) -> str:
    """Where the topology runs, for the starting line: `` (local[2, 4]: 2 cores)``,
    `` with 2 worker(s)`` (`` with 2 worker(s) as threads`` or ``... as processes`` where
    there are several, whose kind depends on ``topology.worker.kind``, the clock and
    ``--show``), or nothing."""
    if info.spark is not None and info.spark.resources:
        return f" ({info.spark.resources})"
    if not info.workers:
        return ""
    kind = ""
    if info.local is not None and info.workers > 1:
        kind = " as processes" if info.local.worker_kind == "process" else " as threads"
    return f" with {info.workers} worker(s){kind}"


class _Seen:
    """The newest figures the watch loop read (the run's result if the topology is
    killed from elsewhere, e.g. the web UI, before the run stops it)."""

    def __init__(self, info: TopologyInfo) -> None:
        self.info = info


def _gone(cluster: Cluster, name: str) -> bool:
    return name not in cluster.topology_names()


def _watch(
    cluster: Cluster,
    name: str,
    options: RunOptions,
    display: _Display,
    order: list[str],
    seen: _Seen,
) -> None:
    deadline = time.monotonic() + options.seconds if options.seconds > 0 else None

    def remaining() -> float:
        return float("inf") if deadline is None else deadline - time.monotonic()

    def wait(step: float) -> bool:
        """Wait up to ``step`` seconds; True once the run should end early (idle)."""
        step = max(0.0, min(remaining(), step))
        if options.until_idle:
            return cluster.wait_idle(name, step)
        time.sleep(step)
        return False

    def look() -> TopologyInfo | None:
        """The figures now (None: the topology was killed from elsewhere)."""
        try:
            seen.info = cluster.get_topology_info(name)
        except SquallError:
            if _gone(cluster, name):
                return None
            raise
        return seen.info

    step = options.refresh_secs if display.live is not None else 0.5
    try:
        while remaining() > 0:
            idle = wait(step)
            info = look()
            if info is None:
                return
            display.update(live_view(info, order=order))
            if idle or failed(info):
                return
    except SquallError:
        if not _gone(cluster, name):
            raise


def failed(info: TopologyInfo) -> bool:
    """Whether the topology has failed (on Spark: a query stopped with an error)."""
    return info.status == "FAILED"


def _stop(cluster: Cluster, name: str, drain_secs: float, console: Console) -> TopologyInfo:
    try:
        cluster.deactivate(name)
        if drain_secs > 0 and not cluster.wait_idle(name, drain_secs):
            console.print(
                f"[yellow]Tuples were still in flight after {drain_secs:g} s; "
                "killing anyway.[/yellow]"
            )
    except KeyboardInterrupt:
        console.print("[yellow]Interrupted again: killing without waiting.[/yellow]")
    info = cluster.get_topology_info(name)
    cluster.kill_topology(name, wait_secs=0)
    return info
