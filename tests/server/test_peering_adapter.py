"""The peering adapter between two queue managers, in-process, over memory streams.

Each test runs two real peering layers (``qmgr.server.peering.Peering``, each
with its own store, committer and signals) joined by the memory network of
:mod:`peer_kit`, under ``MockClock(autojump_threshold=0)``: timeouts, the
OrderAck batching and the links' backoff fire without real waiting. Messages
are committed on A as a client's transaction commits them (the core's
``prepare_send`` and ``commit``), or written straight into the outgoing
queue with ``storage.AppendOutgoing``; the tests check what B's queues hold,
in order, A's outgoing queue and sequence in its store, B's incoming stream
state, and why connections closed.

Every test names ``autojump_clock`` itself: pytest-trio runs a test under a
mock clock only when the test function asks for it, not when a fixture does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from peer_kit import (
    Network,
    Node,
    is_data,
    is_order_ack,
    is_session_ack,
    open_network,
    wait_until,
)

import storage
import wire
from qmgr.core.outgoing import EntryOrigin, RemoteDestination, entry_prefix
from qmgr.protocol import Role

QUEUE = "orders"


@pytest.fixture
async def network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[Network]:
    async with open_network(tmp_path, monkeypatch) as net:
        yield net


async def start_pair(
    network: Network, *settings: str, b_settings: tuple[str, ...] = ()
) -> tuple[Node, Node]:
    """A and B started with ``settings`` (B also with ``b_settings``); B has
    the transactional queue ``orders``."""
    a = await network.start("qm-a", 1901, settings)
    b = await network.start("qm-b", 1902, (*settings, *b_settings))
    await b.create_queue(QUEUE)
    return a, b


def bodies(count: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(1, count + 1)]


def incoming_state(b: Node, a: Node, queue: str = QUEUE) -> storage.IncomingState:
    """B's stored state of the stream (queue, A)."""
    [state] = [
        s
        for s in b.store.incoming_states()
        if s.queue_key == queue and s.source_qm == a.store.qm_guid.bytes
    ]
    return state


def settled(a: Node) -> Callable[[], bool]:
    """A's outgoing queues are empty in the store and in memory."""

    def check() -> bool:
        queues = a.peering.outgoing.values()
        return bool(queues) and all(q.stored == 0 and len(q.machine) == 0 for q in queues)

    return check


async def deliver(a: Node, b: Node, expected: list[bytes]) -> None:
    """Wait until B's queue holds ``expected`` and A's outgoing queue is empty; check
    both, and that B's queue holds nothing more."""
    await wait_until(lambda: len(b.bodies(QUEUE)) >= len(expected), what="arrivals")
    await wait_until(settled(a), what="A forgets what B acknowledged")
    assert b.bodies(QUEUE) == expected


async def append_outgoing(a: Node, b: Node, payloads: list[bytes]) -> int:
    """Write transactional entries straight into A's outgoing queue for B's
    ``orders`` (as a commit unit would), and tell the peering layer."""
    destination = RemoteDestination("TCP", "127.0.0.1", b.port, QUEUE)
    prefix = entry_prefix(EntryOrigin.LOCAL, transactional=True, recoverable=True)
    ops = []
    for body in payloads:
        message = wire.MessageProperties(destination=destination.display_name, body=body).stamp(
            source_qm=a.store.qm_guid,
            ordinal=a.core.ordinals.take(),
            sent_time=time.time(),
            transactional=True,
        )
        ops.append(
            storage.AppendOutgoing(
                destination.outgoing_name,
                destination.display_name,
                (prefix, message.raw),
                message.body_size,
            )
        )
    outcome = await a.committer.submit(storage.Unit(tuple(ops)))
    assert outcome.error is None
    first = outcome.results[0]
    assert isinstance(first, storage.Appended)
    a.notify([first.queue_id])
    return first.queue_id


# ---------------------------------------------------------------------- delivery


async def test_transactions_arrive_in_commit_order_and_the_sender_rolls(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = await start_pair(network)
    expected = bodies(6)
    await a.send(b.remote(QUEUE), expected[:2])
    await a.send(b.remote(QUEUE), expected[2:5])
    await a.send(b.remote(QUEUE), expected[5:])
    outgoing = a.outgoing_queue()
    first_state = a.outgoing_state()
    assert (first_state.sequence_ordinal, first_state.base) == (1, 0)

    committed = trio.current_time()
    # Delivery takes no time on a memory stream.
    await trio.sleep(0.001)
    assert b.bodies(QUEUE) == expected
    # Stored and synced on B, but the OrderAck is batched: A still holds all six.
    await trio.sleep(0.4)
    assert a.depth(outgoing.queue_id) == 6
    await wait_until(settled(a), step=0.001)
    assert trio.current_time() - committed == pytest.approx(0.5, abs=0.0015)

    # One OrderAck covered all six, with the persisted mark.
    to_a = network.channel(b, a)
    [order_ack] = [wire.OrderAck.from_message(p) for p in to_a.user_packets(is_order_ack)]
    first_sequence = wire.TxSequenceId(ordinal=1, timestamp=first_state.sequence_timestamp)
    assert (order_ack.sequence_id, order_ack.sequence_number) == (first_sequence, 6)
    assert order_ack.destination_qm == a.store.qm_guid
    # Sent once each, on one connection.
    assert network.channel(a, b).count(is_data) == 6
    assert network.connections == [("qm-a", "qm-b")]

    # A forgot them all in its store; the sequence rolled past them.
    record = a.store.get_queue_by_id(outgoing.queue_id)
    assert record is not None
    assert record.depth == 0
    state = a.outgoing_state()
    assert (state.sequence_timestamp, state.sequence_ordinal) == (
        first_state.sequence_timestamp,
        2,
    )
    assert state.base == record.next_lookup_id - 1 == 6
    # B's stream state: the last number of the first sequence, nothing rejected.
    stream = incoming_state(b, a)
    assert (stream.sequence_id, stream.last_number, stream.reject_count) == (
        first_sequence.value,
        6,
        0,
    )
    messages = b.messages(QUEUE)
    assert all(m.transactional and m.source_qm == a.store.qm_guid for m in messages)
    assert b.peering.received == 6
    assert b.peering.rejected == 0

    # The next transaction goes on the new sequence, numbered from 1.
    await a.send(b.remote(QUEUE), [b"after-roll"])
    await deliver(a, b, [*expected, b"after-roll"])
    second = wire.TxSequenceId(ordinal=2, timestamp=first_state.sequence_timestamp)
    stream = incoming_state(b, a)
    assert (stream.sequence_id, stream.last_number) == (second.value, 1)
    assert a.outgoing_state().sequence_ordinal == 3


async def test_entries_appended_to_the_outgoing_queue_are_delivered(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    queue_id = await append_outgoing(a, b, [b"x1", b"x2", b"x3"])
    await deliver(a, b, [b"x1", b"x2", b"x3"])
    state = a.store.outgoing_state(queue_id)
    assert state is not None
    assert (state.sequence_ordinal, state.base) == (2, 3)
    assert incoming_state(b, a).last_number == 3


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
    for sender, receiver in ((a, b), (b, a)):
        channel = network.channel(sender, receiver)
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
    assert b.peering.rejected == 0


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


# ---------------------------------------------------------------------- faults


async def test_lost_session_acks_end_the_session_and_the_resend_is_dropped_once(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The OrderAck comes later than the ack-wait timeout, so A resends.
    a, b = await start_pair(
        network,
        "peers.ack_timeout=2.0",
        b_settings=("peers.order_ack_delay=5.0", "peers.order_ack_max_delay=10.0"),
    )
    to_a = network.channel(b, a)
    to_a.drop = lambda packet: is_session_ack(packet) and len(network.connections) == 1
    expected = bodies(5)
    await a.send(b.remote(QUEUE), expected)
    await deliver(a, b, expected)

    assert to_a.dropped
    assert all(is_session_ack(p) for p in to_a.dropped)
    first = a.closed[0]
    assert first.role is Role.INITIATOR
    assert first.reason == ("no acknowledgement for 5 sent packets and nothing received for 2 s")
    assert len(network.connections) == 2
    # Everything was sent twice; B took each once and dropped the resend.
    assert network.channel(a, b).count(is_data) == 10
    assert b.peering.received == 10
    assert b.peering.rejected == 5
    key = (QUEUE, a.store.qm_guid.bytes)
    in_memory = b.peering.incoming.state(key)
    assert in_memory is not None
    assert in_memory.reject_count == 5
    assert in_memory.last_number == 5
    assert incoming_state(b, a).last_number == 5
    assert a.outgoing_state().sequence_ordinal == 2


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

    to_b.cut_inside = cut_second_message
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    await wait_until(lambda: bool(b.closed))
    to_b.cut_inside = None
    await deliver(a, b, expected)

    assert to_b.cuts == 1
    assert b.closed[0].reason == (
        "the peer closed the connection in the middle of a packet (10 bytes)"
    )
    assert a.closed[0].reason == "the peer closed the connection"
    assert network.connections == [("qm-a", "qm-b")] * 2
    # The first message was stored before the cut; its resend was dropped.
    assert to_b.count(is_data) == 1 + 3
    assert b.peering.rejected == 1
    assert incoming_state(b, a).last_number == 3
    assert a.outgoing_state().sequence_ordinal == 2


async def test_a_connection_cut_inside_the_order_ack_is_resumed_without_duplicates(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    to_a = network.channel(b, a)
    to_a.cut_inside = lambda packet: 10 if is_order_ack(packet) else None
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    await wait_until(lambda: bool(a.closed))
    to_a.cut_inside = None
    await deliver(a, b, expected)

    assert to_a.cuts == 1
    assert a.closed[0].reason == (
        "the peer closed the connection in the middle of a packet (10 bytes)"
    )
    assert network.connections == [("qm-a", "qm-b")] * 2
    # B had all three; A sent them again and B announced them once more.
    assert network.channel(a, b).count(is_data) == 6
    assert b.peering.rejected == 3
    assert to_a.count(is_order_ack) == 1
    assert incoming_state(b, a).last_number == 3
    assert a.outgoing_state().sequence_ordinal == 2


async def test_an_idle_session_closes_after_the_idle_timeout(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, "peers.idle_timeout=30.0")
    await a.send(b.remote(QUEUE), [b"one"])
    sent = trio.current_time()
    await deliver(a, b, [b"one"])
    await wait_until(lambda: bool(a.closed and b.closed), step=0.01)
    [a_closed], [b_closed] = a.closed, b.closed
    idle = "idle: no user packet for 30 s"
    assert idle in (a_closed.reason, b_closed.reason)
    assert {a_closed.reason, b_closed.reason} <= {idle, "the peer closed the connection"}
    # 30 s after the last user packet either way: B's OrderAck, 0.5 s after the message.
    assert 30.5 <= a_closed.at - sent <= 30.55
    # Nothing to send: the link does not reconnect.
    await trio.sleep(600)
    assert network.connections == [("qm-a", "qm-b")]
    assert a.link(b).state == "idle"


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


async def test_order_acks_a_sender_cannot_use_are_made_good_by_the_resend_timer(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """B's OrderAcks reach A, but for 20 s they name a sequence A does not
    have (so A ignores them; the session still counts them, as it must). A's
    Transactional Ack Wait (``peers.resend_intervals``) resends what no
    OrderAck covered; B drops the copies and announces what it has."""
    a, b = await start_pair(network, "peers.resend_intervals=[30.0]")
    to_a = network.channel(b, a)
    spoiled: list[wire.OrderAck] = []

    def spoil(packet: wire.Packet, data: bytes) -> bytes:
        if not (isinstance(packet, wire.UserMessage) and is_order_ack(packet)):
            return data
        if trio.current_time() >= 20.0:
            return data
        ack = wire.OrderAck.from_message(packet)
        unknown = wire.TxSequenceId(ordinal=7, timestamp=1)
        spoiled.append(ack)
        return wire.build_packet(dataclasses.replace(ack, sequence_id=unknown))

    to_a.rewrite = spoil
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    took = await wait_until(settled(a), step=0.01)
    assert b.bodies(QUEUE) == expected
    assert [(ack.sequence_number, ack.previous_sequence_number) for ack in spoiled] == [(3, 2)]
    # 30 s after sending them, with no usable OrderAck: sent again, on the same session.
    assert 30.0 <= took <= 30.6
    assert network.channel(a, b).count(is_data) == 6
    assert b.peering.rejected == 3
    assert network.connections == [("qm-a", "qm-b")]
    assert a.closed == b.closed == []
    assert a.outgoing_state().sequence_ordinal == 2


async def test_two_destination_queues_share_the_link_each_in_order(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    await b.create_queue("other")
    for i in range(1, 6):
        await a.send(b.remote(QUEUE), [f"o{i}".encode()])
        await a.send(b.remote("other"), [f"x{i}".encode(), f"y{i}".encode()])
    await wait_until(settled(a))
    assert b.bodies(QUEUE) == [f"o{i}".encode() for i in range(1, 6)]
    assert b.bodies("other") == [f"{k}{i}".encode() for i in range(1, 6) for k in "xy"]
    assert network.connections == [("qm-a", "qm-b")]
    assert incoming_state(b, a).last_number == 5
    assert incoming_state(b, a, "other").last_number == 10
    assert len(a.peering.outgoing) == 2


async def test_a_long_stream_is_loaded_in_chunks_and_forgotten_as_it_goes(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    expected = bodies(2500)
    await a.send(b.remote(QUEUE), expected)
    await deliver(a, b, expected)
    # More than peers' max unannounced messages (1024): OrderAcks went out
    # while the stream was flowing, not only at its end.
    assert network.channel(b, a).count(is_order_ack) >= 2
    assert network.channel(a, b).count(is_data) == 2500
    assert incoming_state(b, a).last_number == 2500
    assert a.outgoing_state().sequence_ordinal == 2


# ---------------------------------------------------------------------- rejections at arrival


async def test_messages_b_cannot_take_are_dead_lettered_and_the_streams_go_on(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = await start_pair(network)
    await b.create_queue("plain", transactional=False)
    await a.send(b.remote("late"), [b"no-queue-1", b"no-queue-2"])
    await wait_until(settled(a), what="A forgets the dead-lettered messages")
    await a.send(b.remote("plain"), [b"not-transactional"])
    await wait_until(settled(a), what="A forgets the dead-lettered message")

    dead = b.messages("system$;deadxact")
    assert [(bytes(m.body), m.message_class) for m in dead] == [
        (b"no-queue-1", wire.MessageClass.NACK_BAD_DST_Q),
        (b"no-queue-2", wire.MessageClass.NACK_BAD_DST_Q),
        (b"not-transactional", wire.MessageClass.NACK_NOT_TRANSACTIONAL_Q),
    ]
    assert [m.destination for m in dead] == [
        "DIRECT=TCP:127.0.0.1:1902\\private$\\late",
        "DIRECT=TCP:127.0.0.1:1902\\private$\\late",
        "DIRECT=TCP:127.0.0.1:1902\\private$\\plain",
    ]
    assert all(m.transactional and m.source_qm == a.store.qm_guid for m in dead)
    assert b.bodies("plain") == []
    assert b.peering.dead_lettered == 3
    assert incoming_state(b, a, "late").last_number == 2
    assert incoming_state(b, a, "plain").last_number == 1

    # The rejected stream advanced: once the queue exists, later messages land in it.
    await b.create_queue("late")
    await a.send(b.remote("late"), [b"later-1", b"later-2"])
    await wait_until(lambda: len(b.bodies("late")) == 2)
    await wait_until(settled(a))
    assert b.bodies("late") == [b"later-1", b"later-2"]
    assert len(b.messages("system$;deadxact")) == 3
    stream = incoming_state(b, a, "late")
    assert wire.TxSequenceId.from_value(stream.sequence_id).ordinal == 2
    assert stream.last_number == 2
    assert b.peering.rejected == 0


# ---------------------------------------------------------------------- crashes


@pytest.mark.parametrize("stored_before_crash", [5, 3])
async def test_a_receiver_crash_before_the_order_ack_loses_and_duplicates_nothing(
    network: Network, autojump_clock: trio.testing.MockClock, stored_before_crash: int
) -> None:
    a, b = await start_pair(
        network,
        "peers.window=1",
        b_settings=("peers.order_ack_delay=5.0", "peers.order_ack_max_delay=10.0"),
    )
    to_b = network.channel(a, b)
    to_b.delay = 1.0  # one packet a second: the test sees B between two
    expected = bodies(5)
    await a.send(b.remote(QUEUE), expected[:3])
    await a.send(b.remote(QUEUE), expected[3:])
    await wait_until(lambda: len(b.bodies(QUEUE)) == stored_before_crash, step=0.01)
    assert network.channel(b, a).count(is_order_ack) == 0
    await b.stop()
    assert a.outgoing_queue().depth == 5

    to_b.delay = 0.0
    await trio.sleep(3)  # A's link finds B down
    await b.start()
    await deliver(a, b, expected)
    assert b.starts == 2
    # Before the crash: what B stored, and (B part way) the next message, lost
    # with the connection; after it: all five again.
    first_connection = 5 if stored_before_crash == 5 else stored_before_crash + 1
    assert to_b.count(is_data) == first_connection + 5
    assert [c.reason for c in b.closed] == ["the queue manager is stopping"]
    assert a.closed[0].reason == "the peer closed the connection"
    # The restarted B took only what it did not have.
    assert b.peering.received == 5
    assert b.peering.rejected == stored_before_crash
    assert incoming_state(b, a).last_number == 5
    assert a.outgoing_state().sequence_ordinal == 2


async def test_a_sender_crash_before_the_order_ack_resends_from_its_store(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(
        network, b_settings=("peers.order_ack_delay=5.0", "peers.order_ack_max_delay=10.0")
    )
    expected = bodies(4)
    await a.send(b.remote(QUEUE), expected[:2])
    await a.send(b.remote(QUEUE), expected[2:])
    await wait_until(lambda: len(b.bodies(QUEUE)) == 4, step=0.01)
    await a.stop()
    await a.start()
    # The restarted A loads its outgoing queue and its sequence, and resends.
    await deliver(a, b, expected)
    assert network.channel(a, b).count(is_data) == 8
    assert b.peering.rejected == 4
    assert incoming_state(b, a).last_number == 4
    assert a.outgoing_state().sequence_ordinal == 2


async def test_a_dead_lettered_message_is_not_dead_lettered_again_after_a_crash(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(
        network, b_settings=("peers.order_ack_delay=5.0", "peers.order_ack_max_delay=10.0")
    )
    await a.send(b.remote("missing"), [b"lost-1", b"lost-2"])
    await wait_until(lambda: len(b.messages("system$;deadxact")) == 2, step=0.01)
    await b.stop()
    await b.start()
    await wait_until(settled(a))
    dead = b.messages("system$;deadxact")
    assert [bytes(m.body) for m in dead] == [b"lost-1", b"lost-2"]
    assert {m.message_class for m in dead} == {wire.MessageClass.NACK_BAD_DST_Q}
    assert b.peering.rejected == 2
    assert b.peering.dead_lettered == 0


# ---------------------------------------------------------------------- other kinds of message


@pytest.mark.parametrize("crash", [False, True], ids=["session-acks-lost", "receiver-crash"])
async def test_resent_non_transactional_messages_are_dropped_by_the_history(
    network: Network, autojump_clock: trio.testing.MockClock, crash: bool
) -> None:
    a, b = await start_pair(network, "peers.ack_timeout=2.0")
    await b.create_queue("plain", transactional=False)
    to_a = network.channel(b, a)
    to_a.drop = lambda packet: is_session_ack(packet) and len(network.connections) == 1
    expected = bodies(4, "n")
    await a.send(b.remote("plain"), expected, transactional=False)
    await wait_until(lambda: len(b.bodies("plain")) == 4, step=0.01)
    if crash:
        await b.stop()
        await b.start()
    await wait_until(settled(a), what="A forgets what B acknowledged")
    assert b.bodies("plain") == expected
    assert network.channel(a, b).count(is_data) == 8
    assert b.peering.duplicates == 4
    assert all(not m.transactional for m in b.messages("plain"))
    assert len(network.connections) == 2


async def test_one_outgoing_queue_carries_every_kind_of_message(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Transactional, recoverable and express messages to one remote queue share
    an outgoing queue; B dead-letters the non-transactional ones (its queue is
    transactional) and the transactional numbering bridges them."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"t1"])
    await a.send(b.remote(QUEUE), [b"r1"], transactional=False)
    await a.send(b.remote(QUEUE), [b"t2", b"t3"])
    await a.send(b.remote(QUEUE), [b"e1"], transactional=False, delivery=0)
    await a.send(b.remote(QUEUE), [b"t4"])
    await deliver(a, b, [b"t1", b"t2", b"t3", b"t4"])
    dead = b.messages("system$;deadletter")
    assert [(bytes(m.body), m.message_class, m.delivery) for m in dead] == [
        (b"r1", wire.MessageClass.NACK_NOT_TRANSACTIONAL_MSG, 1),
        (b"e1", wire.MessageClass.NACK_NOT_TRANSACTIONAL_MSG, 0),
    ]
    headers = [p.transaction for p in network.channel(a, b).user_packets(is_data)]
    numbers = [
        None if h is None else (h.sequence_number, h.previous_sequence_number) for h in headers
    ]
    assert numbers == [(1, 0), None, (3, 1), (4, 3), None, (6, 4)]
    assert incoming_state(b, a).last_number == 6
    assert a.outgoing_state().sequence_ordinal == 2


async def test_a_router_relays_exactly_once_in_order(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A -> R -> C: R keeps the packets whole and passes C's OrderAck back to A."""
    route = 'routes."127.0.0.1:1903"="127.0.0.1:1902"'
    a = await network.start("qm-a", 1901, [route])
    r = await network.start("qm-r", 1902)
    c = await network.start("qm-c", 1903)
    await c.create_queue(QUEUE)
    expected = bodies(5)
    await a.send(c.remote(QUEUE), expected[:3])
    await a.send(c.remote(QUEUE), expected[3:])
    await wait_until(lambda: len(c.bodies(QUEUE)) == 5)
    await wait_until(settled(a), what="A forgets on C's OrderAck")
    await wait_until(settled(r), what="R forgets what C stored")
    assert c.bodies(QUEUE) == expected
    assert all(m.source_qm == a.store.qm_guid for m in c.messages(QUEUE))
    assert network.connections == [("qm-a", "qm-r"), ("qm-r", "qm-c")]
    assert network.channel(a, r).count(is_data) == 5
    assert network.channel(r, c).count(is_data) == 5
    assert network.channel(c, r).count(is_order_ack) == 1
    assert network.channel(r, a).count(is_order_ack) == 1
    assert incoming_state(c, a).last_number == 5
    assert a.outgoing_state().sequence_ordinal == 2
    assert r.store.incoming_states() == []


# ---------------------------------------------------------------------- clocks


async def test_the_order_ack_is_not_held_back_by_a_wall_clock_step(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """OrderAcks go out ``order_ack_delay`` after the persist, never more than
    ``order_ack_max_delay`` after it, whatever NTP does to the wall clock."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"one"])
    await wait_until(lambda: len(b.bodies(QUEUE)) == 1, step=0.01)
    arrived = trio.current_time()
    network.clock.step(-3600.0)
    await wait_until(settled(a), step=0.01)
    assert trio.current_time() - arrived <= 10.0
    assert network.channel(a, b).count(is_data) == 1
