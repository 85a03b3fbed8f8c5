"""``qmgr dl``: distribution lists kept by the queue manager.

A send names a list as ``DL=name`` (``qmgr send DL=fanout --body ...``), alone
or in a multiple-element format name; each target gets one copy, in the
sender's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import click
from rich.table import Table
from rich.text import Text

from qmgr.client import QueueManager

from .common import client, json_option, plural, reports_errors, shown, stdout_console

__all__ = ["dl"]


@click.group()
def dl() -> None:
    """Create, change, list and delete distribution lists (send to them as DL=NAME)."""


@dl.command("create")
@click.argument("name")
@click.argument("targets", nargs=-1, metavar="[TARGET]...")
@click.pass_context
@reports_errors
def dl_create(ctx: click.Context, name: str, targets: tuple[str, ...]) -> None:
    """Create the list NAME with TARGETs (queue or format names; a queue here must exist)."""
    with client(ctx) as qm:
        qm.create_list(name, targets)
    click.echo(f"created distribution list {name} with {plural(len(targets), 'target')}")


def _targets_change(
    verb: str, summary: str, change: Callable[[QueueManager, str, tuple[str, ...]], int]
) -> click.Command:
    """``dl VERB NAME TARGET...``: ``change`` the list NAME and say how many targets it has."""

    @dl.command(verb, help=summary)
    @click.argument("name")
    @click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
    @click.pass_context
    @reports_errors
    def command(ctx: click.Context, name: str, targets: tuple[str, ...]) -> None:
        with client(ctx) as qm:
            count = change(qm, name, targets)
        click.echo(f"{name}: {plural(count, 'target')}")

    return command


dl_add = _targets_change(
    "add",
    "Add TARGETs to the list NAME (a queue here must exist).",
    lambda qm, name, targets: qm.add_to_list(name, *targets),
)
dl_remove = _targets_change(
    "remove",
    "Remove TARGETs from the list NAME.",
    lambda qm, name, targets: qm.remove_from_list(name, *targets),
)


@dl.command("delete")
@click.argument("name")
@click.pass_context
@reports_errors
def dl_delete(ctx: click.Context, name: str) -> None:
    """Delete the list NAME (messages already sent to it are not affected)."""
    with client(ctx) as qm:
        qm.delete_list(name)
    click.echo(f"deleted distribution list {name}")


@dl.command("list")
@click.argument("name", required=False)
@json_option("Print a JSON array.")
@click.pass_context
@reports_errors
def dl_list(ctx: click.Context, name: str | None, as_json: bool) -> None:
    """Show every list (or the list NAME) with its targets."""
    with client(ctx) as qm:
        found = [qm.get_list(name)] if name else qm.lists()
    if as_json:
        click.echo(json.dumps([{"name": f.name, "targets": list(f.targets)} for f in found]))
        return
    if not found:
        click.echo("no distribution lists")
        return
    table = Table()
    table.add_column("list")
    table.add_column("targets")
    for entry in found:
        targets = Text("\n").join(shown(target) for target in entry.targets)
        table.add_row(shown(entry.name), targets or "(none)")
    stdout_console().print(table)
