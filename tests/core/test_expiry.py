"""Messages whose time to be received has passed (``qmgr.core.expiry``): found in
the store's deadline index in bounded steps, held while their removal is written,
removed with the reports of NACK_RECEIVE_TIMEOUT, and left alone while a
transaction holds them."""

from __future__ import annotations

import storage
from qmgr.core import names
from wire import MessageClass

from .harness import DEADLETTER, FULL, WALL, CoreHarness, classes, expire, messages


def test_an_expired_message_is_removed_with_its_reports(qm: CoreHarness) -> None:
    qm.send_tx(
        "q",
        b"late",
        time_to_be_received=30,
        acknowledge=FULL,
        admin_queue="admin",
        journal=DEADLETTER,
    )
    qm.send_tx("q", b"no limit")
    assert expire(qm, WALL + 29.9) == 0
    assert expire(qm, WALL + 30) == 1
    assert qm.bodies("q") == [b"no limit"]
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
    qm.send_tx("q", b"a", time_to_be_received=5, acknowledge=FULL, admin_queue="admin")
    qm.send_tx("q", b"b", time_to_be_received=5, acknowledge=FULL, admin_queue="admin")
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


def test_an_expired_message_is_not_journaled(qm: CoreHarness) -> None:
    qm.create("kept", journal=True)
    qm.send("kept", b"x", time_to_be_received=5)
    assert expire(qm, WALL + 5) == 1
    assert qm.visible("kept") == []
    assert qm.visible("kept;journal") == []  # it was not received


def test_a_message_of_a_purged_queue_is_left_to_the_erase_steps(qm: CoreHarness) -> None:
    qm.send("plain", b"x", time_to_be_received=5)
    qm.purge("plain")
    step = qm.core.expiry.step(WALL + 5, 10)
    assert (step.units, step.held, step.more) == ([], 0, False)
    qm.erase_all()
    assert qm.store.due_messages(before=float("inf"), limit=10) == []


def test_outgoing_entries_are_handed_to_the_peering_layer(qm: CoreHarness) -> None:
    remote = "DIRECT=TCP:10.9.9.9:1801\\private$\\far"
    qm.send(remote, b"x", time_to_reach_queue=5)
    step = qm.core.expiry.step(WALL + 5, 10)
    assert step.units == []
    [entry] = step.outgoing
    outgoing = qm.store.get_queue_by_id(entry.queue_id)
    assert outgoing is not None
    assert outgoing.kind is storage.QueueKind.OUTGOING
    assert entry.deadline == WALL + 5
