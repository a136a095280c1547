"""docs/cli.md documents every command and every option that ``--help`` shows.

The commands and options are read from the click objects behind ``squall --help``, so
an option added to the command without its documentation fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from squall.cli.main import main

CLI_DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def commands() -> dict[str, click.Command]:
    """``squall``'s subcommands by name (``squall`` itself as ``""``)."""
    group = main
    assert isinstance(group, click.Group)
    context = click.Context(group)
    found: dict[str, click.Command] = {"": group}
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        found[name] = command
    return found


def option_names(command: click.Command) -> list[str]:
    """Every option spelling of ``command`` that ``--help`` lists (``--live``,
    ``--no-live``, ``-v``, ``--verbose`` ...), hidden ones left out."""
    names: list[str] = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            names.extend([*param.opts, *param.secondary_opts])
    return names


def section(name: str) -> str:
    """The text of docs/cli.md's ``## `squall NAME` `` section (the page's start for
    ``squall`` itself)."""
    text = CLI_DOC.read_text()
    if not name:
        return text.split("\n## ", 1)[0]
    match = re.search(rf"^## `squall {name}`.*?(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"docs/cli.md has no '## `squall {name}`' section"
    return match.group(0)


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_and_option_is_in_the_cli_docs(name: str) -> None:
    command = commands()[name]
    text = section(name)
    missing = [
        option
        for option in option_names(command)
        if not re.search(rf"`[^`\n]*(?<![\w-]){re.escape(option)}(?![\w-])[^`\n]*`", text)
    ]
    assert not missing, f"docs/cli.md's section on `squall {name}` lacks {missing}"


def test_the_docs_list_no_option_the_command_does_not_have() -> None:
    """Every ``--option`` in a command's section is one the command (or ``squall``
    itself: ``--version``) has: no stale docs."""
    everywhere = set(option_names(commands()[""]))
    for name, command in commands().items():
        if not name:
            continue
        known = set(option_names(command)) | everywhere
        if name == "submit":  # it passes the options after its own on to `squall run`
            known |= set(option_names(commands()["run"]))
        written = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", section(name)))
        assert written <= known, f"`squall {name}` has no {sorted(written - known)}"


@pytest.mark.parametrize("name", sorted(n for n in commands() if n))
def test_help_lists_what_the_docs_describe(name: str) -> None:
    """``squall NAME --help`` runs and shows each of the command's options."""
    result = CliRunner().invoke(main, [name, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for option in option_names(commands()[name]):
        assert option in result.output
