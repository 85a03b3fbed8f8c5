"""``qmgr route``: where a destination's messages go, and why.

``qmgr route DESTINATION`` asks the daemon which next hop a destination (a
format name or ``HOST[:PORT]``) takes: the ``[routes]`` entry that matched,
each next hop in order with the state of its link, and the one in use.
Without a destination it shows how the queue manager routes: whether it is
a router, its aliases and its ``[routes]``. This module also renders the
routing lines of ``qmgr status``.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console

from qmgr.client import NotSupported as ClientNotSupported
from qmgr.client import QueueManager, Routing
from qmgr.client.shapes import iso

from .common import client, json_option, listing_table, reports_errors, shown, stdout_console

__all__ = ["print_routing_lines", "route", "routing_json", "routing_or_none"]


@click.command()
@click.argument("destination", required=False, default="")
@json_option("Print one JSON object.")
@click.pass_context
@reports_errors
def route(ctx: click.Context, destination: str, as_json: bool) -> None:
    """Show which next hop DESTINATION's messages take, and why.

    DESTINATION is a format name ('DIRECT=TCP:10.2.0.7\\private$\\orders':
    quote it, the shell eats backslashes) or HOST[:PORT] of a queue manager.
    Without it, show whether this queue manager is a router, its aliases and
    its [routes] entries.
    """
    with client(ctx) as qm:
        info = qm.routing(destination)
    if as_json:
        click.echo(json.dumps(routing_json(info), indent=2))
        return
    console = stdout_console()
    if not destination:
        print_routing_lines(console, info)
        if info.routes:
            table = listing_table("key", "next hops")
            for entry in info.routes:
                table.add_row(shown(entry.key), shown(", ".join(entry.hops)))
            console.print()
            console.print(table)
        else:
            console.print("routes             none: every destination is reached directly")
        return
    if info.local:
        console.print(
            f"{info.destination} is this queue manager: messages to it are delivered here",
            highlight=False,
            markup=False,
        )
        return
    why = (
        f'routes."{info.entry}"' if info.entry else "no [routes] entry: straight to the destination"
    )
    console.print(f"destination  {info.destination}", highlight=False, markup=False)
    console.print(f"route        {why}", highlight=False, markup=False)
    table = listing_table("next hop", "state", "in use", "down since", "last error")
    for hop in info.hops:
        table.add_row(
            shown(hop.hop),
            hop.state,
            "yes" if hop.in_use else "",
            "" if hop.down_since is None else iso(hop.down_since),
            shown(hop.last_error),
        )
    console.print(table)


def routing_json(info: Routing) -> dict[str, Any]:
    """The routing as one JSON-ready object (``qmgr route --json``)."""
    found: dict[str, Any] = {
        "router": info.router,
        "failover_after": info.failover_after,
        "aliases": list(info.aliases),
        "routes": [{"key": r.key, "hops": list(r.hops)} for r in info.routes],
    }
    if info.destination:
        found["destination"] = {
            "destination": info.destination,
            "local": info.local,
            "entry": info.entry or None,
            "hops": [
                {
                    "hop": h.hop,
                    "state": h.state,
                    "in_use": h.in_use,
                    "down_since": None if h.down_since is None else iso(h.down_since),
                    "last_error": h.last_error,
                }
                for h in info.hops
            ],
        }
    return found


def routing_or_none(qm: QueueManager, destination: str = "") -> Routing | None:
    """The routing, or None when the daemon cannot say (too old, or no peering)."""
    try:
        return qm.routing(destination)
    except ClientNotSupported:
        return None


def print_routing_lines(console: Console, info: Routing) -> None:
    """Whether the queue manager is a router, and its aliases (``status``, ``route``)."""
    console.print(
        f"router             {'yes' if info.router else 'no'}", highlight=False, markup=False
    )
    aliases = ", ".join(info.aliases) if info.aliases else "none"
    console.print(f"aliases            {aliases}", highlight=False, markup=False)
