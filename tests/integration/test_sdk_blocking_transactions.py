"""The blocking SDK's transactions against a real daemon: MSMQ's transaction rules,
commit and abort, pipelined sends and their errors, and a disconnect's abort."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
from helpers import DaemonProcess, settings
from sdk_blocking_kit import send_when

from qmgr.client import (
    LimitExceeded,
    QueueManager,
    QueueNotFound,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
    connect,
)

# --------------------------------------------------------------------------
# MSMQ's transaction rules
# --------------------------------------------------------------------------


def test_non_transactional_send_to_transactional_queue(qm: QueueManager, txq: str) -> None:
    with pytest.raises(TransactionUsageError, match="transactional"):
        qm.send(txq, b"x", transactional=False)
    qm.send(txq, b"single", transactional=True)
    qm.send(txq, b"auto")
    messages = qm.peek_range(txq)
    assert [m.text for m in messages] == ["single", "auto"]
    assert all(m.transactional and m.priority == 0 for m in messages)


def test_single_message_transaction_to_plain_queue(qm: QueueManager, plainq: str) -> None:
    with pytest.raises(TransactionUsageError):
        qm.send(plainq, b"x", transactional=True)
    qm.send(plainq, b"x", transactional=False)


def test_send_in_transaction_to_plain_queue(qm: QueueManager, plainq: str) -> None:
    tx = qm.begin()
    tx.send(plainq, b"x")
    with pytest.raises(TransactionUsageError, match="not transactional"):
        tx.commit()
    assert tx.ended
    assert qm.peek(plainq) is None


def test_receive_in_transaction_from_plain_queue(qm: QueueManager, plainq: str) -> None:
    qm.send(plainq, b"x")
    tx = qm.begin()
    with pytest.raises(TransactionUsageError, match="not transactional"):
        tx.receive(plainq)
    # A failed operation dooms its transaction: it can only abort.
    with pytest.raises(TransactionUsageError, match="aborted because"):
        tx.commit()
    assert qm.receive(plainq) is not None


# --------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------


def test_commit_makes_all_sends_visible_at_once_in_order(qm: QueueManager, txq: str) -> None:
    qm.send(txq, b"before")
    with qm.begin() as tx:
        for i in range(10):
            tx.send(txq, f"m{i}", label=str(i))
        assert [m.text for m in qm.peek_range(txq)] == ["before"]
    messages = qm.peek_range(txq)[1:]
    assert [m.text for m in messages] == [f"m{i}" for i in range(10)]
    first = messages[0].lookup_id
    assert [m.lookup_id for m in messages] == list(range(first, first + 10))
    assert len({m.id for m in messages}) == 10


def test_abort_returns_messages_to_their_places(qm: QueueManager, txq: str) -> None:
    for i in range(5):
        qm.send(txq, f"m{i}")
    before = qm.peek_range(txq)
    tx = qm.begin()
    taken = [tx.receive(txq), tx.receive(txq)]
    tx.send(txq, b"discarded")
    assert [m.text for m in qm.peek_range(txq)] == ["m2", "m3", "m4"]
    assert qm.status().open_transactions >= 1
    locked = next(q for q in qm.list_queues() if q.name == txq).locked
    assert locked == 2
    tx.abort()
    assert [m.lookup_id for m in taken if m] == [m.lookup_id for m in before[:2]]
    after = qm.peek_range(txq)
    assert [(m.lookup_id, m.text) for m in after] == [(m.lookup_id, m.text) for m in before]
    with pytest.raises(TransactionNotFound, match="ended"):
        tx.commit()


def test_exception_in_block_aborts(qm: QueueManager, txq: str) -> None:
    qm.send(txq, b"keep")
    with pytest.raises(RuntimeError), qm.begin() as tx:
        assert tx.receive(txq) is not None
        tx.send(txq, b"never")
        raise RuntimeError("boom")
    assert tx.ended
    assert [m.text for m in qm.peek_range(txq)] == ["keep"]


def test_receive_and_send_commit_together(qm: QueueManager, queue_name: str) -> None:
    source, target = queue_name, f"{queue_name}-out"
    qm.create_queue(source, transactional=True)
    qm.create_queue(target, transactional=True)
    qm.send(source, b"work")
    with qm.begin() as tx:
        work = tx.receive(source, timeout=1)
        assert work is not None
        tx.send(target, work.body + b" done")
    assert qm.peek(source) is None
    done = qm.receive(target)
    assert done is not None
    assert done.body == b"work done"


def test_transactional_receive_waits(
    shared_daemon: DaemonProcess, qm: QueueManager, txq: str
) -> None:
    ready = threading.Event()
    thread = send_when(ready, shared_daemon.address, txq, b"late")
    with qm.begin() as tx:
        ready.set()
        message = tx.receive(txq, timeout=5)
    thread.join(10)
    assert message is not None
    assert message.body == b"late"
    assert qm.peek(txq) is None


def test_failed_pipelined_send_aborts_the_commit(qm: QueueManager, txq: str) -> None:
    qm.send(txq, b"stays")
    missing = f"missing-{uuid.uuid4().hex}"
    tx = qm.begin()
    assert tx.receive(txq) is not None
    tx.send(txq, b"a")
    tx.send(missing, b"b")
    tx.send(txq, b"c")
    with pytest.raises(QueueNotFound, match=r"aborted.*does not exist"):
        tx.commit()
    assert tx.ended
    # Nothing applied: no sends, and the received message is back.
    assert [m.text for m in qm.peek_range(txq)] == ["stays"]


def test_failed_pipelined_send_is_raised_by_the_next_call(qm: QueueManager, txq: str) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    with qm.begin() as tx:
        tx.send(missing, b"b")
        with pytest.raises(QueueNotFound, match="cannot commit"):
            tx.receive(txq)
        with pytest.raises(QueueNotFound):
            tx.send(txq, b"c")
        tx.abort()
    assert qm.peek(txq) is None


def test_a_refused_receive_leaves_a_transaction_that_takes_nothing_more(
    qm: QueueManager, txq: str
) -> None:
    for body in (b"work-1", b"work-2"):
        qm.send(txq, body)
    missing = f"missing-{uuid.uuid4().hex}"
    with qm.begin() as tx:
        first = tx.receive(txq)
        assert first is not None
        with pytest.raises(QueueNotFound, match="does not exist"):
            tx.receive(missing)
        # An application that goes on is told at once, before it takes work-2.
        with pytest.raises(
            QueueNotFound, match="a receive in transaction 1 failed, so it cannot commit"
        ):
            tx.receive(txq)
        tx.abort()
    assert [m.body for m in qm.peek_range(txq)] == [b"work-1", b"work-2"]


def test_a_transaction_past_the_connection_s_limit_says_so_and_aborts_quietly(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=settings("limits.max_transactions_per_connection=1"))
    with connect(daemon.address) as qm:
        qm.create_queue("tq", transactional=True)
        held = qm.begin()
        refused = qm.begin()  # its Begin is pipelined, and refused
        with pytest.raises(LimitExceeded, match="could not begin: a connection may have at most 1"):
            refused.receive("tq", timeout=0)
        refused.abort()  # nothing to abort: not an error
        second = qm.begin()
        second.abort()
        held.abort()
        with qm.begin() as tx:  # the limit leaves room again
            tx.send("tq", b"x")
        assert qm.peek("tq") is not None


def test_large_pipelined_transaction(qm: QueueManager, txq: str) -> None:
    body = b"p" * 200
    with qm.begin() as tx:
        for i in range(5000):
            tx.send(txq, body, label=str(i))
    messages = qm.peek_range(txq, max=10_000)
    assert len(messages) == 5000
    assert [m.label for m in messages[:3]] == ["0", "1", "2"]
    assert messages[-1].lookup_id - messages[0].lookup_id == 4999


def test_big_bodies_in_one_transaction(qm: QueueManager, txq: str) -> None:
    body = b"B" * (3 * 1024 * 1024)
    with qm.begin() as tx:
        for _ in range(4):
            tx.send(txq, body)
    assert qm.purge_queue(txq) == 4


def test_interleaved_transactions_on_one_connection(qm: QueueManager, txq: str) -> None:
    first, second = qm.begin(), qm.begin()
    assert first.id != second.id
    first.send(txq, b"1")
    second.send(txq, b"2")
    second.commit()
    first.abort()
    assert [m.text for m in qm.peek_range(txq)] == ["2"]


def test_disconnect_aborts_the_transaction(
    shared_daemon: DaemonProcess, qm: QueueManager, txq: str
) -> None:
    qm.send(txq, b"one")
    before = qm.peek(txq)
    assert before is not None
    other = connect(shared_daemon.address)
    try:
        tx = other.begin()
        assert tx.receive(txq) is not None
        tx.send(txq, b"uncommitted")
        assert qm.peek(txq) is None
    finally:
        other.close()
    back = qm.receive(txq, timeout=5)
    assert back is not None
    assert (back.lookup_id, back.body) == (before.lookup_id, b"one")
    assert qm.receive(txq) is None


@pytest.mark.parametrize("uses", ["receive", "send"])
def test_a_commit_after_its_queue_was_deleted_raises_transaction_aborted(
    qm: QueueManager, uses: str
) -> None:
    name = f"doomed-{uuid.uuid4().hex}"
    qm.create_queue(name, transactional=True)
    qm.send(name, b"x")
    tx = qm.begin()
    if uses == "receive":
        assert tx.receive(name, timeout=1) is not None
    else:
        tx.send(name, b"y")
    qm.delete_queue(name)
    qm.create_queue(name, transactional=True)  # a new queue of the same name takes nothing
    with pytest.raises(TransactionAborted, match="was aborted: a queue it uses was deleted"):
        tx.commit()
    assert tx.ended
    assert qm.peek(name) is None
