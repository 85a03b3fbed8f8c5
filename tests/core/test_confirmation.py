"""The transaction confirmation process at the source (``qmgr.core.confirmation``):
the copies a commit keeps, settled on a FinalAck or at their deadline (found
by ``qmgr.core.expiry``). The FinalAcks a destination records are in
``test_final_acks.py``."""

from __future__ import annotations

import uuid
from typing import Any

import lmdb
import pytest

import storage
from qmgr.core import names
from qmgr.core.confirmation import confirmation_deadline, wants_confirmation
from qmgr.core.engine import Limits
from qmgr.core.errors import QueueManagerError
from qmgr.core.outcomes import correlation_of
from qmgr.core.outgoing import decode_entry
from qmgr.core.sends import SendMode
from storage.keys import DB_EXPIRY, expiry_key
from wire import INFINITE, MessageClass, MessageProperties

from .conftest import OpenCore
from .harness import (
    DEADLETTER,
    JOURNAL,
    NEG_RECEIVE,
    POS_ARRIVAL,
    POS_RECEIVE,
    SOURCE,
    WALL,
    CoreHarness,
    classes,
    expire,
    messages,
)

REMOTE = "DIRECT=TCP:10.9.9.9:1801\\private$\\orders"
REMOTE_2 = "DIRECT=TCP:10.9.9.8:1801\\private$\\orders"
OUTGOING = "outgoing$;tcp:10.9.9.9:1801\\orders"
OUTGOING_2 = "outgoing$;tcp:10.9.9.8:1801\\orders"


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core({"q": {"transactional": True}, "plain": {}, "admin": {}})


def outgoing(qm: CoreHarness) -> dict[str, list[MessageProperties]]:
    """The messages waiting in each outgoing queue, by the queue's store name."""
    found: dict[str, list[MessageProperties]] = {}
    for record in qm.store.list_queues():
        if record.kind is storage.QueueKind.OUTGOING:
            found[record.name] = [
                MessageProperties.from_bytes(
                    decode_entry(storage.message_payload(stored)).data.tobytes()
                )
                for _, stored in qm.store.read_range(record.queue_id, limit=10_000)
            ]
    return found


def sent(qm: CoreHarness, name: str = OUTGOING) -> MessageProperties:
    """The one message waiting in the outgoing queue ``name``."""
    [message] = outgoing(qm)[name]
    return message


def confirmed_send(
    qm: CoreHarness, *, journal: int = DEADLETTER, ttbr: int = 30, **properties: Any
) -> MessageProperties:
    """A committed transactional send to REMOTE that asks for confirmation."""
    qm.send_tx(REMOTE, b"order", journal=journal, time_to_be_received=ttbr, **properties)
    return sent(qm)


def confirmation_due(qm: CoreHarness) -> list[tuple[float, int, int]]:
    return [
        (entry.deadline, entry.queue_id, entry.lookup_id)
        for entry in qm.store.due_messages(before=float("inf"), limit=1000)
        if entry.queue_id == storage.CONFIRMATION_QUEUE_ID
    ]


def settle(qm: CoreHarness, ordinal: int, message_class: int) -> storage.UnitOutcome | None:
    """Settle on a FinalAck and write the unit; None if nothing was waiting."""
    unit = qm.core.confirmations.settle(ordinal, message_class, wall=WALL)
    return None if unit is None else qm.write(unit)


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("ttbr", "ttrq", "delay", "expected"),
    [
        (INFINITE, 10, None, None),  # no time to be received: no deadline
        (INFINITE, INFINITE, 5.0, None),
        (30, 10, None, 40.0),  # TTBR + min(TTBR, TTRQ)
        (30, 100, None, 60.0),
        (30, INFINITE, None, 60.0),  # TTRQ infinite: TTBR + TTBR
        (30, 10, 5.0, 35.0),  # XactDelayReceiveNack given: TTBR + delay
        # A delay of 0 is a second: the destination counts from the whole
        # seconds the packet says, up to a second after the send.
        (30, INFINITE, 0.0, 31.0),
        (30, 0, None, 31.0),
        (30, 10, 100.0, 130.0),
    ],
)
def test_confirmation_deadline_follows_seed_003(
    ttbr: int, ttrq: int, delay: float | None, expected: float | None
) -> None:
    message = MessageProperties(sent_time=WALL, time_to_be_received=ttbr, time_to_reach_queue=ttrq)
    deadline = confirmation_deadline(message, delay)
    assert deadline == (None if expected is None else WALL + expected)


@pytest.mark.parametrize(
    ("journal", "transactional", "wanted"),
    [
        (DEADLETTER, True, True),
        (JOURNAL, True, True),
        (DEADLETTER | JOURNAL, True, True),
        (0, True, False),
        (DEADLETTER | JOURNAL, False, False),
    ],
)
def test_which_messages_want_confirmation(journal: int, transactional: bool, wanted: bool) -> None:
    message = MessageProperties(journal=journal).stamp(
        source_qm=SOURCE, ordinal=1, sent_time=WALL, transactional=transactional
    )
    assert wants_confirmation(message) is wanted


# --------------------------------------------------------------------------- copies at commit


@pytest.mark.parametrize("journal", [DEADLETTER, JOURNAL, DEADLETTER | JOURNAL])
def test_a_committed_transactional_send_keeps_a_copy(qm: CoreHarness, journal: int) -> None:
    tx = qm.begin()
    qm.prepare(REMOTE, b"order", tx=tx, journal=journal, time_to_be_received=30)
    [pending] = tx.confirmations
    assert isinstance(pending, storage.AddConfirmation)
    ordinal = pending.confirmation.ordinal
    assert qm.store.confirmations(ordinal) == []  # nothing before the commit
    assert qm.commit(tx) == [None]
    message = sent(qm)
    assert message.ordinal == ordinal
    assert message.transactional
    [copy] = qm.store.confirmations(ordinal)
    assert copy == storage.Confirmation(
        ordinal=ordinal,
        index=0,
        delivered=False,
        last_class=0,
        deadline=WALL + 60,  # TTBR 30 + min(TTBR, TTRQ infinite)
        destination=OUTGOING,
        payload=message.raw,
    )
    assert confirmation_due(qm) == [(WALL + 60, 0, ordinal * 256)]
    assert storage.confirmation_of_lookup(ordinal * 256) == (ordinal, 0)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_prepared_transactions_copies_are_kept_with_it_until_it_commits(
    qm: CoreHarness, commit: bool
) -> None:
    """Two-phase or not, a send to another queue manager is confirmed."""
    two_phase = qm.core.two_phase
    tx = two_phase.begin(qm, 0, qm.tick(), "g")
    qm.prepare(REMOTE, b"order", tx=tx, journal=DEADLETTER, time_to_be_received=30)
    [pending] = tx.confirmations
    ordinal = pending.confirmation.ordinal
    unit = two_phase.prepare(tx, WALL)
    assert two_phase.prepared(tx, unit, qm.write(unit)) == (set(), None)
    qm.crash()  # in doubt: only the store has the copy now
    assert qm.store.confirmations(ordinal) == []
    two_phase = qm.core.two_phase
    two_phase.resolved(qm.write(two_phase.resolve(["g"], commit=commit, wall=WALL)))
    if commit:
        assert qm.store.confirmations(ordinal) == [pending.confirmation]
        assert confirmation_due(qm) == [(WALL + 60, 0, ordinal * 256)]
    else:
        assert qm.store.confirmations(ordinal) == []
        assert confirmation_due(qm) == []


def test_one_copy_per_remote_destination_none_for_a_local_one(qm: CoreHarness) -> None:
    qm.send_tx(f"{REMOTE},q,{REMOTE_2}", b"fan", journal=JOURNAL, time_to_be_received=30)
    first, second = sent(qm, OUTGOING), sent(qm, OUTGOING_2)
    assert first.ordinal == second.ordinal
    copies = qm.store.confirmations(first.ordinal)
    assert [(c.index, c.destination, c.delivered, c.deadline) for c in copies] == [
        (0, OUTGOING, False, WALL + 60),
        (1, OUTGOING_2, False, WALL + 60),
    ]
    assert [MessageProperties.from_bytes(c.payload).body for c in copies] == [b"fan", b"fan"]
    assert [m.body for m in messages(qm, "q")] == [b"fan"]


def test_a_copy_without_time_to_be_received_has_no_deadline(qm: CoreHarness) -> None:
    message = confirmed_send(qm, ttbr=INFINITE)
    [copy] = qm.store.confirmations(message.ordinal)
    assert copy.deadline is None
    assert confirmation_due(qm) == []


def test_xact_delay_receive_nack_sets_the_deadline(open_core: OpenCore) -> None:
    qm = open_core(limits=Limits(xact_delay_receive_nack=5.0))
    message = confirmed_send(qm, time_to_reach_queue=10)
    [copy] = qm.store.confirmations(message.ordinal)
    assert copy.deadline == WALL + 35


def test_a_single_message_transaction_keeps_a_copy(qm: CoreHarness) -> None:
    prepared = qm.prepare(
        REMOTE, b"one", mode=SendMode.SINGLE, journal=DEADLETTER, time_to_be_received=30
    )
    assert prepared is not None
    assert prepared.transactional
    assert prepared.unit is not None
    outcome = qm.write(prepared.unit)
    assert outcome.error is None
    message = sent(qm)
    assert [c.deadline for c in qm.store.confirmations(message.ordinal)] == [WALL + 60]


def test_a_non_transactional_send_keeps_no_copy(qm: CoreHarness) -> None:
    qm.send(REMOTE, b"plain", journal=DEADLETTER | JOURNAL, time_to_be_received=30)
    message = sent(qm)
    assert not message.transactional
    assert qm.store.confirmations(message.ordinal) == []
    assert confirmation_due(qm) == []


def test_a_send_without_those_journal_levels_keeps_no_copy(qm: CoreHarness) -> None:
    qm.send_tx(
        REMOTE,
        b"x",
        acknowledge=POS_RECEIVE | NEG_RECEIVE,
        admin_queue="admin",
        time_to_be_received=30,
    )
    message = sent(qm)
    assert message.transactional
    assert qm.store.confirmations(message.ordinal) == []
    assert confirmation_due(qm) == []


def test_a_send_to_a_local_queue_keeps_no_copy(qm: CoreHarness) -> None:
    tx = qm.begin()
    qm.prepare("q", b"local", tx=tx, journal=DEADLETTER | JOURNAL, time_to_be_received=30)
    assert tx.confirmations == []
    assert qm.commit(tx) == [None]
    [message] = messages(qm, "q")
    assert qm.store.confirmations(message.ordinal) == []
    assert confirmation_due(qm) == []


def test_an_aborted_transaction_keeps_no_copy(qm: CoreHarness) -> None:
    tx = qm.begin()
    qm.prepare(REMOTE, b"x", tx=tx, journal=DEADLETTER, time_to_be_received=30)
    [pending] = tx.confirmations
    assert isinstance(pending, storage.AddConfirmation)
    qm.core.abort(tx)
    assert tx.confirmations == []
    assert qm.store.confirmations(pending.confirmation.ordinal) == []
    assert confirmation_due(qm) == []
    assert outgoing(qm) == {}


# --------------------------------------------------------------------------- settling on a FinalAck


def test_ack_receive_with_journal_copies_to_the_system_journal(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=JOURNAL)
    unit = qm.core.confirmations.settle(message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL)
    assert unit is not None
    assert unit.ops[0] == storage.SettleConfirmation(message.ordinal, 0)
    assert qm.write(unit).error is None
    [copy] = messages(qm, names.SYSTEM_JOURNAL)
    assert (copy.message_id, copy.body, copy.message_class) == (message.message_id, b"order", 0)
    assert messages(qm, names.DEADXACT) == []
    assert qm.store.confirmations(message.ordinal) == []
    assert confirmation_due(qm) == []


@pytest.mark.parametrize(
    ("journal", "message_class"),
    [
        pytest.param(DEADLETTER, MessageClass.ACK_RECEIVE, id="ack-receive-without-journal"),
        pytest.param(JOURNAL, MessageClass.NACK_RECEIVE_TIMEOUT, id="nack-without-deadletter"),
    ],
)
def test_an_outcome_the_journal_level_does_not_keep_drops_the_copy(
    qm: CoreHarness, journal: int, message_class: int
) -> None:
    message = confirmed_send(qm, journal=journal)
    outcome = settle(qm, message.ordinal, message_class)
    assert outcome is not None
    assert outcome.results == (storage.Done(),)
    for queue in (names.SYSTEM_JOURNAL, names.DEADXACT, names.DEADLETTER):
        assert messages(qm, queue) == []
    assert qm.store.confirmations(message.ordinal) == []


@pytest.mark.parametrize(
    "message_class",
    [
        MessageClass.NACK_RECEIVE_TIMEOUT,
        MessageClass.NACK_Q_PURGED,
        MessageClass.NACK_Q_DELETED,
        MessageClass.NACK_REACH_QUEUE_TIMEOUT,
    ],
)
def test_a_nack_the_source_keeps_goes_to_deadxact(qm: CoreHarness, message_class: int) -> None:
    message = confirmed_send(qm, journal=DEADLETTER | JOURNAL)
    outcome = settle(qm, message.ordinal, message_class)
    assert outcome is not None
    assert outcome.error is None
    [dead] = messages(qm, names.DEADXACT)
    assert dead.message_class == message_class
    assert (dead.message_id, dead.body, dead.transactional) == (message.message_id, b"order", True)
    assert messages(qm, names.SYSTEM_JOURNAL) == []
    assert messages(qm, names.DEADLETTER) == []
    assert qm.store.confirmations(message.ordinal) == []
    assert confirmation_due(qm) == []


@pytest.mark.parametrize(
    ("message_class", "kept_here"),
    [
        (MessageClass.NACK_BAD_DST_Q, True),
        (MessageClass.NACK_ACCESS_DENIED, True),
        (MessageClass.NACK_HOP_COUNT_EXCEEDED, True),
        (MessageClass.NACK_Q_EXCEED_QUOTA, True),
        (MessageClass.NACK_NOT_TRANSACTIONAL_Q, True),
    ],
)
def test_a_nack_at_arrival_puts_the_copy_in_the_dead_letter_queue_here(
    qm: CoreHarness, message_class: int, kept_here: bool
) -> None:
    """As MSMQ's source does on any negative FinalAck ([MS-MQQB] §3.1.5.7), whatever
    the destination kept (a Windows destination keeps none; qmgr's keeps one only
    for a queue that is not transactional, seed 000)."""
    message = confirmed_send(qm, journal=DEADLETTER | JOURNAL)
    unit = qm.core.confirmations.settle(message.ordinal, message_class, wall=WALL)
    assert unit is not None
    assert qm.write(unit).error is None
    assert classes(qm, names.DEADXACT) == ([message_class] if kept_here else [])
    assert messages(qm, names.SYSTEM_JOURNAL) == []
    assert qm.store.confirmations(message.ordinal) == []


def test_a_second_final_ack_settles_nothing(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER | JOURNAL)
    assert settle(qm, message.ordinal, MessageClass.NACK_RECEIVE_TIMEOUT) is not None
    assert (
        qm.core.confirmations.settle(message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL) is None
    )
    assert (
        qm.core.confirmations.settle(message.ordinal, MessageClass.NACK_Q_PURGED, wall=WALL) is None
    )
    assert classes(qm, names.DEADXACT) == [MessageClass.NACK_RECEIVE_TIMEOUT]
    assert messages(qm, names.SYSTEM_JOURNAL) == []


def test_a_final_ack_for_an_unknown_message_settles_nothing(qm: CoreHarness) -> None:
    assert qm.core.confirmations.settle(12345, MessageClass.ACK_RECEIVE, wall=WALL) is None


def test_copies_survive_a_crash_and_settle_after_it(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=JOURNAL)
    qm.crash()
    assert [c.destination for c in qm.store.confirmations(message.ordinal)] == [OUTGOING]
    assert settle(qm, message.ordinal, MessageClass.ACK_RECEIVE) is not None
    assert [m.message_id for m in messages(qm, names.SYSTEM_JOURNAL)] == [message.message_id]


# --------------------------------------------------------------------------- the deadline


def test_nothing_settles_before_the_deadline(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER)
    assert expire(qm, WALL + 59.999) == 0
    assert len(qm.store.confirmations(message.ordinal)) == 1
    assert messages(qm, names.DEADXACT) == []


def test_a_copy_never_delivered_expires_as_receive_timeout_at_sender(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER, acknowledge=NEG_RECEIVE, admin_queue="admin")
    assert expire(qm, WALL + 60) == 1
    [dead] = messages(qm, names.DEADXACT)
    assert dead.message_class == MessageClass.NACK_RECEIVE_TIMEOUT_AT_SENDER
    assert int(MessageClass.NACK_RECEIVE_TIMEOUT_AT_SENDER) == 0xC003
    assert (dead.message_id, dead.body) == (message.message_id, b"order")
    [nack] = messages(qm, "admin")
    assert nack.message_class == 0xC003
    assert nack.correlation_id == correlation_of(message)
    assert nack.body == b"order"  # a NACK carries the original body
    assert qm.store.confirmations(message.ordinal) == []
    assert confirmation_due(qm) == []
    # Nothing more on a later pass.
    assert expire(qm, WALL + 1000) == 0
    assert classes(qm, names.DEADXACT) == [0xC003]


def test_no_admin_nack_without_neg_receive(qm: CoreHarness) -> None:
    confirmed_send(
        qm, journal=DEADLETTER, acknowledge=POS_ARRIVAL | POS_RECEIVE, admin_queue="admin"
    )
    assert expire(qm, WALL + 60) == 1
    assert classes(qm, names.DEADXACT) == [0xC003]
    assert messages(qm, "admin") == []


def test_an_expired_copy_without_deadletter_level_is_only_dropped(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=JOURNAL)
    assert expire(qm, WALL + 60) == 1
    assert messages(qm, names.DEADXACT) == []
    assert messages(qm, names.SYSTEM_JOURNAL) == []
    assert qm.store.confirmations(message.ordinal) == []


def test_a_delivered_copy_expires_as_receive_timeout(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER, acknowledge=NEG_RECEIVE, admin_queue="admin")
    names_of_outgoing = [
        record.name
        for record in qm.store.list_queues()
        if record.kind is storage.QueueKind.OUTGOING
    ]
    assert names_of_outgoing == [OUTGOING]
    op = qm.core.confirmations.delivered([(message, OUTGOING)])
    assert op == storage.MarkDelivered(((message.ordinal, OUTGOING),), with_forget=True)
    assert qm.write(storage.Unit((op,))).error is None
    assert [c.delivered for c in qm.store.confirmations(message.ordinal)] == [True]
    assert expire(qm, WALL + 59.999) == 0
    assert expire(qm, WALL + 60) == 1
    assert classes(qm, names.DEADXACT) == [MessageClass.NACK_RECEIVE_TIMEOUT]
    # Its NACK comes from the destination, not from here.
    assert messages(qm, "admin") == []
    assert qm.store.confirmations(message.ordinal) == []


def test_delivered_is_none_for_messages_without_confirmation(qm: CoreHarness) -> None:
    qm.send_tx(REMOTE, b"x", time_to_be_received=30)
    message = sent(qm)
    assert qm.core.confirmations.delivered([(message, OUTGOING)]) is None
    assert qm.core.confirmations.delivered([]) is None


def test_delivered_to_another_destination_leaves_the_copy_undelivered(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER)
    op = qm.core.confirmations.delivered([(message, OUTGOING_2)])
    assert op is not None
    assert qm.write(storage.Unit((op,))).error is None
    assert expire(qm, WALL + 60) == 1
    assert classes(qm, names.DEADXACT) == [0xC003]


def test_a_final_ack_after_the_deadline_settles_nothing(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER | JOURNAL)
    # The FinalAck's unit is decided first, the deadline's is written first.
    late = qm.core.confirmations.settle(message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL)
    assert late is not None
    assert expire(qm, WALL + 60) == 1
    outcome = qm.write(late)
    assert isinstance(outcome.error, storage.ConfirmationMissing)
    assert outcome.results[1] is storage.SKIPPED
    assert messages(qm, names.SYSTEM_JOURNAL) == []
    assert classes(qm, names.DEADXACT) == [0xC003]
    # Decided after the deadline's unit was written: nothing to settle.
    assert (
        qm.core.confirmations.settle(message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL) is None
    )


def test_a_deadline_after_the_final_ack_settles_nothing(qm: CoreHarness) -> None:
    message = confirmed_send(qm, journal=DEADLETTER | JOURNAL)
    expiry = qm.core.expiry
    step = expiry.step(WALL + 60, 10)
    assert step.messages == [None]
    [deadline_unit] = step.units
    assert settle(qm, message.ordinal, MessageClass.ACK_RECEIVE) is not None
    outcome = qm.write(deadline_unit)
    assert isinstance(outcome.error, storage.ConfirmationMissing)
    assert expiry.done(None, outcome) == set()
    assert messages(qm, names.DEADXACT) == []
    assert [m.message_id for m in messages(qm, names.SYSTEM_JOURNAL)] == [message.message_id]
    # The index entry went with the copy: nothing is due any more.
    assert expire(qm, WALL + 1000) == 0
    assert confirmation_due(qm) == []


def test_index_entries_of_copies_gone_or_without_deadline_are_dropped(qm: CoreHarness) -> None:
    def copy(ordinal: int, deadline: float | None) -> storage.AddConfirmation:
        return storage.AddConfirmation(
            storage.Confirmation(
                ordinal=ordinal,
                index=0,
                delivered=False,
                last_class=0,
                deadline=deadline,
                destination=OUTGOING,
                payload=b"not read",
            )
        )

    # Earlier releases left an index entry behind when a copy was kept again
    # without a deadline, and settling it then left the entry with no copy at
    # all: such entries, written into the file directly here.
    assert qm.write(storage.Unit((copy(900, None), copy(901, None)))).error is None
    assert qm.write(storage.Unit((storage.SettleConfirmation(901, 0),))).error is None
    qm.close()
    with lmdb.open(str(qm.path), max_dbs=32, subdir=True) as env:
        expiry = env.open_db(DB_EXPIRY)
        with env.begin(write=True) as txn:
            for ordinal in (900, 901):
                txn.put(expiry_key(WALL + 10, 0, ordinal * 256), b"", db=expiry)
    qm.crash()
    assert confirmation_due(qm) == [(WALL + 10, 0, 900 * 256), (WALL + 10, 0, 901 * 256)]
    step = qm.core.expiry.step(WALL + 10, 10)
    assert step.units == [
        storage.Unit(
            (
                storage.ForgetExpiry(
                    (
                        storage.DueMessage(WALL + 10, 0, 900 * 256),
                        storage.DueMessage(WALL + 10, 0, 901 * 256),
                    )
                ),
            )
        )
    ]
    assert qm.write(step.units[0]).error is None
    assert confirmation_due(qm) == []
    assert [c.deadline for c in qm.store.confirmations(900)] == [None]
    assert messages(qm, names.DEADXACT) == []


# --------------------------------------------------------------------------- found by review


def test_a_final_ack_settles_the_copy_of_the_destination_it_came_from(qm: CoreHarness) -> None:
    qm.send_tx(
        f"{REMOTE},{REMOTE_2}",
        b"fan",
        journal=DEADLETTER,
        time_to_be_received=30,
        acknowledge=NEG_RECEIVE,
        admin_queue="admin",
    )
    message = sent(qm, OUTGOING_2)
    # The second destination got it (OrderAck) and received it (FinalAck);
    # the first was never reached.
    delivered = qm.core.confirmations.delivered([(message, OUTGOING_2)])
    assert delivered is not None
    assert qm.write(storage.Unit((delivered,))).error is None
    assert settle(qm, message.ordinal, MessageClass.ACK_RECEIVE) is not None
    assert [c.destination for c in qm.store.confirmations(message.ordinal)] == [OUTGOING]
    assert expire(qm, WALL + 60) == 1
    assert classes(qm, names.DEADXACT) == [MessageClass.NACK_RECEIVE_TIMEOUT_AT_SENDER]
    assert classes(qm, "admin") == [MessageClass.NACK_RECEIVE_TIMEOUT_AT_SENDER]


def test_a_final_ack_naming_its_outgoing_queue_settles_that_copy_once_and_no_other(
    qm: CoreHarness,
) -> None:
    qm.send_tx(f"{REMOTE},{REMOTE_2}", b"fan", journal=JOURNAL, time_to_be_received=30)
    message = sent(qm, OUTGOING)
    confirmations = qm.core.confirmations

    def final_ack(destination: str) -> storage.Unit | None:
        return confirmations.settle(
            message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL, destination=destination
        )

    # The second destination's FinalAck comes first, before any OrderAck: its
    # sequence names its outgoing queue, so its own copy is settled.
    unit = final_ack(OUTGOING_2)
    assert unit is not None
    assert qm.write(unit).error is None
    assert [c.destination for c in qm.store.confirmations(message.ordinal)] == [OUTGOING]
    # The same FinalAck again (sent once more on another session): nothing.
    assert final_ack(OUTGOING_2) is None
    unit = final_ack(OUTGOING)
    assert unit is not None
    assert qm.write(unit).error is None
    assert qm.store.confirmations(message.ordinal) == []
    assert len(messages(qm, names.SYSTEM_JOURNAL)) == 2


def test_a_send_to_more_than_256_remote_targets_fails_alone(qm: CoreHarness) -> None:
    targets = [
        f"DIRECT=TCP:10.9.{i // 200}.{i % 200 + 1}:1801\\private$\\orders" for i in range(257)
    ]
    assert qm.write(qm.core.lists.create("many", targets)).error is None
    innocent = qm.begin()
    qm.prepare("q", b"innocent", tx=innocent)
    big = qm.begin()
    try:
        qm.prepare("DL=many", b"x", tx=big, journal=DEADLETTER)
    except QueueManagerError:
        qm.core.abort(big)  # refused at the send: the right place too
        assert qm.commit(innocent) == [None]
    else:
        innocent_error, big_error = qm.commit(innocent, big)
        assert innocent_error is None
        assert big_error is not None
    assert qm.bodies("q") == [b"innocent"]


def test_only_the_queue_manager_whose_order_ack_covered_a_copy_settles_it(
    qm: CoreHarness,
) -> None:
    qm.send_tx(REMOTE, b"one", journal=JOURNAL, time_to_be_received=30)
    message = sent(qm, OUTGOING)
    confirmations = qm.core.confirmations
    b_qm, m_qm = uuid.uuid4(), uuid.uuid4()
    # Before any OrderAck, nothing says whose it is: a FinalAck of anyone counts.
    assert confirmations.settle(message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL, sender=m_qm)
    delivered = confirmations.delivered([(message, OUTGOING)], by=b_qm)
    assert delivered is not None
    assert qm.write(storage.Unit((delivered,))).error is None
    [copy] = qm.store.confirmations(message.ordinal)
    assert copy.acknowledged_by == b_qm.bytes
    # Another queue manager's FinalAck settles nothing, and is refused; B's does.
    for destination in (OUTGOING, None):  # its sequence named the queue, or not
        assert (
            confirmations.settle(
                message.ordinal,
                MessageClass.NACK_Q_PURGED,
                wall=WALL,
                destination=destination,
                sender=m_qm,
            )
            is None
        )
        assert confirmations.refused(message.ordinal, m_qm, destination=destination)
    assert not confirmations.refused(message.ordinal, b_qm)
    unit = confirmations.settle(message.ordinal, MessageClass.ACK_RECEIVE, wall=WALL, sender=b_qm)
    assert unit is not None
    assert qm.write(unit).error is None
    # Settled: a repeat is no refusal.
    assert not confirmations.refused(message.ordinal, m_qm)
