"""The peer port's accepting side (``qmgr.server.peering.accept``): who may connect, and
how many sessions it holds."""

from __future__ import annotations

import structlog
import trio
import trio.testing
from fault_stream import FaultStream
from peer_kit import Channel, Network, wait_until

from .conftest import QUEUE, bodies, deliver, start_pair


async def test_an_address_outside_accept_from_is_refused_before_any_session(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, b_settings=('peers.accept_from=["10.0.0.0/8"]',))
    with structlog.testing.capture_logs() as logs:
        await a.send(b.remote(QUEUE), bodies(1))
        await wait_until(lambda: len(a.closed) >= 2, what="A tries twice")
    assert all(not closed.opened for closed in a.closed)
    refused = [entry for entry in logs if entry["event"] == "peer_refused"]
    assert len(refused) >= 2
    assert refused[0]["reason"] == "address not allowed by peers.accept_from"
    # B never ran a session: nothing ended there, nothing arrived.
    assert b.closed == []
    assert b.peering.connections == set()
    assert b.bodies(QUEUE) == []
    assert a.link(b).state in ("waiting", "connecting")


async def test_the_sessions_beyond_max_connections_are_refused(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, b_settings=("peers.max_connections=1",))
    c = await network.start("qm-c", 1903)
    await a.send(b.remote(QUEUE), [b"from-a"])
    await deliver(a, b, [b"from-a"])
    # A's session is still open (idle for 300 s): C's is one too many.
    with structlog.testing.capture_logs() as logs:
        await c.send(b.remote(QUEUE), [b"from-c"])
        await wait_until(lambda: bool(c.closed), what="C refused")
    assert not c.closed[0].opened
    # Told so by B's EstablishConnection response (CS set), not left waiting.
    assert "refused the connection" in c.closed[0].reason
    refused = [e["reason"] for e in logs if e["event"] == "peer_refused"]
    assert any("(peers.max_connections)" in reason for reason in refused)
    assert len(b.peering.connections) == 1
    assert b.bodies(QUEUE) == [b"from-a"]
    # Once A's session is gone (idle), C gets in.
    await wait_until(lambda: b.bodies(QUEUE) == [b"from-a", b"from-c"], what="C delivers")
    assert "idle: no user packet for 300 s" in {c.reason for c in (*a.closed, *b.closed)}


async def test_sessions_a_queue_manager_opens_are_bounded_apart_from_those_it_takes(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    # B sends to A (its one session out, at its bound of 1): C's session to B
    # is still taken, and a second destination of B's waits for a slot.
    a, b = await start_pair(network, b_settings=("peers.max_connections=1",))
    c = await network.start("qm-c", 1903)
    await a.create_queue(QUEUE)
    await c.create_queue(QUEUE)
    await b.send(a.remote(QUEUE), [b"b-to-a"])
    await deliver(b, a, [b"b-to-a"])
    await c.send(b.remote(QUEUE), [b"c-to-b"])
    await wait_until(lambda: b.bodies(QUEUE) == [b"c-to-b"], what="C delivers to B")
    with structlog.testing.capture_logs() as logs:
        await b.send(c.remote(QUEUE), [b"b-to-c"])
        await trio.sleep(5)
    assert c.bodies(QUEUE) == []  # B's session to A holds its one slot out
    assert [e for e in logs if e["event"] == "peer_connect_failed"] == []  # not the hop's fault
    [said] = [e for e in logs if e["event"] == "peer_sessions_limit"]  # once, not every second
    assert (said["log_level"], said["limit"]) == ("warning", 1)
    [queue] = [q for q in b.peering.outgoing.values() if q.destination.endpoint[1] == c.port]
    assert "sessions open to peers already (peers.max_connections)" in queue.link.last_error
    assert queue.link.failures == 0
    # Once B's session to A has ended (idle), its message to C goes.
    await wait_until(lambda: c.bodies(QUEUE) == [b"b-to-c"], what="B delivers to C")


async def test_a_session_past_max_connections_from_another_address_is_logged_refused(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(
        network, b_settings=("peers.max_connections=1", 'peers.accept_from=["0.0.0.0/0"]')
    )
    await a.send(b.remote(QUEUE), [b"from-a"])
    await deliver(a, b, [b"from-a"])  # A's session to B holds B's one slot
    left, _ = trio.testing.memory_stream_pair()
    stream = FaultStream(left, sending=Channel(), receiving=Channel(), peer=("10.0.0.7", 40000))
    with structlog.testing.capture_logs() as logs:
        await b.serve(stream)  # answered with the refusal, then closed
    [refused] = [e for e in logs if e["event"] == "peer_refused"]
    assert refused["peer"] == "10.0.0.7:40000"
    assert refused["reason"] == "peers.max_connections (1) reached"


async def test_an_ipv6_peer_is_named_in_brackets(network: Network) -> None:
    b = await network.start("qm-b", 1902, ('peers.accept_from=["10.0.0.0/8"]',))
    left, _ = trio.testing.memory_stream_pair()
    stream = FaultStream(left, sending=Channel(), receiving=Channel(), peer=("fd55::1", 53956))
    with structlog.testing.capture_logs() as logs:
        await b.serve(stream)
    [refused] = [entry for entry in logs if entry["event"] == "peer_refused"]
    assert refused["peer"] == "[fd55::1]:53956"
