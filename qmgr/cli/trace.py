"""``qmgr trace MESSAGE-ID``: where one message went, across queue managers.

It asks the queue manager of ``--server`` what it knows about the message
(``qm.trace()``), then, for a message still on its way, the queue manager
it is on its way to (a finding's ``next_hop``, a peer address), and so on.
A peer address is turned into that queue manager's client address with
``--via PEER=CLIENT``, or else by qmgr's default layout (clients on the
port after the peer port: 1801 and 1802).
"""

from __future__ import annotations

import json
from typing import Any, Final

import click
from rich.table import Table
from rich.text import Text

import wire
from qmgr.client import ConnectionLost, QueueError, TraceReport
from qmgr.client.shapes import iso

from .common import (
    CliError,
    client,
    connect_to,
    json_option,
    quoted,
    reports_errors,
    server_of,
    shown,
    stdout_console,
)

__all__ = ["trace"]

#: Most queue managers one trace visits.
MAX_VISITS: Final = 8


def _message_id(ctx: click.Context, param: click.Parameter, text: str) -> str:
    """``text``, once it is a message id: anything else is a usage error (exit
    status 2), before a queue manager is asked."""
    try:
        wire.parse_message_id(text)
    except ValueError as exc:
        msg = f"{quoted(text)} is {exc}"
        raise click.BadParameter(msg, ctx=ctx, param=param) from None
    return text


@click.command()
@click.argument("message_id", metavar="MESSAGE-ID", callback=_message_id)
@json_option("Print one JSON array, one entry per queue manager.")
@click.option(
    "--via",
    multiple=True,
    metavar="PEER=CLIENT",
    help="The client address of the queue manager at a peer address (repeatable), "
    "e.g. 10.0.0.5:1801=10.0.0.5:1802.",
)
@click.option("--no-follow", is_flag=True, help="Ask only the queue manager of --server.")
@click.pass_context
@reports_errors
def trace(
    ctx: click.Context, message_id: str, as_json: bool, via: tuple[str, ...], no_follow: bool
) -> None:
    """Show where the message MESSAGE-ID went: committed, on its way (which
    outgoing queue, which queue manager next), waiting in a queue, received
    (journal), dead-lettered with its class, and the acknowledgments about it."""
    peers = _via(via)
    with client(ctx) as qm:
        first = qm.trace(message_id)
        start = server_of(ctx)
    visits: list[tuple[str, TraceReport | None, str]] = [(start, first, "")]
    seen = {start}
    pending = [] if no_follow else _next(first, peers, seen)
    while pending and len(visits) < MAX_VISITS:
        address = pending.pop(0)
        try:
            with connect_to(ctx, address, client_name="qmgr-trace") as other:
                report = other.trace(message_id)
        except (ConnectionLost, QueueError, ValueError) as exc:
            visits.append((address, None, str(exc)))
            continue
        visits.append((address, report, ""))
        pending.extend(_next(report, peers, seen))
    if as_json:
        click.echo(json.dumps([_json(address, r, error) for address, r, error in visits], indent=2))
    else:
        console = stdout_console()
        for address, seen_report, error in visits:
            _print(console, address, seen_report, error)
    if not any(found and found.findings for _, found, _ in visits):
        msg = f"no queue manager visited knows message {message_id}"
        hint = (
            "a message received without a journal leaves no record, and its source keeps "
            "none of a message it delivered unless it asked for a journal or an "
            "acknowledgment: run the trace against its destination (--server)"
        )
        raise CliError(msg, hint=hint)


def _via(values: tuple[str, ...]) -> dict[str, str]:
    peers: dict[str, str] = {}
    for value in values:
        peer, sep, address = value.partition("=")
        if not sep or not peer or not address:
            msg = f"--via {value!r}: expected PEER=CLIENT, e.g. 10.0.0.5:1801=10.0.0.5:1802"
            raise click.UsageError(msg)
        peers[peer.strip().lower()] = address.strip()
    return peers


def _next(report: TraceReport, peers: dict[str, str], seen: set[str]) -> list[str]:
    found: list[str] = []
    for finding in report.findings:
        hop = finding.next_hop.lower()
        if not hop:
            continue
        address = peers.get(hop) or _default_client(hop)
        if address and address not in seen:
            seen.add(address)
            found.append(address)
    return found


def _default_client(peer: str) -> str:
    host, _, port = peer.rpartition(":")
    return f"{host}:{int(port) + 1}" if host and port.isdigit() else ""


def _json(address: str, report: TraceReport | None, error: str) -> dict[str, Any]:
    if report is None:
        return {"address": address, "error": error}
    return {
        "address": address,
        "qm": report.qm_name,
        "findings": [
            {
                "kind": f.kind,
                "place": f.place,
                "time": None if f.time is None else iso(f.time),
                "message_class": f.message_class,
                "class_name": f.class_name,
                "detail": f.detail,
                "next_hop": f.next_hop or None,
            }
            for f in report.findings
        ],
    }


def _print(console: Any, address: str, report: TraceReport | None, error: str) -> None:
    if report is None:
        console.print(shown(f"{address}: not reachable ({error})"))
        return
    title = shown(f"{report.qm_name} ({address})")
    if not report.findings:
        console.print(Text.assemble(title, ": nothing about this message"))
        return
    table = Table(title=title, title_justify="left")
    for column in ("what", "where", "when", "class", "detail", "next"):
        table.add_column(column)
    for f in report.findings:
        # Every cell is the queue manager's text (queue names, ``[v6]:port``
        # addresses), never console markup.
        table.add_row(
            shown(f.kind),
            shown(f.place),
            "" if f.time is None else f.time.strftime("%Y-%m-%d %H:%M:%S"),
            shown(f.class_name if f.message_class else ""),
            shown(f.detail),
            shown(f.next_hop),
        )
    console.print(table)
