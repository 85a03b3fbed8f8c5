"""Return paths (``qmgr.protocol.return_paths``), through the Receiver that
keeps them: where acknowledgments go back to, which ones a router passes on,
keeps or refuses, and the bounds on what it remembers.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest

import wire
from qmgr.protocol import (
    Accepted,
    ArrivalKind,
    FinalAckToKeep,
    PassOn,
    Receiver,
    ReturnPaths,
)
from qmgr.protocol import return_paths as return_paths_module
from qmgr.protocol.return_paths import PASSED_ON_REMEMBERED

from .model_kit import T0
from .receiver_kit import (
    LOCAL,
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
    parse_packet,
    receiver,
)

#: A router between A and this queue manager.
R = uuid.UUID("d0000000-0000-4000-8000-00000000000d")


def relay(machine: Receiver[str], packet: wire.UserMessage, path: str) -> None:
    """Arrive and accept a message the core relays to another queue manager."""
    assert machine.arrive(packet, path) is ArrivalKind.MESSAGE
    accepted = machine.accept(packet, queue_key=None, relayed=True, now=T0, wall=WALL)
    assert isinstance(accepted, Accepted)
    assert (accepted.stream, accepted.remember) == (None, b"")


def test_acknowledgments_for_another_queue_manager_go_back_its_way() -> None:
    machine = receiver(router=True)
    relay(machine, message(A, 1, number=1), "from-a")  # A's stream went on to C
    machine.return_paths.path_closed("from-a")
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
    machine.return_paths.path_closed("from-a")
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
    monkeypatch.setattr(return_paths_module, "MAX_STREAM_PATHS", 2)
    machine = receiver(router=True)
    # About a message of A, whose messages never came this way: dropped.
    assert machine.arrive(final_ack(A), "from-c") is ArrivalKind.UNROUTABLE
    assert machine.unroutable == 1
    other = wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp + 1)
    relay(machine, message(B, 1, number=1, sequence_id=other), "from-b")
    machine.return_paths.path_closed("from-b")
    assert machine.arrive(final_ack(A), "from-c") is ArrivalKind.UNROUTABLE
    # Once a stream of A's (any) was relayed here, A's FinalAcks are kept.
    relay(machine, message(A, 2, number=1, sequence_id=other), "from-a")
    machine.return_paths.path_closed("from-a")
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
    monkeypatch.setattr(return_paths_module, "MAX_STREAM_PATHS", 2)
    machine = receiver()
    for source in (A, B, C):
        accept(machine, message(source, 1, PLAIN), PLAIN, path=f"from-{source.hex[0]}")
    assert machine.return_paths.paths() == {B.bytes: "from-b", C.bytes: "from-c"}


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
    machine.return_paths.session_opened("session-a", A)
    assert passed_on_to(machine, order_ack(A, 1), "from-c") == "from-r1"
    assert passed_on_to(machine, final_ack(A), "from-c") == "session-a"
    # Not back where it came from: then by the session.
    assert passed_on_to(machine, order_ack(A, 2), "from-r1") == "session-a"
    machine.return_paths.path_closed("from-r1")
    assert passed_on_to(machine, order_ack(A, 3), "from-c") == "session-a"


def test_the_stream_paths_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(return_paths_module, "MAX_STREAM_PATHS", 2)
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
    machine.return_paths.session_opened("with-a", A)
    machine.return_paths.session_opened("with-c", C)
    assert machine.return_paths.routes() == {
        A.bytes: "with-a",
        B.bytes: "from-b",
        C.bytes: "with-c",
    }
    closing.update({"with-a", "with-c"})
    assert machine.return_paths.routes() == {A.bytes: "from-b", B.bytes: "from-b"}
    machine.return_paths.path_closed("from-b")
    assert machine.return_paths.routes() == {}


def test_a_sources_router_is_its_way_back_once_its_return_path_is_gone() -> None:
    # A's messages came through the router R. The connection they came on ends
    # (an idle close, a restart): a later session with R is the way to A.
    machine = receiver()
    assert machine.arrive(message(A, 1, number=1), "conn-r", hop=R) is ArrivalKind.MESSAGE
    assert machine.return_paths.via(A) == R.bytes
    machine.return_paths.path_closed("conn-r")
    assert machine.return_paths.routes() == {}
    machine.return_paths.session_opened("new-r", R)
    assert machine.return_paths.routes() == {A.bytes: "new-r", R.bytes: "new-r"}
    assert passed_on_to(machine, final_ack(A), "from-c") == "new-r"
    # A session with A itself comes first; a message straight from A leaves
    # the router known (A may send both ways).
    machine.return_paths.session_opened("with-a", A)
    assert machine.return_paths.routes()[A.bytes] == "with-a"
    machine.return_paths.path_closed("with-a")
    assert machine.arrive(message(A, 2, number=2), "conn-a", hop=A) is ArrivalKind.MESSAGE
    assert machine.return_paths.via(A) == R.bytes
    assert machine.return_paths.routes()[A.bytes] == "conn-a"
    machine.return_paths.path_closed("conn-a")
    assert machine.return_paths.routes()[A.bytes] == "new-r"


def test_the_routers_known_at_the_start_come_from_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(return_paths_module, "MAX_STREAM_PATHS", 2)
    # Least recent first: with room for two, the oldest is left out.
    machine = receiver(vias={C.bytes: R.bytes, A.bytes: R.bytes, B.bytes: R.bytes})
    assert (
        machine.return_paths.via(C),
        machine.return_paths.via(A),
        machine.return_paths.via(B),
    ) == (None, R.bytes, R.bytes)
    machine.return_paths.session_opened("conn-r", R)
    assert machine.return_paths.routes() == {
        A.bytes: "conn-r",
        B.bytes: "conn-r",
        R.bytes: "conn-r",
    }
    # Bounded as they change: the least recently heard of goes.
    machine.arrive(message(C, 1, number=1), "conn-r", hop=R)
    assert (
        machine.return_paths.via(A),
        machine.return_paths.via(B),
        machine.return_paths.via(C),
    ) == (None, R.bytes, R.bytes)


def test_nothing_is_passed_on_along_a_closing_path() -> None:
    closing = {"with-a"}
    machine = receiver(closing=closing.__contains__)
    relay(machine, message(A, 1, number=1), "from-b")
    machine.return_paths.session_opened("with-a", A)
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
    machine.return_paths.session_opened("with-a", A)
    assert passed_on_to(machine, final_ack(A), "from-c") == "with-a"
    assert machine.arrive(order_ack(A, 4), "from-c") is ArrivalKind.UNROUTABLE
    machine.return_paths.path_closed("with-a")
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


def test_a_message_makes_its_connection_the_return_path_of_its_source() -> None:
    machine = receiver()
    accept(machine, message(A, 1, number=1), path="old")
    accept(machine, message(A, 2, number=2), path="new")
    accept(machine, message(B, 1, number=1), path="old")
    assert machine.return_paths.path_to(A) == "new"
    assert dict(machine.return_paths.paths()) == {A.bytes: "new", B.bytes: "old"}
    machine.return_paths.path_closed("old")
    assert dict(machine.return_paths.paths()) == {A.bytes: "new"}
    assert machine.received == 3


# --------------------------------------------------------------------------
# ReturnPaths on its own
# --------------------------------------------------------------------------


def test_a_relayed_source_is_asked_for_until_a_write_keeping_it_is_persisted() -> None:
    paths: ReturnPaths[str] = ReturnPaths(router=True)
    # Two writes in flight ask for A; the first fails, the second is persisted.
    assert paths.keep_source(A.bytes)
    assert paths.keep_source(A.bytes)
    paths.source_written(A.bytes, kept=False)
    assert paths.keep_source(A.bytes)  # still not kept: a third write asks too
    paths.source_written(A.bytes, kept=True)
    assert not paths.keep_source(A.bytes)  # kept: no write asks any more
    paths.source_written(A.bytes, kept=False)  # the third failed: A stays kept
    assert not paths.keep_source(A.bytes)
    assert paths.keep_source(B.bytes)


def test_the_relayed_sources_kept_and_asked_for_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(return_paths_module, "MAX_STREAM_PATHS", 2)
    paths: ReturnPaths[str] = ReturnPaths(router=True, relayed_sources=[A.bytes])
    assert paths.keep_source(B.bytes)
    assert not paths.keep_source(C.bytes)  # A kept, B asked for: no room
    assert paths.keep_source(B.bytes)  # one already asked for is asked for again
    paths.source_written(B.bytes, kept=False)
    assert not paths.keep_source(C.bytes)  # one of B's writes is still in flight
    paths.source_written(B.bytes, kept=False)
    assert paths.keep_source(C.bytes)  # B's writes failed: its room is free


def test_a_relayed_source_kept_takes_one_room_not_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(return_paths_module, "MAX_STREAM_PATHS", 3)
    paths: ReturnPaths[str] = ReturnPaths(router=True, relayed_sources=[A.bytes])
    assert paths.keep_source(B.bytes)
    paths.source_written(B.bytes, kept=True)  # kept: no longer asked for
    assert paths.keep_source(C.bytes)  # A and B kept, C asked for: three
    assert not paths.keep_source(R.bytes)


def test_an_order_ack_of_ours_goes_the_streams_way_then_the_sources() -> None:
    closing: set[str] = set()
    paths: ReturnPaths[str] = ReturnPaths(closing=closing.__contains__)
    assert paths.order_ack_path(A.bytes, SEQ.timestamp) is None
    paths.message_arrived(message(A, 1, number=1), "stream-way", None)
    paths.message_arrived(message(A, 2, PLAIN), "source-way", None)
    assert paths.order_ack_path(A.bytes, SEQ.timestamp) == "stream-way"
    assert paths.order_ack_path(A.bytes, SEQ.timestamp + 1) == "source-way"
    closing.add("stream-way")
    assert paths.order_ack_path(A.bytes, SEQ.timestamp) == "source-way"
    paths.path_closed("source-way")
    assert paths.order_ack_path(A.bytes, SEQ.timestamp) is None


def test_a_message_this_queue_manager_sent_to_itself_is_no_way_back_to_its_source() -> None:
    # A router relayed A's message to a hop that turned out to be itself: it comes
    # back over a session with itself (hop: this queue manager), which leads to A
    # no more than before. Its own messages that way are its own way back.
    machine = receiver(router=True)
    relay(machine, message(A, 1, number=1), "from-a")
    assert machine.arrive(message(A, 1, number=1), "itself", hop=LOCAL) is ArrivalKind.MESSAGE
    assert machine.return_paths.path_to(A) == "from-a"
    assert machine.return_paths.order_ack_path(A.bytes, SEQ.timestamp) == "from-a"
    assert machine.return_paths.via(A) is None
    assert machine.received == 2
    machine.arrive(message(LOCAL, 1, number=1), "itself", hop=LOCAL)
    assert machine.return_paths.path_to(LOCAL) == "itself"
