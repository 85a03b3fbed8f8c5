"""Reports of a message's fate, decided by the core: acknowledgments to admin
queues, the source's dead-letter and journal copies, expiry by time to be
received, and purges and deletions."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import WALL, CoreHarness, classes, expire, messages

import storage
from qmgr.core import names, ranges
from qmgr.core.outcomes import acknowledgment_wanted, correlation_of, deadline_of
from wire import MessageClass, MessageProperties

POS_ARRIVAL, POS_RECEIVE, NEG_ARRIVAL, NEG_RECEIVE = 0x01, 0x02, 0x04, 0x08
FULL = 0x0F
DEADLETTER, JOURNAL = 0x01, 0x02


@pytest.fixture
def qm(tmp_path: Path) -> CoreHarness:
    harness = CoreHarness(tmp_path / "store")
    harness.create("q", transactional=True)
    harness.create("plain")
    harness.create("admin")
    return harness


def send_tx(qm: CoreHarness, queue: str, body: bytes, **properties: object) -> None:
    tx = qm.begin()
    qm.prepare(queue, body, tx=tx, **properties)
    assert qm.commit(tx) == [None]


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("level", "message_class", "wanted"),
    [
        (POS_ARRIVAL, MessageClass.ACK_REACH_QUEUE, True),
        (POS_RECEIVE, MessageClass.ACK_REACH_QUEUE, False),
        (POS_RECEIVE, MessageClass.ACK_RECEIVE, True),
        (NEG_ARRIVAL, MessageClass.NACK_BAD_DST_Q, True),
        (NEG_ARRIVAL, MessageClass.NACK_RECEIVE_TIMEOUT, False),
        (NEG_RECEIVE, MessageClass.NACK_RECEIVE_TIMEOUT, True),
        (NEG_RECEIVE, MessageClass.NACK_Q_PURGED, True),
        (NEG_RECEIVE, MessageClass.NACK_REACH_QUEUE_TIMEOUT, False),
        (0x0C, MessageClass.NACK_REACH_QUEUE_TIMEOUT, True),
        (FULL, MessageClass.NORMAL, False),
    ],
)
def test_acknowledgment_levels(level: int, message_class: int, wanted: bool) -> None:
    assert acknowledgment_wanted(level, message_class) is wanted


def test_deadlines_follow_the_send_time() -> None:
    message = MessageProperties(sent_time=WALL, time_to_be_received=30, time_to_reach_queue=10)
    assert deadline_of(message) == WALL + 30
    assert deadline_of(message, reach_only=True) == WALL + 10
    assert deadline_of(MessageProperties(sent_time=WALL)) is None


# --------------------------------------------------------------------------- acknowledgments


def test_arrival_and_receipt_are_acknowledged_to_the_admin_queue(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"body", acknowledge=FULL, admin_queue="admin", label="order 7")
    [sent] = messages(qm, "q")
    [arrived] = messages(qm, "admin")
    assert arrived.message_class == MessageClass.ACK_REACH_QUEUE
    assert arrived.correlation_id == correlation_of(sent)
    assert (arrived.label, arrived.body, arrived.response_queue) == ("order 7", b"", "q")
    assert (arrived.acknowledge, arrived.journal, arrived.admin_queue) == (0, 0, "")
    assert arrived.destination == "admin"
    assert arrived.source_qm == qm.store.qm_guid
    assert arrived.message_id != sent.message_id
    # The admin queue is not transactional: neither is the acknowledgment.
    assert not arrived.transactional
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    assert classes(qm, "admin") == [MessageClass.ACK_REACH_QUEUE]  # not before the commit
    assert qm.commit(tx) == [None]
    assert classes(qm, "admin") == [MessageClass.ACK_REACH_QUEUE, MessageClass.ACK_RECEIVE]
    # Receiving the acknowledgments reports nothing more.
    assert qm.take("admin") is not None
    assert qm.take("admin") is not None
    assert classes(qm, "admin") == []


def test_an_aborted_receive_reports_nothing(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"x", acknowledge=POS_RECEIVE, admin_queue="admin")
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    qm.core.abort(tx)
    assert classes(qm, "admin") == []
    assert qm.take("plain") is None
    assert [body for _, body in qm.visible("q")] == [b"x"]


def test_no_level_no_report(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"x", admin_queue="admin")
    assert qm.take("q") is not None
    assert messages(qm, "admin") == []
    for key in names.SYSTEM_QUEUES:
        assert messages(qm, key) == []


def test_a_receive_outside_a_transaction_is_acknowledged(qm: CoreHarness) -> None:
    qm.send("plain", b"x", acknowledge=POS_RECEIVE, admin_queue="admin")
    assert qm.take("plain") is not None
    assert classes(qm, "admin") == [MessageClass.ACK_RECEIVE]


def test_a_transactional_admin_queue_gets_transactional_acknowledgments(qm: CoreHarness) -> None:
    qm.create("tadmin", transactional=True)
    qm.send("plain", b"x", acknowledge=POS_ARRIVAL, admin_queue="tadmin")
    [ack] = messages(qm, "tadmin")
    assert ack.transactional
    assert ack.message_class == MessageClass.ACK_REACH_QUEUE


def test_a_full_admin_queue_still_takes_acknowledgments(qm: CoreHarness) -> None:
    qm.create("small", quota=1)
    qm.send("plain", b"x", acknowledge=POS_ARRIVAL | POS_RECEIVE, admin_queue="small")
    assert qm.take("plain") is not None
    assert classes(qm, "small") == [MessageClass.ACK_REACH_QUEUE, MessageClass.ACK_RECEIVE]


def test_an_acknowledgment_to_a_deleted_admin_queue_is_dead_lettered(qm: CoreHarness) -> None:
    qm.create("gone")
    qm.send("plain", b"x", acknowledge=POS_RECEIVE, admin_queue="gone")
    _, unit = qm.core.delete_queue("gone")
    qm.core.queue_deleted(qm.write(unit))
    assert qm.take("plain") is not None
    [dead] = messages(qm, names.DEADLETTER)
    assert dead.message_class == MessageClass.NACK_BAD_DST_Q
    assert dead.destination == "gone"


def test_one_arrival_acknowledgment_per_local_queue(qm: CoreHarness) -> None:
    qm.create("plain2")
    qm.send("plain,plain2", b"x", acknowledge=POS_ARRIVAL, admin_queue="admin")
    assert classes(qm, "admin") == [MessageClass.ACK_REACH_QUEUE] * 2


# --------------------------------------------------------------------------- journals


def test_source_journal_of_a_received_transactional_message(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"x", journal=JOURNAL)
    assert messages(qm, names.SYSTEM_JOURNAL) == []
    assert qm.take("q") is not None
    [copy] = messages(qm, names.SYSTEM_JOURNAL)
    assert (copy.body, copy.message_class) == (b"x", 0)


def test_source_journal_of_a_delivered_plain_message(qm: CoreHarness) -> None:
    qm.send("plain", b"x", journal=JOURNAL)
    assert [m.body for m in messages(qm, names.SYSTEM_JOURNAL)] == [b"x"]
    assert qm.take("plain") is not None
    assert len(messages(qm, names.SYSTEM_JOURNAL)) == 1


# --------------------------------------------------------------------------- expiry


def test_an_expired_message_is_removed_with_its_reports(qm: CoreHarness) -> None:
    send_tx(
        qm,
        "q",
        b"late",
        time_to_be_received=30,
        acknowledge=FULL,
        admin_queue="admin",
        journal=DEADLETTER,
    )
    send_tx(qm, "q", b"no limit")
    assert expire(qm, WALL + 29.9) == 0
    assert expire(qm, WALL + 30) == 1
    assert [body for _, body in qm.visible("q")] == [b"no limit"]
    assert classes(qm, "admin") == [MessageClass.ACK_REACH_QUEUE, MessageClass.NACK_RECEIVE_TIMEOUT]
    assert messages(qm, "admin")[1].body == b"late"  # a NACK carries the body
    [dead] = messages(qm, names.DEADXACT)
    assert (dead.body, dead.message_class) == (b"late", MessageClass.NACK_RECEIVE_TIMEOUT)
    assert qm.core.queue("q").depth == 1
    assert qm.store.due_messages(before=float("inf"), limit=10) == []
    assert expire(qm, WALL + 1000) == 0


def test_an_expired_message_without_levels_just_leaves(qm: CoreHarness) -> None:
    qm.send("plain", b"x", time_to_be_received=5)
    assert expire(qm, WALL + 6) == 1
    assert qm.visible("plain") == []
    for key in (*names.SYSTEM_QUEUES, "admin"):
        assert messages(qm, key) == []


def test_a_held_message_expires_only_when_its_transaction_aborts(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"a", time_to_be_received=5, acknowledge=FULL, admin_queue="admin")
    send_tx(qm, "q", b"b", time_to_be_received=5, acknowledge=FULL, admin_queue="admin")
    committing, aborting = qm.begin(), qm.begin()
    assert qm.take("q", committing) is not None
    assert qm.take("q", aborting) is not None
    step = qm.core.expiry.step(WALL + 10, 10)
    assert (step.units, step.held) == ([], 2)
    assert qm.commit(committing) == [None]
    qm.core.abort(aborting)
    assert expire(qm, WALL + 10) == 1
    assert classes(qm, "admin")[2:] == [MessageClass.ACK_RECEIVE, MessageClass.NACK_RECEIVE_TIMEOUT]
    assert qm.visible("q") == []


def test_a_message_being_expired_is_not_received(qm: CoreHarness) -> None:
    qm.send("plain", b"x", time_to_be_received=5)
    step = qm.core.expiry.step(WALL + 5, 10)
    assert len(step.units) == 1
    assert qm.take("plain") is None  # held by the expiry until its unit is written
    qm.core.expiry.done(step.messages[0], RuntimeError("never written"))
    assert qm.take("plain") is not None


def test_expiry_is_ordered_and_bounded(qm: CoreHarness) -> None:
    for seconds in (50, 10, 30, 20, 40):
        qm.send("plain", str(seconds).encode(), time_to_be_received=seconds)
    step = qm.core.expiry.step(WALL + 35, 2)
    assert len(step.units) == 2
    assert step.more
    assert qm.core.expiry.next_deadline(WALL + 35) == WALL + 40
    assert qm.core.expiry.next_deadline(WALL + 50) is None


def test_a_crash_loses_no_deadline(qm: CoreHarness) -> None:
    qm.send("plain", b"x", time_to_be_received=5)
    qm.crash()
    assert expire(qm, WALL + 5) == 1


# --------------------------------------------------------------------------- purge, delete


def test_a_purge_reports_what_asked(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"asked", acknowledge=NEG_RECEIVE, admin_queue="admin", journal=DEADLETTER)
    send_tx(qm, "q", b"silent")
    send_tx(qm, "q", b"asked too", acknowledge=NEG_RECEIVE, admin_queue="admin")
    assert qm.purge("q") == 3
    assert messages(qm, "admin") == []  # reported as the messages are erased
    qm.erase_all(step=2)
    nacks = messages(qm, "admin")
    assert [m.message_class for m in nacks] == [MessageClass.NACK_Q_PURGED] * 2
    assert sorted(m.body for m in nacks) == [b"asked", b"asked too"]
    assert [(m.body, m.message_class) for m in messages(qm, names.DEADXACT)] == [
        (b"asked", MessageClass.NACK_Q_PURGED)
    ]
    assert qm.store.queues_to_erase() == []


def test_a_purged_message_held_by_a_committing_transaction_is_received(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"x", acknowledge=NEG_RECEIVE | POS_RECEIVE, admin_queue="admin")
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    qm.purge("q")
    qm.erase_all()
    assert qm.commit(tx) == [None]
    qm.erase_all()
    assert classes(qm, "admin") == [MessageClass.ACK_RECEIVE]


def test_deleting_a_queue_reports_its_messages(qm: CoreHarness) -> None:
    qm.create("doomed", transactional=True, journal=True)
    for index in range(5):
        send_tx(qm, "doomed", b"%d" % index, acknowledge=NEG_RECEIVE, admin_queue="admin")
    assert qm.take("doomed") is not None  # one journal copy, which reports nothing
    _, unit = qm.core.delete_queue("doomed")
    qm.core.queue_deleted(qm.write(unit))
    qm.erase_all(step=2)
    assert classes(qm, "admin") == [MessageClass.NACK_Q_DELETED] * 4
    assert qm.store.queues_to_erase() == []


# --------------------------------------------------------------------------- two-phase and ranges


def test_a_prepared_receive_is_reported_at_its_commit_once(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"x", acknowledge=POS_RECEIVE, admin_queue="admin")
    tx = qm.core.two_phase.begin(qm, 0, qm.tick(), "g1")
    assert qm.take("q", tx) is not None
    unit = qm.core.two_phase.prepare(tx, WALL)
    qm.core.two_phase.prepared(tx, unit, qm.write(unit))
    assert classes(qm, "admin") == []
    qm.crash()
    for _ in range(2):
        unit = qm.core.two_phase.resolve(["g1"], commit=True, wall=WALL)
        qm.core.two_phase.resolved(qm.write(unit))
    assert classes(qm, "admin") == [MessageClass.ACK_RECEIVE]


def test_remove_through_reports_each_receipt(qm: CoreHarness) -> None:
    send_tx(qm, "q", b"a", acknowledge=POS_RECEIVE, admin_queue="admin")
    send_tx(qm, "q", b"b")
    send_tx(qm, "q", b"c", acknowledge=POS_RECEIVE, admin_queue="admin")
    sent = messages(qm, "q")
    queue = qm.core.queue("q")
    step = ranges.removal_step(qm.core, queue, through=3, limit=10, wall=WALL)
    assert step is not None
    held, unit = step
    removed, _ = ranges.removal_done(qm.core, queue, held, qm.write(unit))
    assert removed == 3
    acks = messages(qm, "admin")
    assert [ack.correlation_id for ack in acks] == [
        correlation_of(sent[0]),
        correlation_of(sent[2]),
    ]
    assert [ack.message_class for ack in acks] == [MessageClass.ACK_RECEIVE] * 2


def test_an_unreadable_message_does_not_stop_expiry(qm: CoreHarness) -> None:
    queue = qm.core.queue("plain").queue_id
    qm.write(storage.Unit((storage.AppendMessage(queue, b"not a message", 3, 13, deadline=WALL),)))
    qm.send("plain", b"x", time_to_be_received=1)
    expire(qm, WALL + 5)
    assert qm.store.due_messages(before=float("inf"), limit=10) == []
    # The readable one expired; the unreadable one stays, and expiry went on.
    assert [bytes(storage.message_payload(r)) for _, r in qm.store.read_range(queue)] == [
        b"not a message"
    ]
