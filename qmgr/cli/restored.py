"""``qmgr restored``: prepare a data directory restored from a backup for its first start.

It runs on the data directory itself, with the queue manager stopped (the
store's lock refuses it otherwise), and writes one transaction
(``qmgr.server.restored``: every outgoing queue goes on as a new stream,
every incoming stream takes its next message whatever came before it, message
ids move half their space on). What it cannot give back is said in
``docs/operations.md`` ("The data directory"). The configuration is read as
``qmgr serve`` reads it, for the data directory and the store's sizes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from .common import configuration_options, fail

__all__ = ["restored"]


@click.command()
@configuration_options
@click.option("--json", "as_json", is_flag=True, help="Print what changed as JSON.")
def restored(
    config_path: Path | None, data_dir: str | None, settings: tuple[str, ...], as_json: bool
) -> None:
    """Prepare a data directory restored from a backup, once, before its first start.

    The queue manager must be stopped. Its outgoing queues go on as new streams
    (their destinations took the backup's numbers from the original already),
    its incoming streams take their next message whatever came before it (the
    original took messages since, which are lost with it), its message ids
    move half their space on, and each queue's next lookup id moves 2**40 on
    (a reader that remembers the last lookup id it read, a Spark query, takes
    the new messages).
    """
    from qmgr.config import ConfigError, load_config

    try:
        config = load_config(config_path, settings=settings, data_dir=data_dir)
    except ConfigError as exc:
        fail(str(exc), status=2)

    from qmgr.server import StartupError
    from qmgr.server.restored import renew_after_restore

    try:
        restored = renew_after_restore(config, now=time.time())
    except StartupError as exc:
        fail(str(exc), status=exc.status)
    result, in_doubt = restored.renewed, restored.in_doubt
    directory = config.data_dir
    if as_json:
        report = {
            "data_dir": str(directory),
            "already": result.already,
            "outgoing_queues": result.outgoing,
            "retired_sequences": result.retired,
            "incoming_streams": result.streams,
            "queues": result.queues,
            "ordinal_limit": result.ordinal_limit,
            "in_doubt": list(in_doubt),
        }
        click.echo(json.dumps(report))
        return
    if result.already:
        click.echo(f"{directory}: prepared already, and not started since: nothing changed")
    else:
        click.echo(f"{directory}: ready to start in place of the original")
        click.echo(f"  outgoing queues that go on as new streams: {result.outgoing}")
        click.echo(f"  kept sequences of removed outgoing queues dropped: {result.retired}")
        click.echo(f"  incoming streams that take their next message: {result.streams}")
        click.echo(f"  queues whose next lookup ids move on: {result.queues}")
    if in_doubt:
        click.echo(
            f"warning: {len(in_doubt)} prepared transaction(s) in doubt, which the original "
            "may have resolved after the backup: ask their coordinator before resolving "
            "them (qmgr tx list): " + ", ".join(in_doubt),
            err=True,
        )
