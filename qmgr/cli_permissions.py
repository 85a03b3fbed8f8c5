"""``qmgr queue grant|revoke|acl``: a queue's permissions.

An entry is a user (a client certificate's common name), ``group:NAME``,
``peer:NAME`` (``peer:*`` every peer queue manager) or ``everyone``; rights
are ``send``, ``receive``, ``peek``, ``purge``, ``delete``,
``set-properties``, ``get-properties``, ``change-permissions`` and ``full``.
"""

from __future__ import annotations

import json

import click
from rich.table import Table
from rich.text import Text

from qmgr.cli_common import client, reports_errors, stdout_console

__all__ = ["add_permission_commands"]


def _print(queue: str, acl: dict[str, list[str]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"queue": queue, "entries": acl}, indent=2))
        return
    table = Table(title=None, show_edge=False, pad_edge=False)
    table.add_column("entry", overflow="fold")
    table.add_column("rights")
    for entry, rights in sorted(acl.items()):
        table.add_row(Text(entry), ", ".join(rights))
    stdout_console().print(table)


@click.command("grant")
@click.argument("name")
@click.argument("entry")
@click.argument("rights", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
@reports_errors
def queue_grant(
    ctx: click.Context, name: str, entry: str, rights: tuple[str, ...], as_json: bool
) -> None:
    """Give ENTRY the RIGHTS on queue NAME (e.g. `qmgr queue grant orders alice receive`)."""
    with client(ctx) as qm:
        acl = qm.grant(name, entry, *rights)
    _print(name, acl, as_json)


@click.command("revoke")
@click.argument("name")
@click.argument("entry")
@click.argument("rights", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
@reports_errors
def queue_revoke(
    ctx: click.Context, name: str, entry: str, rights: tuple[str, ...], as_json: bool
) -> None:
    """Take RIGHTS (all of them if none are named) from ENTRY on queue NAME."""
    with client(ctx) as qm:
        acl = qm.revoke(name, entry, *rights)
    _print(name, acl, as_json)


@click.command("acl")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
@reports_errors
def queue_acl(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show who may do what to queue NAME."""
    with client(ctx) as qm:
        acl = qm.permissions(name)
    _print(name, acl, as_json)


def add_permission_commands(group: click.Group) -> None:
    """Add ``grant``, ``revoke`` and ``acl`` to the ``qmgr queue`` group."""
    group.add_command(queue_grant)
    group.add_command(queue_revoke)
    group.add_command(queue_acl)
