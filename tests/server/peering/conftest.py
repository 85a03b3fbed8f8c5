"""Fixtures and helpers of the peering adapter's tests: two queue managers in one process.

Each test runs real peering layers (``qmgr.server.peering.Peering``, each
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

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from peer_kit import Channel, Network, Node, open_network, wait_until

import storage
import wire
from qmgr.core.final_acks import final_ack_op
from qmgr.core.outgoing import EntryOrigin, RemoteDestination, entry_prefix
from qmgr.protocol import Receiver
from qmgr.server.peering.connection import PeerConnection

#: The transactional queue B has.
QUEUE = "orders"
#: Settings of a receiver whose OrderAcks come late (5 s; at most 10 s).
LATE_ORDER_ACKS = ("peers.order_ack_delay=5.0", "peers.order_ack_max_delay=10.0")


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


def receiver(node: Node) -> Receiver[PeerConnection]:
    """A node's receiver of its peers' messages."""
    return node.peering.incoming.receiver


def incoming_state(b: Node, a: Node, queue: str = QUEUE) -> storage.IncomingState:
    """B's stored state of the stream (queue, A)."""
    [state] = [
        s
        for s in b.store.incoming_states()
        if s.queue_key == queue and s.source_qm == a.store.qm_guid.bytes
    ]
    return state


def check_resends_dropped(a: Node, b: Node, *, rejected: int, last_number: int) -> None:
    """B dropped ``rejected`` messages of the stream (:data:`QUEUE`, A) it already had,
    its stored state of that stream ends at message ``last_number``, and A's
    outgoing state is at sequence ordinal 2."""
    assert receiver(b).rejected == rejected
    assert incoming_state(b, a).last_number == last_number
    assert a.outgoing_state().sequence_ordinal == 2


def settled(a: Node) -> Callable[[], bool]:
    """A's outgoing queues are empty in the store and in memory."""

    def check() -> bool:
        queues = a.peering.outgoing.values()
        return bool(queues) and all(q.stored == 0 and len(q.machine) == 0 for q in queues)

    return check


async def deliver(a: Node, b: Node, expected: list[bytes], queue: str = QUEUE) -> None:
    """Wait until B's queue holds ``expected`` and A's outgoing queue is empty; check
    both, and that B's queue holds nothing more."""
    await wait_until(lambda: len(b.bodies(queue)) >= len(expected), what="arrivals")
    await wait_until(settled(a), what="A forgets what B acknowledged")
    assert b.bodies(queue) == expected


@pytest.fixture
async def first_delivered(network: Network) -> tuple[Node, Node]:
    """A and B started (:func:`start_pair`), and a message b"first" sent from A
    delivered to B: A has an outgoing queue to B, and it is empty."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"first"])
    await deliver(a, b, [b"first"])
    return a, b


async def cut_once(
    a: Node,
    b: Node,
    channel: Channel,
    cut: Callable[[wire.Packet], int | None],
    *,
    watch: Node,
    expected: list[bytes],
) -> None:
    """Send ``expected`` from A to B while ``channel`` cuts the connection where
    ``cut`` says; once ``watch`` saw its connection end, let everything through
    and wait until it is all delivered."""
    channel.cut_inside = cut
    await a.send(b.remote(QUEUE), expected)
    await wait_until(lambda: bool(watch.closed))
    channel.cut_inside = None
    await deliver(a, b, expected)
    assert channel.cuts == 1


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


#: A route from A (1901) to C (1903) through the router R (1902).
THROUGH_R = 'routes."127.0.0.1:1903"="127.0.0.1:1902"'
#: R and C reconnect and acknowledge quickly.
QUICK = ("peers.retry_initial=0.05", "peers.retry_max=0.5", "peers.order_ack_delay=0.02")


async def start_router_line(
    network: Network, *a_settings: str, queue: str = QUEUE, transactional: bool = True
) -> tuple[Node, Node, Node]:
    """A -> R -> C, C's ``queue`` created, and C down."""
    a = await network.start("qm-a", 1901, [THROUGH_R, *a_settings])
    r = await network.start("qm-r", 1902, ["peers.router=true", *QUICK])
    c = await network.start("qm-c", 1903, QUICK)
    await c.create_queue(queue, transactional=transactional)
    await c.stop()
    return a, r, c


def receipts(
    node: Node, limit: int = 1, queue: str = QUEUE
) -> list[tuple[wire.MessageProperties, storage.Operation]]:
    """The first ``limit`` messages of ``node``'s ``queue`` and, for each, the
    FinalAck its receipt records (ACK_RECEIVE), not yet written."""
    record = node.store.get_queue(queue)
    assert record is not None
    found = []
    for _, data in node.store.read_range(record.queue_id, limit=limit):
        message = wire.MessageProperties.from_bytes(storage.message_payload(data))
        note = storage.message_note(data)
        found.append((message, final_ack_op(message, note, wire.MessageClass.ACK_RECEIVE)))
    return found
