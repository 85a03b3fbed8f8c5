"""Distribution lists with real daemons: the CLI and the SDK, a list reaching
local queues and a queue on another queue manager in one transaction, and
seed 000's rule there (the remote non-transactional queue refuses its copy)."""

from __future__ import annotations

import json

import pytest
from cli.kit import ok, run
from helpers import DaemonProcess, Peers, remote_queue, send_in_transaction, wait_until

from qmgr.client import DistributionList, MessageClass, QueueExists, QueueNotFound


def test_the_dl_commands(shared_daemon: DaemonProcess, queue_name: str) -> None:
    a, b, dl = f"{queue_name}-a", f"{queue_name}-b", f"{queue_name}-dl"
    for queue in (a, b):
        ok(run(shared_daemon, "queue", "create", queue, "--transactional"))
    assert "2 targets" in ok(run(shared_daemon, "dl", "create", dl, a, b)).output
    assert "1 target" in ok(run(shared_daemon, "dl", "remove", dl, b)).output
    ok(run(shared_daemon, "dl", "add", dl, b))
    [listed] = json.loads(ok(run(shared_daemon, "dl", "list", dl, "--json")).output)
    assert listed == {"name": dl, "targets": [a, b]}
    ok(run(shared_daemon, "send", f"DL={dl}", "--body", "to both"))
    for queue in (a, b):
        message = json.loads(ok(run(shared_daemon, "receive", queue, "--json")).output)
        assert message["body"] == "to both"
    ok(run(shared_daemon, "dl", "create", f"{dl}-empty"))
    empty = run(shared_daemon, "send", f"DL={dl}-empty", "--body", "to nobody")
    assert empty.exit_code == 1
    assert "reaches no queue" in empty.output
    ok(run(shared_daemon, "dl", "delete", f"{dl}-empty"))
    ok(run(shared_daemon, "dl", "delete", dl))
    missing = run(shared_daemon, "dl", "list", dl)
    assert missing.exit_code == 1
    assert "does not exist" in missing.output


def test_a_list_across_queue_managers_in_one_transaction(peers: Peers) -> None:
    _, b, qa, qb = peers
    qa.create_queue("local", transactional=True)
    qa.create_queue("acks")
    qb.create_queue("orders", transactional=True)
    qb.create_queue("plain")
    targets = ["local", remote_queue(b, "orders"), remote_queue(b, "plain")]
    qa.create_list("everyone", targets)
    assert qa.get_list("EVERYONE") == DistributionList("everyone", tuple(targets))
    with pytest.raises(QueueExists):
        qa.create_list("everyone")
    send_in_transaction(qa, "DL=everyone", b"hello", acknowledge=0x04, admin_queue="acks")
    local = qa.receive("local", timeout=5)
    assert local is not None
    arrived = qb.receive("orders", timeout=20)
    assert arrived is not None
    assert arrived.id == local.id  # all copies share one message id
    # Seed 000: the non-transactional queue refuses its copy at the other host.
    wait_until(lambda: len(qb.peek_range("system$;deadxact")) == 1, timeout=20)
    [dead] = qb.peek_range("system$;deadxact")
    assert dead.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    wait_until(lambda: len(qa.peek_range("acks")) == 1, timeout=20)
    [nack] = qa.peek_range("acks")
    assert nack.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    assert qb.peek("plain") is None
    qa.delete_list("everyone")
    with pytest.raises(QueueNotFound):
        qa.send("DL=everyone", b"x")
