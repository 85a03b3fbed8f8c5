"""One peer connection (``qmgr.server.peering.connection``): packets in any pieces, the
window, SessionAcks that lie or get lost, connections cut anywhere, idle sessions, and
what was accepted but never written when a connection breaks."""

from __future__ import annotations

import re

import pytest
import structlog
import trio
import trio.testing
from peer_kit import Network, is_data, is_order_ack, is_session_ack, wait_until

import storage
import wire
from qmgr.core.outgoing import decode_entry
from qmgr.protocol import Role
from qmgr.server.peering.close_reasons import PeerClosed, close_reason
from qmgr.server.peering.connection import SLOT_PLACE_SECONDS, Dialing, PacketToSend
from qmgr.server.peering.outgoing_queue import OutgoingQueue

from .conftest import (
    QUEUE,
    bodies,
    check_resends_dropped,
    cut_once,
    deliver,
    incoming_state,
    receiver,
    start_pair,
)


@pytest.mark.parametrize(
    ("read_sizes", "delay"),
    [((1,), 0.0), ((3, 1, 7, 13, 2, 64, 5, 1021), 0.0), ((), 0.25)],
    ids=["one-byte-reads", "odd-reads", "delayed"],
)
async def test_packets_arrive_in_any_pieces(
    network: Network,
    autojump_clock: trio.testing.MockClock,
    read_sizes: tuple[int, ...],
    delay: float,
) -> None:
    a, b = await start_pair(network)
    for sender, to in ((a, b), (b, a)):
        channel = network.channel(sender, to)
        channel.read_sizes = read_sizes
        channel.delay = delay
    expected = bodies(7)
    await a.send(b.remote(QUEUE), expected[:3])
    await a.send(b.remote(QUEUE), expected[3:])
    await deliver(a, b, expected)
    assert network.connections == [("qm-a", "qm-b")]
    assert network.channel(a, b).count(is_data) == 7
    assert a.outgoing_state().sequence_ordinal == 2
    assert incoming_state(b, a).last_number == 7
    assert receiver(b).rejected == 0


@pytest.mark.parametrize("window", [1, 2])
async def test_more_messages_than_the_window_all_arrive(
    network: Network, autojump_clock: trio.testing.MockClock, window: int
) -> None:
    a, b = await start_pair(network, f"peers.window={window}")
    to_b = network.channel(a, b)
    in_flight: list[int] = []

    def spy(packet: wire.Packet) -> bool:
        # Called as A writes: how many sent packets wait for B's SessionAck.
        connection = a.link(b).connection
        if is_data(packet) and connection is not None:
            in_flight.append(connection.session.unacked)
        return False

    to_b.drop = spy
    expected = bodies(25)
    await a.send(b.remote(QUEUE), expected[:20])
    await a.send(b.remote(QUEUE), expected[20:])
    await deliver(a, b, expected)
    assert len(in_flight) == 25
    assert max(in_flight) <= window
    assert network.channel(b, a).count(is_session_ack) >= 25 // window
    assert network.connections == [("qm-a", "qm-b")]
    assert to_b.count(is_data) == 25
    assert incoming_state(b, a).last_number == 25


async def test_a_session_ack_with_wrong_counts_closes_the_connection(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    network.auto_connect = False
    await a.send(b.remote(QUEUE), [b"waits"])
    pair = await network.connect(a, b)
    await wait_until(pair.initiator.opened.is_set)
    wrong = wire.SessionHeader(
        ack_sequence_number=0,
        user_message_sequence_number=3,
        recoverable_message_sequence_number=2,
    )
    await pair.far.inject(wire.build_packet(wire.SessionAck(session=wrong)))
    await wait_until(pair.done.is_set)
    assert pair.initiator.close_reason == (
        "SessionHeader counts 3 sent / 2 recoverable sent, but we received 0 / 0"
    )
    assert pair.acceptor.close_reason.startswith("the peer closed the connection")


async def test_a_rewritten_session_ack_closes_and_the_next_session_delivers_once(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = await start_pair(network)
    to_a = network.channel(b, a)
    rewritten: list[wire.SessionHeader] = []

    def bump(packet: wire.Packet, data: bytes) -> bytes:
        if not isinstance(packet, wire.SessionAck) or rewritten:
            return data
        header = packet.session
        wrong = wire.SessionHeader(
            ack_sequence_number=header.ack_sequence_number,
            recoverable_ack_sequence_number=header.recoverable_ack_sequence_number,
            recoverable_ack_flags=header.recoverable_ack_flags,
            user_message_sequence_number=header.user_message_sequence_number + 1,
            recoverable_message_sequence_number=header.recoverable_message_sequence_number + 1,
            window_size=header.window_size,
        )
        rewritten.append(wrong)
        return wire.build_packet(wire.SessionAck(session=wrong))

    to_a.rewrite = bump
    expected = bodies(4)
    await a.send(b.remote(QUEUE), expected)
    await deliver(a, b, expected)
    assert len(rewritten) == 1
    first = a.closed[0]
    assert first.reason == "SessionHeader counts 1 sent / 1 recoverable sent, but we received 0 / 0"
    assert len(network.connections) == 2
    assert incoming_state(b, a).last_number == 4


async def test_a_connection_cut_mid_packet_is_resumed_without_duplicates(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    to_b = network.channel(a, b)
    seen: list[wire.Packet] = []

    def cut_second_message(packet: wire.Packet) -> int | None:
        if is_data(packet):
            seen.append(packet)
            if len(seen) == 2:
                return 10
        return None

    await cut_once(a, b, to_b, cut_second_message, watch=b, expected=bodies(3))
    assert b.closed[0].reason == (
        "the peer closed the connection in the middle of a packet (10 bytes)"
    )
    assert a.closed[0].reason == "the peer closed the connection"
    assert network.connections == [("qm-a", "qm-b")] * 2
    # The first message was stored before the cut; its resend was dropped.
    assert to_b.count(is_data) == 1 + 3
    check_resends_dropped(a, b, rejected=1, last_number=3)


async def test_a_connection_cut_inside_the_order_ack_is_resumed_without_duplicates(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    to_a = network.channel(b, a)

    def cut_order_ack(packet: wire.Packet) -> int | None:
        return 10 if is_order_ack(packet) else None

    await cut_once(a, b, to_a, cut_order_ack, watch=a, expected=bodies(3))
    assert a.closed[0].reason == (
        "the peer closed the connection in the middle of a packet (10 bytes)"
    )
    assert network.connections == [("qm-a", "qm-b")] * 2
    # B had all three; A sent them again and B announced them once more.
    assert network.channel(a, b).count(is_data) == 6
    assert to_a.count(is_order_ack) == 1
    check_resends_dropped(a, b, rejected=3, last_number=3)


async def test_a_session_that_never_carries_a_message_closes_when_idle(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = await start_pair(network, "peers.idle_timeout=30.0")
    network.auto_connect = False
    await a.send(b.remote(QUEUE), [b"first"])
    # The link is stuck connecting; make a session by hand, and take the
    # message away from A so that the session has nothing to carry.
    queue = a.outgoing_queue()
    [outgoing] = a.peering.outgoing.values()
    outgoing.paused = True
    opened = trio.current_time()
    pair = await network.connect(a, b)
    await wait_until(pair.initiator.opened.is_set)
    assert trio.current_time() - opened < 0.1
    await wait_until(pair.done.is_set)
    closed = {c.role: c for c in (*a.closed, *b.closed)}
    reasons = {c.reason for c in closed.values()}
    assert "idle: no user packet for 30 s" in reasons
    assert reasons <= {"idle: no user packet for 30 s", "the peer closed the connection"}
    assert [c.at - opened for c in closed.values()] == [30.0, 30.0]
    assert network.channel(a, b).count(is_data) == 0
    assert a.depth(queue.queue_id) == 1


@pytest.mark.parametrize("transactional", [True, False], ids=["transactional", "recoverable"])
async def test_a_message_accepted_but_never_written_is_taken_from_the_resend(
    network: Network, autojump_clock: trio.testing.MockClock, transactional: bool
) -> None:
    """B accepts a message, then bad bytes in the same read end the connection
    before the write: B forgets the acceptance, so A's resend on the next
    connection is stored (not rejected forever, not dropped as a duplicate)."""
    a, b = await start_pair(network)
    queue = QUEUE if transactional else "plain"
    if not transactional:
        await b.create_queue(queue, transactional=False)
    network.auto_connect = False
    await a.send(b.remote(queue), [b"once"], transactional=transactional)
    [outgoing] = a.peering.outgoing.values()
    outgoing.paused = True  # the first connection carries nothing of A's own
    first = await network.connect(a, b)
    await wait_until(first.acceptor.opened.is_set)
    # The packet A will send, then garbage, in one write.
    [(lookup_id, data)] = a.store.read_range(a.outgoing_queue().queue_id, limit=2)
    entry = decode_entry(storage.message_payload(data))
    state = a.outgoing_state()
    header = wire.TransactionHeader(
        sequence_id=wire.TxSequenceId(
            ordinal=state.sequence_ordinal, timestamp=state.sequence_timestamp
        ),
        sequence_number=lookup_id - state.base,
        previous_sequence_number=0,
    )
    packet = wire.message_to_packet(
        wire.MessageProperties.from_bytes(entry.data),
        destination=wire.DirectQueue(name=f"TCP:127.0.0.1:{b.port}\\private$\\{queue}"),
        transaction=header if transactional else None,
    )
    await first.near.inject(wire.build_packet(packet) + b"garbage!" * 4)
    await wait_until(first.done.is_set)
    assert b.closed[0].reason.startswith("protocol error")
    assert b.bodies(queue) == []

    outgoing.paused = False
    second = await network.connect(a, b)
    await deliver(a, b, [b"once"], queue)
    assert not second.done.is_set()
    assert receiver(b).rejected == receiver(b).duplicates == 0


async def test_a_peer_that_stops_reading_is_left_at_the_ack_timeout_and_gets_everything_once(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, "peers.ack_timeout=5.0")
    # Recoverable messages: B owes A nothing back but SessionAcks, so that
    # only A's own timer can end the session below.
    await b.create_queue("plain", transactional=False)
    first = bodies(3, "first")
    await a.send(b.remote("plain"), first, transactional=False)
    await deliver(a, b, first, queue="plain")
    # B stops reading: A's writes block, as on a socket whose buffers are full.
    to_b = network.channel(a, b)
    to_b.stall = trio.Event()
    stalled = trio.current_time()
    expected = bodies(20)
    await a.send(b.remote("plain"), expected, transactional=False)
    await wait_until(lambda: bool(a.closed), what="A leaves the stalled session")
    [closed] = a.closed
    assert closed.role is Role.INITIATOR
    assert re.fullmatch(
        r"no acknowledgement for \d+ sent packets and nothing received for 5 s", closed.reason
    )
    assert closed.at - stalled == pytest.approx(5.0, abs=0.1)
    # B reads again: the next session delivers everything, once and in order.
    to_b.stall.set()
    to_b.stall = None
    await deliver(a, b, first + expected, queue="plain")


async def test_a_peer_that_closes_before_the_session_opens_is_said_to_refuse_perhaps(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    # The connection closes as A's EstablishConnection goes (as a refusing peer closes it).
    network.channel(a, b).cut_after = 0
    await a.send(b.remote(QUEUE), [b"one"])
    await wait_until(lambda: bool(a.closed), what="A's attempt ends")
    reason = a.closed[0].reason
    assert reason.startswith("the peer closed the connection before the session opened")
    assert "its log says why (peer_refused)" in reason
    # The next attempt is not cut: delivered.
    await deliver(a, b, [b"one"])


async def test_a_peer_closing_as_the_queue_manager_stops_does_not_crash_the_stop() -> None:
    # The stop's Cancelled and the peer's close come up together: the stop goes
    # on alone (before, the whole group did, and the daemon exited 1).
    reasons: list[str] = []
    with trio.CancelScope() as stop:
        try:
            async with trio.open_nursery() as nursery:

                async def reader() -> None:
                    try:
                        await trio.sleep_forever()
                    finally:
                        raise PeerClosed("the peer closed the connection")

                nursery.start_soon(reader)
                nursery.start_soon(trio.sleep_forever)  # a task the stop cancels
                await trio.testing.wait_all_tasks_blocked()
                stop.cancel()
        except BaseExceptionGroup as group:
            reasons.append(close_reason(group, structlog.get_logger()))
    # Nothing came out of the stop's scope (the test is here), and no reason
    # was made: the connection's finally says it is stopping.
    assert reasons == []
    mixed = BaseExceptionGroup("tasks", [KeyboardInterrupt(), PeerClosed("closed")])
    with pytest.raises(BaseExceptionGroup) as raised:
        close_reason(mixed, structlog.get_logger())
    assert [type(leaf) for leaf in raised.value.exceptions] == [KeyboardInterrupt]
    assert close_reason(PeerClosed("closed"), structlog.get_logger()) == "closed"


async def test_a_wake_up_made_while_the_writer_asks_the_queues_is_kept(
    network: Network, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue that, while the writer asks it, has nothing yet but wakes its link
    (as one whose work appears during the call would) is asked again at once."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"first"])
    await deliver(a, b, [b"first"])
    original = OutgoingQueue.next_packet
    woke: list[float] = []

    def wakes_first(queue: OutgoingQueue, now: float) -> PacketToSend | None:
        if not woke:
            woke.append(now)
            queue.wake()
            return None
        return original(queue, now)

    monkeypatch.setattr(OutgoingQueue, "next_packet", wakes_first)
    sent = trio.current_time()
    await a.send(b.remote(QUEUE), [b"second"])
    await deliver(a, b, [b"first", b"second"])
    assert woke
    # Not at the next unrelated wake-up (the session's idle timeout, 300 s).
    assert trio.current_time() - sent < 1.0


def test_links_waiting_for_a_session_of_their_own_are_served_in_turn() -> None:
    slots = Dialing()
    first, second, back = object(), object(), object()
    # No slot: both wait, in order.
    assert not slots.may_open(first, opened=2, limit=2, now=0.0)
    assert not slots.may_open(second, opened=2, limit=2, now=0.5)
    # A slot frees: a link whose session just ended does not jump the line,
    # nor does the second; the first gets it.
    assert not slots.may_open(back, opened=1, limit=2, now=1.0)
    assert not slots.may_open(second, opened=1, limit=2, now=1.0)
    assert slots.may_open(first, opened=1, limit=2, now=1.0)
    assert list(slots.waiting) == [second, back]
    # A link that stopped asking loses its place after SLOT_PLACE_SECONDS.
    later = 1.0 + SLOT_PLACE_SECONDS + 0.1
    assert slots.may_open(back, opened=1, limit=2, now=later)
    slots.leave(second)
    assert slots.waiting == {}
