"""``qmgr queue create|list|show|delete|purge``, and how a queue is shown.

The ``queue`` group is made here; ``queue set`` (poison handling, in
:mod:`.poison`) and ``queue grant|revoke|acl`` (:mod:`.permissions`) are added
to it where every command is registered, in :mod:`qmgr.cli`. A queue is
shown the same way everywhere: :func:`queue_json` for ``queue list --json``,
``queue show --json`` and ``status --json``, :func:`queue_table` for ``queue
list`` and ``status``. The poison-handling options and columns are here too,
because ``queue create`` takes them and every queue listing shows them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, Final

import click
from rich.table import Table
from rich.text import Text

from qmgr.client import QueueInfo, QueueManager
from qmgr.client.shapes import iso, poison_json, queue_json
from qmgr.core.names import without_private_prefix

from .common import (
    CliError,
    Seconds,
    client,
    confirmed,
    folded,
    json_option,
    listing_table,
    plural,
    print_listing,
    quoted,
    reports_errors,
    right,
    shown,
    size,
    stdout_console,
    yes_option,
)

__all__ = [
    "RETRY_OPTIONS",
    "SUBQUEUES",
    "ByteCount",
    "find_queue",
    "poison_json",
    "queue",
    "queue_json",
    "queue_table",
    "retry_options",
    "retry_text",
]

#: The suffixes of the subqueues every queue has.
SUBQUEUES: Final = (";retry", ";poison")


class ByteCount(click.ParamType):  # type: ignore[type-arg,unused-ignore]
    """A byte count: ``1048576``, ``512K``, ``10M``, ``1G`` (binary multiples)."""

    name = "BYTES"
    _UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
        unit = text[-1:] if text[-1:] in self._UNITS and text[-1:] else ""
        number = text[: len(text) - len(unit)]
        if not number.isdigit():
            self.fail(f"{value!r} is not a byte count (examples: 1048576, 512K, 10M)", param, ctx)
        return int(number) * self._UNITS[unit]


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
        type=Seconds(min=0.0, max=float(0xFFFFFFFF)),
        metavar="SECONDS",
        help="Poison handling: seconds in NAME;retry before coming back (default 1800).",
    ),
)


def retry_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with :data:`RETRY_OPTIONS`; it receives them as one
    ``retry`` dict of SDK keyword arguments (``retry_count``, ``retry_cycles``,
    ``retry_delay``; None where not given)."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        retry_count: int | None,
        retry_cycles: int | None,
        retry_delay: float | None,
        **kwargs: Any,
    ) -> Any:
        retry = {
            "retry_count": retry_count,
            "retry_cycles": retry_cycles,
            "retry_delay": retry_delay,
        }
        return command(*args, retry=retry, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(RETRY_OPTIONS):
        decorated = option(decorated)
    return decorated


@click.group()
def queue() -> None:
    """Create, list, show, change, delete and purge queues, and their permissions."""


@queue.command("create")
@click.argument("name")
@click.option("--transactional", is_flag=True, help="Accept only transactional messages.")
@click.option("--journal", is_flag=True, help="Copy received messages to NAME;journal.")
@click.option("--quota", type=ByteCount(), help="Most bytes of message bodies (e.g. 10M).")
@retry_options
@click.pass_context
@reports_errors
def queue_create(
    ctx: click.Context,
    name: str,
    transactional: bool,
    journal: bool,
    quota: int | None,
    retry: dict[str, Any],
) -> None:
    """Create the private queue NAME (with NAME;journal, NAME;retry and NAME;poison).

    A --retry-* option turns poison handling on (see `qmgr queue set`).
    """
    with client(ctx) as qm:
        qm.create_queue(name, transactional=transactional, journal=journal, quota=quota, **retry)
    kind = "transactional queue" if transactional else "queue"
    poison = any(value is not None for value in retry.values())
    created = f"created {kind} {quoted(without_private_prefix(name))}"
    click.echo(created + (" with poison handling" if poison else ""))


@queue.command("list")
@json_option("Print a JSON array.")
@click.pass_context
@reports_errors
def queue_list(ctx: click.Context, as_json: bool) -> None:
    """List every queue with its depth, bytes and locked messages."""
    with client(ctx) as qm:
        queues = qm.list_queues()
    print_listing(queues, as_json, queue_json, queue_table)


@queue.command("show")
@click.argument("name")
@json_option("Print one JSON object.")
@click.pass_context
@reports_errors
def queue_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show queue NAME: its properties, poison handling and subqueues."""
    with client(ctx) as qm:
        info = find_queue(qm, name)
        family = {q.name.lower(): q for q in qm.list_queues()}
    subqueues = [family[key] for key in (info.name.lower() + s for s in SUBQUEUES) if key in family]
    if as_json:
        data = {
            **queue_json(info),
            "subqueues": [{"name": q.name, "depth": q.depth, "bytes": q.bytes} for q in subqueues],
        }
        click.echo(json.dumps(data, indent=2))
        return
    table = listing_table("property", folded("value"), show_header=False)
    rows: list[tuple[str, str | Text]] = [
        ("queue", shown(info.name)),
        ("format name", shown(info.format_name)),
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


@queue.command("delete")
@click.argument("name")
@yes_option
@click.pass_context
@reports_errors
def queue_delete(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete queue NAME with its journal queue, its subqueues (NAME;retry,
    NAME;poison) and all their messages.

    A journal queue or a subqueue goes with its queue and cannot be deleted
    alone; neither can a system queue, nor a queue a prepared transaction uses.
    """
    question = (
        f"Delete queue {quoted(name)}, its journal queue, its subqueues and all their messages?"
    )
    count = confirmed(ctx, question, yes, lambda qm: qm.delete_queue(name))
    click.echo(f"deleted queue {quoted(name)} ({plural(count, 'message')})")


@queue.command("purge")
@click.argument("name")
@yes_option
@click.pass_context
@reports_errors
def queue_purge(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete every message in queue NAME."""
    question = f"Delete every message in {quoted(name)}?"
    count = confirmed(ctx, question, yes, lambda qm: qm.purge_queue(name))
    click.echo(f"purged {plural(count, 'message')} from {quoted(name)}")


def find_queue(qm: QueueManager, name: str) -> QueueInfo:
    """The queue NAME as ``list_queues`` shows it (any of its spellings).

    Raises:
        CliError: there is no such queue (with a hint).
    """
    wanted = without_private_prefix(name).lower()
    for info in qm.list_queues():
        if info.name.lower() == wanted or info.format_name.lower() == name.lower():
            return info
    msg = f"queue {quoted(name)} does not exist"
    raise CliError(msg, hint="`qmgr queue list` shows the queues")


# --------------------------------------------------------------------------
# Rendering, for `queue list`, `queue show` and `status`
# --------------------------------------------------------------------------


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


def queue_table(queues: Sequence[QueueInfo]) -> Table:
    """Queues for people, one row each."""
    table = listing_table(
        folded("queue"),
        "kind",
        "tx",
        "journal",
        right("depth"),
        right("bytes"),
        right("locked"),
        right("quota"),
        "retries",
    )
    for q in queues:
        table.add_row(
            shown(q.name),  # a queue's name is anyone's text, never console markup
            str(q.kind),
            "yes" if q.transactional else "",
            "yes" if q.journal else "",
            str(q.depth),
            str(q.bytes),
            str(q.locked),
            "" if q.quota is None else size(q.quota),
            retry_text(q),
        )
    return table
