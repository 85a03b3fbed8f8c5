"""Poison handling meets delivery outcomes: a message in a queue's subqueue is still
in its destination, so receiving it, expiring it, or deleting its queue reports its
fate as it would from the queue itself; a move reports nothing."""

from __future__ import annotations

import pytest

import storage
from qmgr.core import names
from qmgr.core.trace import Tracer
from storage import PoisonSettings
from wire import MessageClass

from .conftest import OpenCore
from .harness import (
    DEADLETTER,
    NEG_RECEIVE,
    POS_RECEIVE,
    WALL,
    CoreHarness,
    abort_receive,
    classes,
    expire,
    flush_poison,
    messages,
)

#: One aborted receive too many moves a message straight to ``;poison``.
STRAIGHT_TO_POISON = PoisonSettings(retry_count=0, retry_cycles=0, retry_delay=5.0)


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"q": {"transactional": True, "poison": STRAIGHT_TO_POISON}, "admin": {}})


def send_poisoned(qm: CoreHarness, body: bytes, **properties: object) -> None:
    """Send ``body`` to ``q`` in a transaction, then abort a receive of it: it moves to
    ``q;poison``."""
    tx = qm.begin()
    qm.prepare("q", body, tx=tx, **properties)
    assert qm.commit(tx) == [None]
    assert abort_receive(qm, "q") is not None
    flush_poison(qm)
    assert qm.bodies("q;poison") == [body]


def test_a_move_reports_nothing_and_a_receive_from_the_subqueue_reports_the_receipt(
    qm: CoreHarness,
) -> None:
    send_poisoned(qm, b"m", acknowledge=POS_RECEIVE | NEG_RECEIVE, admin_queue="admin")
    assert classes(qm, "admin") == []  # an abort and a move are not a fate
    tx = qm.begin()
    assert qm.take("q;poison", tx) is not None
    assert qm.commit(tx) == [None]
    [ack] = messages(qm, "admin")
    assert ack.message_class == MessageClass.ACK_RECEIVE
    assert ack.response_queue == "q"  # the message's destination, not the subqueue


def test_a_move_back_in_a_transaction_reports_nothing(qm: CoreHarness) -> None:
    send_poisoned(qm, b"m", acknowledge=POS_RECEIVE, admin_queue="admin")
    source, target = qm.core.moves.move_queues("q;poison", "q")
    tx = qm.begin()
    held = qm.core.moves.move_one(source, target, lookup_id=0, tx=tx, now=qm.tick())
    assert held is not None
    assert qm.commit(tx) == [None]
    assert qm.bodies("q") == [b"m"]
    assert classes(qm, "admin") == []
    assert qm.take("q") is not None  # received at last: reported once
    assert classes(qm, "admin") == [MessageClass.ACK_RECEIVE]


def test_a_message_in_a_subqueue_expires_with_its_reports(qm: CoreHarness) -> None:
    send_poisoned(
        qm,
        b"late",
        time_to_be_received=30,
        acknowledge=NEG_RECEIVE,
        admin_queue="admin",
        journal=DEADLETTER,
    )
    # The move carried the deadline: the expiry index follows the message.
    [due] = qm.store.due_messages(before=float("inf"), limit=10)
    assert due.queue_id == qm.core.queue("q;poison").queue_id
    assert expire(qm, WALL + 29.9) == 0
    assert expire(qm, WALL + 30) == 1
    assert qm.visible("q;poison") == []
    assert classes(qm, "admin") == [MessageClass.NACK_RECEIVE_TIMEOUT]
    [dead] = messages(qm, names.DEADXACT)
    assert (dead.body, dead.message_class) == (b"late", MessageClass.NACK_RECEIVE_TIMEOUT)


def test_deleting_a_queue_reports_the_messages_of_its_subqueues(qm: CoreHarness) -> None:
    send_poisoned(qm, b"p", acknowledge=NEG_RECEIVE, admin_queue="admin")
    _, unit = qm.core.queues.delete("q")
    qm.core.queues.deleted(qm.write(unit))
    qm.erase_all(step=2)
    assert classes(qm, "admin") == [MessageClass.NACK_Q_DELETED]
    assert qm.store.queues_to_erase() == []


def test_a_purge_of_a_subqueue_reports_its_messages(qm: CoreHarness) -> None:
    send_poisoned(qm, b"p", acknowledge=NEG_RECEIVE, admin_queue="admin")
    assert qm.purge("q;poison") == 1
    qm.erase_all(step=2)
    assert classes(qm, "admin") == [MessageClass.NACK_Q_PURGED]


def test_the_note_of_a_moved_message_goes_with_it(qm: CoreHarness) -> None:
    tx = qm.begin()
    qm.prepare("q", b"n", tx=tx)
    assert qm.commit(tx) == [None]
    record = qm.core.queue("q")
    [(lookup_id, stored)] = qm.store.read_range(record.queue_id, limit=10)
    moved = storage.moved_record(
        storage.encode_message_record(
            storage.message_payload(stored),
            priority=3,
            size=1,
            arrived_time=WALL,
            deadline=WALL + 9,
            note=b"\x01" * 16,
        )
    )
    assert storage.message_note(moved) == b"\x01" * 16
    assert storage.message_deadline(moved) == WALL + 9
    assert storage.message_arrived_time(moved) == WALL
    assert bytes(storage.message_payload(moved)) == bytes(storage.message_payload(stored))
    assert lookup_id == 1


def test_a_trace_finds_a_message_in_a_subqueue(qm: CoreHarness) -> None:
    send_poisoned(qm, b"p")
    [stored] = messages(qm, "q;poison")
    ordinal = stored.ordinal
    tracer = Tracer(qm.store)
    key = tracer.key(qm.store.qm_guid, ordinal)
    scanned, left = qm.store.scan_messages(tracer.queues(), select=tracer.select(key), limit=10)
    assert left == []
    found = tracer.findings(qm.store.qm_guid, ordinal, scanned, {})
    assert [(f.kind, f.place) for f in found] == [("subqueue", "q;poison")]
    assert "subqueue" in found[0].detail
