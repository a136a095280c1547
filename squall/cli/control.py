"""``squall list|activate|deactivate|rebalance|kill``: steer the topologies of a running
UI server (``squall run FILE --ui``, or a :class:`~squall.ui.UIServer` of your own)
through its REST API, as ``storm list``/``activate``/... steer Storm's.

Runs in the user's shell; every command is one or two HTTP requests.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from squall.cli.drpc import read_token

DEFAULT_URL = "http://127.0.0.1:8080/"
TIMEOUT_SECS = 30.0

url_option = click.option(
    "--url",
    envvar="SQUALL_UI_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The UI server's URL (or SQUALL_UI_URL).",
)
#: The environment variable holding a UI server's token.
TOKEN_ENV = "SQUALL_UI_TOKEN"
token_option = click.option(
    "--token-file",
    "token_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"A file holding the server's token, if it has one.  [default: {TOKEN_ENV}]",
)


class UIClient:
    """A UI server's REST API, called from the command line.

    Raises (every method):
        click.ClickException: the server cannot be reached, or refused the request
            (its ``errorMessage``).
    """

    def __init__(self, url: str, token: str | None) -> None:
        self.base = url if url.endswith("/") else url + "/"
        self.token = token

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer to ``method`` ``/api/v1/<path>``."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.base}api/v1/{path}", data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECS) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["errorMessage"]
            except (ValueError, KeyError, TypeError):
                message = exc.reason
            raise click.ClickException(f"{exc.code} {exc.reason}: {message}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise click.ClickException(
                f"cannot reach a squall UI server at {self.base} ({reason}); start one with "
                "`squall run FILE --ui`, or give --url"
            ) from None

    def topology(self, name: str) -> Any:
        return self.call("GET", f"topology/{_quoted(name)}")


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _client(url: str, token_file: Path | None) -> UIClient:
    return UIClient(url, read_token(token_file, TOKEN_ENV))


@click.command("list", short_help="List the running topologies of a UI server.")
@url_option
@token_option
def list_topologies(url: str, token_file: Path | None) -> None:
    """List the topologies the UI server at --url shows: name, status, tasks, workers,
    executors and uptime (as `storm list`)."""
    topologies = _client(url, token_file).call("GET", "topology/summary")["topologies"]
    if not topologies:
        click.echo("No topologies running.")
        return
    table = Table("Topology", "Status", "Tasks", "Workers", "Executors", "Uptime")
    for entry in topologies:
        table.add_row(
            entry["name"],
            entry["status"],
            str(entry["tasksTotal"]),
            str(entry["workersTotal"]),
            str(entry["executorsTotal"]),
            entry["uptime"],
        )
    Console(width=120).print(table)


def _switch(operation: str, done: str, short_help: str, doc: str) -> click.Command:
    """The command that POSTs ``operation`` (activate, deactivate) for topology NAME."""

    @click.command(operation, short_help=short_help, help=doc)
    @click.argument("name")
    @url_option
    @token_option
    def command(name: str, url: str, token_file: Path | None) -> None:
        _client(url, token_file).call("POST", f"topology/{_quoted(name)}/{operation}")
        click.echo(f"{done} {name!r}.")

    return command


activate = _switch(
    "activate", "Activated", "Resume a topology's spouts.", "Resume the spouts of topology NAME."
)
deactivate = _switch(
    "deactivate",
    "Deactivated",
    "Stop a topology's spouts.",
    "Stop calling the spouts of topology NAME; tuples in flight still complete.",
)


def wait_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The ``-w``/``--wait`` option of ``kill`` and ``rebalance``: ``what`` it is."""
    return click.option(
        "-w",
        "--wait",
        type=click.IntRange(min=0),
        default=None,
        help=f"{what}  [default: the topology's message timeout]",
    )


def _wait_default(client: UIClient, name: str, wait: int | None) -> int:
    """``wait``, or the topology's message timeout (Storm's default)."""
    return int(client.topology(name)["msgTimeout"]) if wait is None else wait


@click.command(short_help="Kill a topology (deactivate, wait, kill).")
@click.argument("name")
@wait_option("Seconds between deactivating and killing.")
@url_option
@token_option
def kill(name: str, wait: int | None, url: str, token_file: Path | None) -> None:
    """Kill topology NAME: its spouts are deactivated now and it is killed after --wait
    seconds, so tuples in flight can complete (as `storm kill`)."""
    client = _client(url, token_file)
    seconds = _wait_default(client, name, wait)
    client.call("POST", f"topology/{_quoted(name)}/kill/{seconds}")
    click.echo(f"Killing {name!r}: deactivated, killed in {seconds} s.")


def _executors(options: tuple[str, ...]) -> dict[str, int]:
    """The ``-e COMPONENT=N`` options as component id -> N (ASCII digits only: ``²``
    is a digit to ``str.isdigit`` and not a number to ``int``).

    Raises:
        click.BadParameter: an option that is not COMPONENT=N.
    """
    executors: dict[str, int] = {}
    for option in options:
        component, equals, count = option.rpartition("=")
        if not equals or not component or not (count.isascii() and count.isdigit()):
            raise click.BadParameter(
                f"{option!r} is not COMPONENT=N (e.g. split=4)", param_hint="-e"
            )
        executors[component] = int(count)
    return executors


@click.command(short_help="Change a topology's workers and executors.")
@click.argument("name")
@wait_option("Seconds the topology stays deactivated before the change.")
@click.option(
    "-n",
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="The new number of workers, up to the topology's executors (ackers included).",
)
@click.option(
    "-e",
    "--executors",
    "executor_options",
    multiple=True,
    metavar="COMPONENT=N",
    help="A component's new number of executors, up to its task count (repeatable).",
)
@url_option
@token_option
def rebalance(
    name: str,
    wait: int | None,
    workers: int | None,
    executor_options: tuple[str, ...],
    url: str,
    token_file: Path | None,
) -> None:
    """Rebalance topology NAME: deactivate it, wait --wait seconds, deal its executors
    to --workers workers with the -e changes, and restore its state (as
    `storm rebalance`)."""
    executors = _executors(executor_options)
    client = _client(url, token_file)
    seconds = _wait_default(client, name, wait)
    options: dict[str, Any] = {}
    if workers is not None:
        options["numWorkers"] = workers
    if executors:
        options["executors"] = executors
    client.call(
        "POST", f"topology/{_quoted(name)}/rebalance/{seconds}", {"rebalanceOptions": options}
    )
    click.echo(f"Rebalanced {name!r}.")


COMMANDS = [list_topologies, activate, deactivate, rebalance, kill]

__all__ = ["COMMANDS", "UIClient"]
