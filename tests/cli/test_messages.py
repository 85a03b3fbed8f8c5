"""``qmgr send``, ``receive`` and ``move`` (``qmgr/cli/messages.py``), against a scripted
daemon, and how a message is printed.

The scripted daemon answers sends and transactions, and has no message to
give; the round trips through a real queue manager are in
``tests/integration/test_cli.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from fake_daemon import FakeDaemon
from helpers import DaemonProcess
from rich.console import Console
from wire_samples import QUEUE_INFO

from qmgr.cli import messages
from qmgr.client import Acknowledge, Journal, Message, MessageClass, connect
from wire import MessageProperties
from wire import client as cf

from .kit import ok, qmgr_process, run

SOURCE = uuid.UUID(int=7)
SENT = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)


def sent(daemon: FakeDaemon) -> list[cf.Send]:
    return daemon.requests_of(cf.Send)


# --------------------------------------------------------------------------
# send
# --------------------------------------------------------------------------


def test_send_prints_the_message_id(fake_daemon: FakeDaemon) -> None:
    result = ok(run(fake_daemon, "send", "orders", "--body", "héllo", "--label", "greet"))
    assert result.stdout == "m\n"
    [request] = sent(fake_daemon)
    assert (request.tx_id, request.mode) == (0, 0)
    message = request.message
    assert (message.destination, message.body, message.label) == (
        "orders",
        "héllo".encode(),
        "greet",
    )
    assert (message.priority, message.delivery) == (3, 1)


def test_send_options(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    body = tmp_path / "body.bin"
    body.write_bytes(b"\x00\xff")
    ok(run(fake_daemon, "send", "orders", "--file", str(body), "--priority", "7", "--express"))
    ok(run(fake_daemon, "send", "orders", "--body", "x", "--transactional"))
    ok(run(fake_daemon, "send", "orders", "--body", "x", "--no-transactional"))
    ok(run(fake_daemon, "send", "orders", input="from stdin"))
    first, insisting, refusing, piped = sent(fake_daemon)
    assert (first.message.body, first.message.priority, first.message.delivery) == (
        b"\x00\xff",
        7,
        0,
    )
    assert [r.mode for r in (first, insisting, refusing)] == [0, 2, 1]
    assert piped.message.body == b"from stdin"


def test_send_with_reports(fake_daemon: FakeDaemon) -> None:
    reports = ["--ack", "full-receive", "--admin-queue", "admin", "--response-queue", "answers"]
    reports += ["--journal", "journal", "--ttrq", "30", "--ttbr", "60"]
    ok(run(fake_daemon, "send", "orders", "--body", "x", *reports))
    [request] = sent(fake_daemon)
    message = request.message
    assert message.acknowledge == Acknowledge.FULL_RECEIVE
    assert (message.admin_queue, message.response_queue) == ("admin", "answers")
    assert message.journal == Journal.JOURNAL
    assert (message.time_to_reach_queue, message.time_to_be_received) == (30, 60)


def test_send_count(fake_daemon: FakeDaemon) -> None:
    result = ok(run(fake_daemon, "send", "orders", "--body", "x", "--count", "3"))
    assert result.stdout.startswith("sent 3 messages to orders in ")
    assert result.stdout.endswith(" s\n")
    assert [r.message.body for r in sent(fake_daemon)] == [b"x"] * 3


def test_a_run_stopped_by_an_error_says_how_far_it_got(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    # The quota takes two 256-byte messages: the third send is refused.
    ok(run(shared_daemon, "queue", "create", queue_name, "--quota", "600", "--transactional"))
    stopped = run(shared_daemon, "send", queue_name, "--body", "x" * 256, "--count", "5")
    assert stopped.exit_code == 1
    note, error = stopped.stderr.splitlines()
    assert note == "note: sent 2 of 5 messages before the error"
    assert error.startswith("error: ")
    assert "quota" in error
    small = f"{queue_name}-small"
    ok(run(shared_daemon, "queue", "create", small, "--quota", "450", "--transactional"))
    moved = run(shared_daemon, "move", queue_name, small, "--count", "2")
    assert moved.exit_code == 1
    assert moved.stderr.splitlines()[0] == "note: moved 1 of 2 messages before the error"


def test_send_errors(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    body = tmp_path / "body"
    body.write_text("x")
    both = run(fake_daemon, "send", "orders", "--body", "x", "--file", str(body))
    assert both.exit_code == 2
    assert "give --body or --file, not both" in both.stderr
    missing = run(fake_daemon, "send", "missing", "--body", "x")
    assert missing.exit_code == 1
    assert missing.stderr == "error: queue 'missing' does not exist\n"
    assert not sent(fake_daemon)[1:]  # the refused one only


# --------------------------------------------------------------------------
# receive and move, when there is nothing
# --------------------------------------------------------------------------


def test_receive_says_how_many_it_found(fake_daemon: FakeDaemon) -> None:
    result = ok(run(fake_daemon, "receive", "orders"))
    assert result.stdout == ""
    assert result.stderr == "note: received 0 of 1 message (no more)\n"
    waited = ok(run(fake_daemon, "receive", "orders", "--count", "2", "--timeout", "0.25"))
    assert waited.stderr == "note: received 0 of 2 messages (no more within 0.25 s)\n"
    assert [r.queue for r in fake_daemon.requests_of(cf.Receive)] == ["orders", "orders"]


def test_move_looks_before_it_begins_a_transaction(fake_daemon: FakeDaemon) -> None:
    result = ok(run(fake_daemon, "move", "orders", "billing", "--count", "2"))
    assert result.stdout == "moved 0 messages from orders to billing\n"
    assert result.stderr == "note: moved 0 of 2 messages (no more)\n"
    # It looks first: with nothing there, no transaction is begun.
    [peek] = fake_daemon.requests_of(cf.Receive)
    assert (peek.queue, peek.peek, peek.tx_id) == ("orders", True, 0)
    assert fake_daemon.requests_of(cf.Begin) == []


def test_move_says_it_needs_transactional_queues(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    plain, tx = f"{queue_name}-plain", f"{queue_name}-tx"
    ok(run(shared_daemon, "queue", "create", plain))
    ok(run(shared_daemon, "queue", "create", tx, "--transactional"))
    ok(run(shared_daemon, "send", plain, "--body", "p"))
    ok(run(shared_daemon, "send", tx, "--body", "t"))
    hint = (
        "hint: each message is received and sent in one transaction, "
        "which MSMQ allows only on transactional queues"
    )
    for source, destination in ((plain, tx), (tx, plain)):
        refused = run(shared_daemon, "move", source, destination)
        assert refused.exit_code == 1
        assert refused.stderr.splitlines() == [
            f"error: qmgr move needs transactional queues, and '{plain}' is not transactional",
            hint,
        ]
    for queue, body in ((plain, "p"), (tx, "t")):  # nothing moved
        [left] = json.loads("[" + ok(run(shared_daemon, "peek", queue, "--json")).stdout + "]")
        assert left["body"] == body


def test_a_refused_move_leaves_the_message_where_it_was_uncounted(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    source = f"{queue_name}-orders"
    ok(
        run(
            shared_daemon,
            *("queue", "create", source, "--transactional"),
            *("--retry-count", "0", "--retry-cycles", "0"),
        )
    )
    ok(run(shared_daemon, "send", source, "--body", "order-1"))
    for _ in range(2):  # poison handling would move it at the first counted abort
        refused = run(shared_daemon, "move", source, f"{queue_name}-shiped")
        assert refused.exit_code == 1
        assert "does not exist" in refused.stderr
    [left] = json.loads("[" + ok(run(shared_daemon, "peek", source, "--json")).stdout + "]")
    assert (left["body"], left["abort_count"]) == ("order-1", 0)
    assert ok(run(shared_daemon, "peek", f"{source};poison")).stdout == ""


def test_move_between_subqueues_takes_lookup_id_or_all() -> None:
    both = run(None, "move", "orders;poison", "orders", "--lookup-id", "3", "--all")
    assert both.exit_code == 2
    assert "give --lookup-id or --all, not both" in both.stderr


def test_move_back_names_no_destination_and_move_names_one() -> None:
    named = run(None, "move", "system$;deadletter", "orders", "--back")
    assert named.exit_code == 2
    assert "--back moves each message back to the queue it was sent to: give no DEST" in (
        named.stderr
    )
    neither = run(None, "move", "system$;deadletter")
    assert neither.exit_code == 2
    assert "give DEST, or --back to move dead letters back" in neither.stderr


def test_move_back_asks_for_no_target_and_keeps_the_ids(fake_daemon: FakeDaemon) -> None:
    fake_daemon.canned[cf.MoveMessages] = cf.Moved(count=1, lookup_id=9)
    one = ok(run(fake_daemon, "move", "system$;deadletter", "--back", "--lookup-id", "5"))
    assert (
        one.stdout
        == "moved 1 message from system$;deadletter back to its queue (lookup id 9 there)\n"
    )
    fake_daemon.canned[cf.MoveMessages] = cf.Moved(count=2, lookup_id=12)
    dead = dataclasses.replace(
        QUEUE_INFO,
        name="system$;deadletter",
        format_name=".\\system$;deadletter",
        kind=int(cf.QueueKind.DEADLETTER),
        transactional=False,
        depth=1,
    )
    fake_daemon.canned[cf.ListQueues] = cf.QueueList(queues=(dead,))
    every = ok(run(fake_daemon, "move", "system$;deadletter", "--back", "--all"))
    assert every.stdout == "moved 2 messages from system$;deadletter back to their queues\n"
    assert every.stderr.startswith("note: 1 message stays in system$;deadletter (no application")
    assert fake_daemon.requests_of(cf.MoveMessages) == [
        cf.MoveMessages(source="system$;deadletter", target="", lookup_id=5),
        cf.MoveMessages(source="system$;deadletter", target="", all=True),
    ]
    # Into a queue named, by lookup id: the one move that keeps the id, not a receive and a send.
    ok(run(fake_daemon, "move", "system$;deadxact", "orders", "--lookup-id", "3"))
    assert fake_daemon.requests_of(cf.MoveMessages)[-1] == cf.MoveMessages(
        source="system$;deadxact", target="orders", lookup_id=3
    )
    assert fake_daemon.requests_of(cf.Receive) == []


# --------------------------------------------------------------------------
# The progress bar
# --------------------------------------------------------------------------


def test_progress_only_on_a_terminal_and_for_more_than_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True)
    monkeypatch.setattr(messages, "stderr_console", lambda: terminal)
    with messages.Progress.of(1, "one", "task") as progress:
        assert progress._bar is None
        progress.advance()
        progress.echo("printed")
    with messages.Progress.of(3, "three", "task") as progress:
        assert progress._bar is not None
        progress.advance()
        progress.advance()
        [task] = progress._bar.tasks
        assert (task.completed, task.total) == (2, 3)
        progress.echo("above the bar")  # stdout is no terminal here: plain echo
    monkeypatch.setattr(messages, "stderr_console", lambda: Console(file=io.StringIO()))
    with messages.Progress.of(3, "three", "task") as progress:
        assert progress._bar is None  # stderr is no terminal
    assert capsys.readouterr().out == "printed\nabove the bar\n"


# --------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------


def _message(
    body: bytes = b"hi", *, counters: dict[str, Any] | None = None, **fields: Any
) -> Message:
    """A message as a receive gives it: from SOURCE, sent at SENT, arrived a second later."""
    properties = MessageProperties(
        body=body, label="l", source_qm=SOURCE, ordinal=3, sent_time=SENT.timestamp(), **fields
    )
    arrived = SENT + dt.timedelta(seconds=1)
    return Message(
        queue="q", lookup_id=5, arrived_time=arrived, properties=properties, **(counters or {})
    )


def test_message_text() -> None:
    assert messages.message_text(_message()) == (
        "--- q  lookup id 5  id {00000000-0000-0000-0000-000000000007}\\3\n"
        "    label 'l'  priority 3  sent 2023-11-14T22:13:20.000000+00:00  2 bytes\n"
        "hi"
    )


def test_message_text_of_an_acknowledgment_moved_and_binary() -> None:
    about = SOURCE.bytes_le + (9).to_bytes(4, "little")
    moved = SENT + dt.timedelta(seconds=2)
    message = _message(
        b"\xff\x00",
        message_class=int(MessageClass.ACK_REACH_QUEUE),
        correlation_id=about,
        counters={"abort_count": 1, "move_count": 2, "last_move_time": moved},
    )
    assert messages.message_text(message).splitlines()[1:] == [
        "    label 'l'  priority 3  sent 2023-11-14T22:13:20.000000+00:00  2 bytes",
        "    class ACK_REACH_QUEUE  about {00000000-0000-0000-0000-000000000007}\\9",
        "    aborted 1  moved 2 (last 2023-11-14T22:13:22.000000+00:00)",
        "<2 bytes of binary data; use --json to see them>",
    ]


def test_a_body_with_control_characters_is_shown_escaped() -> None:
    """A sender cannot drive the operator's terminal (clear it, retitle it,
    overwrite a line) or hide text; a file or pipe gets the same escaped text
    rather than a body with its escape sequences silently stripped."""
    body = "a\\b \x1b[2J\x1b]0;pwned\x07\rover\u202etxt\tend\nnext"
    lines = messages.message_text(_message(body.encode())).splitlines()
    assert lines[2] == (
        "    (control characters escaped: \\xNN, \\uNNNN, \\ as \\\\; --json for the bytes)"
    )
    assert lines[3:] == ["a\\\\b \\x1b[2J\\x1b]0;pwned\\x07\\x0dover\\u202etxt\tend", "next"]
    assert len(messages.message_text(_message(b"plain\ttext\nand \\ more")).splitlines()) == 4


def test_message_json() -> None:
    text = messages.message_json_line(_message("héllo".encode()))
    assert "\n" not in text
    data = json.loads(text)
    assert (data["body"], data["body_encoding"], data["body_size"]) == ("héllo", "utf-8", 6)
    assert data["id"] == "{00000000-0000-0000-0000-000000000007}\\3"
    assert data["correlation_id"] is None
    assert data["acknowledged_id"] is None
    assert data["sent_time"] == "2023-11-14T22:13:20.000000+00:00"
    assert data["arrived_time"] == "2023-11-14T22:13:21.000000+00:00"
    assert (data["time_to_reach_queue"], data["last_move_time"]) == (None, None)
    assert (data["delivery"], data["class_name"]) == ("recoverable", "NORMAL")
    binary = messages.message_json(_message(b"\xff\x00", correlation_id=bytes(range(20))))
    assert (binary["body"], binary["body_encoding"], binary["body_size"]) == ("/wA=", "base64", 2)
    assert binary["correlation_id"] == bytes(range(20)).hex()


# --------------------------------------------------------------------------
# what a receive shows is what it removes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("transactional", [True, False], ids=["transactional", "plain"])
def test_a_message_the_output_could_not_take_stays_in_the_queue_or_is_named(
    shared_daemon: DaemonProcess,
    queue_name: str,
    monkeypatch: pytest.MonkeyPatch,
    transactional: bool,
) -> None:
    """A full disk under ``qmgr receive q --count N >> file``: a transactional
    queue takes the message back; a non-transactional one cannot, and the
    message is named as lost."""
    ok(run(shared_daemon, "queue", "create", queue_name, *["--transactional"] * transactional))
    for body in ("one", "two", "three"):
        ok(run(shared_daemon, "send", queue_name, "--body", body))
    shown: list[str] = []

    def echo(progress: messages.Progress, text: str) -> None:
        if shown:
            raise OSError(errno.ENOSPC, "No space left on device")
        shown.append(text)

    monkeypatch.setattr(messages.Progress, "echo", echo)
    result = run(shared_daemon, "receive", queue_name, "--count", "3")
    assert isinstance(result.exception, OSError)
    assert [text.splitlines()[-1] for text in shown] == ["one"]
    with connect(shared_daemon.address) as qm:
        left = qm.peek_range(queue_name)
    if transactional:
        assert [(m.body, m.abort_count) for m in left] == [(b"two", 1), (b"three", 0)]
        assert result.stderr == ""
    else:
        assert [m.body for m in left] == [b"three"]
        assert "could not be written out: it is lost" in result.stderr


def test_a_receive_to_a_full_disk_or_closed_output_says_so_and_removes_nothing(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name, "--transactional"))
    ok(run(shared_daemon, "send", queue_name, "--body", "kept"))
    with open(os.devnull.replace("null", "full"), "w") as full:
        result = qmgr_process(shared_daemon, "receive", queue_name, stdout=full)
    assert (result.returncode, result.stderr) == (
        1,
        "error: cannot write the output: No space left on device\n",
    )
    result = qmgr_process(shared_daemon, "receive", queue_name, preexec_fn=lambda: os.close(1))
    assert (result.returncode, result.stderr) == (
        1,
        "error: standard output is closed: the messages received would be shown nowhere\n",
    )
    with connect(shared_daemon.address) as qm:
        [kept] = qm.peek_range(queue_name)
    assert kept.body == b"kept"


def test_send_reads_no_further_than_a_message_may_carry(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    """``--file /dev/zero`` or an endless pipe is refused, not read into memory whole."""
    refused = run(fake_daemon, "send", "q", "--file", "/dev/zero")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: /dev/zero holds over 4194304 bytes")
    big = tmp_path / "big"
    big.write_bytes(b"x" * (4 * 1024 * 1024 + 1))
    assert "holds over 4194304 bytes" in run(fake_daemon, "send", "q", "--file", str(big)).stderr
    assert sent(fake_daemon) == []
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * (4 * 1024 * 1024))
    ok(run(fake_daemon, "send", "q", "--file", str(exact)))
    assert len(sent(fake_daemon)[0].message.body) == 4 * 1024 * 1024


def test_a_body_argument_that_was_not_utf8_is_sent_as_given(fake_daemon: FakeDaemon) -> None:
    """Python gives non-UTF-8 bytes of an argument as lone surrogates."""
    ok(run(fake_daemon, "send", "q", "--body", "caf\udce9"))
    assert sent(fake_daemon)[0].message.body == b"caf\xe9"
