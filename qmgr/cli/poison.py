"""``qmgr queue set``, and ``qmgr move`` keeping the messages' ids (subqueues, dead letters).

``qmgr queue set NAME --quota BYTES`` (or ``--no-quota``) changes a queue's
quota in place; the rest of this docstring is about poison handling, which
the same command changes.

A queue with poison handling moves a message whose receiving transactions
keep aborting to ``NAME;retry``, brings it back after the retry delay, and
after its retry cycles moves it to ``NAME;poison`` (MSMQ 4.0 subqueues,
WCF's netMsmq rules). ``qmgr queue set NAME --retry-count N --retry-cycles N
--retry-delay SECONDS`` changes those settings (``--no-poison`` turns poison
handling off), ``qmgr queue show NAME`` shows them with the depths of the
subqueues, ``qmgr peek 'NAME;poison'`` shows the poison messages and their
counters, and ``qmgr move 'NAME;poison' NAME --all`` (or ``--lookup-id N``)
moves them back after a fix: a move keeps the message's id and body.

The same move takes dead letters out of ``system$;deadletter`` and
``system$;deadxact``: ``qmgr move 'system$;deadxact' orders --lookup-id N``
(or ``--all``) into a queue of their transactional kind, ``qmgr move
'system$;deadletter' --back`` each back to the queue it was sent to (those
that have none here stay). They become ordinary messages of their queue
again, with their ids.

The retry options and columns, and ``queue show``, are in :mod:`.queues`
(``queue create`` and every queue listing use them); ``qmgr move`` itself is
in :mod:`.messages` and comes here for a move that keeps the ids: one that
involves a subqueue, names messages (``--lookup-id``, ``--all``) or moves
them ``--back``.
"""

from __future__ import annotations

import json
from typing import Any

import click

from qmgr.client import QueueManager
from qmgr.client.shapes import queue_json

from .common import CliError, client, json_option, plural, reports_errors, size
from .queues import SUBQUEUES, ByteCount, find_queue, retry_options, retry_text

__all__ = ["is_subqueue_move", "move_keeping_ids", "queue_set"]


@click.command("set")
@click.argument("name")
@retry_options
@click.option(
    "--poison/--no-poison",
    "poison",
    default=None,
    help="Turn poison handling on (with WCF's defaults for what is not given) or off.",
)
@click.option(
    "--quota",
    type=ByteCount(),
    help="Most bytes of message bodies from now on (e.g. 10M); may be below what it holds.",
)
@click.option("--no-quota", is_flag=True, help="Remove the quota.")
@json_option("Print the queue as one JSON object (as `queue show --json`).")
@click.pass_context
@reports_errors
def queue_set(
    ctx: click.Context,
    name: str,
    retry: dict[str, Any],
    poison: bool | None,
    quota: int | None,
    no_quota: bool,
    as_json: bool,
) -> None:
    """Change the poison handling or the quota of queue NAME.

    Any retry option turns poison handling on; what is not given keeps its
    value (or WCF's default). --no-poison turns it off: aborted receives are
    still counted, but nothing moves.

    --quota sets the most bytes of message bodies the queue (with its
    subqueues) holds, for the sends from now on: below what it holds, new
    messages are refused until enough are received. --no-quota removes it.
    """
    poison_asked = poison is not None or any(value is not None for value in retry.values())
    if not poison_asked and quota is None and not no_quota:
        msg = (
            "nothing to change: give --retry-count, --retry-cycles, --retry-delay, "
            "--no-poison, --quota or --no-quota"
        )
        raise click.UsageError(msg)
    if poison is False and any(value is not None for value in retry.values()):
        msg = "--no-poison turns poison handling off: give no retry option with it"
        raise click.UsageError(msg)
    if quota is not None and no_quota:
        msg = "give --quota or --no-quota, not both"
        raise click.UsageError(msg)
    with client(ctx) as qm:
        qm.set_queue_properties(
            name, **retry, poison_handling=poison, quota=quota, no_quota=no_quota
        )
        info = find_queue(qm, name)
    if as_json:
        click.echo(json.dumps(queue_json(info), indent=2))
        return
    if poison_asked:
        shown = retry_text(info)
        click.echo(f"{info.name}: poison handling " + (f"on ({shown})" if shown else "off"))
    if quota is not None or no_quota:
        click.echo(
            f"{info.name}: " + ("no quota" if info.quota is None else f"quota {size(info.quota)}")
        )


# --------------------------------------------------------------------------
# qmgr move, keeping the messages' ids
# --------------------------------------------------------------------------


def is_subqueue_move(source: str, destination: str) -> bool:
    """True if either name is a subqueue: the move is MSMQ's MoveMessage, not a
    receive and a send."""
    return any(name.lower().endswith(SUBQUEUES) for name in (source, destination))


def _left_in(qm: QueueManager, source: str) -> int:
    """How many messages ``source`` holds after a move of all: 0 when it is named
    in a way the listing of queues does not show (the move itself worked)."""
    try:
        return find_queue(qm, source).depth
    except CliError:
        return 0


def move_keeping_ids(
    ctx: click.Context,
    source: str,
    destination: str | None,
    *,
    count: int,
    lookup_id: int | None,
    move_all: bool,
) -> None:
    """``qmgr move`` as MSMQ moves a message, keeping its id: between a queue and
    its subqueues, or out of a dead-letter queue (``destination`` None: each
    message back to the queue it was sent to)."""
    if move_all and lookup_id is not None:
        msg = "give --lookup-id or --all, not both"
        raise click.UsageError(msg)
    target = destination or ""
    moved = 0
    last: int | None = None
    with client(ctx) as qm:
        if move_all:
            result = qm.move(source, target, all=True)
            moved, last = result.count, result.lookup_id
        elif lookup_id is not None:
            result = qm.move(source, target, lookup_id)
            moved, last = result.count, result.lookup_id
        else:
            for _ in range(count):
                result = qm.move(source, target)
                if not result.count:
                    break
                moved += result.count
                last = result.lookup_id
        left = _left_in(qm, source) if move_all else 0
    if destination is None:
        where = " back to " + ("its queue" if moved == 1 else "their queues")
        if moved == 1 and last:
            where += f" (lookup id {last} there)"
    else:
        where = f" to {destination}"
        if moved > 1 and last:
            where += f" (the last one is lookup id {last} there)"
        elif moved == 1 and last:
            where += f" (lookup id {last} there)"
    click.echo(f"moved {plural(moved, 'message')} from {source}{where}")
    if left:
        stay = "stays" if left == 1 else "stay"
        if destination is None:
            why = (
                "no application queue of its kind here to go back to, or not yours to send "
                "to, its queue at its quota, no room in the store, held by a transaction, "
                "dead since the move began"
            )
        elif is_subqueue_move(source, destination):
            why = "held by a transaction, no room in the store, or arrived since the move began"
        else:
            why = (
                f"{destination} at its quota, no room in the store, held by a "
                "transaction, arrived since the move began"
            )
        click.echo(f"note: {plural(left, 'message')} {stay} in {source} ({why})", err=True)
    if not move_all and lookup_id is None and moved < count:
        click.echo(f"note: moved {moved} of {plural(count, 'message')} (no more)", err=True)
