"""FinalAcks at a destination (``qmgr.core.final_acks``): an arriving transactional
message that asks for one keeps its sequence fields in its record's note, and the
unit that decides its fate (a receipt, an expiry, a purge, a refusal at arrival)
records the FinalAck for its source (with ``qmgr.core.outcomes`` and
``qmgr.core.arrivals``)."""

from __future__ import annotations

import struct

import pytest

import storage
import wire
from qmgr.core import names
from qmgr.core.arrivals import Arrival, Arrivals
from qmgr.core.final_acks import decode_final_ack, final_ack_note, final_ack_op, wants_final_ack
from qmgr.core.names import LocalIdentity
from wire import INFINITE, MessageClass, MessageProperties

from .harness import (
    DEADLETTER,
    JOURNAL,
    NEG_ARRIVAL,
    NEG_RECEIVE,
    POS_RECEIVE,
    SOURCE,
    WALL,
    CoreHarness,
    classes,
    expire,
    messages,
)

IDENTITY = LocalIdentity(peer_port=1901)
HERE = "TCP:127.0.0.1:1901\\private$\\"
#: The sequence fields of the arriving messages' TransactionHeader.
SEQUENCE = (3, 5, 4, 2)  # TxSequenceID ordinal, timestamp, number, previous number
ARRIVING_ORDINAL = 7
#: The key of the arriving message's FinalAck: its source, ordinal and stream timestamp.
KEY = SOURCE.bytes + ARRIVING_ORDINAL.to_bytes(4, "big") + SEQUENCE[1].to_bytes(4, "big")


def header(flags: int = 0) -> wire.TransactionHeader:
    """The TransactionHeader of SEQUENCE, with ``flags``."""
    ordinal, timestamp, number, previous = SEQUENCE
    return wire.TransactionHeader(
        flags=flags,
        sequence_id=wire.TxSequenceId(ordinal=ordinal, timestamp=timestamp),
        sequence_number=number,
        previous_sequence_number=previous,
    )


def arriving(
    destination: str,
    *,
    journal: int = DEADLETTER,
    flags: int = 0,
    ttbr: int = INFINITE,
    acknowledge: int = 0,
) -> wire.UserMessage:
    """A transactional message from SOURCE, as it arrives on the wire."""
    message = MessageProperties(
        body=b"body",
        label="l",
        journal=journal,
        acknowledge=acknowledge,
        time_to_be_received=ttbr,
    ).stamp(source_qm=SOURCE, ordinal=ARRIVING_ORDINAL, sent_time=WALL, transactional=True)
    return wire.message_to_packet(
        message, destination=wire.DirectQueue(name=destination), transaction=header(flags)
    )


def arrive(qm: CoreHarness, packet: wire.UserMessage) -> Arrival:
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes)
    key, remote = arrivals.destination(packet)
    assert remote is None
    arrival = arrivals.to_queue(packet, key, wall=WALL)
    outcome = qm.write(storage.Unit(arrival.ops))
    assert outcome.error is None
    return arrival


def final_acks(qm: CoreHarness) -> list[tuple[bytes, tuple[int, int, int, int, int]]]:
    return [(pending.key, decode_final_ack(pending.value)) for pending in qm.store.final_acks()]


def test_an_arrived_message_keeps_its_sequence_fields_in_its_note(qm: CoreHarness) -> None:
    arrival = arrive(qm, arriving(HERE + "q"))
    assert arrival.refusal is None
    record = qm.core.queue("q")
    [(_, stored)] = qm.store.read_range(record.queue_id, limit=10)
    assert storage.message_note(stored) == struct.pack(">IIII", *SEQUENCE)
    assert final_acks(qm) == []  # nothing until it leaves its queue
    assert qm.store.final_ack_count() == 0


def test_a_received_message_records_ack_receive(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q"))
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    assert final_acks(qm) == []  # not before the commit
    assert qm.commit(tx) == [None]
    assert final_acks(qm) == [(KEY, (MessageClass.ACK_RECEIVE, *SEQUENCE))]
    assert qm.store.final_ack_count() == 1
    # Neither a journal copy nor a dead letter at the destination.
    for system in (names.SYSTEM_JOURNAL, names.DEADXACT, names.DEADLETTER):
        assert messages(qm, system) == []


def test_an_aborted_receive_records_nothing(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q"))
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    qm.core.abort(tx)
    assert final_acks(qm) == []
    assert qm.bodies("q") == [b"body"]


def test_a_receive_outside_a_transaction_records_ack_receive(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q", journal=JOURNAL))
    assert qm.take("q") is not None
    assert final_acks(qm) == [(KEY, (MessageClass.ACK_RECEIVE, *SEQUENCE))]


def test_an_expired_message_records_receive_timeout_and_no_dead_letter(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q", ttbr=30))
    # A second past its time to be received: the wire's send time is whole seconds.
    assert expire(qm, WALL + 30.999) == 0
    assert final_acks(qm) == []
    assert expire(qm, WALL + 31) == 1
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_RECEIVE_TIMEOUT, *SEQUENCE))]
    assert qm.visible("q") == []
    # The source keeps the dead-letter copy; the destination keeps none.
    assert messages(qm, names.DEADXACT) == []
    assert messages(qm, names.DEADLETTER) == []


def test_a_purged_message_records_q_purged(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q"))
    assert qm.purge("q") == 1
    qm.erase_all()
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_Q_PURGED, *SEQUENCE))]
    assert messages(qm, names.DEADXACT) == []


def test_a_refused_message_records_its_nack_at_once_and_is_kept_here(qm: CoreHarness) -> None:
    """A transactional message for a queue that is not transactional is kept where
    that queue is (seed 000); its source drops its copy on the FinalAck."""
    arrival = arrive(qm, arriving(HERE + "plain"))
    assert arrival.refusal == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    assert arrival.kept
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_NOT_TRANSACTIONAL_Q, *SEQUENCE))]
    [dead] = messages(qm, names.DEADXACT)
    assert dead.message_class == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    assert (dead.source_qm, dead.ordinal, dead.body) == (SOURCE, ARRIVING_ORDINAL, b"body")
    assert messages(qm, "plain") == []


def test_a_message_to_a_missing_queue_records_bad_dst_q_for_its_source_to_keep(
    qm: CoreHarness,
) -> None:
    """With MQMSG_DEADLETTER its source runs the confirmation process: the NACK in
    the FinalAck puts the source's copy in its own dead-letter queue ([MS-MQQB]
    §3.1.5.7), so none is kept here (one message, one dead-letter copy)."""
    arrival = arrive(qm, arriving(HERE + "nowhere", flags=wire.TransactionFlags.FINAL_ACK))
    assert arrival.refusal == MessageClass.NACK_BAD_DST_Q
    assert (arrival.kept, arrival.no_room) == (False, False)
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_BAD_DST_Q, *SEQUENCE))]
    assert classes(qm, names.DEADXACT) == []


def test_a_refused_message_whose_source_keeps_no_copy_is_kept_here(qm: CoreHarness) -> None:
    """FA without MQMSG_DEADLETTER (a positive confirmation asked, MQMSG_JOURNAL):
    its source keeps no dead-letter copy, so the refusal is kept here."""
    arrival = arrive(
        qm, arriving(HERE + "nowhere", journal=JOURNAL, flags=wire.TransactionFlags.FINAL_ACK)
    )
    assert arrival.kept
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_BAD_DST_Q, *SEQUENCE))]
    assert classes(qm, names.DEADXACT) == [MessageClass.NACK_BAD_DST_Q]


def test_a_refusal_not_kept_for_want_of_room_still_tells_its_source(
    qm: CoreHarness,
) -> None:
    """Past ``max_rejected_bytes`` nothing is kept here, and the FinalAck's NACK has
    the source keep its copy, with the refusal's class."""
    arrivals = Arrivals(qm.store, IDENTITY, qm.core.outcomes, max_rejected_bytes=1)
    packet = arriving(HERE + "plain")
    key, _ = arrivals.destination(packet)
    arrival = arrivals.to_queue(packet, key, wall=WALL)
    assert arrival.refusal == MessageClass.NACK_NOT_TRANSACTIONAL_Q
    assert (arrival.kept, arrival.no_room) == (False, True)
    assert [type(op) for op in arrival.ops] == [storage.RecordFinalAck]


def test_without_fa_flag_or_journal_level_no_final_ack_but_for_a_refusal(
    qm: CoreHarness,
) -> None:
    # An acknowledgment level makes the receive look at the message's reports.
    arrive(qm, arriving(HERE + "q", journal=0, acknowledge=POS_RECEIVE | NEG_RECEIVE, ttbr=30))
    arrive(qm, arriving(HERE + "plain", journal=0, acknowledge=NEG_ARRIVAL))
    record = qm.core.queue("q")
    [(_, stored)] = qm.store.read_range(record.queue_id, limit=10)
    assert storage.message_note(stored) == b""
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    assert qm.commit(tx) == [None]
    # Only the refusal's: a refusal at arrival always sends one ([MS-MQQB] §3.1.5.8.2).
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_NOT_TRANSACTIONAL_Q, *SEQUENCE))]
    assert classes(qm, names.DEADXACT) == [MessageClass.NACK_NOT_TRANSACTIONAL_Q]


def test_without_fa_flag_or_journal_level_an_expiry_records_none(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q", journal=0, acknowledge=NEG_RECEIVE, ttbr=30))
    assert expire(qm, WALL + 31) == 1
    assert qm.visible("q") == []
    assert final_acks(qm) == []


def test_the_fa_flag_alone_asks_for_a_final_ack() -> None:
    message = MessageProperties().stamp(
        source_qm=SOURCE, ordinal=1, sent_time=WALL, transactional=True
    )
    header = wire.TransactionHeader(
        flags=wire.TransactionFlags.FINAL_ACK,
        sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1),
        sequence_number=1,
        previous_sequence_number=0,
    )
    assert wants_final_ack(message, header)
    assert not wants_final_ack(
        message,
        wire.TransactionHeader(
            sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1),
            sequence_number=1,
            previous_sequence_number=0,
        ),
    )


def test_a_message_with_only_the_fa_flag_records_its_expiry(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q", journal=0, flags=wire.TransactionFlags.FINAL_ACK, ttbr=30))
    assert expire(qm, WALL + 31) == 1
    assert final_acks(qm) == [(KEY, (MessageClass.NACK_RECEIVE_TIMEOUT, *SEQUENCE))]


def test_a_message_with_only_the_fa_flag_records_its_receipt(qm: CoreHarness) -> None:
    arrive(qm, arriving(HERE + "q", journal=0, flags=wire.TransactionFlags.FINAL_ACK))
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    assert qm.commit(tx) == [None]
    assert final_acks(qm) == [(KEY, (MessageClass.ACK_RECEIVE, *SEQUENCE))]


# --------------------------------------------------------------------------- the records


def test_a_note_and_a_final_ack_carry_the_sequence_fields() -> None:
    note = final_ack_note(header())
    assert note == struct.pack(">IIII", *SEQUENCE)
    message = MessageProperties().stamp(
        source_qm=SOURCE, ordinal=ARRIVING_ORDINAL, sent_time=WALL, transactional=True
    )
    op = final_ack_op(message, note, MessageClass.NACK_Q_PURGED)
    assert (op.source_qm, op.ordinal) == (SOURCE.bytes, ARRIVING_ORDINAL)
    assert decode_final_ack(op.value) == (MessageClass.NACK_Q_PURGED, *SEQUENCE)


@pytest.mark.parametrize(
    ("journal", "flags", "wanted"),
    [
        (0, 0, False),
        (DEADLETTER, 0, True),
        (JOURNAL, 0, True),
        (0, int(wire.TransactionFlags.FINAL_ACK), True),
    ],
)
def test_which_arriving_messages_want_a_final_ack(journal: int, flags: int, wanted: bool) -> None:
    message = MessageProperties(journal=journal).stamp(
        source_qm=SOURCE, ordinal=1, sent_time=WALL, transactional=True
    )
    assert wants_final_ack(message, header(flags)) is wanted
