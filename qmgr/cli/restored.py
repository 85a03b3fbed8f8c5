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

from .common import fail

__all__ = ["restored"]


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The TOML file the queue manager runs with.",
)
@click.option("--data-dir", type=click.Path(file_okay=False), help="Where the store lives.")
@click.option(
    "--set",
    "settings",
    metavar="SECTION.KEY=VALUE",
    multiple=True,
    help="Override a configuration key, as for qmgr serve.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what changed as JSON.")
def restored(
    config_path: Path | None, data_dir: str | None, settings: tuple[str, ...], as_json: bool
) -> None:
    """Prepare a data directory restored from a backup, once, before its first start.

    The queue manager must be stopped. Its outgoing queues go on as new streams
    (their destinations took the backup's numbers from the original already),
    its incoming streams take their next message whatever came before it (the
    original took messages since, which are lost with it), and its message ids
    move half their space on.
    """
    from qmgr.config import ConfigError, load_config

    try:
        config = load_config(config_path, settings=settings, data_dir=data_dir)
    except ConfigError as exc:
        fail(str(exc), status=2)

    from qmgr.server import StartupError
    from qmgr.server.restored import renew_after_restore

    try:
        result = renew_after_restore(config, now=time.time())
    except StartupError as exc:
        fail(str(exc), status=exc.status)
    directory = config.data_dir
    if as_json:
        click.echo(
            json.dumps(
                {
                    "data_dir": str(directory),
                    "outgoing_queues": result.outgoing,
                    "retired_sequences": result.retired,
                    "incoming_streams": result.streams,
                    "ordinal_limit": result.ordinal_limit,
                }
            )
        )
        return
    click.echo(f"{directory}: ready to start in place of the original")
    click.echo(f"  outgoing queues that go on as new streams: {result.outgoing}")
    click.echo(f"  kept sequences of removed outgoing queues dropped: {result.retired}")
    click.echo(f"  incoming streams that take their next message: {result.streams}")
