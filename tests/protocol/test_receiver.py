"""The Receiver of a peer's messages (``qmgr.protocol.receiver``), without sockets:
each decision on its own. The hostile model that runs it against losses,
duplicates, reordering, failed writes and crashes is in ``test_receiver_model.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid

import pytest

import wire
from qmgr.protocol import (
    Accepted,
    ArrivalKind,
    Dropped,
    FinalAckArrived,
    OrderAckArrived,
    StreamState,
)
from qmgr.protocol.history import message_keys

from .model_kit import T0
from .receiver_kit import (
    LOCAL,
    ORDERS,
    PLAIN,
    SEQ,
    WALL,
    A,
    B,
    C,
    accept,
    announced,
    final_ack,
    message,
    order_ack,
    parse_order_ack,
    receiver,
)

# --------------------------------------------------------------------------
# Arrival: what a packet is (return paths: test_return_paths.py)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("target", [LOCAL, wire.NULL_GUID])
def test_an_order_ack_for_us_is_handed_over(target: uuid.UUID) -> None:
    machine = receiver()
    arrival = machine.arrive(order_ack(target, 4), "conn-1")
    assert isinstance(arrival, OrderAckArrived)
    assert arrival.ack.sequence_number == 4
    assert machine.received == 0
    assert machine.return_paths.path_to(C) is None  # acknowledgments make no return path


def test_a_final_ack_about_our_message_is_handed_over() -> None:
    arrival = receiver().arrive(final_ack(LOCAL), "conn-1")
    assert isinstance(arrival, FinalAckArrived)
    assert arrival.ack.acked_message_id == 9


# --------------------------------------------------------------------------
# Acceptance
# --------------------------------------------------------------------------


def test_a_relayed_message_is_accepted_as_it_is() -> None:
    machine = receiver()
    packet = message(A, 1, number=5)  # not the next of any stream: a router does not care
    assert machine.arrive(packet, "conn-1") is ArrivalKind.MESSAGE
    decision = machine.accept(packet, queue_key=None, relayed=True, now=T0, wall=WALL)
    assert decision == Accepted(relayed_source=A.bytes)  # its first: the source is kept
    assert machine.streams() == []


def test_a_resend_of_a_relayed_message_still_held_is_dropped_and_nothing_else_is() -> None:
    """The store says whether the outgoing queue still holds a copy (``held``): a
    resend is then dropped, to be acknowledged like a duplicate, while what is not
    held (a first copy, or a resend whose copy was forwarded and forgotten) is
    stored as it is, whatever its number: a router keeps no sequence."""
    machine = receiver()
    first, resend = message(A, 1, number=7), message(A, 1, number=7)
    assert machine.arrive(first, "conn-1") is ArrivalKind.MESSAGE
    stored = machine.accept(first, queue_key=None, relayed=True, now=T0, wall=WALL)
    assert stored == Accepted(relayed_source=A.bytes)
    assert machine.arrive(resend, "conn-2") is ArrivalKind.MESSAGE
    again = machine.accept(resend, queue_key=None, relayed=True, held=True, now=T0, wall=WALL)
    assert again is Dropped.HELD
    # Its source's OrderAcks still find their way back: the resend's connection.
    assert machine.return_paths.path_to(A) == "conn-2"
    for plain in (message(B, 3), message(B, 3)):  # non-transactional, by message id
        decision = machine.accept(plain, queue_key=None, relayed=True, held=True, now=T0, wall=WALL)
        assert decision is Dropped.HELD
    assert machine.relayed_duplicates == 3
    # Forwarded and forgotten since: stored and forwarded again (the destination
    # drops it, and re-announces its OrderAck).
    later = machine.accept(resend, queue_key=None, relayed=True, held=False, now=T0, wall=WALL)
    assert later == Accepted(relayed_source=A.bytes)  # the first's write not persisted yet
    assert (machine.received, machine.rejected, machine.duplicates) == (2, 0, 0)
    assert machine.streams() == []
    assert len(machine.history) == 0  # nothing to remember: the store's index is the memory


def test_held_concerns_relays_only() -> None:
    machine = receiver()
    # For a queue here, the exactly-once rule decides, whatever ``held`` says.
    packet = message(A, 1, number=1)
    assert machine.arrive(packet, "conn-1") is ArrivalKind.MESSAGE
    decision = machine.accept(packet, queue_key=ORDERS, relayed=False, held=True, now=T0, wall=WALL)
    assert isinstance(decision, Accepted)
    assert decision.stream is not None
    # A relay refused for too many hops is kept once by the history.
    refused = message(A, 2, number=2)
    kept = machine.accept(
        refused, queue_key=None, relayed=True, refused=True, held=True, now=T0, wall=WALL
    )
    assert isinstance(kept, Accepted)
    assert kept.remember != b""
    assert machine.relayed_duplicates == 0


def test_a_relay_refused_for_too_many_hops_is_kept_once_and_its_resends_are_duplicates() -> None:
    machine = receiver()
    packet = message(A, 1, number=5)
    first = machine.accept(packet, queue_key=None, relayed=True, refused=True, now=T0, wall=WALL)
    assert isinstance(first, Accepted)
    assert first.remember != b""
    assert first.stream is None  # no sequence is kept for a destination elsewhere
    again = machine.accept(packet, queue_key=None, relayed=True, refused=True, now=T0, wall=WALL)
    assert again is Dropped.DUPLICATE
    machine.rolled_back([first])  # the first copy was never written: the next is kept
    third = machine.accept(packet, queue_key=None, relayed=True, refused=True, now=T0, wall=WALL)
    assert isinstance(third, Accepted)
    assert machine.streams() == []


def test_transactional_messages_are_accepted_in_order_with_the_state_to_write() -> None:
    machine = receiver()
    first = accept(machine, message(A, 1, number=1), wall=WALL + 5)
    assert isinstance(first, Accepted)
    assert first.stream == (ORDERS, A.bytes, SEQ.timestamp)
    assert first.state == StreamState(SEQ.value, 1, 0, WALL + 5)
    assert first.header is not None
    assert first.remember == b""
    assert accept(machine, message(A, 3, number=3)) is Dropped.REJECTED  # 2 is missing
    assert accept(machine, message(A, 1, number=1)) is Dropped.REJECTED  # already accepted
    assert isinstance(accept(machine, message(A, 2, number=2)), Accepted)
    assert machine.rejected == 2


def test_an_acceptance_says_where_its_stream_stood_before_it() -> None:
    machine = receiver()
    first = accept(machine, message(A, 1, number=1))
    second = accept(machine, message(A, 2, number=2))
    assert isinstance(first, Accepted)
    assert isinstance(second, Accepted)
    assert (first.follows, second.follows) == ((0, 0), (SEQ.value, 1))
    # The first is stored; a failed write of the second rolls the stream back to
    # it, and the resend of the second follows it again.
    machine.persisted(first, now=T0, wall=WALL)
    machine.rolled_back([second])
    again = accept(machine, message(A, 2, number=2))
    assert isinstance(again, Accepted)
    assert again.follows == (SEQ.value, 1)
    non_transactional = accept(machine, message(A, 9, number=None))
    assert isinstance(non_transactional, Accepted)
    assert non_transactional.follows is None


def test_an_unknown_destination_keys_its_stream_by_address() -> None:
    machine = receiver()
    decision = accept(machine, message(A, 1, "Missing", number=1), queue=None)
    assert isinstance(decision, Accepted)
    assert decision.stream == ("DIRECT=TCP:10.0.0.9\\private$\\Missing", A.bytes, SEQ.timestamp)


def test_two_outgoing_queues_of_one_source_to_one_queue_are_two_streams() -> None:
    # One source sends to one queue under two names, from two outgoing queues
    # with their own timestamps: the newer does not shut the older out, each
    # stream keeps its order, and each has its own OrderAck to the source.
    newer = wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp + 7)
    machine = receiver(order_ack_delay=0.5)
    decisions = [
        accept(machine, message(A, 1, number=1, sequence_id=newer), path="conn-a"),
        accept(machine, message(A, 2, number=1), path="conn-a"),
        accept(machine, message(A, 3, number=2, sequence_id=newer), path="conn-a"),
        accept(machine, message(A, 4, number=2), path="conn-a"),
    ]
    assert all(isinstance(decision, Accepted) for decision in decisions)
    streams = [decision.stream for decision in decisions if isinstance(decision, Accepted)]
    assert (
        streams
        == [
            (ORDERS, A.bytes, newer.timestamp),
            (ORDERS, A.bytes, SEQ.timestamp),
        ]
        * 2
    )
    # Within each, the old rule: duplicates and gaps are rejected.
    assert accept(machine, message(A, 2, number=1)) is Dropped.REJECTED
    assert accept(machine, message(A, 5, number=4, sequence_id=newer)) is Dropped.REJECTED
    for decision in decisions:
        assert isinstance(decision, Accepted)
        machine.persisted(decision, now=T0, wall=WALL)
    acks = [parse_order_ack(data) for _, data in machine.order_acks(T0 + 1, WALL)]
    assert sorted((ack.sequence_id.value, ack.sequence_number) for ack in acks) == [
        (SEQ.value, 2),
        (newer.value, 2),
    ]
    assert {ack.destination_qm for ack in acks} == {A}


def test_a_non_transactional_message_is_remembered_and_its_resend_dropped() -> None:
    machine = receiver()
    decision = accept(machine, message(A, 7, PLAIN), PLAIN)
    assert isinstance(decision, Accepted)
    assert decision.stream is None
    assert decision.remember == message_keys(A.bytes, 7, PLAIN)[0]
    # Pending (its write is on its way) or persisted: a resend is a duplicate.
    assert accept(machine, message(A, 7, PLAIN), PLAIN) is Dropped.DUPLICATE
    machine.persisted(decision, now=T0, wall=WALL)
    assert accept(machine, message(A, 7, PLAIN), PLAIN) is Dropped.DUPLICATE
    assert machine.duplicates == 2
    # The same id from another source, or for another queue, is another message.
    assert isinstance(accept(machine, message(B, 7, PLAIN), PLAIN), Accepted)
    assert isinstance(accept(machine, message(A, 7, "other"), "other"), Accepted)


def test_history_keys_name_the_destination_in_any_case_and_bare_keys_still_count() -> None:
    key, bare = message_keys(A.bytes, 7, "Plain")
    assert key == message_keys(A.bytes, 7, "PLAIN")[0]
    assert key.startswith(bare)
    assert message_keys(A.bytes, 7 + (1 << 32), "plain") == (key, bare)  # the low 32 bits
    machine = receiver(history=[bare])
    assert accept(machine, message(A, 7, PLAIN), PLAIN) is Dropped.DUPLICATE


def test_the_history_evicts_by_size_and_by_age_in_the_write_that_remembers() -> None:
    machine = receiver(history_size=2, history_seconds=60.0)
    decisions = []
    for number, wall in ((1, WALL), (2, WALL + 1), (3, WALL + 2)):
        decision = accept(machine, message(A, number, PLAIN), PLAIN, wall=wall)
        assert isinstance(decision, Accepted)
        machine.persisted(decision, now=T0, wall=wall)
        decisions.append(decision)
    assert decisions[0].forget == decisions[1].forget == ()
    assert decisions[2].forget == (decisions[0].remember,)  # too many
    late = accept(machine, message(A, 4, PLAIN), PLAIN, wall=WALL + 63)
    assert isinstance(late, Accepted)
    assert late.forget == (decisions[1].remember, decisions[2].remember)  # too old
    # Forgotten: a resend of the first is stored again (MSMQ's rule).
    assert isinstance(accept(machine, message(A, 1, PLAIN), PLAIN), Accepted)


def test_a_rolled_back_write_lets_the_resends_in() -> None:
    machine = receiver()
    tx = accept(machine, message(A, 1, number=1))
    plain = accept(machine, message(A, 9, PLAIN), PLAIN)
    assert isinstance(tx, Accepted)
    assert isinstance(plain, Accepted)
    machine.rolled_back([tx, plain])
    assert machine.history.pending == 0
    assert isinstance(accept(machine, message(A, 1, number=1)), Accepted)
    assert isinstance(accept(machine, message(A, 9, PLAIN), PLAIN), Accepted)


# --------------------------------------------------------------------------
# Persisted, and the OrderAcks
# --------------------------------------------------------------------------


def test_order_acks_announce_the_persisted_mark_along_the_return_path() -> None:
    machine = receiver(order_ack_delay=0.5)
    one = accept(machine, message(A, 1, number=1), path="conn-a")
    two = accept(machine, message(A, 2, number=2), path="conn-a")
    assert isinstance(one, Accepted)
    assert isinstance(two, Accepted)
    assert machine.next_deadline() is None  # nothing persisted: nothing to announce
    machine.persisted(one, now=T0, wall=WALL)
    assert machine.next_deadline() == T0 + 0.5
    assert machine.order_acks(T0 + 0.4, WALL) == []
    [(path, data)] = machine.order_acks(T0 + 0.5, WALL + 0.5)
    ack = parse_order_ack(data)
    assert path == "conn-a"
    assert (ack.sequence_id, ack.sequence_number, ack.previous_sequence_number) == (SEQ, 1, 0)
    assert (ack.source_qm, ack.destination_qm, ack.sent_time) == (LOCAL, A, int(WALL + 0.5))
    state = machine.stream_state((ORDERS, A.bytes, SEQ.timestamp))
    assert state == StreamState(SEQ.value, 1, 0, T0)


def test_an_order_ack_with_no_return_path_waits_for_the_resend() -> None:
    machine = receiver(order_ack_delay=0.5)
    decision = accept(machine, message(A, 1, number=1), path="conn-a")
    assert isinstance(decision, Accepted)
    machine.persisted(decision, now=T0, wall=WALL)
    machine.return_paths.path_closed("conn-a")
    assert machine.order_acks(T0 + 1, WALL) == []
    # The sender resends on its next connection: rejected, and announced there.
    assert accept(machine, message(A, 1, number=1), path="conn-b", now=T0 + 2) is Dropped.REJECTED
    [(path, data)] = machine.order_acks(T0 + 3, WALL)
    assert path == "conn-b"
    assert parse_order_ack(data).sequence_number == 1


def test_each_streams_order_ack_goes_back_the_way_its_messages_came() -> None:
    # One source, two outgoing queues: one reaches here straight (conn-a), the
    # other through a router (conn-r). The source takes an OrderAck only from
    # each queue's own next hop, so each stream's goes back its own way, however
    # the source's messages interleave.
    routed = wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp + 7)
    machine = receiver(order_ack_delay=0.5)
    decisions = [
        accept(machine, message(A, 1, number=1), path="conn-a"),
        accept(machine, message(A, 2, "audit", number=1, sequence_id=routed), path="conn-r"),
        accept(machine, message(A, 3, number=2), path="conn-a"),
        accept(machine, message(A, 4, "audit", number=2, sequence_id=routed), path="conn-r"),
    ]
    sent = {ack.sequence_id.value: path for path, ack in announced(machine, decisions)}
    assert sent == {SEQ.value: "conn-a", routed.value: "conn-r"}
    # A plain message on the router's path leaves each stream's way as it was.
    accept(machine, message(A, 5, PLAIN), path="conn-r")
    accept(machine, message(A, 3, number=2), path="conn-a", now=T0 + 2)  # a resend re-arms it
    [(path, _)] = machine.order_acks(T0 + 3, WALL)
    assert path == "conn-a"
    # Once a stream's way is closed, its OrderAck goes the source's last way.
    machine.return_paths.path_closed("conn-a")
    accept(machine, message(A, 3, number=2), path="conn-r", now=T0 + 4)
    [(path, _)] = machine.order_acks(T0 + 5, WALL)
    assert path == "conn-r"


def test_a_receiver_restarts_from_what_the_store_holds() -> None:
    state = StreamState(SEQ.value, 4, 0, T0)
    key, _ = message_keys(A.bytes, 9, PLAIN)
    machine = receiver(streams={(ORDERS, A.bytes, SEQ.timestamp): state}, history=[key])
    assert machine.streams() == [((ORDERS, A.bytes, SEQ.timestamp), state)]
    assert accept(machine, message(A, 4, number=4)) is Dropped.REJECTED
    assert isinstance(accept(machine, message(A, 5, number=5)), Accepted)
    assert accept(machine, message(A, 9, PLAIN), PLAIN) is Dropped.DUPLICATE
    assert len(machine.history) == 1


def test_decisions_are_values() -> None:
    decision = Accepted(remember=b"k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.remember = b"x"  # type: ignore[misc]
    assert list(itertools.islice(Dropped, 2)) == [Dropped.REJECTED, Dropped.DUPLICATE]
