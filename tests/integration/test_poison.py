"""Poison handling and subqueues against a real daemon, with short settings given as
queue properties: the whole cycle (``;retry``, back, ``;poison``), every kind of
abort counted, moves, subqueue rules, a restart while messages wait in
``;retry``, the trio SDK and the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import trio
from helpers import DaemonProcess, qmgr, wait_until

from qmgr.client import (
    AccessDenied,
    InvalidArgument,
    Message,
    QueueKind,
    QueueManager,
    QueueNotFound,
    QuotaExceeded,
    TransactionUsageError,
    connect,
    open_client,
)


def peeked(qm: QueueManager, queue: str) -> Message | None:
    return qm.peek(queue)


def abort_once(qm: QueueManager, queue: str, timeout: float = 10.0) -> Message:
    """Receive the next message of ``queue`` in a transaction (waiting for it) and abort."""
    with qm.begin() as tx:
        message = tx.receive(queue, timeout=timeout)
        assert message is not None, f"nothing came to {queue} within {timeout} s"
        tx.abort()
    return message


def eventually(predicate: Callable[[], bool]) -> None:
    wait_until(predicate, 20.0)


def test_a_poison_message_retries_comes_back_and_ends_in_poison(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q = queue_name
    with connect(shared_daemon.address) as qm:
        qm.create_queue(q, transactional=True, journal=True)
        [info] = [i for i in qm.list_queues() if i.name == q]
        assert not info.poison_handling
        qm.set_queue_properties(q, retry_count=1, retry_cycles=1, retry_delay=1)
        [info] = [i for i in qm.list_queues() if i.name == q]
        assert (info.retry_count, info.retry_cycles, info.retry_delay) == (1, 1, 1.0)
        subqueues = {i.name: i for i in qm.list_queues() if i.name.startswith(q + ";")}
        assert subqueues[q + ";retry"].kind is QueueKind.SUBQUEUE
        assert subqueues[q + ";poison"].kind is QueueKind.SUBQUEUE
        message_id = qm.send(q, b"poison pill", label="bad")

        # Cycle 1: retry_count + 1 = 2 receives, then ;retry.
        first = abort_once(qm, q)
        assert (first.abort_count, first.move_count, first.last_move_time) == (0, 0, None)
        second = abort_once(qm, q)
        assert second.abort_count == 1
        eventually(lambda: peeked(qm, q + ";retry") is not None)
        waiting = peeked(qm, q + ";retry")
        assert waiting is not None
        assert (waiting.id, waiting.body, waiting.label) == (message_id, b"poison pill", "bad")
        assert (waiting.abort_count, waiting.move_count) == (0, 1)
        assert waiting.last_move_time is not None
        assert qm.peek(q) is None

        # It comes back by itself (a receive waits for it); cycle 2 ends in ;poison.
        third = abort_once(qm, q)
        assert (third.id, third.abort_count, third.move_count) == (message_id, 0, 2)
        abort_once(qm, q)
        eventually(lambda: peeked(qm, q + ";poison") is not None)
        poisoned = peeked(qm, q + ";poison")
        assert poisoned is not None
        assert (poisoned.id, poisoned.abort_count, poisoned.move_count) == (message_id, 0, 3)
        assert qm.peek(q) is None
        assert qm.peek(q + ";retry") is None

        # Back by hand after a fix; received from the queue at last.
        moved = qm.move(q + ";poison", q, poisoned.lookup_id)
        assert moved.count == 1
        assert moved.lookup_id is not None
        received = qm.receive(q, timeout=5)
        assert received is not None
        assert (received.id, received.lookup_id, received.move_count) == (
            message_id,
            moved.lookup_id,
            4,
        )
        journaled = qm.peek(q + ";journal")
        assert journaled is not None
        assert journaled.id == message_id


def test_disconnect_idle_timeout_and_abort_prepared_are_counted(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=["--set", "transactions.idle_timeout=0.3"])
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True)
        qm.send("q", b"m")
    # A client that disconnects in the middle of its transaction.
    gone = connect(daemon.address)
    tx = gone.begin()
    assert tx.receive("q", timeout=5) is not None
    gone.close()
    with connect(daemon.address) as qm:
        eventually(lambda: (m := qm.peek("q")) is not None and m.abort_count == 1)
        # A transaction left idle past transactions.idle_timeout.
        idle = qm.begin()
        assert idle.receive("q", timeout=5) is not None
        eventually(lambda: (m := qm.peek("q")) is not None and m.abort_count == 2)
        # A prepared transaction aborted by its xid, from another connection.
        tx = qm.begin(xid="poison-test")
        assert tx.receive("q", timeout=5) is not None
        tx.prepare()
    with connect(daemon.address) as other:
        other.abort_prepared("poison-test")
        eventually(lambda: (m := other.peek("q")) is not None and m.abort_count == 3)
        # A commit counts nothing, and the message goes with its counters.
        with other.begin() as tx:
            assert tx.receive("q", timeout=5) is not None
        assert other.peek("q") is None


def test_counters_and_retries_survive_a_restart(daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        qm.create_queue("q", transactional=True, retry_count=1, retry_cycles=1, retry_delay=1)
        qm.send("q", b"m")
        qm.send("q", b"n")
        abort_once(qm, "q")
        abort_once(qm, "q")  # m's second abort: to ;retry, back in 1 s (after the restart)
        with qm.begin() as tx:
            message = tx.receive("q", timeout=5)
            assert message is not None
            assert message.body == b"n"
            tx.abort()
        eventually(lambda: peeked(qm, "q;retry") is not None)
        eventually(lambda: (m := qm.peek("q")) is not None and m.abort_count == 1)
    daemon.restart()
    with connect(daemon.address) as qm:
        [info] = [i for i in qm.list_queues() if i.name == "q"]
        assert (info.retry_count, info.retry_cycles, info.retry_delay) == (1, 1, 1.0)
        n = qm.peek("q")
        assert n is not None
        assert (n.body, n.abort_count) == (b"n", 1)
        # The one in ;retry comes back after the restart, on time.
        eventually(lambda: len(qm.peek_range("q")) == 2)
        back = qm.peek_range("q")[1]
        assert (back.body, back.move_count, back.abort_count) == (b"m", 2, 0)


def test_subqueues_take_no_sends_share_the_quota_and_go_with_their_queue(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q = queue_name
    with connect(shared_daemon.address) as qm:
        qm.create_queue(q, quota=300)  # not transactional: subqueues all the same
        for name in (q + ";retry", q + ";poison", f"DIRECT=OS:.\\private$\\{q};poison"):
            with pytest.raises(AccessDenied, match="nothing can be sent to a subqueue"):
                qm.send(name, b"x")
        for body in (b"a" * 100, b"b" * 100, b"c" * 100):
            qm.send(q, body)
        assert qm.move(q, q + ";poison").count == 1
        assert qm.move(q, q + ";retry").count == 1
        with pytest.raises(QuotaExceeded):
            qm.send(q, b"d" * 100)  # the subqueues' bytes count
        with pytest.raises(InvalidArgument, match="own subqueues"):
            qm.move(q, "system$;deadletter")
        with pytest.raises(QueueNotFound):
            qm.move(q + ";poison", q, 999)
        with pytest.raises(TransactionUsageError):
            with qm.begin() as tx:
                tx.move(q, q + ";poison")
        # Purging the queue leaves its subqueues; receiving from one frees quota.
        assert qm.purge_queue(q) == 1
        assert [m.body[:1] for m in qm.peek_range(q + ";poison")] == [b"a"]
        received = qm.receive(q + ";retry")
        assert received is not None
        assert received.body[:1] == b"b"
        qm.send(q, b"e" * 100)
        assert qm.delete_queue(q) == 2  # the queue's message and the poison one
        with pytest.raises(QueueNotFound):
            qm.peek(q + ";poison")


def test_moves_in_a_transaction_and_all_at_once(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q = queue_name
    with connect(shared_daemon.address) as qm:
        qm.create_queue(q, transactional=True)
        ids = [qm.send(q, f"m{i}".encode()) for i in range(5)]
        with qm.begin() as tx:
            assert tx.move(q, q + ";poison")
            tx.abort()
        assert qm.peek(q + ";poison") is None
        with qm.begin() as tx:
            assert tx.move(q, q + ";poison")
            assert tx.move(q, q + ";poison")
        assert [m.id for m in qm.peek_range(q + ";poison")] == ids[:2]
        moved = qm.move(q, q + ";poison", all=True)
        assert moved.count == 3
        assert [m.id for m in qm.peek_range(q + ";poison")] == ids
        assert moved.lookup_id == qm.peek_range(q + ";poison")[-1].lookup_id
        assert qm.move(q, q + ";poison").count == 0


def test_the_trio_sdk_moves_and_sets_properties(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    q = queue_name

    async def main() -> None:
        async with open_client(shared_daemon.address) as qm:
            await qm.create_queue(q, transactional=True, retry_count=2)
            await qm.set_queue_properties(q, retry_delay=5)
            [info] = [i for i in await qm.list_queues() if i.name == q]
            assert (info.retry_count, info.retry_cycles, info.retry_delay) == (2, 2, 5.0)
            await qm.set_queue_properties(q, poison_handling=False)
            [info] = [i for i in await qm.list_queues() if i.name == q]
            assert not info.poison_handling
            await qm.send(q, b"x")
            async with qm.begin() as tx:
                assert await tx.receive(q, timeout=5) is not None
                await tx.abort()
            async with qm.begin() as tx:
                assert await tx.move(q, q + ";retry")
            moved = await qm.move(q + ";retry", q, all=True)
            assert moved.count == 1
            message = await qm.peek(q)
            assert message is not None
            assert (message.abort_count, message.move_count) == (0, 2)

    trio.run(main)


def test_the_command_line(shared_daemon: DaemonProcess, queue_name: str) -> None:
    q = queue_name
    made = qmgr(shared_daemon, "queue", "create", q, "--transactional", "--retry-count", "0")
    assert made.returncode == 0, made.stderr
    assert "poison handling" in made.stdout
    changed = qmgr(shared_daemon, "queue", "set", q, "--retry-cycles", "0", "--retry-delay", "60")
    assert changed.returncode == 0, changed.stderr
    assert "0 x 0, 1m" in changed.stdout
    listed = json.loads(qmgr(shared_daemon, "queue", "list", "--json").stdout)
    [mine] = [entry for entry in listed if entry["name"] == q]
    assert (mine["retry_count"], mine["retry_cycles"], mine["retry_delay"]) == (0, 0, 60.0)
    table = qmgr(shared_daemon, "queue", "list").stdout
    assert "retries" in table
    with connect(shared_daemon.address) as qm:
        message_id = qm.send(q, b"cli")
        abort_once(qm, q)  # straight to ;poison: no retry cycles
        eventually(lambda: peeked(qm, q + ";poison") is not None)
    shown = json.loads(qmgr(shared_daemon, "queue", "show", q, "--json").stdout)
    assert [(s["name"], s["depth"]) for s in shown["subqueues"]] == [
        (q + ";retry", 0),
        (q + ";poison", 1),
    ]
    peek = qmgr(shared_daemon, "peek", q + ";poison", "--json")
    assert peek.returncode == 0, peek.stderr
    found = json.loads(peek.stdout)
    assert (found["id"], found["abort_count"], found["move_count"]) == (message_id, 0, 1)
    assert found["last_move_time"] is not None
    refused = qmgr(shared_daemon, "send", q + ";poison", "--body", "x")
    assert refused.returncode == 1
    assert "nothing can be sent to a subqueue" in refused.stderr
    back = qmgr(shared_daemon, "move", q + ";poison", q, "--lookup-id", str(found["lookup_id"]))
    assert back.returncode == 0, back.stderr
    assert back.stdout.startswith("moved 1 message")
    received = json.loads(qmgr(shared_daemon, "receive", q, "--json").stdout)
    assert (received["id"], received["move_count"]) == (message_id, 2)
    off = qmgr(shared_daemon, "queue", "set", q, "--no-poison")
    assert "poison handling off" in off.stdout
    again = qmgr(shared_daemon, "move", q + ";poison", q, "--all")
    assert again.stdout.startswith("moved 0 messages")
