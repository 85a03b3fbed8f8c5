"""The hub (``qmgr.server.peering.hub``): its parts together (a router between three
queue managers), and what it answers for them: status, pause, resume, purge."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
import trio
import trio.testing
from peer_kit import Network, Node, is_data, is_order_ack, wait_until

from qmgr.core.errors import InvalidName, QueueNotFound
from qmgr.server.client.services import OutgoingAction
from qmgr.server.peering.hub import Peering

from .conftest import (
    QUEUE,
    bodies,
    deliver,
    incoming_state,
    settled,
    start_pair,
)


async def test_a_router_relays_exactly_once_in_order(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A -> R -> C: R keeps the packets whole and passes C's OrderAck back to A."""
    route = 'routes."127.0.0.1:1903"="127.0.0.1:1902"'
    a = await network.start("qm-a", 1901, [route])
    r = await network.start("qm-r", 1902, ["peers.router=true"])
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


async def test_status_follows_both_sides(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), bodies(3))
    await deliver(a, b, bodies(3))
    [stream] = b.peering.incoming_infos()
    assert (stream.source_qm, stream.queue, stream.last_number) == (a.store.qm_guid, QUEUE, 3)
    assert stream.sequence_ordinal == 1
    assert abs(stream.last_access - network.clock.time()) < 1.0  # unix time, not trio's
    [queue] = a.peering.outgoing_infos()
    assert (queue.destination, queue.state, queue.waiting) == (
        "DIRECT=TCP:127.0.0.1:1902\\private$\\orders",
        "connected",
        0,
    )
    assert queue.next_hop == "127.0.0.1:1902"
    assert queue.last_order_ack is not None
    assert a.peering.next_hops() == {a.outgoing_queue().queue_id: "127.0.0.1:1902"}
    assert b.peering.outgoing_infos() == ()


async def test_an_outgoing_queue_is_paused_resumed_and_purged(
    first_delivered: tuple[Node, Node], autojump_clock: trio.testing.MockClock
) -> None:
    a, b = first_delivered
    destination = b.remote(QUEUE)
    info, purged = await a.peering.control(OutgoingAction.PAUSE, destination)
    assert (info.state, purged) == ("paused", 0)
    await a.send(b.remote(QUEUE), [b"held"])
    await trio.sleep(60)
    assert b.bodies(QUEUE) == [b"first"]
    info, _ = await a.peering.control(OutgoingAction.RESUME, info.destination)
    assert info.state != "paused"
    await deliver(a, b, [b"first", b"held"])
    await a.peering.control(OutgoingAction.PAUSE, destination)
    await a.send(b.remote(QUEUE), [b"gone-1", b"gone-2"])
    info, purged = await a.peering.control(OutgoingAction.PURGE, destination)
    assert (purged, info.waiting) == (2, 0)
    await a.peering.control(OutgoingAction.RESUME, destination)
    await a.send(b.remote(QUEUE), [b"after"])
    await deliver(a, b, [b"first", b"held", b"after"])


async def test_only_an_outgoing_queue_can_be_controlled(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    # The name as it is typed (backslashes not doubled), to copy into the next command.
    with pytest.raises(InvalidName) as refused:
        a.peering.find(".\\private$\\orders")
    assert str(refused.value) == "'.\\private$\\orders' is not a queue on another queue manager"
    for listed in ("DL=fan", "dl=anything"):  # not one queue: named, not an internal error
        with pytest.raises(InvalidName, match="is a distribution list: name one of its targets"):
            a.peering.find(listed)
    with pytest.raises(QueueNotFound, match="no outgoing queue"):
        a.peering.find(b.remote(QUEUE))
    with pytest.raises(QueueNotFound) as missing:
        a.peering.find("DIRECT=TCP:10.9.9.9\\private$\\orders")
    assert str(missing.value) == (
        "there is no outgoing queue for 'DIRECT=TCP:10.9.9.9\\private$\\orders'"
    )
    with pytest.raises(InvalidName) as malformed:
        a.peering.find("DIRECT=TCP:10.9.9.9\\orders")
    assert str(malformed.value).startswith("'DIRECT=TCP:10.9.9.9\\orders': expected private$")


@pytest.mark.parametrize(
    ("source", "itself", "judged_as"),
    [
        ("own", True, "everyone"),  # a port map of itself: back over its session with itself
        ("own", False, "everyone"),  # through a router, back to it
        ("other", True, ("peer", None)),  # forwarded by this router to itself
        ("other", False, ("peer", "qm-r")),  # an ordinary peer's message
    ],
)
def test_whose_rights_an_arriving_message_has(source: str, itself: bool, judged_as: object) -> None:
    """A message of this queue manager's own clients that comes back to it (a name
    of its own it does not know as such) has only everyone's rights, whichever
    connection brings it: neither this queue manager nor a router lends it theirs."""
    own = uuid.uuid4()
    asked: list[object] = []
    authorization = SimpleNamespace(
        enabled=True,
        refuses_peer=lambda identity: asked.append(("peer", identity)),
        refuses_unknown_client=lambda: asked.append("everyone"),
    )
    hub = SimpleNamespace(authorization=authorization, local_qm=own)
    connection = SimpleNamespace(
        itself=itself, remote_qm=own if itself else uuid.uuid4(), identity="qm-r"
    )
    packet = SimpleNamespace(
        user=SimpleNamespace(source_qm=own if source == "own" else uuid.uuid4())
    )
    Peering.denied(hub, connection, packet)  # type: ignore[arg-type]
    assert asked == [judged_as]
