"""A transactional session, built from the spec's rules, replayed against the sans-IO layers.

The session of [MS-MQQB] §4.1 is opened with the example's frames
(:mod:`.spec_frames`), then carries what the example does not show: two
transactional messages of one sequence, the SessionAck whose bitmap reports
them stored, the OrderAck, a resend rejected and re-announced, and the
FinalAck (reference §8, §10, §14.4-§15.6). The peer's packets are written
byte by byte from the layouts (:mod:`.spec_packets`), not by qmgr's builders.

* qmgr receiving (the example's server, ACCEPTOR): :class:`PeerSession` with a
  :class:`Receiver` (its :class:`IncomingSequences`) is fed the client's
  packets; its SessionAcks, OrderAcks and its FinalAck are compared with the
  spec's bytes, but for the fields the sender chooses (:func:`blank_free`).
* qmgr sending (the example's client, INITIATOR): :class:`PeerSession` with an
  :class:`OutgoingSequence` sends, and is fed the server's SessionAcks (an
  empty bitmap first, as Windows sends while nothing new is stored), OrderAck
  (with garbage in its reserved bytes, as Windows sends it) and FinalAck.

Time is the explicit ``now`` of every call.
"""

from __future__ import annotations

import wire
from qmgr.protocol import (
    Accepted,
    Acked,
    Arrived,
    Dropped,
    EntryKind,
    FinalAckArrived,
    OrderAckArrived,
    SessionState,
)

from . import spec_packets as sp
from .spec_frames import (
    ACK_TIMEOUT,
    CLIENT_QM,
    RECOVERABLE_ACK_TIMEOUT,
    SERVER_QM,
    decode_one,
    fixed_bytes,
)
from .spec_peers import (
    QUEUE,
    SEQUENCE,
    SEQUENCE_ID,
    WALL,
    Client,
    Server,
    T,
    client_message,
    only,
    sent_data,
)

#: Garbage in an OrderAck's reserved body bytes (SHOULD be 0; Windows: garbage).
GARBAGE = bytes(range(0xA0, 0xB4))
#: The FinalAck (ACK_RECEIVE) of the client's message 1 (0x901), from the server.
FINAL_ACK = sp.final_ack(
    source=SERVER_QM,
    destination_qm=CLIENT_QM,
    sequence=SEQUENCE,
    number=1,
    previous=0,
    acked_message_id=0x901,
)


# --------------------------------------------------------------------------
# qmgr receives
# --------------------------------------------------------------------------


def test_receiving_a_transaction_acknowledging_it_and_the_final_ack() -> None:
    server = Server()
    session = server.session
    now = T + 1
    assert isinstance(server.take(client_message(1, flags=sp.FIRST), now), Accepted)
    assert isinstance(server.take(client_message(2, flags=sp.LAST), now), Accepted)

    # SessionAck at RecoverableAckSendTimeout (the client's 1496 ms) after the
    # first stored packet: AckSequenceNumber 2, base 1, bits 0 and 1 (both stored).
    assert session.next_deadline() == now + RECOVERABLE_ACK_TIMEOUT
    ack = sent_data(session.timer(now + RECOVERABLE_ACK_TIMEOUT))
    assert fixed_bytes(ack) == fixed_bytes(sp.session_ack(ack=2, base=1, bitmap=0b11))

    # The OrderAck, 500 ms after the last persist: everything up to 2, in order,
    # to the client's order_queue$ (private queue 4), express, flags all clear.
    assert server.receiver.next_deadline() == now + 0.5
    assert server.receiver.order_acks(now + 0.499, WALL) == []
    [(path, order_ack)] = server.receiver.order_acks(now + 0.5, WALL)
    assert path == "client"
    expected = sp.order_ack(source=SERVER_QM, destination_qm=CLIENT_QM, sequence=SEQUENCE, number=2)
    assert sp.blank_free(order_ack) == sp.blank_free(expected)
    assert order_ack[2:4] == b"\x00\x00"  # PR=0 and no flag

    # It goes out as a user packet; the client acknowledges it (nothing recoverable).
    session.send(order_ack, recoverable=False, tag="order-ack", now=now + 0.5)
    client_ack = sp.session_ack(ack=1, sent=2, recoverable_sent=2)
    assert session.receive(decode_one(client_ack), now + 0.6) == [Acked(tags=("order-ack",))]

    # The client's OrderAck was lost, its Transactional Ack Wait timer resends
    # message 1: rejected (it is not after 2), counted and acknowledged at once,
    # and the OrderAck re-announces 2.
    later = now + 30
    assert server.take(client_message(1, flags=sp.FIRST), later) is Dropped.REJECTED
    assert server.receiver.rejected == 1
    [(_, again)] = server.receiver.order_acks(later + 0.5, WALL)
    assert sp.blank_free(again) == sp.blank_free(expected)
    session.send(again, recoverable=False, tag="order-ack 2", now=later + 0.5)
    # The rejected packet was still a recoverable packet of the session: bit 0
    # of the next SessionAck, whose base is the client's third recoverable packet.
    ack = sent_data(session.timer(later + RECOVERABLE_ACK_TIMEOUT))
    assert fixed_bytes(ack) == fixed_bytes(
        sp.session_ack(ack=3, base=3, bitmap=1, sent=2, recoverable_sent=0)
    )

    # Message 1 is received by an application: the FinalAck (ACK_RECEIVE) goes
    # back, recoverable, as the FinalAck courier builds it.
    final = wire.build_packet(
        wire.FinalAck(
            source_qm=SERVER_QM,
            destination_qm=CLIENT_QM,
            message_id=9,
            sent_time=int(WALL),
            sequence_id=SEQUENCE_ID,
            sequence_number=1,
            previous_sequence_number=0,
            acked_source_qm=CLIENT_QM,
            acked_message_id=0x901,
        ).to_message()
    )
    assert sp.blank_free(final) == sp.blank_free(FINAL_ACK)
    session.send(final, recoverable=True, tag="final-ack", now=later + 2)
    # The client's SessionAck: received 3 of ours, the FinalAck (its recoverable 1) stored.
    client_ack = sp.session_ack(ack=3, base=1, bitmap=1, sent=3, recoverable_sent=3)
    assert session.receive(decode_one(client_ack), later + 3) == [
        Acked(tags=("order-ack 2", "final-ack"))
    ]
    assert (session.unacked, session.unpersisted) == (0, 0)
    assert session.state is SessionState.OPEN


def test_a_message_out_of_order_is_rejected_and_the_stream_holds() -> None:
    server = Server()
    now = T + 1
    assert isinstance(server.take(client_message(1), now), Accepted)
    # Number 3 claims 2 before it: 2 never came, so 3 is not accepted.
    assert server.take(client_message(3), now) is Dropped.REJECTED
    assert isinstance(server.take(client_message(2), now), Accepted)
    assert isinstance(server.take(client_message(3), now), Accepted)
    [(_, order_ack)] = server.receiver.order_acks(now + 0.5, WALL)
    packet = wire.parse_packet(order_ack)
    assert isinstance(packet, wire.UserMessage)
    ack = wire.OrderAck.from_message(packet)
    assert (ack.sequence_id, ack.sequence_number, ack.previous_sequence_number) == (
        SEQUENCE_ID,
        3,
        2,
    )


# --------------------------------------------------------------------------
# qmgr sends
# --------------------------------------------------------------------------


def test_sending_a_transaction_and_taking_its_acknowledgements() -> None:
    client = Client()
    session, sequence = client.session, client.sequence
    sequence.add(101, EntryKind.TRANSACTIONAL)
    sequence.add(102, EntryKind.TRANSACTIONAL)
    now = T + 1
    first, second = client.transmit(now), client.transmit(now)
    # The TransactionHeader as the spec numbers a first transmission: 1 then 2,
    # each naming its predecessor; byte for byte the packet the rules give.
    assert first == sp.transactional_message(
        source=CLIENT_QM,
        queue=QUEUE,
        message_id=0x901,
        sequence=SEQUENCE,
        number=1,
        previous=0,
        body=b"order 1",
    )
    assert sp.blank_free(second) == sp.blank_free(client_message(2))
    assert session.unacked == 2

    # Windows acknowledges receipt before the packets are stored: base 0, no bit.
    # The window frees up; nothing is done yet.
    received = sp.session_ack(ack=2)
    assert session.receive(decode_one(received), now + 0.1) == []
    assert (session.unacked, session.unpersisted) == (0, 2)
    # Then the bitmap: both stored. A transactional entry still waits for its OrderAck.
    stored = sp.session_ack(ack=2, base=1, bitmap=0b11)
    assert session.receive(decode_one(stored), now + 1.5) == [Acked(tags=(101, 102))]
    assert sequence.session_acked(101, persisted=True) == ()
    assert sequence.session_acked(102, persisted=True) == ()
    assert sequence.unacknowledged == 2

    # The OrderAck, with garbage in its reserved bytes: ends both entries.
    order_ack = sp.order_ack(
        source=SERVER_QM, destination_qm=CLIENT_QM, sequence=SEQUENCE, number=2, reserved=GARBAGE
    )
    arrived = only(session.receive(decode_one(order_ack), now + 2), Arrived)
    assert isinstance(arrived, Arrived)
    assert arrived.recoverable_number is None  # an OrderAck is express
    kind = client.receiver.arrive(arrived.packet, "server")
    assert isinstance(kind, OrderAckArrived)
    assert kind.ack.reserved == GARBAGE
    assert sequence.order_ack(kind.ack.sequence_id, kind.ack.sequence_number, now + 2) == (
        101,
        102,
    )
    assert sequence.last_order_ack == 2
    # A stale OrderAck (number 1) ends nothing more.
    assert sequence.order_ack(SEQUENCE_ID, 1, now + 3) == ()

    # Our SessionAck for the OrderAck, AckWaitTimeout/2 later: 1 received, our
    # 2 sent of which 2 recoverable, nothing recoverable received.
    ack = sent_data(session.timer(now + 2 + ACK_TIMEOUT / 2))
    assert fixed_bytes(ack) == fixed_bytes(sp.session_ack(ack=1, sent=2, recoverable_sent=2))

    # The FinalAck (message 1 received at the destination): recoverable; once the
    # caller has stored what it settles, it is reported in the bitmap.
    later = now + 100
    arrived = only(session.receive(decode_one(FINAL_ACK), later), Arrived)
    assert isinstance(arrived, Arrived)
    assert arrived.recoverable_number == 1
    kind = client.receiver.arrive(arrived.packet, "server")
    assert isinstance(kind, FinalAckArrived)
    assert (kind.ack.message_class, kind.ack.acked_source_qm, kind.ack.acked_message_id) == (
        wire.MessageClass.ACK_RECEIVE,
        CLIENT_QM,
        0x901,
    )
    assert session.persisted(1, later) == []
    ack = sent_data(session.timer(later + RECOVERABLE_ACK_TIMEOUT))
    assert fixed_bytes(ack) == fixed_bytes(
        sp.session_ack(ack=2, base=1, bitmap=1, sent=2, recoverable_sent=2)
    )
    assert session.state is SessionState.OPEN


def test_an_order_ack_of_another_sequence_is_ignored() -> None:
    client = Client()
    client.sequence.add(101, EntryKind.TRANSACTIONAL)
    client.transmit(T + 1)
    older = wire.TxSequenceId(ordinal=SEQUENCE[0], timestamp=SEQUENCE[1] - 1)
    assert client.sequence.order_ack(older, 1, T + 2) == ()
    assert client.sequence.unacknowledged == 1
