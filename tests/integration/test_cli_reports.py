"""``qmgr send`` with acknowledgments, journal levels and timers, and how
``qmgr receive`` shows the reports, against a real daemon."""

from __future__ import annotations

import json

from cli.kit import ok, run, sent_id
from helpers import DaemonProcess


def test_send_asks_for_acknowledgments_and_receive_shows_them(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    acks = f"{queue_name}-acks"
    ok(run(shared_daemon, "queue", "create", queue_name, "--transactional"))
    ok(run(shared_daemon, "queue", "create", acks))
    reports = ["--ack", "pos-arrival", "--ack", "pos-receive", "--admin-queue", acks]
    timers = ["--journal", "deadletter", "--ttbr", "3600"]
    sent = sent_id(shared_daemon, queue_name, "hello", *reports, *timers)
    message = json.loads(ok(run(shared_daemon, "receive", queue_name, "--json")).output)
    assert (message["acknowledge"], message["journal"], message["time_to_be_received"]) == (
        3,
        1,
        3600,
    )
    first = json.loads(ok(run(shared_daemon, "receive", acks, "--json")).output)
    second = json.loads(ok(run(shared_daemon, "receive", acks, "--json")).output)
    assert [first["class_name"], second["class_name"]] == ["ACK_REACH_QUEUE", "ACK_RECEIVE"]
    assert first["acknowledged_id"] == second["acknowledged_id"] == sent
    sent_id(shared_daemon, acks, "x", "--ack", "pos-arrival", "--admin-queue", acks)
    text = ok(run(shared_daemon, "receive", acks)).output
    assert "class ACK_REACH_QUEUE" not in text  # the message itself is a normal one
    text = ok(run(shared_daemon, "receive", acks)).output
    assert "class ACK_REACH_QUEUE  about {" in text


def test_ack_without_an_admin_queue_is_a_usage_error(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    result = run(shared_daemon, "send", queue_name, "--body", "x", "--ack", "pos-receive")
    assert result.exit_code == 2
    assert "--ack needs --admin-queue" in result.output
