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
    FinalAckToKeep,
    OrderAckArrived,
    PassOn,
    Receiver,
    StreamState,
)
from qmgr.protocol import receiver as receiver_module
from qmgr.protocol.history import message_keys
from qmgr.protocol.receiver import PASSED_ON_REMEMBERED

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
    final_ack,
    message,
    order_ack,
    parse_order_ack,
    parse_packet,
    receiver,
)

#: A router between A and this queue manager.
R = uuid.UUID("d0000000-0000-4000-8000-00000000000d")

# --------------------------------------------------------------------------
# Arrival: what a packet is, and return paths
# --------------------------------------------------------------------------


@pytest.mark.parametrize("target", [LOCAL, wire.NULL_GUID])
def test_an_order_ack_for_us_is_handed_over(target: uuid.UUID) -> None:
    machine = receiver()
    arrival = machine.arrive(order_ack(target, 4), "conn-1")
    assert isinstance(arrival, OrderAckArrived)
    assert arrival.ack.sequence_number == 4
    assert machine.received == 0
    assert machine.path_to(C) is None  # acknowledgments make no return path


def relay(machine: Receiver[str], packet: wire.UserMessage, path: str) -> None:
    """Arrive and accept a message the core relays to another queue manager."""
    assert machine.arrive(packet, path) is ArrivalKind.MESSAGE
    accepted = machine.accept(packet, queue_key=None, relayed=True, now=T0, wall=WALL)
    assert isinstance(accepted, Accepted)
    assert (accepted.stream, accepted.remember) == (None, b"")


def test_acknowledgments_for_another_queue_manager_go_back_its_way() -> None:
    machine = receiver(router=True)
    relay(machine, message(A, 1, number=1), "from-a")  # A's stream went on to C
    machine.path_closed("from-a")
    assert machine.arrive(order_ack(A, 4), "from-c") is ArrivalKind.UNROUTABLE
    # No way to A yet: a router keeps its FinalAck (the destination forgets it
    # once acknowledged, and nothing would send it again), and drops its
    # OrderAck (the destination announces again when A resends).
    kept = machine.arrive(final_ack(A), "from-c")
    assert isinstance(kept, FinalAckToKeep)
    assert (kept.ack.acked_source_qm, kept.ack.source_qm) == (A, C)
    assert machine.unroutable == 1
    accept(machine, message(A, 1, number=1), path="from-a")
    passed = machine.arrive(order_ack(A, 4), "from-c")
    assert isinstance(passed, PassOn)
    assert (passed.path, passed.recoverable) == ("from-a", False)
    assert parse_order_ack(passed.data).sequence_number == 4
    passed = machine.arrive(final_ack(A), "from-c")
    assert isinstance(passed, PassOn)
    assert (passed.path, passed.recoverable) == ("from-a", True)
    machine.path_closed("from-a")
    assert machine.arrive(order_ack(A, 4), "from-c") is ArrivalKind.UNROUTABLE
    assert isinstance(machine.arrive(final_ack(A), "from-c"), FinalAckToKeep)
    # A's only way is where the FinalAck came from: it is not sent back there.
    accept(machine, message(A, 2, number=2), path="from-c")
    assert machine.arrive(final_ack(A), "from-c") is ArrivalKind.UNROUTABLE
    # A queue manager that relays nothing has no FinalAck of another to keep.
    assert receiver().arrive(final_ack(A), "from-c") is ArrivalKind.UNROUTABLE


def test_a_router_keeps_only_final_acks_of_sources_it_relayed_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(receiver_module, "MAX_STREAM_PATHS", 2)
    machine = receiver(router=True)
    # About a message of A, whose messages never came this way: dropped.
    assert machine.arrive(final_ack(A), "from-c") is ArrivalKind.UNROUTABLE
    assert machine.unroutable == 1
    other = wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp + 1)
    relay(machine, message(B, 1, number=1, sequence_id=other), "from-b")
    machine.path_closed("from-b")
    assert machine.arrive(final_ack(A), "from-c") is ArrivalKind.UNROUTABLE
    # Once a stream of A's (any) was relayed here, A's FinalAcks are kept.
    relay(machine, message(A, 2, number=1, sequence_id=other), "from-a")
    machine.path_closed("from-a")
    assert isinstance(machine.arrive(final_ack(A), "from-c"), FinalAckToKeep)
    # The sources kept are bounded: past the bound, a new one is not kept.
    third = machine.accept(message(C, 3, number=1), queue_key=None, relayed=True, now=T0, wall=WALL)
    assert third == Accepted()


def test_a_routers_order_ack_of_a_relayed_stream_comes_only_from_its_next_hop() -> None:
    hops = {"outgoing$;to-c": C}
    machine = receiver(router=True, hop_of=hops.get)
    relayed = message(A, 1, number=1)
    assert machine.arrive(relayed, "from-a", hop=A) is ArrivalKind.MESSAGE
    machine.accept(
        relayed, queue_key=None, relayed=True, now=T0, wall=WALL, relayed_to="outgoing$;to-c"
    )
    # From another peer (B): refused, and counted.
    assert machine.arrive(order_ack(A, 1), "from-b", hop=B) is ArrivalKind.NOT_FROM_HOP
    assert machine.unroutable == 1
    # From C, the queue's hop: passed on to A.
    passed = machine.arrive(order_ack(A, 2), "from-c", hop=C)
    assert isinstance(passed, PassOn)
    assert passed.path == "from-a"
    # A hop not known yet (no session since the start), or a stream not relayed
    # here: no check.
    hops.clear()
    assert isinstance(machine.arrive(order_ack(A, 3), "from-b", hop=B), PassOn)


def test_a_windows_source_sharing_one_timestamp_has_each_streams_hop_checked() -> None:
    # Windows gives all its outgoing queues one timestamp, each its own
    # ordinal: two streams through this router, to C and to B, each keep their
    # own hop.
    hops = {"outgoing$;to-c": C, "outgoing$;to-b": B}
    machine = receiver(router=True, hop_of=hops.get)
    to_c = wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp)
    to_b = wire.TxSequenceId(ordinal=2, timestamp=SEQ.timestamp)
    for n, (sequence, queue) in enumerate(((to_c, "outgoing$;to-c"), (to_b, "outgoing$;to-b"))):
        packet = message(A, n + 1, number=1, sequence_id=sequence)
        assert machine.arrive(packet, "from-a", hop=A) is ArrivalKind.MESSAGE
        machine.accept(packet, queue_key=None, relayed=True, now=T0, wall=WALL, relayed_to=queue)
    acked = machine.arrive(order_ack(A, 1, sender=B, sequence_id=to_b), "from-b", hop=B)
    assert isinstance(acked, PassOn)
    acked = machine.arrive(order_ack(A, 1, sender=C, sequence_id=to_c), "from-c", hop=C)
    assert isinstance(acked, PassOn)
    acked = machine.arrive(order_ack(A, 2, sender=B, sequence_id=to_c), "from-b", hop=B)
    assert acked is ArrivalKind.NOT_FROM_HOP


def test_the_sources_relayed_for_are_kept_and_their_final_acks_too() -> None:
    # A message of a source relayed here asks the write to keep the source
    # until one that did is persisted; a FinalAck about its messages is kept
    # after a restart (its stream unknown); a rolled-back write forgets it.
    machine = receiver(router=True)
    first = machine.accept(message(A, 1, number=1), queue_key=None, relayed=True, now=T0, wall=WALL)
    assert first == Accepted(relayed_source=A.bytes)
    machine.rolled_back([first])
    assert machine.arrive(final_ack(B), "from-c") is ArrivalKind.UNROUTABLE
    again = machine.accept(message(A, 2, number=2), queue_key=None, relayed=True, now=T0, wall=WALL)
    assert again == Accepted(relayed_source=A.bytes)
    machine.persisted(again, now=T0, wall=WALL)
    assert (
        machine.accept(message(A, 3, number=3), queue_key=None, relayed=True, now=T0, wall=WALL)
        == Accepted()
    )
    restarted = receiver(router=True, relayed_sources=[A.bytes])
    assert isinstance(restarted.arrive(final_ack(A), "from-c"), FinalAckToKeep)
    assert restarted.arrive(final_ack(B), "from-c") is ArrivalKind.UNROUTABLE


def test_a_source_is_kept_by_the_first_write_that_is_stored() -> None:
    # A's messages reach the router on two connections, each writing its own
    # unit: until one keeping A is persisted, each asks to keep A, so a first
    # write that fails does not leave A out while a later one is stored.
    machine = receiver(router=True)
    first = machine.accept(message(A, 1, number=1), queue_key=None, relayed=True, now=T0, wall=WALL)
    second = machine.accept(
        message(A, 2, number=2), queue_key=None, relayed=True, now=T0, wall=WALL
    )
    assert first == second == Accepted(relayed_source=A.bytes)
    machine.rolled_back([first])
    # While one is in flight, A counts as relayed for.
    assert isinstance(machine.arrive(final_ack(A), "from-c"), FinalAckToKeep)
    machine.persisted(second, now=T0, wall=WALL)
    third = machine.accept(message(A, 3, number=3), queue_key=None, relayed=True, now=T0, wall=WALL)
    assert third == Accepted()  # kept: asked no more


def test_the_return_paths_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A peer naming ever new sources cannot grow the table: the least recently
    # heard of is forgotten.
    monkeypatch.setattr(receiver_module, "MAX_STREAM_PATHS", 2)
    machine = receiver()
    for source in (A, B, C):
        accept(machine, message(source, 1, PLAIN), PLAIN, path=f"from-{source.hex[0]}")
    assert machine.paths() == {B.bytes: "from-b", C.bytes: "from-c"}


def announced(
    machine: Receiver[str], decisions: list[Accepted | Dropped]
) -> list[tuple[str, wire.OrderAck]]:
    """Persist the accepted ``decisions``: the OrderAcks due a second later, with their paths."""
    for decision in decisions:
        assert isinstance(decision, Accepted)
        machine.persisted(decision, now=T0, wall=WALL)
    return [(path, parse_order_ack(data)) for path, data in machine.order_acks(T0 + 1, WALL)]


def passed_on_to(machine: Receiver[str], ack: wire.UserMessage, arrived_on: str) -> str:
    """The path an acknowledgment for another queue manager is passed on along."""
    passed = machine.arrive(ack, arrived_on)
    assert isinstance(passed, PassOn)
    return passed.path


def test_a_router_passes_an_order_ack_back_the_way_its_stream_came() -> None:
    # A's stream came through another router (from-r1), while A also has a session
    # here: its OrderAck goes back through from-r1, where A expects it from; a
    # FinalAck takes the session. Once from-r1 is gone, the OrderAck does too.
    machine = receiver()
    relay(machine, message(A, 1, number=1), "from-r1")
    machine.session_opened("session-a", A)
    assert passed_on_to(machine, order_ack(A, 1), "from-c") == "from-r1"
    assert passed_on_to(machine, final_ack(A), "from-c") == "session-a"
    # Not back where it came from: then by the session.
    assert passed_on_to(machine, order_ack(A, 2), "from-r1") == "session-a"
    machine.path_closed("from-r1")
    assert passed_on_to(machine, order_ack(A, 3), "from-c") == "session-a"


def test_the_stream_paths_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(receiver_module, "MAX_STREAM_PATHS", 2)
    machine = receiver(order_ack_delay=0.5)
    stamps = [wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp + n) for n in range(3)]
    decisions = [
        accept(machine, message(A, n + 1, number=1, sequence_id=stamp), path=f"conn-{n}")
        for n, stamp in enumerate(stamps)
    ]
    # The least recently used is forgotten: its OrderAck goes the source's last way.
    sent = {ack.sequence_id.timestamp: path for path, ack in announced(machine, decisions)}
    assert sent == {
        stamps[0].timestamp: "conn-2",  # forgotten: the way A's last message came
        stamps[1].timestamp: "conn-1",
        stamps[2].timestamp: "conn-2",
    }


def test_an_acknowledgment_is_passed_on_unchanged_and_never_sent_back() -> None:
    machine = receiver()
    relay(machine, message(A, 1, number=1), "from-a")
    ack = order_ack(A, 4)
    passed = machine.arrive(ack, "from-c")
    assert isinstance(passed, PassOn)
    assert parse_packet(passed.data) == dataclasses.replace(ack, session=None)
    # Back on the connection it came from: dropped, not bounced.
    assert machine.arrive(order_ack(A, 5), "from-a") is ArrivalKind.UNROUTABLE
    assert machine.unroutable == 1


def test_the_routes_to_queue_managers_are_a_session_first_then_a_return_path() -> None:
    closing: set[str] = set()
    machine = receiver(closing=closing.__contains__)
    accept(machine, message(A, 1, number=1), path="from-b")
    accept(machine, message(B, 1, number=1), path="from-b")
    machine.session_opened("with-a", A)
    machine.session_opened("with-c", C)
    assert machine.routes() == {A.bytes: "with-a", B.bytes: "from-b", C.bytes: "with-c"}
    closing.update({"with-a", "with-c"})
    assert machine.routes() == {A.bytes: "from-b", B.bytes: "from-b"}
    machine.path_closed("from-b")
    assert machine.routes() == {}


def test_a_sources_router_is_its_way_back_once_its_return_path_is_gone() -> None:
    # A's messages came through the router R. The connection they came on ends
    # (an idle close, a restart): a later session with R is the way to A.
    machine = receiver()
    assert machine.arrive(message(A, 1, number=1), "conn-r", hop=R) is ArrivalKind.MESSAGE
    assert machine.via(A) == R.bytes
    machine.path_closed("conn-r")
    assert machine.routes() == {}
    machine.session_opened("new-r", R)
    assert machine.routes() == {A.bytes: "new-r", R.bytes: "new-r"}
    assert passed_on_to(machine, final_ack(A), "from-c") == "new-r"
    # A session with A itself comes first; a message straight from A leaves
    # the router known (A may send both ways).
    machine.session_opened("with-a", A)
    assert machine.routes()[A.bytes] == "with-a"
    machine.path_closed("with-a")
    assert machine.arrive(message(A, 2, number=2), "conn-a", hop=A) is ArrivalKind.MESSAGE
    assert machine.via(A) == R.bytes
    assert machine.routes()[A.bytes] == "conn-a"
    machine.path_closed("conn-a")
    assert machine.routes()[A.bytes] == "new-r"


def test_the_routers_known_at_the_start_come_from_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(receiver_module, "MAX_STREAM_PATHS", 2)
    # Least recent first: with room for two, the oldest is left out.
    machine = receiver(vias={C.bytes: R.bytes, A.bytes: R.bytes, B.bytes: R.bytes})
    assert (machine.via(C), machine.via(A), machine.via(B)) == (None, R.bytes, R.bytes)
    machine.session_opened("conn-r", R)
    assert machine.routes() == {A.bytes: "conn-r", B.bytes: "conn-r", R.bytes: "conn-r"}
    # Bounded as they change: the least recently heard of goes.
    machine.arrive(message(C, 1, number=1), "conn-r", hop=R)
    assert (machine.via(A), machine.via(B), machine.via(C)) == (None, R.bytes, R.bytes)


def test_nothing_is_passed_on_along_a_closing_path() -> None:
    closing = {"with-a"}
    machine = receiver(closing=closing.__contains__)
    relay(machine, message(A, 1, number=1), "from-b")
    machine.session_opened("with-a", A)
    passed = machine.arrive(order_ack(A, 4), "from-c")
    assert isinstance(passed, PassOn)
    assert passed.path == "from-b"  # the session with A is closing
    closing.add("from-b")
    assert machine.arrive(order_ack(A, 5), "from-c") is ArrivalKind.UNROUTABLE


def test_an_acknowledgment_goes_on_a_session_with_its_queue_manager_first() -> None:
    # A FinalAck takes a session with its queue manager before the way its
    # messages last came; an OrderAck of a stream not relayed here goes nowhere
    # (no one here knows who may acknowledge it).
    machine = receiver()
    accept(machine, message(A, 1, PLAIN), PLAIN, path="from-b")  # A's messages came through B
    machine.session_opened("with-a", A)
    assert passed_on_to(machine, final_ack(A), "from-c") == "with-a"
    assert machine.arrive(order_ack(A, 4), "from-c") is ArrivalKind.UNROUTABLE
    machine.path_closed("with-a")
    again = final_ack(A)
    again = dataclasses.replace(again, user=dataclasses.replace(again.user, message_id=3))
    assert passed_on_to(machine, again, "from-c") == "from-b"


def test_two_routers_that_hold_each_other_as_a_return_path_stop_passing_an_ack_on() -> None:
    """A's messages reached each router through the other (one was down, then the
    other way round): an OrderAck for A goes round once and is dropped when it
    comes back, whatever connections carry it."""
    one, two = receiver(), receiver()
    relay(one, message(A, 1, number=1), "two->one")
    relay(two, message(A, 2, number=2), "one->two")
    packet, at, passes = order_ack(A, 4), one, 0
    for _ in range(100):
        arrival = at.arrive(packet, "in")
        if arrival is ArrivalKind.UNROUTABLE:
            break
        assert isinstance(arrival, PassOn)
        packet = parse_packet(arrival.data)
        at = two if at is one else one
        passes += 1
    assert passes == 2
    assert (one.unroutable, two.unroutable) == (1, 0)
    # A new acknowledgment (a new id) is passed on again: it is not the same one.
    assert isinstance(one.arrive(order_ack(A, 5), "in"), PassOn)


def test_the_acknowledgments_remembered_are_bounded() -> None:
    machine = receiver()
    relay(machine, message(A, 1, number=1), "from-a")
    first = order_ack(A, 1)
    assert isinstance(machine.arrive(first, "from-c"), PassOn)
    for number in range(2, PASSED_ON_REMEMBERED + 2):
        assert isinstance(machine.arrive(order_ack(A, number), "from-c"), PassOn)
    assert isinstance(machine.arrive(first, "from-c"), PassOn)  # forgotten by now


def test_a_final_ack_about_our_message_is_handed_over() -> None:
    arrival = receiver().arrive(final_ack(LOCAL), "conn-1")
    assert isinstance(arrival, FinalAckArrived)
    assert arrival.ack.acked_message_id == 9


def test_a_message_makes_its_connection_the_return_path_of_its_source() -> None:
    machine = receiver()
    accept(machine, message(A, 1, number=1), path="old")
    accept(machine, message(A, 2, number=2), path="new")
    accept(machine, message(B, 1, number=1), path="old")
    assert machine.path_to(A) == "new"
    assert dict(machine.paths()) == {A.bytes: "new", B.bytes: "old"}
    machine.path_closed("old")
    assert dict(machine.paths()) == {A.bytes: "new"}
    assert machine.received == 3


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
    assert machine.path_to(A) == "conn-2"
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
    machine.path_closed("conn-a")
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
    machine.path_closed("conn-a")
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
