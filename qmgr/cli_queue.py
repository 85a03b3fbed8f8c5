"""``qmgr queue ...``: create, list, show, change, delete and purge queues
(``queue set|show``, poison handling, are added from ``cli_poison``)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from qmgr.cli_common import client, confirm, plural, reports_errors, size, stdout_console
from qmgr.cli_permissions import add_permission_commands
from qmgr.cli_poison import add_queue_commands, queue_json, retry_options, retry_text
from qmgr.client import QueueInfo

__all__ = ["ByteCount", "queue", "queue_json", "queue_table"]


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


@click.group()
def queue() -> None:
    """Create, list, show, change, delete and purge queues, and their permissions."""


add_queue_commands(queue)  # set, show (cli_poison)
add_permission_commands(queue)  # grant, revoke, acl (cli_permissions)


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
    retry_count: int | None,
    retry_cycles: int | None,
    retry_delay: float | None,
) -> None:
    """Create the private queue NAME (with NAME;journal, NAME;retry and NAME;poison).

    A --retry-* option turns poison handling on (see `qmgr queue set`).
    """
    with client(ctx) as qm:
        qm.create_queue(
            name,
            transactional=transactional,
            journal=journal,
            quota=quota,
            retry_count=retry_count,
            retry_cycles=retry_cycles,
            retry_delay=retry_delay,
        )
    kind = "transactional queue" if transactional else "queue"
    poison = (retry_count, retry_cycles, retry_delay) != (None, None, None)
    click.echo(f"created {kind} {name!r}" + (" with poison handling" if poison else ""))


@queue.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
@click.pass_context
@reports_errors
def queue_list(ctx: click.Context, as_json: bool) -> None:
    """List every queue with its depth, bytes and locked messages."""
    with client(ctx) as qm:
        queues = qm.list_queues()
    if as_json:
        click.echo(json.dumps([queue_json(q) for q in queues], indent=2))
    else:
        stdout_console().print(queue_table(queues))


@queue.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@reports_errors
def queue_delete(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete queue NAME, its journal and all their messages."""
    with client(ctx) as qm:
        confirm(f"Delete queue {name!r}, its journal and all their messages?", yes)
        count = qm.delete_queue(name)
    click.echo(f"deleted queue {name!r} ({plural(count, 'message')})")


@queue.command("purge")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@reports_errors
def queue_purge(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete every message in queue NAME."""
    with client(ctx) as qm:
        confirm(f"Delete every message in {name!r}?", yes)
        count = qm.purge_queue(name)
    click.echo(f"purged {plural(count, 'message')} from {name!r}")


def queue_table(queues: list[QueueInfo] | tuple[QueueInfo, ...]) -> Table:
    table = Table(title=None, show_edge=False, pad_edge=False)
    table.add_column("queue", overflow="fold")
    table.add_column("kind")
    table.add_column("tx")
    table.add_column("journal")
    table.add_column("depth", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("locked", justify="right")
    table.add_column("quota", justify="right")
    table.add_column("retries")
    for q in queues:
        table.add_row(
            Text(q.name),  # a queue's name is anyone's text, never console markup
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
