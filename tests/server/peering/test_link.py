"""The link to a next hop (``qmgr.server.peering.link``): shared by its queues, idle when
there is nothing to send and no FinalAck to come back."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import trio
import trio.testing
from fault_stream import is_data
from peer_kit import HOST, Network, wait_until

import storage
from qmgr.core.outcomes import JOURNAL_DEADLETTER
from qmgr.server.peering.connection import PacketToSend
from qmgr.server.peering.link import LinkQueues
from qmgr.server.peering.outgoing_queue import OutgoingQueue

from .conftest import (
    QUEUE,
    deliver,
    incoming_state,
    settled,
    start_pair,
)


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
    assert a.link(b).last_error == ""  # a normal end, whichever side closed: no error
    # Nothing to send: the link does not reconnect.
    await trio.sleep(200)
    assert network.connections == [("qm-a", "qm-b")]
    assert a.link(b).state == "idle"
    # Quiet for peers.outgoing_cleanup_after (300 s): the queue goes, and its link.
    await trio.sleep(400)
    assert (a.peering.outgoing, a.peering.links) == ({}, {})
    assert network.connections == [("qm-a", "qm-b")]


async def test_a_link_keeps_a_session_while_copies_await_their_final_acks(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, "peers.idle_timeout=30.0", "peers.outgoing_cleanup_after=60")
    # It asks for confirmation, to be received within an hour: its copy waits at
    # A until B's FinalAck, or until the deadline (3,600 + 3,600 s) reports it
    # unconfirmed.
    await a.send(b.remote(QUEUE), [b"one"], journal=JOURNAL_DEADLETTER, time_to_be_received=3600)
    await deliver(a, b, [b"one"])
    [message] = b.messages(QUEUE)
    [queue_id] = [q.queue_id for q in a.store.list_queues() if q.kind is storage.QueueKind.OUTGOING]
    # Each idle close (30 s) is followed by a new session (peers.retry_initial,
    # 1 s, later), so that B always has one to send the FinalAck on; the queue
    # is not removed although it has been empty for longer than the cleanup.
    await trio.sleep(310)
    assert 9 <= len(network.connections) <= 11
    assert set(network.connections) == {("qm-a", "qm-b")}
    assert a.link(b).last_error == ""
    assert a.peering.outgoing[queue_id].awaiting_confirmation
    # The copy settled (as a FinalAck settles it): the last session closes
    # idle, no other opens, and the queue goes after the cleanup time.
    settle = storage.Unit((storage.SettleConfirmation(message.ordinal, 0),))
    assert (await a.committer.submit(settle)).error is None
    await wait_until(lambda: a.link(b).state == "idle", step=1.0)
    made = len(network.connections)
    await wait_until(lambda: not a.peering.outgoing, step=1.0)
    assert len(network.connections) == made


async def test_a_copy_without_a_deadline_keeps_no_session(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, "peers.idle_timeout=30.0")
    # No time to be received: nothing can report it unconfirmed, so its
    # FinalAck may wait for the next session.
    await a.send(b.remote(QUEUE), [b"one"], journal=JOURNAL_DEADLETTER)
    await deliver(a, b, [b"one"])
    [message] = b.messages(QUEUE)
    assert [c.deadline for c in a.store.confirmations(message.ordinal)] == [None]
    await trio.sleep(300)
    assert network.connections == [("qm-a", "qm-b")]
    assert a.link(b).state == "idle"


async def test_a_peer_that_closes_an_idle_session_first_leaves_no_error(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a = await network.start("qm-a", 1901, ("peers.idle_timeout=300.0",))
    b = await network.start("qm-b", 1902, ("peers.idle_timeout=30.0",))
    await b.create_queue(QUEUE)
    await a.send(b.remote(QUEUE), [b"one"])
    await deliver(a, b, [b"one"])
    await wait_until(lambda: bool(a.closed), step=0.01)
    [closed] = a.closed
    assert closed.reason == "the peer closed the connection"
    [queue] = a.peering.outgoing.values()
    assert (queue.info().state, queue.info().last_error) == ("idle", "")


async def test_a_session_that_works_clears_the_last_error(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a = await network.start("qm-a", 1901, ("peers.idle_timeout=30.0",))
    await a.send(f"DIRECT=TCP:{HOST}:1902\\private$\\{QUEUE}", [b"one"])
    [queue] = a.peering.outgoing.values()
    await wait_until(lambda: queue.info().last_error != "", what="a failed attempt")
    assert "cannot connect" in queue.info().last_error
    b = await network.start("qm-b", 1902, ("peers.idle_timeout=30.0",))
    await b.create_queue(QUEUE)
    await deliver(a, b, [b"one"])
    assert queue.info().last_error == ""


async def test_a_hop_down_for_thousands_of_attempts_is_still_retried(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    # The delay doubled with each failure, as a float: past 1,024 failures (17
    # hours of a hop down at the default 60 s) it overflowed, and the link died.
    a = await network.start("qm-a", 1901, ("peers.retry_initial=0.001", "peers.retry_max=0.002"))
    await a.send(f"DIRECT=TCP:{HOST}:1902\\private$\\{QUEUE}", [b"one"])
    [queue] = a.peering.outgoing.values()
    assert queue.link is not None
    link = queue.link
    await wait_until(lambda: link.failures > 2000, what="2,000 failed attempts")
    b = await network.start("qm-b", 1902)
    await b.create_queue(QUEUE)
    await deliver(a, b, [b"one"])


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


async def test_a_hop_that_opens_sessions_but_takes_nothing_is_failed_over(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    route = f'routes."{HOST}:1904"=["{HOST}:1902", "{HOST}:1903"]'
    a = await network.start("qm-a", 1901, (route, "peers.route_failover_after=5.0"))
    r1 = await network.start("qm-r1", 1902, ("peers.router=true",))
    await network.start("qm-r2", 1903, ("peers.router=true",))
    d = await network.start("qm-d", 1904)
    await d.create_queue(QUEUE)
    # R1 completes every handshake, then its sessions break as the first message comes.
    network.channel(a, r1).cut_inside = lambda packet: 0 if is_data(packet) else None
    expected = [f"m{i}".encode() for i in range(1, 6)]
    await a.send(d.remote(QUEUE), expected)
    await deliver(a, d, expected)
    assert network.connections.count(("qm-a", "qm-r1")) >= 2  # it kept answering
    assert ("qm-a", "qm-r2") in network.connections
    [queue] = a.peering.outgoing.values()
    assert queue.hop == (HOST, 1903)


async def test_a_hop_that_stops_reading_is_failed_over_from_when_it_went_silent(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    route = f'routes."{HOST}:1904"=["{HOST}:1902", "{HOST}:1903"]'
    settings = (route, "peers.route_failover_after=3.0", "peers.ack_timeout=5.0")
    a = await network.start("qm-a", 1901, settings)
    r1 = await network.start("qm-r1", 1902, ("peers.router=true",))
    await network.start("qm-r2", 1903, ("peers.router=true",))
    d = await network.start("qm-d", 1904)
    await d.create_queue(QUEUE, transactional=False)
    first = [b"first"]
    await a.send(d.remote(QUEUE), first, transactional=False)
    await deliver(a, d, first)
    # R1 worked, then stops reading (a stopped process: its kernel still takes
    # connections, and every write to it blocks once its buffers are full).
    network.channel(a, r1).stall = trio.Event()
    silent = trio.current_time()
    expected = [f"m{i}".encode() for i in range(1, 6)]
    await a.send(d.remote(QUEUE), expected, transactional=False)
    [queue] = a.peering.outgoing.values()
    await wait_until(lambda: queue.hop == (HOST, 1903), what="the queue moves to R2")
    # The failover delay after the session's acknowledgement timeout: not
    # after a reconnection's handshake timeout (60 s) on top of it.
    assert trio.current_time() - silent == pytest.approx(5.0 + 3.0, abs=0.5)
    await deliver(a, d, first + expected)


# ---------------------------------------------------------------------- LinkQueues


class _Source:
    """An outgoing queue as ``LinkQueues`` sees it: a number of packets to give."""

    def __init__(self, name: str, packets: int = 0) -> None:
        self.name, self.packets, self.asked = name, packets, 0
        self.on_ask: Callable[[], None] = lambda: None

    def next_packet(self, now: float) -> PacketToSend | None:
        self.asked += 1
        self.on_ask()
        if not self.packets:
            return None
        self.packets -= 1
        return self.name.encode(), True, self.name


def _carried(*sources: _Source) -> LinkQueues:
    queues = LinkQueues()
    for source in sources:
        queues.add(cast(OutgoingQueue, source))
    return queues


def _drain(queues: LinkQueues) -> list[object]:
    tags = []
    while (built := queues.next_packet(0.0)) is not None:
        tags.append(built[2])
    return tags


def test_link_queues_take_turns_and_pass_over_queues_with_nothing_to_send() -> None:
    a, b, idle = _Source("a", 2), _Source("b", 3), _Source("idle")
    queues = _carried(a, b, idle)
    assert _drain(queues) == ["a", "b", "a", "b", "b"]
    assert (len(queues), idle in queues) == (3, True)
    # Once found empty, a queue is not asked again until it is marked.
    asked = (a.asked, b.asked, idle.asked)
    assert queues.next_packet(0.0) is None
    assert (a.asked, b.asked, idle.asked) == asked
    b.packets = 1
    queues.mark(cast(OutgoingQueue, b))
    assert _drain(queues) == ["b"]
    assert (a.asked, idle.asked) == asked[::2]


def test_a_send_through_a_link_with_many_idle_queues_asks_only_the_marked_one() -> None:
    idle = [_Source(f"idle{i}") for i in range(1000)]
    busy = _Source("busy")
    queues = _carried(*idle, busy)
    assert _drain(queues) == []
    for _ in range(10):
        busy.packets = 1
        queues.mark(cast(OutgoingQueue, busy))
        assert _drain(queues) == ["busy"]
    assert {source.asked for source in idle} == {1}
    # A session that opens asks every queue again.
    queues.all_may_send()
    assert _drain(queues) == []
    assert {source.asked for source in idle} == {2}


def test_link_queues_forget_a_removed_queue_and_ignore_marks_of_others() -> None:
    a, b = _Source("a", 1), _Source("b", 1)
    queues = _carried(a)
    queues.mark(cast(OutgoingQueue, b))  # not carried: ignored
    queues.remove(cast(OutgoingQueue, a))
    queues.remove(cast(OutgoingQueue, a))  # no error
    assert (len(queues), list(queues)) == (0, [])
    assert queues.next_packet(0.0) is None
    assert a.asked == b.asked == 0


def test_a_queue_marked_again_while_it_is_asked_waits_for_the_next_call() -> None:
    again = _Source("again")
    queues = _carried(again)
    again.on_ask = lambda: queues.mark(cast(OutgoingQueue, again))
    assert queues.next_packet(0.0) is None
    assert again.asked == 1
    assert queues.next_packet(0.0) is None
    assert again.asked == 2
