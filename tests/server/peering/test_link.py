"""The link to a next hop (``qmgr.server.peering.link``): shared by its queues, idle when
there is nothing to send."""

from __future__ import annotations

import trio
import trio.testing
from peer_kit import Network, wait_until

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
    # Nothing to send: the link does not reconnect.
    await trio.sleep(600)
    assert network.connections == [("qm-a", "qm-b")]
    assert a.link(b).state == "idle"


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
