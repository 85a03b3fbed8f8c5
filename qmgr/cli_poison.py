"""``qmgr queue set|show`` and ``qmgr move`` between a queue and its subqueues.

A queue with poison handling moves a message whose receiving transactions
keep aborting to ``NAME;retry``, brings it back after the retry delay, and
after its retry cycles moves it to ``NAME;poison`` (MSMQ 4.0 subqueues,
WCF's netMsmq rules). ``qmgr queue set NAME --retry-count N --retry-cycles N
--retry-delay SECONDS`` changes those settings (``--no-poison`` turns poison
handling off), ``qmgr queue show NAME`` shows them with the depths of the
subqueues, ``qmgr peek 'NAME;poison'`` shows the poison messages and their
counters, and ``qmgr move 'NAME;poison' NAME --all`` (or ``--lookup-id N``)
moves them back after a fix: a move keeps the message's id and body.
"""

from __future__ import annotations

import json
from typing import Any, Final

import click
from rich.table import Table
from rich.text import Text

from qmgr.cli_common import CliError, client, iso, plural, reports_errors, size, stdout_console
from qmgr.client import QueueInfo, QueueManager

__all__ = [
    "RETRY_OPTIONS",
    "add_queue_commands",
    "is_subqueue_move",
    "poison_json",
    "queue_json",
    "retry_options",
    "retry_text",
    "subqueue_move",
]

#: The suffixes of the subqueues every queue has.
_SUBQUEUES: Final = (";retry", ";poison")


def retry_text(info: QueueInfo) -> str:
    """A queue's poison handling for a table: ``3 x 2, 30m`` or empty when off."""
    if info.retry_count is None or info.retry_delay is None:
        return ""
    delay = info.retry_delay
    if delay >= 60 and delay % 60 == 0:
        shown = f"{delay / 3600:g}h" if delay % 3600 == 0 else f"{delay / 60:g}m"
    else:
        shown = f"{delay:g}s"
    return f"{info.retry_count} x {info.retry_cycles}, {shown}"


def poison_json(info: QueueInfo) -> dict[str, Any]:
    """A queue's poison settings as JSON fields (``null`` when off)."""
    return {
        "retry_count": info.retry_count,
        "retry_cycles": info.retry_cycles,
        "retry_delay": info.retry_delay,
    }


#: ``--retry-count``, ``--retry-cycles`` and ``--retry-delay``, for ``queue create`` and ``set``.
RETRY_OPTIONS: Final = (
    click.option(
        "--retry-count",
        type=click.IntRange(0, 0xFFFFFFFF),
        help="Poison handling: aborted receives before a move to NAME;retry (WCF default 5).",
    ),
    click.option(
        "--retry-cycles",
        type=click.IntRange(0, 0xFFFFFFFF),
        help="Poison handling: trips through NAME;retry before NAME;poison (default 2).",
    ),
    click.option(
        "--retry-delay",
        type=click.FloatRange(min=0.0),
        metavar="SECONDS",
        help="Poison handling: seconds in NAME;retry before coming back (default 1800).",
    ),
)


def retry_options(func: Any) -> Any:
    """Decorate a command with :data:`RETRY_OPTIONS`."""
    for option in reversed(RETRY_OPTIONS):
        func = option(func)
    return func


@click.command("set")
@click.argument("name")
@retry_options
@click.option(
    "--poison/--no-poison",
    "poison",
    default=None,
    help="Turn poison handling on (with WCF's defaults for what is not given) or off.",
)
@click.pass_context
@reports_errors
def queue_set(
    ctx: click.Context,
    name: str,
    retry_count: int | None,
    retry_cycles: int | None,
    retry_delay: float | None,
    poison: bool | None,
) -> None:
    """Change the poison handling of queue NAME.

    Any retry option turns poison handling on; what is not given keeps its
    value (or WCF's default). --no-poison turns it off: aborted receives are
    still counted, but nothing moves.
    """
    if poison is None and (retry_count, retry_cycles, retry_delay) == (None, None, None):
        msg = "nothing to change: give --retry-count, --retry-cycles, --retry-delay or --no-poison"
        raise click.UsageError(msg)
    with client(ctx) as qm:
        qm.set_queue_properties(
            name,
            retry_count=retry_count,
            retry_cycles=retry_cycles,
            retry_delay=retry_delay,
            poison_handling=poison,
        )
        info = _queue(qm, name)
    shown = retry_text(info)
    click.echo(f"{info.name}: poison handling " + (f"on ({shown})" if shown else "off"))


@click.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@reports_errors
def queue_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show queue NAME: its properties, poison handling and subqueues."""
    with client(ctx) as qm:
        info = _queue(qm, name)
        family = {q.name.lower(): q for q in qm.list_queues()}
    subqueues = [
        family[key] for key in (info.name.lower() + s for s in _SUBQUEUES) if key in family
    ]
    if as_json:
        data = {
            **queue_json(info),
            "subqueues": [{"name": q.name, "depth": q.depth, "bytes": q.bytes} for q in subqueues],
        }
        click.echo(json.dumps(data, indent=2))
        return
    table = Table(title=None, show_header=False, show_edge=False, pad_edge=False)
    table.add_column("property")
    table.add_column("value", overflow="fold")
    rows: list[tuple[str, str | Text]] = [
        ("queue", Text(info.name)),
        ("format name", Text(info.format_name)),
        ("kind", str(info.kind)),
        ("transactional", "yes" if info.transactional else "no"),
        ("journal", "yes" if info.journal else "no"),
        ("quota", "none" if info.quota is None else size(info.quota)),
        ("messages", f"{info.depth} ({size(info.bytes)}), {info.locked} locked"),
        ("created", iso(info.created_at)),
    ]
    if info.kind == "normal":
        if info.retry_count is None:
            rows.append(("poison handling", "off"))
        else:
            rows.append(("poison handling", "on"))
            rows.append(("  retry count", str(info.retry_count)))
            rows.append(("  retry cycles", str(info.retry_cycles)))
            rows.append(("  retry delay", f"{info.retry_delay:g} s"))
    for sub in subqueues:
        rows.append((f"subqueue {sub.name[len(info.name) :]}", f"{plural(sub.depth, 'message')}"))
    for key, value in rows:
        table.add_row(key, value)
    stdout_console().print(table)


def queue_json(info: QueueInfo) -> dict[str, Any]:
    """A queue as JSON (``queue list``, ``queue show`` and ``status``)."""
    return {
        "name": info.name,
        "format_name": info.format_name,
        "kind": str(info.kind),
        "transactional": info.transactional,
        "journal": info.journal,
        "quota": info.quota,
        "depth": info.depth,
        "bytes": info.bytes,
        "locked": info.locked,
        "created_at": iso(info.created_at),
        **poison_json(info),
    }


def _queue(qm: QueueManager, name: str) -> QueueInfo:
    """The queue NAME as ``list_queues`` shows it (any of its spellings)."""
    wanted = name.lower()
    for prefix in (".\\private$\\", "private$\\"):
        wanted = wanted.removeprefix(prefix)
    for info in qm.list_queues():
        if info.name.lower() == wanted or info.format_name.lower() == name.lower():
            return info
    msg = f"queue {name!r} does not exist"
    raise CliError(msg, hint="`qmgr queue list` shows the queues")


def add_queue_commands(group: click.Group) -> None:
    """Add ``set`` and ``show`` to the ``qmgr queue`` group."""
    group.add_command(queue_set)
    group.add_command(queue_show)


# --------------------------------------------------------------------------
# qmgr move, between a queue and its subqueues
# --------------------------------------------------------------------------


def is_subqueue_move(source: str, destination: str) -> bool:
    """True if either name is a subqueue: the move is MSMQ's MoveMessage, not a
    receive and a send."""
    return any(name.lower().endswith(_SUBQUEUES) for name in (source, destination))


def subqueue_move(
    ctx: click.Context,
    source: str,
    destination: str,
    *,
    count: int,
    lookup_id: int | None,
    move_all: bool,
) -> None:
    """``qmgr move`` between a queue and its subqueues: each message keeps its id."""
    if move_all and lookup_id is not None:
        msg = "give --lookup-id or --all, not both"
        raise click.UsageError(msg)
    moved = 0
    last: int | None = None
    with client(ctx) as qm:
        if move_all:
            result = qm.move(source, destination, all=True)
            moved, last = result.count, result.lookup_id
        elif lookup_id is not None:
            result = qm.move(source, destination, lookup_id)
            moved, last = result.count, result.lookup_id
        else:
            for _ in range(count):
                result = qm.move(source, destination)
                if not result.count:
                    break
                moved += result.count
                last = result.lookup_id
    where = f" (the last one is lookup id {last} there)" if moved > 1 and last else ""
    if moved == 1 and last:
        where = f" (lookup id {last} there)"
    click.echo(f"moved {plural(moved, 'message')} from {source} to {destination}{where}")
    if not move_all and lookup_id is None and moved < count:
        click.echo(f"note: moved {moved} of {plural(count, 'message')} (no more)", err=True)
