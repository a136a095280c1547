"""The ``squall`` command: a thin click layer over the loader, the runner and the display."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console, RenderableType

import squall
from squall.cli.control import COMMANDS as CONTROL_COMMANDS
from squall.cli.display import summary_view, topology_table
from squall.cli.drpc import drpc
from squall.cli.errors_view import errors_reported
from squall.cli.loader import (
    LoadedTopology,
    TopologyLoadError,
    TopologyTarget,
    format_frames,
    load_topology,
    parse_conf_options,
)
from squall.cli.running import (
    RunOptions,
    failed,
    file_logging,
    run_topology,
    squall_logging,
)
from squall.cli.shown import (
    DEFAULT_LAST,
    ShownEmits,
    ShowTarget,
    check_targets,
    resolve_targets,
)
from squall.local.cluster import LocalCluster
from squall.model.config import Config, check_config_keys, effective_config
from squall.model.errors import ComponentError, InvalidTopologyError, SquallError
from squall.model.topology import StormTopology
from squall.runtime.cluster import Cluster
from squall.runtime.metrics import TopologyInfo
from squall.runtime.plan import build_plan
from squall.runtime.system import acker_count, system_topology

CONF_HELP = (
    "Configuration entry KEY=VALUE with Storm's key names, e.g. topology.workers=2 or "
    "topology.max.spout.pending=1000 (repeatable). VALUE is parsed as JSON when it can "
    "be (numbers, true/false, null), else kept as a string. Overrides the file's conf."
)
_PIPE_WIDTH = 160
_SQUALL_DIR = Path(squall.__file__).resolve().parent


def make_console() -> Console:
    """A console for stdout; wide enough for the tables when stdout is not a terminal."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=_PIPE_WIDTH)
    return console


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn errors caused by the user's file or settings into clean click errors."""
    try:
        yield
    except TopologyLoadError as exc:
        raise click.ClickException(str(exc)) from None
    except InvalidTopologyError as exc:
        raise click.ClickException(f"invalid topology: {exc}") from None
    except ComponentError as exc:
        message = f"the topology could not start: {exc}"
        cause = exc.__cause__
        if cause is not None:
            outside = format_frames(cause, lambda path: not path.is_relative_to(_SQUALL_DIR))
            message += "\n" + outside
        raise click.ClickException(message) from None
    except SquallError as exc:
        raise click.ClickException(str(exc)) from None


def _load(target: str, conf_options: tuple[str, ...]) -> tuple[LoadedTopology, dict[str, Any]]:
    """The topology and its configuration (the file's, then ``--conf``); each unknown
    ``topology.*`` key is reported on stderr as one ``Warning: ...`` line."""
    loaded = load_topology(TopologyTarget.parse(target))
    conf = {**loaded.conf, **parse_conf_options(conf_options)}
    for message in check_config_keys(conf):
        click.echo(f"Warning: {message}", err=True)
    return loaded, conf


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    squall.__version__, "-V", "--version", prog_name="squall", message="%(prog)s %(version)s"
)
def main() -> None:
    """squall: Apache Storm's stream-processing model in Python.

    Run a topology defined in a Python file and watch its metrics, on the embedded
    local engine (LocalCluster, the default) or on Apache Spark (--engine spark), or
    inspect its components and task plan without running it.

    \b
    Examples:
      squall run examples/word_count.py --seconds 5
      squall run app.py:build_topology --conf topology.workers=2 --no-live
      squall run examples/word_count.py --engine spark --seconds 30
      squall info examples/multi_stream.py
      squall run examples/word_count.py --ui      (then: squall list, squall kill NAME)
    """


main.add_command(drpc)
for command in CONTROL_COMMANDS:
    main.add_command(command)


@main.command()
def version() -> None:
    """Print squall's version (the line ``squall -V`` and ``squall --version`` print)."""
    click.echo(f"squall {squall.__version__}")


def _cluster(
    engine: str,
    master: str | None,
    checkpoint: str | None,
    spark_conf: dict[str, str],
    verbose: bool,
) -> Cluster:
    """The engine ``squall run`` uses (Spark imported only when asked for).

    On Spark, without ``checkpoint`` (and without Spark's own checkpoint location) the
    cluster checkpoints to a new temporary directory that its shutdown removes, on a
    local master only; with it, a topology resumes from what ``checkpoint`` holds of
    it. ``spark_conf`` settings go to the session squall starts.
    """
    if engine == "spark":
        from squall.spark import SparkCluster

        return SparkCluster(
            master=master, checkpoint_dir=checkpoint, spark_conf=spark_conf, verbose=verbose
        )
    return LocalCluster()


@contextmanager
def spark_scratch(
    engine: str, master: str | None, spark_conf: dict[str, str]
) -> Iterator[dict[str, str]]:
    """``spark_conf`` with Spark's scratch space in a new temporary directory, removed
    when the run ends: for a Spark run on a local master that starts its own JVM (no
    session is active in this process), ``spark.local.dir`` and the driver JVM's
    ``java.io.tmpdir`` (where Spark leaves ``spark-*``, ``artifacts-*`` and native
    libraries behind). The command's process owns that JVM, so nothing uses the
    directory after the run. Settings the user gave win. (On a cluster, executors'
    scratch space is their workers' to manage; under spark-submit, the JVM and its
    settings are spark-submit's.)"""
    if engine != "spark" or _active_spark_session():
        yield spark_conf
        return
    from squall.spark.launch.jvm import EXTRA_JAVA_OPTIONS
    from squall.spark.launch.pythonexec import is_local_master
    from squall.spark.launch.session import DEFAULT_MASTER, launched_by_spark_submit

    if launched_by_spark_submit():
        yield spark_conf
        return

    if not is_local_master(master or DEFAULT_MASTER):
        yield spark_conf
        return

    scratch = tempfile.mkdtemp(prefix="squall-run-")
    settings = dict(spark_conf)
    settings.setdefault("spark.local.dir", scratch)
    options = settings.get(EXTRA_JAVA_OPTIONS, "")
    if "-Djava.io.tmpdir=" not in options:
        settings[EXTRA_JAVA_OPTIONS] = f"{options} -Djava.io.tmpdir={scratch}".strip()
    try:
        yield settings
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _active_spark_session() -> bool:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return SparkSession.getActiveSession() is not None


def parse_spark_conf(options: tuple[str, ...]) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` options as Spark settings (values kept as text).

    Raises:
        click.BadParameter: an option without ``=`` or with an empty key.
    """
    settings: dict[str, str] = {}
    for option in options:
        key, equals, value = option.partition("=")
        if not equals or not key.strip():
            raise click.BadParameter(
                f"{option!r} is not KEY=VALUE (e.g. spark.executor.memory=2g)",
                param_hint="--spark-conf",
            )
        settings[key.strip()] = value
    return settings


def _spark_only(engine: str, **options: Any) -> None:
    """Refuse Spark's options with the local engine, which has no use for them."""
    given = [name.replace("_", "-") for name, value in options.items() if value]
    if engine != "spark" and given:
        names = " and ".join(f"--{name}" for name in given)
        raise click.UsageError(f"{names} apply to --engine spark only")


@main.command(short_help="Run a topology (local engine or Spark) with live metrics.")
@click.argument("target", metavar="FILE.py[:NAME]")
@click.option(
    "--seconds",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="How long to run the topology; 0 runs it until Ctrl-C.",
)
@click.option("--conf", "conf_options", multiple=True, metavar="KEY=VALUE", help=CONF_HELP)
@click.option("--name", help="Name to run the topology under.  [default: the file's stem]")
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes of the live metrics table.",
)
@click.option(
    "--live/--no-live",
    default=True,
    show_default=True,
    help="Show a live metrics table while running (only on a terminal).",
)
@click.option(
    "--until-idle",
    is_flag=True,
    help="Stop as soon as the topology is idle: its spouts emit nothing more and no tuple "
    "is queued or pending (for finite inputs); --seconds is then the longest it runs.",
)
@click.option(
    "--drain",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="At the end, seconds to wait for in-flight tuples after stopping the spouts "
    "(Spark: for the micro-batches of what they emitted).",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Log squall's messages (errors with tracebacks; emits when topology.debug=true). "
    "With --engine spark, also Spark's own output: its log at WARN, its progress bars, "
    "and squall's messages from Spark's Python processes (quiet by default).",
)
@click.option(
    "--fail-on-error",
    is_flag=True,
    help="Exit with code 1, after the summary, if any error was reported during the run "
    "(by a component, or a failed Spark micro-batch).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="local: LocalCluster (embedded). spark: SparkCluster (PySpark micro-batches).",
)
@click.option(
    "--master",
    metavar="URL",
    help="Spark only: the Spark master URL (local[N], spark://HOST:PORT, yarn...). A "
    "spark:// master that cannot be reached fails at once.  "
    "[default: a local session, local[*, 4]]",
)
@click.option(
    "--checkpoint",
    metavar="DIR|URI",
    help="Spark only: keep the run's checkpoint (spout logs, query progress, bolt state) in "
    "this directory or URI (file:, hdfs:, s3a: ...) and resume from it: a topology run "
    "again under the same name continues after its last micro-batch. On a cluster it must "
    "be a location every node reaches; it is checked at start.  [default: Spark's "
    "spark.sql.streaming.checkpointLocation; else, on a local master, a new temporary "
    "directory removed at the end]",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="Spark only: discard what the checkpoint holds for the topology's name and start "
    "afresh. Without it, a run resumes the checkpoint its own topology wrote and is "
    "refused on one another topology (other components, tasks or groupings) wrote.",
)
@click.option(
    "--spark-conf",
    "spark_conf_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Spark only: a setting of the Spark session squall starts (repeatable), e.g. "
    "spark.executor.memory=2g; it wins over squall's defaults and spark-defaults.conf.",
)
@click.option(
    "--show",
    "show_options",
    multiple=True,
    metavar="COMPONENT[:STREAM][@FIELD]",
    help="Show, under the final metrics, the last tuples COMPONENT emitted (on STREAM "
    "only, if given; with @FIELD, the latest tuple of each of the last values of FIELD, "
    "such as each word's latest count), with how many it emitted (repeatable). Local "
    "engine only; its workers then run as threads of this process.  [default: the "
    "file's `show`]",
)
@click.option(
    "--no-show",
    is_flag=True,
    help="Show no tuples, not even the file's `show` (its workers then run as they "
    "would without it: topology.workers above 1 runs worker processes).",
)
@click.option(
    "--show-last",
    type=click.IntRange(min=1),
    default=DEFAULT_LAST,
    show_default=True,
    metavar="N",
    help="How many of the last tuples --show shows per component and stream.",
)
@click.option(
    "--ui",
    is_flag=True,
    help="Serve the web UI and REST API while the topology runs (its URL is printed); "
    "`squall list`, `activate`, `deactivate`, `rebalance` and `kill` talk to it.",
)
@click.option(
    "--ui-port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="The UI server's port (0: a free one).",
)
@click.option(
    "--ui-host",
    default="127.0.0.1",
    show_default=True,
    help="The address the UI server listens on (0.0.0.0: every interface). Any address "
    "beyond loopback needs a token (--ui-token-file or SQUALL_UI_TOKEN), or "
    "--ui-allow-unauthenticated-remote.",
)
@click.option(
    "--ui-allowed-host",
    "ui_allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="A name the UI server answers to besides loopback and the address it listens on "
    "(on 0.0.0.0, also this machine's names and addresses), as browsers send it in the "
    "Host header: NAME with the UI port or none (behind a reverse proxy), NAME:PORT with "
    "that port; repeatable. Requests naming other hosts are refused (DNS rebinding).",
)
@click.option(
    "--ui-allow-unauthenticated-remote",
    is_flag=True,
    help="Let the UI server listen beyond loopback without a token: anyone who reaches "
    "its port can then kill topologies.",
)
@click.option(
    "--ui-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A file holding a token every UI request must carry (Authorization: Bearer "
    "...; a browser opens the URL with ?token=... once).  [default: SQUALL_UI_TOKEN, "
    "else no token]",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="N",
    help="Serve the cluster's metrics in Prometheus' text format at /metrics on this port "
    "while the topology runs (0: a free one; its URL is printed), alone, without the UI. "
    "--ui-token-file, --ui-allowed-host and --ui-allow-unauthenticated-remote apply to it.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address the metrics server listens on (0.0.0.0: every interface). Any "
    "address beyond loopback needs a token, as the UI does.",
)
def run(
    target: str,
    seconds: float,
    conf_options: tuple[str, ...],
    name: str | None,
    refresh: float,
    live: bool,
    until_idle: bool,
    drain: float,
    verbose: bool,
    fail_on_error: bool,
    engine: str,
    master: str | None,
    checkpoint: str | None,
    fresh: bool,
    spark_conf_options: tuple[str, ...],
    show_options: tuple[str, ...],
    no_show: bool,
    show_last: int,
    ui: bool,
    ui_port: int,
    ui_host: str,
    ui_allowed_hosts: tuple[str, ...],
    ui_allow_unauthenticated_remote: bool,
    ui_token_file: Path | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the topology in FILE.py[:NAME] and show its metrics: on the local engine
    (LocalCluster), or on Spark with --engine spark (SparkCluster; --master,
    --checkpoint, --fresh and --spark-conf apply to Spark only, the other options to
    both engines).

    While it runs (--seconds, or until Ctrl-C; --until-idle ends it earlier once the
    topology is idle) a live table shows, per component: kind, tasks, tuples emitted,
    transferred, executed, acked and failed, execute latency (bolts), complete latency
    (spouts), capacity and errors; columns that do not fit the width are named as hidden.
    At the end the spouts are deactivated, in-flight tuples drain (--drain), the
    topology is killed and a final summary is printed: the metrics, the most recent
    errors grouped by component and message with their counts and the start of their
    newest traceback, and a closing line such as "3 errors in 1 component".

    FILE.py[:NAME] names a Python file and, optionally, the topology in it: NAME is a
    module-level StormTopology or a function taking no arguments that returns one.
    Without NAME, squall uses `topology` or `build_topology` if the file defines one,
    else the only StormTopology defined at module level. A module-level `conf` (or
    `CONF`) dict is the base configuration, which --conf entries override.

    Errors in the file (syntax errors, exceptions while importing it or building the
    topology, an invalid topology, an open/prepare that raises) end the command with
    a message and exit code 1, as does a Spark that cannot start (a bad --master: one
    line naming the cause) and a topology that fails while it runs (on Spark, a query
    that stops with an error: the run ends at once, with the summary and the reason).
    With --fail-on-error, so do errors reported while the topology ran.

    With --ui, a web UI and REST API serve the cluster while the topology runs (see
    docs/ui.md); a topology killed from there ends the run. With --metrics-port, a
    server of its own serves the metrics to Prometheus at /metrics (see
    docs/metrics.md).
    """
    _spark_only(
        engine, master=master, checkpoint=checkpoint, fresh=fresh, spark_conf=spark_conf_options
    )
    spark_conf = parse_spark_conf(spark_conf_options)
    console = make_console()
    with user_errors():
        loaded, conf = _load(target, conf_options)
        topology_name = name or loaded.default_name
        options = RunOptions(seconds, refresh, live, drain, until_idle, fresh)
        served = UIOptions(
            ui_host,
            ui_port,
            ui_token_file,
            ui_allowed_hosts,
            ui_allow_unauthenticated_remote,
        )
        if no_show and show_options:
            raise click.UsageError("--no-show and --show exclude each other")
        default_show = () if no_show else loaded.show
        shown = _shown(show_options, default_show, loaded.topology, conf, engine, show_last)
        order = loaded.topology.component_ids()

        def final(info: TopologyInfo) -> RenderableType:
            return summary_view(info, order, shown.view() if shown is not None else None)

        with (
            squall_logging(console, verbose),
            file_logging(console, loaded.loggers),
            spark_scratch(engine, master, spark_conf) as settings,
            _cluster(engine, master, checkpoint, settings, verbose) as cluster,
            _ui_server(cluster, ui, served, console),
            _ui_server(
                cluster,
                metrics_port is not None,
                replace(served, host=metrics_host, port=metrics_port or 0),
                console,
                metrics_only=True,
            ),
        ):
            info = run_topology(
                cluster,
                topology_name,
                conf,
                loaded.topology,
                options,
                console,
                loaded.source,
                final,
                shown,
            )
    if failed(info):
        reason = (info.spark.failure if info.spark else None) or "no reason given"
        click.echo(f"Topology {topology_name!r} failed: {reason}", err=True)
        click.get_current_context().exit(1)
    if fail_on_error and had_errors(info):
        click.echo("Errors were reported during the run: exit code 1 (--fail-on-error).", err=True)
        click.get_current_context().exit(1)


def _shown(
    options: tuple[str, ...],
    default: tuple[str, ...],
    topology: StormTopology,
    conf: dict[str, Any],
    engine: str,
    last: int,
) -> ShownEmits | None:
    """The emit listener showing the last tuples of ``--show``'s components, else of
    the file's ``show`` (None: nothing to show).

    The file's ``show`` is left out where the run cannot show it (on Spark, whose tasks
    run in other processes; with ``topology.worker.kind = "process"``), as it is only a
    default; ``--show`` is a usage error there. Elsewhere the workers run as threads of
    this process (``topology.workers`` above 1 would otherwise run worker processes: the
    starting line says which, and ``--no-show`` keeps the processes).

    Raises:
        click.BadParameter: a ``--show`` (or the file's ``show``) that is not
            ``COMPONENT[:STREAM][@FIELD]`` or names no user component, stream or field of
            the topology (a Trident name stands for its operation's output stream, see
            ``squall.cli.shown.resolve_targets``).
        click.UsageError: ``--show`` where it cannot be shown.
    """
    given = bool(options)
    texts = options or default
    if not texts:
        return None
    processes = conf.get(Config.TOPOLOGY_WORKER_KIND) == "process"
    if engine == "spark" or processes:
        if not given:
            return None
        where = (
            "--engine spark"
            if engine == "spark"
            else 'topology.worker.kind = "process" (worker threads are needed)'
        )
        raise click.UsageError(f"--show applies to the local engine only, not with {where}")
    hint = "'--show'" if given else "the file's 'show'"
    try:
        targets = [ShowTarget.parse(text) for text in texts]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None
    targets, problems = resolve_targets(targets, topology)
    problems += check_targets(targets, topology)
    if problems:
        raise click.BadParameter("; ".join(problems), param_hint=hint)
    return ShownEmits(targets, topology, last)


@dataclass(frozen=True)
class UIOptions:
    """The ``--ui-*`` options of ``squall run``."""

    host: str
    port: int
    token_file: Path | None
    allowed_hosts: tuple[str, ...]
    allow_unauthenticated_remote: bool


@contextmanager
def _ui_server(
    cluster: Cluster,
    wanted: bool,
    options: UIOptions,
    console: Console,
    metrics_only: bool = False,
) -> Iterator[None]:
    """A UI server for ``cluster`` while the block runs, if ``wanted`` (its URL printed);
    with ``metrics_only``, one that serves ``/metrics`` alone."""
    if not wanted:
        yield
        return
    from squall.cli.control import TOKEN_ENV
    from squall.cli.drpc import read_token
    from squall.ui import UIServer

    token = read_token(options.token_file, TOKEN_ENV)
    try:
        server = UIServer(
            cluster,
            host=options.host,
            port=options.port,
            token=token,
            allowed_hosts=options.allowed_hosts,
            allow_unauthenticated_remote=options.allow_unauthenticated_remote,
            metrics_only=metrics_only,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--ui-allowed-host'") from None
    with server:
        if metrics_only:
            console.print(f"Prometheus metrics at {server.url}metrics", markup=False)
        else:
            url = server.url + ("?token=<token>" if token else "")
            console.print(f"Web UI and REST API at {url}", markup=False)
        if token is None and options.allow_unauthenticated_remote:
            what, risk = ("metrics", "read them") if metrics_only else ("UI", "kill topologies")
            click.echo(
                f"Warning: the {what} at {server.url} has no token: anyone who reaches it "
                f"can {risk} (--ui-allow-unauthenticated-remote).",
                err=True,
            )
        yield


def had_errors(info: TopologyInfo) -> bool:
    """Whether ``info`` reports any error: a component's (``errors_total``) or, on
    Spark, a failed micro-batch's (the first query's ``errors``)."""
    return errors_reported(info) > 0 or bool(info.spark and info.spark.first.errors)


@main.command(short_help="Show a topology's components, tasks and streams.")
@click.argument("target", metavar="FILE.py[:NAME]")
@click.option("--conf", "conf_options", multiple=True, metavar="KEY=VALUE", help=CONF_HELP)
def info(target: str, conf_options: tuple[str, ...]) -> None:
    """Show the topology in FILE.py[:NAME] without running it.

    Lists every component (the __acker system bolt included) with its executors, task
    count, task ids, workers, declared streams with their fields, and the streams it
    subscribes to with their groupings. Task ids and workers are the ones `squall run`
    would use with the same --conf (they depend on topology.workers and
    topology.acker.executors).

    FILE.py[:NAME] is found as for `squall run` (see `squall run --help`).
    """
    console = make_console()
    with user_errors():
        loaded, conf = _load(target, conf_options)
        effective = effective_config(conf)
        try:
            full = system_topology(loaded.topology, effective)
            plan = build_plan(full, effective)
        except (TypeError, ValueError) as exc:
            raise click.ClickException(f"invalid configuration: {exc}") from None
    title = (
        f"{loaded.source}: {plan.num_workers} worker(s), {acker_count(effective)} acker executor(s)"
    )
    console.print(topology_table(full, plan, title))
    if conf:
        console.print("Configuration:")
        for key, value in sorted(conf.items()):
            console.print(f"  {key} = {value!r}", markup=False)


@main.command(
    short_help="Run a topology on a Spark cluster through spark-submit.",
    context_settings={"ignore_unknown_options": True},
)
@click.argument("target", metavar="FILE.py[:NAME]")
@click.option("--master", metavar="URL", help="The Spark master URL (spark://HOST:PORT, yarn...).")
@click.option(
    "--checkpoint",
    metavar="DIR|URI",
    help="Where the run's checkpoint lives: on a cluster, a location every node reaches "
    "(a shared mount, hdfs://..., s3a://...).  [default: Spark's "
    "spark.sql.streaming.checkpointLocation]",
)
@click.option(
    "--executor-python",
    metavar="PATH",
    help="The Python the executors run, e.g. ./env/bin/python inside an archive given "
    "with --archives env.tar.gz#env; it needs squall's dependencies, not squall.  "
    "[default: PYSPARK_PYTHON, else this Python's path]",
)
@click.option(
    "--py-files",
    "py_files",
    multiple=True,
    metavar="FILE",
    help="More Python files, zips or eggs for the executors' import path (repeatable); "
    "squall itself is always shipped.",
)
@click.option(
    "--archives",
    multiple=True,
    metavar="ARCHIVE[#DIR]",
    help="An archive to unpack in each executor's working directory (repeatable), e.g. a "
    "packed virtual environment.",
)
@click.option(
    "--spark-conf",
    "spark_conf_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark setting for spark-submit (repeatable).",
)
@click.option("--name", help="Topology name (default: derived from FILE and NAME).")
@click.option(
    "--dry-run", is_flag=True, help="Print the spark-submit command instead of running it."
)
@click.argument("run_options", nargs=-1, type=click.UNPROCESSED, metavar="[RUN OPTIONS]...")
def submit(
    target: str,
    master: str | None,
    checkpoint: str | None,
    executor_python: str | None,
    py_files: tuple[str, ...],
    archives: tuple[str, ...],
    spark_conf_options: tuple[str, ...],
    name: str | None,
    dry_run: bool,
    run_options: tuple[str, ...],
) -> None:
    """Run the topology in FILE.py[:NAME] on a Spark cluster with spark-submit.

    spark-submit starts the driver here (client mode) with this Python, which runs
    `squall run FILE --engine spark` in it; RUN OPTIONS after the submit options go to
    that `squall run` (--seconds, --until-idle, --conf, --fail-on-error ...). squall
    is shipped to the executors as a zip (--py-files); their Python (--executor-python)
    needs squall's dependencies (pyarrow, cloudpickle, msgpack ...). The exit code is the
    run's: 1 if the topology fails or cannot start.

    spark-submit is SPARK_HOME's, else the installed PySpark's.
    """
    with user_errors():
        from squall.cli.submit import (
            Submission,
            SubmitError,
            driver_directory,
            driver_environment,
            pack_squall,
            spark_submit_program,
            submit_command,
            with_absolute_paths,
        )

        try:
            program = spark_submit_program()
        except SubmitError as exc:
            raise click.ClickException(str(exc)) from None
        submission = with_absolute_paths(
            Submission(
                target,
                master,
                checkpoint,
                executor_python,
                list(py_files),
                list(archives),
                parse_spark_conf(spark_conf_options),
                name,
                run_options,
            )
        )
    with tempfile.TemporaryDirectory(prefix="squall-submit-") as folder:
        directory = driver_directory(submission, Path(folder))
        command = submit_command(submission, pack_squall(Path(folder)), program)
        if dry_run:
            click.echo(shlex.join(command))
            return
        completed = subprocess.run(command, env=driver_environment(), cwd=directory, check=False)
    click.get_current_context().exit(completed.returncode)
