"""``qmgr outgoing``: the queues of messages on their way to other queue managers.

``qmgr outgoing list`` shows every outgoing queue (one per remote
destination); ``pause``, ``resume`` and ``purge`` act on one, named by the
remote queue's format name as the list shows it. This module also renders
the "Outgoing queues" and "Incoming sequences" parts of ``qmgr status``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from qmgr.client import IncomingInfo, OutgoingInfo, Status
from qmgr.client.shapes import alternates, incoming_json, outgoing_json

from .common import (
    client,
    confirmed,
    folded,
    json_option,
    listing_table,
    plural,
    print_listing,
    print_table,
    quoted,
    reports_errors,
    right,
    shown,
    yes_option,
)
from .routes import routing_or_none

__all__ = [
    "incoming_json",
    "incoming_table",
    "outgoing",
    "outgoing_json",
    "outgoing_table",
    "print_peering_tables",
]


@click.group()
def outgoing() -> None:
    """List, pause, resume and purge outgoing queues (messages to other queue managers).

    DESTINATION is the remote queue's format name as `qmgr outgoing list`
    shows it, e.g. 'DIRECT=TCP:10.0.0.5:1801\\private$\\orders' (quote it:
    the shell eats backslashes).
    """


@outgoing.command("list")
@json_option("Print a JSON array.")
@click.pass_context
@reports_errors
def outgoing_list(ctx: click.Context, as_json: bool) -> None:
    """List every outgoing queue with its state, counters and sequence, the next
    hop in use and the alternates its route lists (see `qmgr route`)."""
    with client(ctx) as qm:
        queues = qm.outgoing()
        routings = {q.destination: routing_or_none(qm, q.destination) for q in queues}
    others = {destination: alternates(routing) for destination, routing in routings.items()}
    print_listing(
        queues,
        as_json,
        lambda q: outgoing_json(q, routings[q.destination], with_alternates=True),
        lambda shown: outgoing_table(shown, others),
        empty="no outgoing queues",
    )


@outgoing.command("pause")
@click.argument("destination")
@click.pass_context
@reports_errors
def outgoing_pause(ctx: click.Context, destination: str) -> None:
    """Stop sending to DESTINATION until resumed.

    Messages for it wait in its outgoing queue; the pause lasts across restarts.
    """
    with client(ctx) as qm:
        info = qm.pause_outgoing(destination)
    click.echo(f"paused {info.destination} ({plural(info.waiting, 'message')} waiting)")


@outgoing.command("resume")
@click.argument("destination")
@click.pass_context
@reports_errors
def outgoing_resume(ctx: click.Context, destination: str) -> None:
    """Send to DESTINATION again after a pause."""
    with client(ctx) as qm:
        info = qm.resume_outgoing(destination)
    click.echo(
        f"resumed {info.destination} ({plural(info.waiting, 'message')} waiting, {info.state})"
    )


@outgoing.command("purge")
@click.argument("destination")
@yes_option
@click.pass_context
@reports_errors
def outgoing_purge(ctx: click.Context, destination: str, yes: bool) -> None:
    """Delete every message waiting to go to DESTINATION.

    They are never delivered. Messages sent later are delivered as usual:
    the exactly-once sequence goes on past the purged ones.
    """
    question = f"Delete every message waiting to go to {quoted(destination)}?"
    count = confirmed(ctx, question, yes, lambda qm: qm.purge_outgoing(destination))
    click.echo(
        f"purged {plural(count, 'message')} from the outgoing queue to {quoted(destination)}"
    )


# --------------------------------------------------------------------------
# Rendering, for `outgoing list` and `status`
# --------------------------------------------------------------------------


def _when(value: dt.datetime | None, missing: str = "") -> str:
    """A time for a table: ISO 8601 to the second, UTC."""
    return missing if value is None else value.isoformat(timespec="seconds")


def _state(info: OutgoingInfo) -> str:
    if info.state == "waiting" and info.next_attempt is not None:
        return f"waiting (next attempt {_when(info.next_attempt)})"
    return info.state


def outgoing_table(
    queues: Sequence[OutgoingInfo], alternates: Mapping[str, Sequence[str]] | None = None
) -> Table:
    """Outgoing queues for people; a "last error" column only if one has an error,
    an "alternates" column only if a route lists others."""
    errors = any(q.last_error for q in queues)
    others = {q.destination: list((alternates or {}).get(q.destination, ())) for q in queues}
    with_alternates = any(others.values())
    table = listing_table(
        folded("destination"),
        "next hop",
        folded("state"),
        right("waiting"),
        right("unacked"),
        "sequence",
        right("next #"),
        "last OrderAck",
    )
    if with_alternates:
        table.add_column("alternates", overflow="fold")
    if errors:
        table.add_column("last error", overflow="fold")
    for q in queues:
        row: list[str | Text] = [  # names are anyone's text, never console markup
            shown(q.destination),
            shown(q.next_hop),
            shown(_state(q)),
            str(q.waiting),
            str(q.unacknowledged),
            shown(q.sequence),
            str(q.next_number),
            _when(q.last_order_ack, "never"),
        ]
        if with_alternates:
            row.append(shown(", ".join(others[q.destination])))
        table.add_row(*row, *([shown(q.last_error)] if errors else []))
    return table


def incoming_table(sequences: Sequence[IncomingInfo]) -> Table:
    """Incoming transactional sequences for people."""
    table = listing_table(
        "source QM",
        folded("queue"),
        "sequence",
        right("last accepted"),
        right("rejects"),
        "last packet",
    )
    for s in sequences:
        table.add_row(
            str(s.source_qm),
            shown(s.queue),
            shown(s.sequence),
            str(s.last_number),
            str(s.reject_count),
            _when(s.last_access),
        )
    return table


def print_peering_tables(console: Console, info: Status) -> None:
    """The status's outgoing queues and incoming sequences, each only if there are any."""
    if info.outgoing:
        console.print()
        console.print("Outgoing queues", highlight=False)
        print_table(outgoing_table(info.outgoing), console)
    if info.incoming:
        console.print()
        console.print("Incoming sequences", highlight=False)
        print_table(incoming_table(info.incoming), console)
