"""Other queue managers' FinalAcks at a router (``qmgr.server.peering.relayed_acks``):
acknowledged to the destination only once the next hop has them, or once kept."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from peer_kit import Network, Node, wait_until

import storage
import wire

from .conftest import QUEUE, receipts, receiver, settled, start_router_line


def is_final_ack(packet: wire.Packet) -> bool:
    return (
        isinstance(packet, wire.UserMessage)
        and wire.classify_packet(packet) is wire.PacketKind.FINAL_ACK
    )


async def received_at_c(network: Network) -> tuple[Node, Node, Node, storage.Operation, int]:
    """A -> R -> C, a message asking for confirmation delivered to C, and the
    FinalAck C records when it is received (not yet written) and its ordinal."""
    a, r, c = await start_router_line(network)
    await c.start()
    await a.send(c.remote(QUEUE), [b"one"], journal=0x03, time_to_be_received=3600)
    await wait_until(lambda: c.bodies(QUEUE) == [b"one"], what="C has it")
    await wait_until(settled(a), what="A has C's OrderAck")
    [(message, op)] = receipts(c)
    assert a.store.confirmations(message.ordinal)
    return a, r, c, op, message.ordinal


@pytest.mark.parametrize("cut", [False, True], ids=["passed-on", "cut-on-the-way-to-a"])
async def test_a_final_ack_passed_on_is_acknowledged_once_the_source_has_it_or_kept(
    network: Network, autojump_clock: trio.testing.MockClock, cut: bool
) -> None:
    """R passes C's FinalAck on to A. The R -> A connection may break inside that
    packet: R then keeps it (and only then acknowledges it to C), and sends it
    on A's next session. Either way A settles its copy, and nothing is left."""
    a, r, c, op, ordinal = await received_at_c(network)
    to_a = network.channel(r, a)
    if cut:
        once = [True]

        def cut_final_ack(packet: wire.Packet) -> int | None:
            if once[0] and is_final_ack(packet):
                once[0] = False
                return 20
            return None

        to_a.cut_inside = cut_final_ack
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: not a.store.confirmations(ordinal), what="A settled its copy")
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    await wait_until(lambda: r.store.final_ack_count() == 0, what="R keeps nothing")
    assert len(a.messages("system$;journal")) == 1
    assert a.messages("system$;deadxact") == []
    # Once delivered to A, after a cut inside the first one or not.
    assert (to_a.count(is_final_ack), to_a.cuts) == (1, 1 if cut else 0)


async def test_c_forgets_a_final_ack_only_after_a_has_it(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """While A has not acknowledged what R passed on, C's session keeps it
    unacknowledged: a crash of R then leaves it with C, which sends it again."""
    a, r, c, op, ordinal = await received_at_c(network)
    to_a = network.channel(r, a)
    # A's acknowledgments of the FinalAck do not come back (A is busy).
    network.channel(a, r).drop = lambda packet: not isinstance(packet, wire.UserMessage)
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: to_a.count(is_final_ack) >= 1, what="R passed it on")
    await trio.sleep(1)
    assert c.store.final_ack_count() == 1
    await r.stop()
    network.channel(a, r).drop = None
    await r.start()
    # The next message through R opens a session between R and C again (a
    # restarted router has forgotten that C owes A a FinalAck).
    await a.send(c.remote(QUEUE), [b"two"])
    await wait_until(lambda: not a.store.confirmations(ordinal), what="A settled its copy")
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    assert receiver(r).unroutable == 0
