"""Other queue managers' FinalAcks at a router (``qmgr.server.peering.relayed_acks``):
stored before they are acknowledged to the destination, forgotten once the next hop
has them."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import trio
import trio.testing
from peer_kit import Network, Node, wait_until

import storage
import wire
from qmgr.server.peering.final_acks import RELAYED_UNTIL

from .conftest import QUEUE, QUICK, THROUGH_R, receipts, receiver, settled, start_router_line


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


async def test_a_final_ack_the_router_stored_survives_its_crash(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """C forgets its FinalAck once R stored it; what R passes on does not reach A
    before R crashes: R, started again, sends it from its store on A's next
    session (A keeps one while its copy waits), and forgets it once A has it."""
    a, r, c, op, ordinal = await received_at_c(network)
    to_a = network.channel(r, a)
    to_a.stall = trio.Event()  # R's writes to A go nowhere
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    assert r.store.final_ack_count() == 1
    await r.stop()
    stall, to_a.stall = to_a.stall, None
    stall.set()
    assert a.store.confirmations(ordinal)
    await r.start()
    await wait_until(lambda: not a.store.confirmations(ordinal), what="A settled its copy")
    await wait_until(lambda: r.store.final_ack_count() == 0, what="R forgot it")
    assert a.messages("system$;deadxact") == []


async def test_a_source_that_acknowledges_slowly_keeps_no_destination_waiting(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A acknowledges what it stores up to 60 s late (legal settings): C's
    session with R, which closes after 20 s without an acknowledgment, is not
    kept waiting for A's; C sends its FinalAck once."""
    a, r, c = await start_router_line(
        network, "peers.ack_timeout=120", "peers.recoverable_ack_timeout=60"
    )
    await c.start()
    await a.send(c.remote(QUEUE), [b"one"], journal=0x03, time_to_be_received=3600)
    await wait_until(lambda: c.bodies(QUEUE) == [b"one"], what="C has it")
    await wait_until(settled(a), what="A has C's OrderAck")
    [(message, op)] = receipts(c)
    closes = len(c.closed)
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: not a.store.confirmations(message.ordinal), what="A settled")
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    await wait_until(lambda: r.store.final_ack_count() == 0, what="R forgot it")
    assert len(c.closed) == closes
    assert network.channel(c, r).count(is_final_ack) == 1


def same_bytes(packet: wire.Packet, frame: bytes) -> bytes:
    """C's FinalAcks with one message id and send time: its resends are the same
    bytes (as an MSMQ resend from an outgoing queue is)."""
    if is_final_ack(packet):
        assert isinstance(packet, wire.UserMessage)
        user = dataclasses.replace(packet.user, message_id=999, sent_time=1_700_000_000)
        return wire.build_packet(dataclasses.replace(packet, user=user))
    return frame


async def test_a_final_ack_sent_again_with_the_same_bytes_is_not_lost(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """R passes C's FinalAck on while its writes to A go nowhere, and its
    acknowledgment to C cuts that connection: C sends the same bytes again,
    which R takes for one come round again. R stored the first: once its
    connection to A ends and A connects again, A has it."""
    a, r, c, op, ordinal = await received_at_c(network)
    network.channel(c, r).rewrite = same_bytes
    to_a = network.channel(r, a)
    to_a.stall = trio.Event()
    network.channel(r, c).cut_after = 0
    r_closes = len(r.closed)
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    await wait_until(
        lambda: any(x.role.name == "ACCEPTOR" for x in r.closed[r_closes:]),
        what="R closed its connection to A",
    )
    stall, to_a.stall = to_a.stall, None
    stall.set()
    await wait_until(lambda: not a.store.confirmations(ordinal), what="A settled its copy")
    assert a.messages("system$;deadxact") == []


async def kept_by_r_until_a_is_back(a: Node, r: Node, c: Node, ordinal: int) -> None:
    """C's FinalAck went to R, which keeps it while A is down; A settles its copy
    once it is back."""
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    assert r.store.final_ack_count() == 1
    await a.start()
    await wait_until(lambda: not a.store.confirmations(ordinal), what="A settled")


async def test_a_restarted_router_keeps_a_final_ack_of_a_source_it_relayed_for(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A -> R -> C. C has "one" (A awaits its FinalAck); C goes down and R holds
    "two" for it. A and R go down; R comes back first and forwards "two" to C,
    whose courier sends the FinalAck of "one" on R's session. R, which forgot
    the streams it relayed before, keeps it: A is among the sources it relayed
    for, which its store keeps. A settles its copy once it is back."""
    a, r, c, op, ordinal = await received_at_c(network)

    def held() -> int:
        return sum(queue.stored for queue in r.peering.outgoing.values())

    await wait_until(lambda: held() == 0, what="R forgot one")
    await c.stop()
    arrived = receiver(r).received
    await a.send(c.remote(QUEUE), [b"two"])
    await wait_until(lambda: receiver(r).received > arrived and held() == 1, what="R has two")
    await a.stop()
    await r.stop()
    await c.start()
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await r.start()
    await wait_until(lambda: c.bodies(QUEUE) == [b"one", b"two"], what="R forwarded two")
    await kept_by_r_until_a_is_back(a, r, c, ordinal)


async def test_a_restarted_router_with_nothing_to_forward_keeps_a_final_ack_of_a_source(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """As above, but R has nothing left for C after its restart, and C opens the
    session (it sends a message to a queue on R): R keeps the FinalAck all the
    same."""
    a, r, c, op, ordinal = await received_at_c(network)
    await r.create_queue("inbox")
    await wait_until(
        lambda: sum(queue.stored for queue in r.peering.outgoing.values()) == 0,
        what="R forgot one",
    )
    await a.stop()
    await r.stop()
    await r.start()
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await c.send(r.remote("inbox"), [b"hello"])
    await wait_until(lambda: r.bodies("inbox") == [b"hello"], what="C's session with R")
    await kept_by_r_until_a_is_back(a, r, c, ordinal)


async def test_a_next_hop_cannot_fill_the_router_with_final_acks_of_anyones_messages(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """C, to which R forwards A's messages, sends R FinalAcks about messages of
    a queue manager X that never routed through R: R keeps none of them."""
    a, r, c = await start_router_line(network)
    await c.start()
    await r.create_queue("inbox")
    await a.send(c.remote(QUEUE), [b"one"])
    await wait_until(lambda: c.bodies(QUEUE) == [b"one"], what="C has it")
    await c.send(r.remote("inbox"), [b"hello"])
    await wait_until(lambda: r.bodies("inbox") == [b"hello"], what="C's session with R")
    connection = c.link(r).connection
    assert connection is not None
    x = uuid.uuid4()
    for ordinal in range(1, 51):
        made_up = wire.FinalAck(
            source_qm=c.store.qm_guid,
            destination=wire.ORDER_QUEUE,
            destination_qm=x,
            message_id=ordinal,
            sent_time=1_700_000_000,
            message_class=wire.MessageClass.ACK_RECEIVE,
            sequence_id=wire.TxSequenceId(ordinal=1, timestamp=0x1000 + ordinal),
            sequence_number=1,
            previous_sequence_number=0,
            acked_source_qm=x,
            acked_message_id=ordinal,
        )
        connection.send_user_packet(wire.build_packet(made_up.to_message()), recoverable=True)
    await wait_until(lambda: receiver(r).unroutable == 50, what="R dropped them")
    assert r.store.final_ack_count() == 0


async def test_a_relayed_messages_deadline_is_kept_though_its_first_write_failed(
    network: Network, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R's first write of A's confirmed message fails (a full store, for a
    moment); A sends it again and R stores it, with its deadline: after a
    restart of R, its session to C comes back and C's FinalAck reaches A."""
    a, r, c = await start_router_line(network)
    failed: list[storage.Unit] = []
    real = r.committer.submit

    async def submit(unit: storage.Unit) -> storage.UnitOutcome:
        if not failed and any(
            isinstance(op, storage.SetSetting) and op.key.startswith(RELAYED_UNTIL)
            for op in unit.ops
        ):
            failed.append(unit)
            return storage.UnitOutcome.failed(unit, storage.StoreFull("full, for a moment"))
        return await real(unit)

    monkeypatch.setattr(r.committer, "submit", submit)
    await a.send(c.remote(QUEUE), [b"one"], journal=0x03, time_to_be_received=3600)
    await wait_until(
        lambda: sum(q.stored for q in r.peering.outgoing.values()) == 1, what="R holds it"
    )
    assert failed
    assert len(r.store.settings(RELAYED_UNTIL)) == 1
    await c.start()
    await wait_until(lambda: c.bodies(QUEUE) == [b"one"], what="C has it")
    await wait_until(settled(a), what="A has C's OrderAck")
    await wait_until(settled(r), what="R forgot it")
    [(message, op)] = receipts(c)
    await r.stop()
    await r.start()
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: not a.store.confirmations(message.ordinal), what="A settled")


async def test_the_deadlines_of_queues_removed_while_the_router_runs_are_cleared(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Ten confirmed messages to ten queues of C (ten outgoing queues at R), 30 s
    to be received: once their deadlines passed and R removed its idle queues,
    none of their deadlines is left in its store."""
    a = await network.start("qm-a", 1901, [THROUGH_R])
    r = await network.start(
        "qm-r", 1902, ["peers.router=true", "peers.outgoing_cleanup_after=10", *QUICK]
    )
    c = await network.start("qm-c", 1903, QUICK)
    names = [f"q{i}" for i in range(10)]
    for name in names:
        await c.create_queue(name)
        await a.send(c.remote(name), [name.encode()], journal=0x03, time_to_be_received=30)
    await wait_until(lambda: all(c.bodies(n) == [n.encode()] for n in names), what="C has all")
    await wait_until(lambda: len(r.store.settings(RELAYED_UNTIL)) == 10, what="R's deadlines")
    await wait_until(lambda: not r.peering.outgoing, what="R removed its outgoing queues")
    await wait_until(lambda: not r.store.settings(RELAYED_UNTIL), what="deadlines cleared")
