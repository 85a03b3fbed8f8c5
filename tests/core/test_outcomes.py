"""Reports of a message's fate (``qmgr.core.outcomes``): acknowledgments to admin
queues and the source's dead-letter and journal copies. Where each fate is
decided has the tests of its reports: ``test_expiry.py``, ``test_queue_admin.py``
(purges, deletions), ``test_ranges.py``, ``test_two_phase.py``,
``test_final_acks.py``."""

from __future__ import annotations

import pytest

import storage
from qmgr.core import names
from qmgr.core.errors import AccessDenied
from qmgr.core.outcomes import acknowledgment_wanted, correlation_of, deadline_of
from qmgr.core.outgoing import decode_entry
from qmgr.core.sends import check_remote_message
from wire import MAX_MESSAGE_BODY, MessageClass, MessageProperties

from .harness import (
    FULL,
    JOURNAL,
    NEG_ARRIVAL,
    NEG_RECEIVE,
    POS_ARRIVAL,
    POS_RECEIVE,
    WALL,
    CoreHarness,
    classes,
    messages,
)

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
    qm.send_tx("q", b"body", acknowledge=FULL, admin_queue="admin", label="order 7")
    [sent] = messages(qm, "q")
    [arrived] = messages(qm, "admin")
    assert arrived.message_class == MessageClass.ACK_REACH_QUEUE
    assert arrived.correlation_id == correlation_of(sent)
    # The id as MSMQ lays an OBJECTID out: the GUID in the [MS-DTYP] packet form
    # (Data1-3 little-endian), as a Windows application matches it.
    assert correlation_of(sent) == sent.source_qm.bytes_le + sent.ordinal.to_bytes(4, "little")
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


def test_an_acknowledgment_for_another_queue_manager_is_fitted_to_a_packet(
    qm: CoreHarness,
) -> None:
    """A local message may have a 250-character label, NUL in it, or a 4 MB body;
    its acknowledgments to an admin queue on another queue manager copy them,
    fitted to a packet, so that they go (they were unsendable and lost)."""
    admin = "DIRECT=TCP:10.9.9.9:1801\\private$\\acks"
    label = "l\x00" + "x" * 248
    qm.send_tx("q", b"b" * MAX_MESSAGE_BODY, acknowledge=FULL, admin_queue=admin, label=label)
    qm.purge("q")
    qm.erase_all()  # reported as the purged messages are erased
    [outgoing] = [q for q in qm.store.list_queues() if q.kind is storage.QueueKind.OUTGOING]
    acks = [
        MessageProperties.from_bytes(decode_entry(storage.message_payload(stored)).data.tobytes())
        for _, stored in qm.store.read_range(outgoing.queue_id, limit=10)
    ]
    assert [(m.message_class, m.label, len(m.body)) for m in acks] == [
        (MessageClass.ACK_REACH_QUEUE, "l" + "x" * 248, 0),
        (MessageClass.NACK_Q_PURGED, "l" + "x" * 248, 0),  # its 4 MB body would not fit
    ]
    for ack in acks:
        check_remote_message(ack)


def test_an_aborted_receive_reports_nothing(qm: CoreHarness) -> None:
    qm.send_tx("q", b"x", acknowledge=POS_RECEIVE, admin_queue="admin")
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    qm.core.abort(tx)
    assert classes(qm, "admin") == []
    assert qm.take("plain") is None
    assert qm.bodies("q") == [b"x"]


def test_no_level_no_report(qm: CoreHarness) -> None:
    qm.send_tx("q", b"x", admin_queue="admin")
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
    _, unit = qm.core.queues.delete("gone")
    qm.core.queues.deleted(qm.write(unit))
    assert qm.take("plain") is not None
    [dead] = messages(qm, names.DEADLETTER)
    assert dead.message_class == MessageClass.NACK_BAD_DST_Q
    assert dead.destination == "gone"


@pytest.mark.parametrize("permissions", [False, True])
def test_an_admin_queue_created_after_the_send_is_another_queue(
    qm: CoreHarness, permissions: bool
) -> None:
    """Where permissions are checked, the right to the admin queue was checked
    when the message was sent: a queue of that name created since (perhaps
    another principal's) does not get the acknowledgment."""
    if permissions:
        qm.core.outcomes.refuses_acknowledgment = lambda message, record: False
    qm.create("acks")
    qm.send("plain", b"x", acknowledge=POS_ARRIVAL | POS_RECEIVE, admin_queue="acks")
    assert classes(qm, "acks") == [MessageClass.ACK_REACH_QUEUE]  # the queue checked
    _, unit = qm.core.queues.delete("acks")
    qm.core.queues.deleted(qm.write(unit))
    qm.core.queues.created(qm.write(qm.core.queues.create("acks", wall=WALL + 1)))
    assert qm.take("plain") is not None
    if permissions:
        assert classes(qm, "acks") == []
        [dead] = messages(qm, names.DEADLETTER)
        assert (dead.message_class, dead.destination) == (MessageClass.NACK_BAD_DST_Q, "acks")
    else:  # as MSMQ: the queue of that name
        assert classes(qm, "acks") == [MessageClass.ACK_RECEIVE]


@pytest.mark.parametrize("admin_queue", ["admin;journal", "admin;poison", names.DEADLETTER])
def test_an_admin_queue_is_a_queue_that_takes_messages(qm: CoreHarness, admin_queue: str) -> None:
    with pytest.raises(AccessDenied, match="an admin queue takes acknowledgments"):
        qm.send("plain", b"x", acknowledge=POS_RECEIVE, admin_queue=admin_queue)
    assert qm.bodies("plain") == []
    # A response queue is the receiver's business: its reply is judged when it is sent.
    qm.send("plain", b"y", response_queue=admin_queue)
    assert qm.bodies("plain") == [b"y"]


def test_one_arrival_acknowledgment_per_local_queue(qm: CoreHarness) -> None:
    qm.create("plain2")
    qm.send("plain,plain2", b"x", acknowledge=POS_ARRIVAL, admin_queue="admin")
    assert classes(qm, "admin") == [MessageClass.ACK_REACH_QUEUE] * 2


# --------------------------------------------------------------------------- journals


def test_source_journal_of_a_received_transactional_message(qm: CoreHarness) -> None:
    qm.send_tx("q", b"x", journal=JOURNAL)
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


# --------------------------------------------------------------------------- purge, delete


# --------------------------------------------------------------------------- two-phase and ranges
