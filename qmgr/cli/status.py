"""``qmgr status``: the queue manager's identity, connections, transactions, queues and peering.

The queues are shown as ``queue list`` shows them (:mod:`.queues`), the
outgoing queues and incoming sequences as ``outgoing list`` does
(:mod:`.outgoing`).
"""

from __future__ import annotations

import datetime as dt
import json

import click

from qmgr.client.shapes import iso, status_json

from .common import client, json_option, print_table, reports_errors, size, stdout_console
from .outgoing import print_peering_tables
from .queues import queue_table
from .routes import print_routing_lines, routing_or_none

__all__ = ["status", "status_json"]


@click.command()
@json_option("Print one JSON object.")
@click.pass_context
@reports_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Show the queue manager's identity, connections, transactions, queues and
    the delivery to and from other queue managers."""
    with client(ctx) as qm:
        info = qm.status()
        routing = routing_or_none(qm)
    if as_json:
        found = status_json(info, routing)
        click.echo(json.dumps(found, indent=2))
        return
    console = stdout_console()
    uptime = dt.timedelta(seconds=round(info.uptime.total_seconds()))
    console.print(f"queue manager      {info.qm_name}", highlight=False, markup=False)
    console.print(f"guid               {info.qm_guid}", highlight=False, markup=False)
    console.print(f"version            {info.server_version}", highlight=False, markup=False)
    console.print(f"up                 {uptime} (since {iso(info.started_at)})", highlight=False)
    console.print(f"connections        {info.connections}", highlight=False)
    console.print(f"open transactions  {info.open_transactions}", highlight=False)
    console.print(
        f"uncommitted        {size(info.uncommitted_bytes)} in open transactions", highlight=False
    )
    console.print(
        f"since start        {info.commits:,} commits, {info.aborts:,} aborts, "
        f"{info.batches:,} synced writes",
        highlight=False,
    )
    if routing is not None:
        print_routing_lines(console, routing)
    if info.erasing:
        console.print(
            f"erasing            messages of {info.erasing} deleted or purged queue(s)",
            highlight=False,
        )
    console.print()
    print_table(queue_table(info.queues), console)
    print_peering_tables(console, info)
