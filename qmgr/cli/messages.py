"""``qmgr send``, ``receive``, ``peek`` and ``move``, and how a message is printed.

``send`` takes its body from ``--body``, ``--file`` or standard input, and its
report options from :mod:`.reports`. ``receive`` and ``peek`` print each
message as text for people (:func:`message_text`) or as one JSON object a
line (:func:`message_json_line`), each received message only once its output
took it (:mod:`.receiving`). ``move`` moves each message in a
transaction of its own (a receive and a send), or as MSMQ moves it, keeping
its id (:mod:`.poison`): between a queue and its subqueues, the messages
named (``--lookup-id``, ``--all``), and dead letters ``--back`` to their
queues. A run of more than one message
shows a progress bar on stderr when stderr is a terminal (:class:`Progress`).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeVar

import click
from rich import progress as rich_progress

from qmgr.client import (
    ConnectionLost,
    Message,
    MessageTooLarge,
    QueueError,
    TransactionUsageError,
)
from qmgr.client.shapes import iso, message_json
from wire.client import MAX_MESSAGE_BODY

from .common import (
    CliError,
    Seconds,
    client,
    count_option,
    json_option,
    plural,
    quoted,
    reports_errors,
    stderr_console,
)
from .poison import is_subqueue_move, move_keeping_ids
from .receiving import ShownReceiver
from .reports import report_options

__all__ = [
    "Progress",
    "message_json",
    "message_json_line",
    "message_text",
    "move",
    "peek",
    "receive",
    "send",
]

F = TypeVar("F", bound=Callable[..., Any])

# --------------------------------------------------------------------------
# send
# --------------------------------------------------------------------------


@click.command()
@click.argument("destination", metavar="DEST")
@click.option("--body", help="The message body, as text (sent as UTF-8).")
@click.option(
    "--file",
    "file_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the body from this file.",
)
@click.option(
    "--label",
    default="",
    help="The message label (at most 250 characters; to another queue manager, "
    "249 UTF-16 units and no NUL).",
)
@count_option("Send this many messages, each with the body.")
@click.option(
    "--transactional/--no-transactional",
    default=None,
    help="Insist on a single-message transaction, or on none (default: as the queue needs).",
)
@click.option(
    "--priority",
    type=click.IntRange(0, 7),
    default=3,
    show_default=True,
    help="The message's priority, from 0 (lowest) to 7 (highest).",
)
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
    started = time.monotonic()
    sent = 0
    with (
        _saying_how_many_on_error("sent", lambda: sent, count),
        client(ctx) as qm,
        Progress.of(count, f"sending to {destination}", "send") as progress,
    ):
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
            sent += 1
            if count == 1:
                click.echo(message_id)
            progress.advance()
    if count > 1:
        elapsed = time.monotonic() - started
        click.echo(f"sent {count} messages to {destination} in {elapsed:.2f} s")


@contextmanager
def _saying_how_many_on_error(verb: str, done: Callable[[], int], count: int) -> Iterator[None]:
    """In a run of ``count`` messages, say on stderr how many were ``verb`` when an
    error stops it (the error itself follows): an operator who runs the command
    again can then ask for the rest only."""
    try:
        yield
    except QueueError as exc:
        if count > 1:
            maybe = (
                "; the one under way when the connection was lost may have been too"
                if isinstance(exc, ConnectionLost)
                else ""
            )
            note = f"note: {verb} {done()} of {plural(count, 'message')} before the error{maybe}"
            click.echo(note, err=True)
        raise


def _read_body(body: str | None, file_path: Path | None) -> bytes:
    if body is not None and file_path is not None:
        msg = "give --body or --file, not both"
        raise click.UsageError(msg)
    if body is not None:
        # Bytes that were not UTF-8 in the argument come back as they were given.
        return body.encode("utf-8", "surrogateescape")
    if file_path is not None:
        try:
            with file_path.open("rb") as file:
                return _read_at_most(file, str(file_path))
        except OSError as exc:
            msg = f"cannot read {file_path}: {exc.strerror}"
            raise CliError(msg) from None
    if not sys.stdin.isatty():
        try:
            return _read_at_most(sys.stdin.buffer, "standard input")
        except OSError as exc:
            msg = f"cannot read standard input: {exc.strerror or exc}"
            raise CliError(msg) from None
    return b""


def _read_at_most(file: BinaryIO, what: str) -> bytes:
    """The whole of ``file``, read no further than one byte past what a message
    may carry (a larger file, or ``/dev/zero``, is refused, not read whole).

    Raises:
        MessageTooLarge: it is larger than a message body may be.
    """
    data = file.read(MAX_MESSAGE_BODY + 1)
    if len(data) > MAX_MESSAGE_BODY:
        msg = f"{what} holds over {MAX_MESSAGE_BODY} bytes, the limit of a message body (4 MB)"
        raise MessageTooLarge(msg)
    return data


# --------------------------------------------------------------------------
# receive, peek and move
# --------------------------------------------------------------------------


def _timeout_option(help: str, *, minimum: float = 0) -> Callable[[F], F]:
    """``--timeout SECONDS`` (default 0: no wait) with the command's own help text."""
    return click.option(
        "--timeout",
        type=Seconds(min=minimum),
        default=0.0,
        show_default=True,
        help=help,
    )


@click.command()
@click.argument("queue_name", metavar="QUEUE")
@count_option("Receive (or peek at) at most this many messages.")
@_timeout_option("Seconds to wait, in all, for messages to arrive.")
@click.option("--peek", is_flag=True, help="Show the messages without removing them.")
@json_option("Print one JSON object per message.")
@click.pass_context
@reports_errors
def receive(
    ctx: click.Context, queue_name: str, count: int, timeout: float, peek: bool, as_json: bool
) -> None:
    """Receive (or --peek at) up to --count messages from QUEUE and print them.

    Each message is removed only once its output took it: written out, and
    into a pipe, read by its reader (see README). With
    --peek and a --count over 1, messages are listed in the order they arrived.
    """
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
            if sys.stdout is None:  # closed (`>&-`): what is received would go nowhere
                msg = "standard output is closed: the messages received would be shown nowhere"
                raise CliError(msg)
            deadline = time.monotonic() + timeout
            taker = ShownReceiver(qm, queue_name)
            with Progress.of(count, f"receiving from {queue_name}", "receive") as progress:
                for _ in range(count):
                    remaining = max(0.0, deadline - time.monotonic())
                    message = taker.receive(remaining, lambda m: progress.echo(render(m)))
                    if message is None:
                        break
                    got += 1
                    progress.advance()
    if got < count:
        verb = "found" if peek else "received"
        waited = f" within {timeout:g} s" if timeout else ""
        click.echo(f"note: {verb} {got} of {plural(count, 'message')} (no more{waited})", err=True)


@click.command()
@click.argument("queue_name", metavar="QUEUE")
@count_option("Show at most this many messages.")
@_timeout_option("Seconds to wait for the first message to arrive.")
@json_option("Print one JSON object per message.")
@click.pass_context
def peek(ctx: click.Context, queue_name: str, count: int, timeout: float, as_json: bool) -> None:
    """Show up to --count messages of QUEUE without removing them (`receive --peek`).

    Over one, they are listed in the order they arrived (lookup ids), which is
    the order of receives except on a non-transactional queue with priorities.
    """
    ctx.invoke(
        receive, queue_name=queue_name, count=count, timeout=timeout, peek=True, as_json=as_json
    )


@click.command()
@click.argument("source")
@click.argument("destination", metavar="[DEST]", required=False)
@count_option("Move at most this many messages.")
# The help of `move` shows its bound as 0.0, that of `receive` and `peek` as 0.
@_timeout_option("Seconds to wait, in all, for messages to arrive in SOURCE.", minimum=0.0)
@click.option(
    "--lookup-id",
    type=click.IntRange(min=1),
    help="Move this message, keeping its id (subqueues, dead letters).",
)
@click.option(
    "--all",
    "move_all",
    is_flag=True,
    help="Move every message, keeping their ids (subqueues, dead letters).",
)
@click.option(
    "--back",
    is_flag=True,
    help="Out of a dead-letter queue, each message back to the queue it was sent to (no DEST).",
)
@click.pass_context
@reports_errors
def move(
    ctx: click.Context,
    source: str,
    destination: str | None,
    count: int,
    timeout: float,
    lookup_id: int | None,
    move_all: bool,
    back: bool,
) -> None:
    """Move up to --count messages from SOURCE to DEST, one transaction each.

    Each message is received from SOURCE and sent to DEST in one transaction:
    after a failure it is in exactly one of the two queues, never both and
    never neither. Both queues must be transactional (MSMQ allows no
    transaction on the others). The message sent is a new one, with a new id.

    Between a queue and its subqueues (`qmgr move 'orders;poison' orders`),
    and with --lookup-id N (that message) or --all (every message there), a
    message moves as MSMQ moves it: in one atomic step, keeping its id and
    properties, and the queues may be non-transactional.

    Dead letters move that way out of system$;deadletter and system$;deadxact
    into a queue of their kind (`qmgr move 'system$;deadxact' orders
    --lookup-id N`), or, with --back and no DEST, each back to the queue it
    was sent to (`qmgr move 'system$;deadletter' --back --all`); those whose
    queue is not here (a remote queue, a list, a queue deleted since) stay.
    A dead letter moved becomes an ordinary message of its queue again: its
    class is normal and its time to be received does not apply again.
    """
    if back:
        if destination is not None:
            msg = "--back moves each message back to the queue it was sent to: give no DEST"
            raise click.UsageError(msg)
        move_keeping_ids(ctx, source, None, count=count, lookup_id=lookup_id, move_all=move_all)
        return
    if destination is None:
        msg = "give DEST, or --back to move dead letters back to the queues they were sent to"
        raise click.UsageError(msg)
    if lookup_id is not None or move_all or is_subqueue_move(source, destination):
        move_keeping_ids(
            ctx, source, destination, count=count, lookup_id=lookup_id, move_all=move_all
        )
        return
    moved = 0
    deadline = time.monotonic() + timeout
    progress_bar = Progress.of(count, f"moving {source} to {destination}", "move")
    with (
        _saying_how_many_on_error("moved", lambda: moved, count),
        client(ctx) as qm,
        progress_bar as progress,
    ):
        while moved < count:
            # The message is looked at first and sent before it is received, so
            # that a send the daemon refuses (no such queue, no right to it, no
            # admin queue) ends the transaction before anything was received:
            # a refused move is not an aborted receive, which poison handling
            # would count. Inside the transaction, the daemon refuses a receive
            # from a non-transactional queue and a send to one as
            # TransactionUsageError: said here in terms of this command.
            message = qm.peek(source, max(0.0, deadline - time.monotonic()))
            if message is None:
                break
            with qm.begin() as tx:
                try:
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
                    taken = tx.receive(source, 0.0, lookup_id=message.lookup_id)
                except TransactionUsageError:
                    # The send's failure (raised by the receive that follows it),
                    # or the receive's own.
                    failed_send = tx._state.failed_request == "a send"
                    raise _needs_transactional(destination if failed_send else source) from None
                if taken is None:
                    tx.abort()  # another reader took it since: look again
                    continue
            moved += 1
            progress.advance()
    click.echo(f"moved {plural(moved, 'message')} from {source} to {destination}")
    if moved < count:
        waited = f" within {timeout:g} s" if timeout else ""
        click.echo(f"note: moved {moved} of {plural(count, 'message')} (no more{waited})", err=True)


def _needs_transactional(queue: str) -> CliError:
    """The error of a move whose ``queue`` (its source or destination) is not transactional."""
    msg = f"qmgr move needs transactional queues, and {quoted(queue)} is not transactional"
    hint = (
        "each message is received and sent in one transaction, "
        "which MSMQ allows only on transactional queues"
    )
    return CliError(msg, hint=hint)


class Progress:
    """The progress of a run of messages: a bar on stderr, or nothing.

    There is a bar only when stderr is a terminal and the run has more than
    one message; without one, :meth:`advance` does nothing and :meth:`echo`
    is ``click.echo``.
    """

    def __init__(
        self, bar: rich_progress.Progress | None, task: rich_progress.TaskID | None
    ) -> None:
        self._bar = bar
        self._task = task

    @classmethod
    @contextmanager
    def of(cls, total: int, what: str, task: str) -> Iterator[Progress]:
        """A bar labelled ``what`` for ``total`` messages while the block runs (see above)."""
        console = stderr_console()
        if total <= 1 or not console.is_terminal:
            yield cls(None, None)
            return
        bar = rich_progress.Progress(
            rich_progress.TextColumn(what),
            rich_progress.BarColumn(),
            rich_progress.MofNCompleteColumn(),
            rich_progress.TimeRemainingColumn(),
            console=console,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        with bar:
            yield cls(bar, bar.add_task(task, total=total))

    def advance(self) -> None:
        """One more message done."""
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)

    def echo(self, text: str) -> None:
        """Print a line on stdout: above the bar if stdout is the bar's terminal, not through it."""
        if self._bar is not None and sys.stdout.isatty():
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            click.echo(text)


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------


def message_json_line(message: Message) -> str:
    """A message as one line of JSON."""
    return json.dumps(message_json(message), ensure_ascii=False)


def message_text(message: Message) -> str:
    """A message for people: a header line, a property line, then the body."""
    header = (
        f"--- {message.queue}  lookup id {message.lookup_id}  id {message.id}\n"
        f"    label {message.label!r}  priority {message.priority}  "
        f"sent {iso(message.sent_time)}  {plural(len(message.body), 'byte')}"
    )
    if message.message_class:
        about = message.acknowledged_id
        header += f"\n    class {message.class_name}" + (f"  about {about}" if about else "")
    if message.abort_count or message.move_count:
        header += f"\n    aborted {message.abort_count}  moved {message.move_count}"
        if message.last_move_time is not None:
            header += f" (last {iso(message.last_move_time)})"
    try:
        text = message.body.decode("utf-8")
    except UnicodeDecodeError:
        text = f"<{len(message.body)} bytes of binary data; use --json to see them>"
    else:
        if not all(part.isprintable() for part in _LINE_BREAKS.split(text)):
            header += _ESCAPED_NOTE
            text = "".join(map(_escaped, text.replace("\\", "\\\\")))
    return f"{header}\n{text}"


#: What a body keeps as it is besides the characters that print: a body is
#: judged as names are (``str.isprintable``, see ``common.quoted``), its lines
#: and tabs aside. The rest (escape sequences, a carriage return that
#: overwrites a line, the invisible characters that reorder or hide text) is
#: shown escaped, so that a message cannot drive the operator's terminal.
_LINE_BREAKS: Final = re.compile("[\n\t]")


#: The header line of a body shown escaped.
_ESCAPED_NOTE: Final = (
    "\n    (control characters escaped: \\xNN, \\uNNNN, \\ as \\\\; --json for the bytes)"
)


def _escaped(char: str) -> str:
    """``char`` as it is if it prints (or is a newline or a tab), else escaped."""
    if char.isprintable() or char in "\n\t":
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
