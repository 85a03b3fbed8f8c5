"""``qmgr queue grant|revoke|acl``: a queue's permissions.

An entry is a user (a client certificate's common name), ``group:NAME``,
``peer:NAME`` (``peer:*`` every peer queue manager) or ``everyone``; rights
are ``send``, ``receive``, ``peek``, ``purge``, ``delete``,
``set-properties``, ``get-properties``, ``change-permissions`` and ``full``.
The commands are added to the ``qmgr queue`` group in :mod:`qmgr.cli`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import click

from qmgr.client import QueueManager
from wire.rights import parse_rights

from .common import (
    client,
    folded,
    json_option,
    listing_table,
    reports_errors,
    shown,
    stdout_console,
)

__all__ = ["queue_acl", "queue_grant", "queue_revoke"]


#: The ``--json`` of every permissions command.
_json_option = json_option("Print the list as JSON.")

#: What the SDK answers a permissions request with: each entry's rights.
Acl = dict[str, list[str]]


def _acl_change(
    verb: str,
    summary: str,
    change: Callable[[QueueManager, str, str, tuple[str, ...]], Acl],
    *,
    rights_required: bool,
) -> click.Command:
    """``queue VERB NAME ENTRY RIGHTS...``: ``change`` the list of queue NAME and print it."""

    @click.command(verb, help=summary)
    @click.argument("name")
    @click.argument("entry")
    @click.argument("rights", nargs=-1, required=rights_required, callback=_known_rights)
    @_json_option
    @click.pass_context
    @reports_errors
    def command(
        ctx: click.Context, name: str, entry: str, rights: tuple[str, ...], as_json: bool
    ) -> None:
        _show(ctx, name, as_json, lambda qm: change(qm, name, entry, rights))

    return command


def _known_rights(
    ctx: click.Context, param: click.Parameter, rights: tuple[str, ...]
) -> tuple[str, ...]:
    """``rights``, once each is a right's name: an unknown one is a usage error
    (exit status 2), before the queue manager is asked."""
    try:
        parse_rights(rights)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return rights


queue_grant = _acl_change(
    "grant",
    "Give ENTRY the RIGHTS on queue NAME (e.g. `qmgr queue grant orders alice receive`).",
    lambda qm, name, entry, rights: qm.grant(name, entry, *rights),
    rights_required=True,
)
queue_revoke = _acl_change(
    "revoke",
    "Take RIGHTS (all of them if none are named) from ENTRY on queue NAME.",
    lambda qm, name, entry, rights: qm.revoke(name, entry, *rights),
    rights_required=False,
)


@click.command("acl")
@click.argument("name")
@_json_option
@click.pass_context
@reports_errors
def queue_acl(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show who may do what to queue NAME."""
    _show(ctx, name, as_json, lambda qm: qm.permissions(name))


def _show(
    ctx: click.Context, queue: str, as_json: bool, request: Callable[[QueueManager], Acl]
) -> None:
    """Make the ``request`` and print the list of ``queue`` it answers with."""
    with client(ctx) as qm:
        acl = request(qm)
    if as_json:
        click.echo(json.dumps({"queue": queue, "entries": acl}, indent=2))
        return
    table = listing_table(folded("entry"), "rights")
    for entry, rights in sorted(acl.items()):
        table.add_row(shown(entry), ", ".join(rights))
    stdout_console().print(table)
