"""The ``qmgr`` command: run a queue manager, and administer and use one.

``qmgr serve`` runs the daemon in the foreground. Every other command is a
client of a running daemon (``--server HOST:PORT``, default
``127.0.0.1:1802``, or ``QMGR_SERVER``): ``queue ...`` (in ``cli_queue``,
with ``queue set|show`` of poison handling from ``cli_poison``), ``send``
(its report options in ``cli_reports``), ``receive``, ``peek``, ``move``,
``status``, ``outgoing ...`` (``cli_outgoing``), ``tx ...`` (``cli_tx``),
``trace`` (``cli_trace``) and ``dl ...`` (``cli_dl``); the helpers all share
are in ``cli_common``. Machine-readable output is available
with ``--json``; tables and progress bars are for people and appear only
where they belong (progress on a terminal, on stderr).

Exit status: 0 on success, 1 on an error (printed as ``error: <message>`` on
stderr), 2 for a usage or configuration error.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from qmgr import __version__
from qmgr.cli_auth import auth
from qmgr.cli_certs import certs
from qmgr.cli_common import (
    DEFAULT_SERVER,
    CliError,
    client,
    fail,
    iso,
    plural,
    reports_errors,
    size,
    stderr_console,
    stdout_console,
)
from qmgr.cli_dl import dl
from qmgr.cli_messages import message_json_line, message_text
from qmgr.cli_outgoing import incoming_json, outgoing, outgoing_json, print_peering_tables
from qmgr.cli_poison import is_subqueue_move, subqueue_move
from qmgr.cli_queue import queue, queue_json, queue_table
from qmgr.cli_reports import report_options
from qmgr.cli_trace import trace
from qmgr.cli_tx import tx
from qmgr.client import Message, Status


def _progress(total: int, what: str) -> Progress | None:
    """A progress bar on stderr if it is a terminal and there is more than one item."""
    console = stderr_console()
    if total <= 1 or not console.is_terminal:
        return None
    return Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )


# --------------------------------------------------------------------------
# The command group
# --------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--server",
    envvar="QMGR_SERVER",
    default=DEFAULT_SERVER,
    show_default=True,
    metavar="HOST:PORT",
    help="The queue manager's client address (env QMGR_SERVER).",
)
@click.option(
    "--tls-ca",
    envvar="QMGR_TLS_CA",
    metavar="PEM",
    help="Connect over TLS, trusting this CA bundle (env QMGR_TLS_CA).",
)
@click.option(
    "--tls-cert",
    envvar="QMGR_TLS_CERT",
    metavar="PEM",
    help="Client certificate to authenticate with over TLS (env QMGR_TLS_CERT).",
)
@click.option(
    "--tls-key",
    envvar="QMGR_TLS_KEY",
    metavar="PEM",
    help="The client certificate's private key (env QMGR_TLS_KEY).",
)
@click.option(
    "--token",
    envvar="QMGR_TOKEN",
    metavar="TOKEN",
    help="Authenticate with this token (env QMGR_TOKEN; see qmgr auth token).",
)
@click.version_option(__version__, prog_name="qmgr")
@click.pass_context
def cli(
    ctx: click.Context,
    server: str,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    token: str | None,
) -> None:
    """qmgr: a transactional queue manager (MSMQ semantics) for Linux."""
    ctx.ensure_object(dict)
    ctx.obj["server"] = server
    ctx.obj["tls"] = (tls_ca, tls_cert, tls_key)
    ctx.obj["token"] = token


cli.add_command(queue)
cli.add_command(certs)
cli.add_command(auth)
cli.add_command(outgoing)
cli.add_command(tx)
cli.add_command(trace)
cli.add_command(dl)


def main() -> None:
    """Entry point of the ``qmgr`` console script."""
    cli(prog_name="qmgr")


# --------------------------------------------------------------------------
# serve
# --------------------------------------------------------------------------


@cli.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A TOML file overriding the built-in defaults.",
)
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Where the store lives."
)
@click.option("--listen", metavar="HOST:PORT", help="Peer (MSMQ) listener address.")
@click.option("--client-listen", metavar="HOST:PORT", help="Client (SDK and CLI) listener address.")
@click.option("--name", help="The queue manager's name (default: the host name).")
@click.option("--log-format", type=click.Choice(["console", "json", "auto"]), help="Log rendering.")
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log threshold."
)
@click.option(
    "--set",
    "settings",
    metavar="SECTION.KEY=VALUE",
    multiple=True,
    help="Override any configuration key (repeatable), e.g. --set store.max_map_size=1073741824.",
)
def serve(
    config_path: Path | None,
    data_dir: Path | None,
    listen: str | None,
    client_listen: str | None,
    name: str | None,
    log_format: str | None,
    log_level: str | None,
    settings: tuple[str, ...],
) -> None:
    """Run a queue manager in the foreground until SIGTERM or Ctrl-C."""
    import trio

    from qmgr.config import ConfigError, load_config
    from qmgr.logs import configure_logging

    try:
        config = load_config(
            config_path,
            settings=settings,
            name=name,
            data_dir=data_dir,
            listen=listen,
            client_listen=client_listen,
            log_format=log_format,
            log_level=log_level,
        )
    except ConfigError as exc:
        fail(str(exc), status=2)
    configure_logging(fmt=config.log_format, level=config.log_level)

    from qmgr.server import StartupError
    from qmgr.server import serve as run_daemon

    try:
        trio.run(run_daemon, config)
    except StartupError as exc:
        fail(str(exc), status=exc.status)
    except KeyboardInterrupt:
        pass  # Ctrl-C before the signal handlers were installed


# --------------------------------------------------------------------------
# send
# --------------------------------------------------------------------------


@cli.command()
@click.argument("destination", metavar="DEST")
@click.option("--body", help="The message body, as text (sent as UTF-8).")
@click.option(
    "--file",
    "file_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the body from this file.",
)
@click.option("--label", default="", help="The message label (at most 250 characters).")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--transactional/--no-transactional",
    default=None,
    help="Insist on a single-message transaction, or on none (default: as the queue needs).",
)
@click.option("--priority", type=click.IntRange(0, 7), default=3, show_default=True)
@click.option(
    "--express",
    is_flag=True,
    help="Mark the message express (MQMSG_DELIVERY_EXPRESS) instead of recoverable.",
)
@report_options
@click.pass_context
@reports_errors
def send(
    ctx: click.Context,
    destination: str,
    body: str | None,
    file_path: Path | None,
    label: str,
    count: int,
    transactional: bool | None,
    priority: int,
    express: bool,
    reports: dict[str, Any],
) -> None:
    """Send a message to DEST (a queue name or format name).

    The body comes from --body, --file, or standard input when it is not a
    terminal. With --count N, N messages with that body are sent.
    """
    payload = _read_body(body, file_path)
    delivery = "express" if express else "recoverable"
    progress = _progress(count, f"sending to {destination}")
    started = time.monotonic()
    with client(ctx) as qm:
        if progress is None:
            for _ in range(count):
                message_id = qm.send(
                    destination,
                    payload,
                    label=label,
                    priority=priority,
                    delivery=delivery,
                    transactional=transactional,
                    **reports,
                )
                if count == 1:
                    click.echo(message_id)
        else:
            with progress:
                task = progress.add_task("send", total=count)
                for _ in range(count):
                    qm.send(
                        destination,
                        payload,
                        label=label,
                        priority=priority,
                        delivery=delivery,
                        transactional=transactional,
                        **reports,
                    )
                    progress.advance(task)
    if count > 1:
        elapsed = time.monotonic() - started
        click.echo(f"sent {count} messages to {destination} in {elapsed:.2f} s")


def _read_body(body: str | None, file_path: Path | None) -> bytes:
    if body is not None and file_path is not None:
        msg = "give --body or --file, not both"
        raise click.UsageError(msg)
    if body is not None:
        return body.encode("utf-8")
    if file_path is not None:
        try:
            return file_path.read_bytes()
        except OSError as exc:
            msg = f"cannot read {file_path}: {exc.strerror}"
            raise CliError(msg) from None
    if not sys.stdin.isatty():
        return sys.stdin.buffer.read()
    return b""


# --------------------------------------------------------------------------
# receive
# --------------------------------------------------------------------------


@cli.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds to wait, in all, for messages to arrive.",
)
@click.option("--peek", is_flag=True, help="Show the messages without removing them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per message.")
@click.pass_context
@reports_errors
def receive(
    ctx: click.Context, queue_name: str, count: int, timeout: float, peek: bool, as_json: bool
) -> None:
    """Receive (or --peek at) up to --count messages from QUEUE and print them."""
    render = message_json_line if as_json else message_text
    got = 0
    with client(ctx) as qm:
        if peek:
            first = qm.peek(queue_name, timeout)
            messages: list[Message] = [] if first is None else [first]
            if first is not None and count > 1:
                messages = qm.peek_range(queue_name, after=0, max=count)
            for found in messages:
                click.echo(render(found))
            got = len(messages)
        else:
            deadline = time.monotonic() + timeout
            progress = _progress(count, f"receiving from {queue_name}")
            with progress if progress is not None else _nothing():
                task = progress.add_task("receive", total=count) if progress else None
                for _ in range(count):
                    remaining = max(0.0, deadline - time.monotonic())
                    message = qm.receive(queue_name, remaining)
                    if message is None:
                        break
                    got += 1
                    if progress is not None and task is not None:
                        progress.advance(task)
                        if sys.stdout.isatty():
                            # The same terminal: print above the bar, not through it.
                            progress.console.print(render(message), markup=False, highlight=False)
                            continue
                    click.echo(render(message))
    if got < count:
        verb = "found" if peek else "received"
        waited = f" within {timeout:g} s" if timeout else ""
        click.echo(f"note: {verb} {got} of {plural(count, 'message')} (no more{waited})", err=True)


@cli.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per message.")
@click.pass_context
def peek(ctx: click.Context, queue_name: str, count: int, timeout: float, as_json: bool) -> None:
    """Show up to --count messages of QUEUE without removing them (`receive --peek`)."""
    ctx.invoke(
        receive, queue_name=queue_name, count=count, timeout=timeout, peek=True, as_json=as_json
    )


@cli.command()
@click.argument("source")
@click.argument("destination", metavar="DEST")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    help="Seconds to wait, in all, for messages to arrive in SOURCE.",
)
@click.option("--lookup-id", type=click.IntRange(min=1), help="Move this message (subqueues).")
@click.option("--all", "move_all", is_flag=True, help="Move every message (subqueues).")
@click.pass_context
@reports_errors
def move(
    ctx: click.Context,
    source: str,
    destination: str,
    count: int,
    timeout: float,
    lookup_id: int | None,
    move_all: bool,
) -> None:
    """Move up to --count messages from SOURCE to DEST, one transaction each.

    Each message is received from SOURCE and sent to DEST in one transaction:
    after a failure it is in exactly one of the two queues, never both and
    never neither. Both queues must be transactional (MSMQ allows no
    transaction on the others). This is how messages come back out of
    system$;deadxact, for example.

    Between a queue and its subqueues (`qmgr move 'orders;poison' orders`),
    a message moves as MSMQ moves it: it keeps its id and properties, and
    the queues may be non-transactional. --lookup-id N moves that message,
    --all every message there.
    """
    if lookup_id is not None or move_all or is_subqueue_move(source, destination):
        subqueue_move(ctx, source, destination, count=count, lookup_id=lookup_id, move_all=move_all)
        return
    moved = 0
    deadline = time.monotonic() + timeout
    with client(ctx) as qm:
        progress = _progress(count, f"moving {source} to {destination}")
        with progress if progress is not None else _nothing():
            task = progress.add_task("move", total=count) if progress else None
            for _ in range(count):
                with qm.begin() as tx:
                    message = tx.receive(source, max(0.0, deadline - time.monotonic()))
                    if message is None:
                        tx.abort()
                        break
                    tx.send(
                        destination,
                        message.body,
                        label=message.label,
                        correlation_id=message.correlation_id,
                        app_specific=message.app_specific,
                        priority=message.priority,
                        acknowledge=message.acknowledge,
                        journal=message.journal,
                        admin_queue=message.admin_queue,
                        response_queue=message.response_queue,
                        time_to_reach_queue=message.time_to_reach_queue,
                        time_to_be_received=message.time_to_be_received,
                    )
                moved += 1
                if progress is not None and task is not None:
                    progress.advance(task)
    click.echo(f"moved {plural(moved, 'message')} from {source} to {destination}")
    if moved < count:
        waited = f" within {timeout:g} s" if timeout else ""
        click.echo(f"note: moved {moved} of {plural(count, 'message')} (no more{waited})", err=True)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --------------------------------------------------------------------------
# status
# --------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
@reports_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Show the queue manager's identity, connections, transactions, queues and
    the delivery to and from other queue managers."""
    with client(ctx) as qm:
        info = qm.status()
    if as_json:
        click.echo(json.dumps(status_json(info), indent=2))
        return
    console = stdout_console()
    uptime = dt.timedelta(seconds=round(info.uptime.total_seconds()))
    console.print(f"queue manager      {info.qm_name}", highlight=False, markup=False)
    console.print(f"guid               {info.qm_guid}", highlight=False)
    console.print(f"version            {info.server_version}", highlight=False)
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
    if info.erasing:
        console.print(
            f"erasing            messages of {info.erasing} deleted or purged queue(s)",
            highlight=False,
        )
    console.print()
    console.print(queue_table(info.queues))
    print_peering_tables(console, info)


def status_json(info: Status) -> dict[str, Any]:
    """The status as one JSON-ready object (``qmgr status --json``)."""
    return {
        "qm_name": info.qm_name,
        "qm_guid": str(info.qm_guid),
        "server_version": info.server_version,
        "started_at": iso(info.started_at),
        "uptime_seconds": round(info.uptime.total_seconds(), 3),
        "connections": info.connections,
        "open_transactions": info.open_transactions,
        "uncommitted_bytes": info.uncommitted_bytes,
        "commits": info.commits,
        "aborts": info.aborts,
        "batches": info.batches,
        "erasing": info.erasing,
        "queues": [queue_json(q) for q in info.queues],
        "outgoing": [outgoing_json(o) for o in info.outgoing],
        "incoming": [incoming_json(i) for i in info.incoming],
    }


if __name__ == "__main__":
    main()
