"""The sending side (``qmgr.server.peering.outgoing``): forgets on OrderAcks, rolls, resends."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import structlog
import trio
import trio.testing
from peer_kit import Channel, Network, Node, is_data, is_order_ack, wait_until

import storage
import wire

from .conftest import (
    LATE_ORDER_ACKS,
    QUEUE,
    bodies,
    check_resends_dropped,
    deliver,
    incoming_state,
    receiver,
    settled,
    start_pair,
)


def spoil_order_acks(channel: Channel, *, until: float) -> list[wire.OrderAck]:
    """Until ``until`` (the mock clock), the OrderAcks over ``channel`` name a
    sequence the sender does not have (it ignores them); returns the list of
    those spoiled, as they were."""
    spoiled: list[wire.OrderAck] = []

    def spoil(packet: wire.Packet, data: bytes) -> bytes:
        if not (isinstance(packet, wire.UserMessage) and is_order_ack(packet)):
            return data
        if trio.current_time() >= until:
            return data
        ack = wire.OrderAck.from_message(packet)
        unknown = wire.TxSequenceId(ordinal=7, timestamp=1)
        spoiled.append(ack)
        return wire.build_packet(dataclasses.replace(ack, sequence_id=unknown))

    channel.rewrite = spoil
    return spoiled


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
    assert receiver(b).received == 6
    assert receiver(b).rejected == 0

    # The next transaction goes on the new sequence, numbered from 1.
    await a.send(b.remote(QUEUE), [b"after-roll"])
    await deliver(a, b, [*expected, b"after-roll"])
    second = wire.TxSequenceId(ordinal=2, timestamp=first_state.sequence_timestamp)
    stream = incoming_state(b, a)
    assert (stream.sequence_id, stream.last_number) == (second.value, 1)
    assert a.outgoing_state().sequence_ordinal == 3


async def test_order_acks_a_sender_cannot_use_are_made_good_by_the_resend_timer(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """B's OrderAcks reach A, but for 20 s they name a sequence A does not
    have (so A ignores them; the session still counts them, as it must). A's
    Transactional Ack Wait (``peers.resend_intervals``) resends what no
    OrderAck covered; B drops the copies and announces what it has."""
    a, b = await start_pair(network, "peers.resend_intervals=[30.0]")
    spoiled = spoil_order_acks(network.channel(b, a), until=20.0)
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    took = await wait_until(settled(a), step=0.01)
    assert b.bodies(QUEUE) == expected
    assert [(ack.sequence_number, ack.previous_sequence_number) for ack in spoiled] == [(3, 2)]
    # 30 s after sending them, with no usable OrderAck: sent again, on the same session.
    assert 30.0 <= took <= 30.6
    assert network.channel(a, b).count(is_data) == 6
    assert receiver(b).rejected == 3
    assert network.connections == [("qm-a", "qm-b")]
    assert a.closed == b.closed == []
    assert a.outgoing_state().sequence_ordinal == 2


def forged_order_ack(a: Node, number: int, source: uuid.UUID) -> wire.OrderAck:
    """An OrderAck of A's outgoing sequence up to ``number``, written by ``source``."""
    state = a.outgoing_state()
    sequence = wire.TxSequenceId(ordinal=state.sequence_ordinal, timestamp=state.sequence_timestamp)
    return wire.OrderAck(
        source_qm=source,
        destination=wire.PrivateQueueId(number=4, host=wire.QueueFormatType.PRIVATE_ON_DESTINATION),
        destination_qm=a.store.qm_guid,
        message_id=1,
        sent_time=0,
        time_to_reach_queue=0xFFFFFFFF,
        time_to_be_received=0xFFFFFFFF,
        sequence_id=sequence,
        sequence_number=number,
        previous_sequence_number=number - 1,
    )


async def test_an_order_ack_for_numbers_never_sent_ends_nothing(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """While B is down, A's messages wait, never sent. An OrderAck of their
    sequence (whose id is only the second the queue was made: easy to guess)
    from a confused peer would end them: it is refused and logged, and they are
    delivered once B is back."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"first"])
    await deliver(a, b, [b"first"])  # A knows B as its hop now
    await b.stop()
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    state = a.outgoing_state()
    with structlog.testing.capture_logs() as logs:
        a.peering.order_ack_arrived(forged_order_ack(a, 3, b.store.qm_guid), b.store.qm_guid)
    [refused] = [e for e in logs if e["event"] == "order_ack_refused"]
    assert (refused["log_level"], refused["number"], refused["sent"]) == ("warning", 3, 0)
    await trio.sleep(1)
    assert a.depth(a.outgoing_queue().queue_id) == 3
    assert a.outgoing_state() == state  # not rolled
    await b.start()
    await deliver(a, b, [b"first", *expected])


async def test_an_order_ack_from_a_queue_manager_that_is_not_the_hop_ends_nothing(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Any peer may connect; only the queue's next hop (the destination, or the
    router that passes its acknowledgments back) may make A forget what it sent."""
    a, b = await start_pair(network, b_settings=LATE_ORDER_ACKS)
    expected = bodies(3)
    await a.send(b.remote(QUEUE), expected)
    await wait_until(lambda: len(b.bodies(QUEUE)) == 3, step=0.01)
    state = a.outgoing_state()
    queue = a.outgoing_queue().queue_id
    stranger = uuid.uuid4()
    with structlog.testing.capture_logs() as logs:
        a.peering.order_ack_arrived(forged_order_ack(a, 3, stranger), stranger)
        a.peering.order_ack_arrived(forged_order_ack(a, 3, b.store.qm_guid), None)
    refusals = [e for e in logs if e["event"] == "order_ack_refused"]
    assert [(e["from_qm"], e["hop_qm"]) for e in refusals] == [
        (str(stranger), str(b.store.qm_guid)),
        ("None", str(b.store.qm_guid)),
    ]
    assert a.depth(queue) == 3  # nothing forgotten
    assert a.outgoing_state() == state
    await deliver(a, b, expected)  # B's own OrderAck ends them, once


async def test_a_sender_crash_before_the_order_ack_resends_from_its_store(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, b_settings=LATE_ORDER_ACKS)
    expected = bodies(4)
    await a.send(b.remote(QUEUE), expected[:2])
    await a.send(b.remote(QUEUE), expected[2:])
    await wait_until(lambda: len(b.bodies(QUEUE)) == 4, step=0.01)
    await a.stop()
    await a.start()
    # The restarted A loads its outgoing queue and its sequence, and resends.
    await deliver(a, b, expected)
    assert network.channel(a, b).count(is_data) == 8
    check_resends_dropped(a, b, rejected=4, last_number=4)


async def test_each_queue_of_a_link_resends_at_its_own_deadline(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Two queues through one link, sent to 10 s apart, with no usable OrderAck
    before 45 s: each queue's Transactional Ack Wait runs from its own
    transmission (30 s), so the resends come at 30 and 40 s, then 60 and 70 s."""
    a, b = await start_pair(network, "peers.resend_intervals=[30.0]")
    await b.create_queue("audit")
    sent: list[tuple[float, bytes]] = []

    def record(packet: wire.Packet, data: bytes) -> bytes:
        if isinstance(packet, wire.UserMessage) and is_data(packet):
            sent.append((trio.current_time(), b"order" if b"order" in data else b"audit"))
        return data

    spoil_order_acks(network.channel(b, a), until=45.0)
    network.channel(a, b).rewrite = record
    await a.send(b.remote(QUEUE), [b"order"])
    await trio.sleep(10.0)
    await a.send(b.remote("audit"), [b"audit"])
    await wait_until(settled(a), step=0.01)
    assert [(round(at), body) for at, body in sent] == [
        (0, b"order"),
        (10, b"audit"),
        (30, b"order"),
        (40, b"audit"),
        (60, b"order"),
        (70, b"audit"),
    ]
    assert (b.bodies(QUEUE), b.bodies("audit")) == ([b"order"], [b"audit"])


# ---------------------------------------------------------------------- cleanup


def outgoing_ids(node: Node) -> list[int]:
    """The ids of a node's outgoing queues, in its store (checked against memory)."""
    stored = [q.queue_id for q in node.store.list_queues() if q.kind is storage.QueueKind.OUTGOING]
    assert sorted(node.peering.outgoing) == stored
    return stored


@pytest.fixture
async def one_delivered(network: Network) -> tuple[Node, Node]:
    """A and B with ``peers.outgoing_cleanup_after=60``, and b"one" delivered from A
    to B: A's outgoing queue is there, and empty."""
    a, b = await start_pair(network, "peers.outgoing_cleanup_after=60")
    await a.send(b.remote(QUEUE), [b"one"])
    await deliver(a, b, [b"one"])
    return a, b


async def test_an_outgoing_queue_quiet_for_the_cleanup_time_is_removed_and_comes_back(
    one_delivered: tuple[Node, Node], autojump_clock: trio.testing.MockClock
) -> None:
    a, b = one_delivered
    [first] = outgoing_ids(a)
    first_state = a.outgoing_state()
    emptied = trio.current_time()
    # Looked at every 15 s: seen quiet at most 15 s after, removed 60 s after that.
    await wait_until(lambda: not outgoing_ids(a), step=0.5)
    assert 60.0 <= trio.current_time() - emptied <= 75.5
    assert a.store.outgoing_states() == {}
    # Its link is stopped and forgotten with it (the session closed after
    # peers.idle_timeout, 300 s, and the link waits no more).
    await wait_until(lambda: not a.peering.links, step=1.0)
    # The next message makes a new queue, whose sequence goes on where the
    # old one's stopped: B sees its one stream from A go on.
    sent = [b"one"]
    for round_ in range(3):
        sent.append(f"again {round_}".encode())
        await a.send(b.remote(QUEUE), sent[-1:])
        await deliver(a, b, sent)
        [queue_id] = outgoing_ids(a)
        assert queue_id != first
        state = a.outgoing_state()
        assert state.sequence_timestamp == first_state.sequence_timestamp
        assert state.sequence_ordinal > first_state.sequence_ordinal
        await wait_until(lambda: not outgoing_ids(a), step=1.0)
    assert [s.source_qm for s in b.store.incoming_states()] == [a.store.qm_guid.bytes]
    assert receiver(b).rejected == 0


async def test_traffic_and_a_pause_keep_an_outgoing_queue(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, "peers.outgoing_cleanup_after=60")
    sent = []
    for index in range(8):  # one message every 40 s: never quiet for 60 s
        sent.append(f"m{index}".encode())
        await a.send(b.remote(QUEUE), sent[-1:])
        await deliver(a, b, sent)
        await trio.sleep(40.0)
    [queue_id] = outgoing_ids(a)
    queue = a.peering.outgoing[queue_id]
    await queue.set_paused(True)
    await trio.sleep(600.0)
    assert outgoing_ids(a) == [queue_id]
    await queue.set_paused(False)
    await wait_until(lambda: not outgoing_ids(a), step=1.0)


async def test_no_cleanup_when_it_is_off(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, "peers.outgoing_cleanup_after=0")
    await a.send(b.remote(QUEUE), [b"one"])
    await deliver(a, b, [b"one"])
    ids = outgoing_ids(a)
    await trio.sleep(3600.0)
    assert outgoing_ids(a) == ids


async def test_the_cleanup_forgets_an_outgoing_queue_already_gone_from_the_store(
    one_delivered: tuple[Node, Node], autojump_clock: trio.testing.MockClock
) -> None:
    a, _ = one_delivered
    [queue_id] = outgoing_ids(a)
    # Removed behind the peering layer's back: its next removal finds it missing.
    outcome = await a.committer.submit(storage.Unit((storage.RemoveEmptyOutgoing(queue_id),)))
    assert outcome.error is None
    assert queue_id in a.peering.outgoing
    await wait_until(lambda: queue_id not in a.peering.outgoing, step=1.0)
    assert outgoing_ids(a) == []


async def test_an_outgoing_queue_whose_address_became_an_alias_is_named_at_start(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Messages wait for an address nobody answers; the queue manager is started again
    with that address among its aliases: a send to it is local now, and the log
    says the old queue still holds messages for it."""
    network.auto_connect = False
    a = await network.start("qm-a", 1901)
    await a.send("DIRECT=TCP:127.0.0.1:1999\\private$\\orders", bodies(2))
    await a.stop()
    with structlog.testing.capture_logs() as logs:
        again = network.node("qm-a", 1901, ['server.aliases=["127.0.0.1:1999"]'])
        await again.start()
    [warning] = [e for e in logs if e["event"] == "outgoing_queue_names_this_queue_manager"]
    assert warning["log_level"] == "warning"
    assert warning["messages"] == 2
    assert warning["queue"] == again.outgoing_queue().name
    # Started without the alias, the same queue is not named.
    await again.stop()
    with structlog.testing.capture_logs() as logs:
        await network.start("qm-a", 1901)
    assert not [e for e in logs if e["event"] == "outgoing_queue_names_this_queue_manager"]
