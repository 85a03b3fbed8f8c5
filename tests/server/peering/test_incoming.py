"""The receiving side (``qmgr.server.peering.incoming``): what the receiver decides,
carried out against a real store: resends dropped once, refusals dead-lettered,
crashes, the history of non-transactional messages, OrderAcks."""

from __future__ import annotations

import uuid

import pytest
import structlog
import trio
import trio.testing
from peer_kit import Network, Node, is_data, is_order_ack, is_session_ack, wait_until

import storage
import wire
from qmgr.protocol import Role
from qmgr.server.peering import relayed_acks
from qmgr.server.peering.connection import PeerConnection

from .conftest import (
    LATE_ORDER_ACKS,
    QUEUE,
    QUICK,
    bodies,
    check_resends_dropped,
    deliver,
    incoming_state,
    receipts,
    receiver,
    settled,
    start_pair,
    start_router_line,
)


async def test_lost_session_acks_end_the_session_and_the_resend_is_dropped_once(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The OrderAck comes later than the ack-wait timeout, so A resends.
    a, b = await start_pair(network, "peers.ack_timeout=2.0", b_settings=LATE_ORDER_ACKS)
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
    assert receiver(b).received == 10
    key = (QUEUE, a.store.qm_guid.bytes, a.outgoing_state().sequence_timestamp)
    in_memory = receiver(b).stream_state(key)
    assert in_memory is not None
    assert in_memory.reject_count == 5
    assert in_memory.last_number == 5
    check_resends_dropped(a, b, rejected=5, last_number=5)


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
    assert b.peering.incoming.dead_lettered == 3
    assert b.peering.refused_by_class() == {
        wire.MessageClass.NACK_BAD_DST_Q: 2,
        wire.MessageClass.NACK_NOT_TRANSACTIONAL_Q: 1,
    }
    # Kept in the dead-letter queue, they are counted there by class too.
    deadxact = b.store.get_queue("system$;deadxact")
    assert deadxact is not None
    assert b.store.counts() == {
        ("dead_letter", deadxact.queue_id, wire.MessageClass.NACK_BAD_DST_Q): 2,
        ("dead_letter", deadxact.queue_id, wire.MessageClass.NACK_NOT_TRANSACTIONAL_Q): 1,
    }
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
    assert receiver(b).rejected == 0


@pytest.mark.parametrize("stored_before_crash", [5, 3])
async def test_a_receiver_crash_before_the_order_ack_loses_and_duplicates_nothing(
    network: Network, autojump_clock: trio.testing.MockClock, stored_before_crash: int
) -> None:
    a, b = await start_pair(network, "peers.window=1", b_settings=LATE_ORDER_ACKS)
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
    # with the connection; after it: the first again, which B answers at once
    # with what it holds, so A sends on from there.
    first_connection = 5 if stored_before_crash == 5 else stored_before_crash + 1
    missing = 5 - stored_before_crash
    resent = to_b.count(is_data) - first_connection
    assert 1 + missing <= resent < 5 + missing  # fewer than all five again
    assert [c.reason for c in b.closed] == ["the queue manager is stopping"]
    assert a.closed[0].reason == "the peer closed the connection"
    # The restarted B took only what it did not have.
    assert receiver(b).received == resent
    check_resends_dropped(a, b, rejected=resent - missing, last_number=5)


async def test_a_receiver_put_back_from_a_backup_flags_its_streams_until_their_next_message(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"one"])
    await deliver(a, b, [b"one"])
    await b.stop()
    # What ``qmgr restored`` writes into a store put back from a backup.
    with storage.Store(b.path, initial_map_size=1 << 22, durable=False) as store:
        [outcome] = store.commit([storage.Unit((storage.RenewAfterRestore(2e9),))], now=2e9)
        assert outcome.error is None
    await b.start()
    key = (QUEUE, a.store.qm_guid.bytes, a.outgoing_state().sequence_timestamp)
    before = receiver(b).stream_state(key)
    assert before is not None
    assert before.resync
    await a.send(b.remote(QUEUE), [b"two"])
    await deliver(a, b, [b"one", b"two"])
    assert not incoming_state(b, a).resync
    after = receiver(b).stream_state(key)
    assert after is not None
    assert not after.resync


async def test_refusals_past_the_dead_letter_allowance_are_counted_as_not_kept(
    network: Network,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The dead-letter queue stops growing there: the metrics must still show them."""
    a, b = await start_pair(network, b_settings=("peers.max_rejected_bytes=1500",))
    for _ in range(4):  # one at a time: the allowance is judged against what is stored
        await a.send(b.remote("nowhere"), [b"x" * 600])
        await wait_until(settled(a), what="A forgets the refused message")
    assert b.peering.incoming.dead_lettered == 4
    kept = len(b.messages("system$;deadxact"))
    assert 0 < kept < 4
    assert b.peering.refused_not_kept() == 4 - kept


async def test_a_dead_lettered_message_is_not_dead_lettered_again_after_a_crash(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, b = await start_pair(network, b_settings=LATE_ORDER_ACKS)
    await a.send(b.remote("missing"), [b"lost-1", b"lost-2"])
    await wait_until(lambda: len(b.messages("system$;deadxact")) == 2, step=0.01)
    await b.stop()
    await b.start()
    await wait_until(settled(a))
    dead = b.messages("system$;deadxact")
    assert [bytes(m.body) for m in dead] == [b"lost-1", b"lost-2"]
    assert {m.message_class for m in dead} == {wire.MessageClass.NACK_BAD_DST_Q}
    assert receiver(b).rejected == 2
    assert b.peering.incoming.dead_lettered == 0


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
    assert receiver(b).duplicates == 4
    assert all(not m.transactional for m in b.messages("plain"))
    assert len(network.connections) == 2


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


def relayed(r: Node) -> int:
    """Entries in R's outgoing queues."""
    queues = r.store.list_queues()
    return sum(q.depth for q in queues if q.kind is storage.QueueKind.OUTGOING)


async def test_a_router_keeps_one_copy_of_what_its_source_resends_while_the_next_hop_is_down(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A -> R -> C with C down: A resends every transactional message at each
    OrderAck wait, and R, which still holds each in its outgoing queue, drops
    the resends, before and after a restart; once C is back it has each message
    once, in order, and R forwarded about one copy of each."""
    a, r, c = await start_router_line(network, "peers.window=8", "peers.resend_intervals=[5.0]")
    expected = bodies(20)
    for first in range(0, 20, 5):
        await a.send(c.remote(QUEUE), expected[first : first + 5])
    from_a = network.channel(a, r)

    async def resent_rounds(rounds: int) -> None:
        sent = from_a.count(is_data)
        await wait_until(lambda: from_a.count(is_data) >= sent + rounds * 20, what="resends")

    await wait_until(lambda: relayed(r) == 20, what="R holds the first copies")
    await resent_rounds(3)
    assert relayed(r) == 20
    assert receiver(r).relayed_duplicates >= 60
    # What the router holds is read from its store: a restart changes nothing.
    await r.stop()
    await r.start()
    await resent_rounds(2)
    assert relayed(r) == 20
    assert receiver(r).relayed_duplicates >= 40
    assert all("no acknowledgement" not in closed.reason for closed in a.closed)

    await c.start()
    await wait_until(lambda: len(c.bodies(QUEUE)) >= 20, what="C has them")
    await wait_until(settled(a), what="A forgets on C's OrderAck")
    await wait_until(lambda: relayed(r) == 0, what="R forgets what C stored")
    assert c.bodies(QUEUE) == expected
    assert incoming_state(c, a).last_number == 20
    # R forwarded one copy of each, and perhaps a few more of a resend that came
    # after its copy went (C rejected those): not a copy per resend.
    forwarded = network.channel(r, c).count(is_data)
    assert forwarded - 20 == receiver(c).rejected < 20


@pytest.mark.parametrize("room", [True, False])
async def test_a_router_keeps_a_final_ack_for_a_source_that_is_down_while_there_is_room(
    network: Network,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    room: bool,
) -> None:
    if not room:
        monkeypatch.setattr(relayed_acks, "MAX_KEPT_FINAL_ACKS", 0)
    a, r, c = await start_router_line(network)
    await c.start()
    await a.send(c.remote(QUEUE), [b"one"], journal=0x01, time_to_be_received=600)
    await wait_until(lambda: c.bodies(QUEUE) == [b"one"], what="C has it")
    await wait_until(settled(a), what="A has C's OrderAck")
    await a.stop()
    # C's FinalAck for it (as a receive records it), sent along the way it came.
    [(message, op)] = receipts(c)
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    # C forgets it once R has acknowledged it: stored, or dropped for want of room.
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    kept = r.store.final_acks()
    if room:
        [(key, _)] = kept
        assert isinstance(op, storage.RecordFinalAck)
        stamp = op.stamp  # A's queue's
        assert stamp is not None
        assert key == b"".join(
            (
                a.store.qm_guid.bytes,
                message.ordinal.to_bytes(4, "big"),
                stamp.to_bytes(4, "big"),
                c.store.qm_guid.bytes,
            )
        )
        assert receiver(r).unroutable == 0
        # A comes back, and keeps a session with R for its copy: R sends it on.
        await a.start()
        await wait_until(lambda: not a.store.confirmations(message.ordinal), what="A settled")
        await wait_until(lambda: r.store.final_ack_count() == 0, what="R forgets it")
    else:
        assert kept == []
        assert receiver(r).unroutable == 1


def junk_final_ack(sender: Node, about: uuid.UUID, ordinal: int) -> bytes:
    """A FinalAck ``sender`` makes up about a message of ``about``'s, of a stream
    nobody relayed."""
    ack = wire.FinalAck(
        source_qm=sender.store.qm_guid,
        destination=wire.ORDER_QUEUE,
        destination_qm=about,
        message_id=100 + ordinal,
        sent_time=1_700_000_000,
        message_class=wire.MessageClass.ACK_RECEIVE,
        sequence_id=wire.TxSequenceId(ordinal=1, timestamp=5),
        sequence_number=1,
        previous_sequence_number=0,
        acked_source_qm=about,
        acked_message_id=ordinal,
    )
    return wire.build_packet(ack.to_message())


async def peer_of(network: Network, r: Node) -> tuple[Node, PeerConnection]:
    """M, an ordinary queue manager with a session to R (it sent R a message)."""
    m = await network.start("qm-m", 1904)
    await r.create_queue("inbox")
    await m.send(r.remote("inbox"), [b"hello"])
    await wait_until(lambda: r.bodies("inbox") == [b"hello"], what="M's session with R")
    connection = m.link(r).connection
    assert connection is not None
    return m, connection


async def test_a_router_keeps_no_final_ack_of_a_stream_it_did_not_relay(
    network: Network,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A peer of the router sends it FinalAcks about messages of queue managers
    that are not there, of streams the router never relayed: none is kept, so
    a real FinalAck for A, whose source is down, still finds room (the cap is
    small here)."""
    monkeypatch.setattr(relayed_acks, "MAX_KEPT_FINAL_ACKS", 20)
    a, r, c = await start_router_line(network)
    m, connection = await peer_of(network, r)
    for n in range(50):
        connection.send_user_packet(junk_final_ack(m, uuid.UUID(int=n + 1), n), recoverable=True)
    await wait_until(lambda: receiver(r).unroutable == 50, what="R dropped the junk")
    assert r.store.final_ack_count() == 0
    await c.start()
    await a.send(c.remote(QUEUE), [b"one"], journal=0x01, time_to_be_received=600)
    await wait_until(lambda: c.bodies(QUEUE) == [b"one"], what="C has it")
    await wait_until(settled(a), what="A has C's OrderAck")
    await a.stop()
    [(_, op)] = receipts(c)
    assert (await c.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAck acknowledged")
    [(key, _)] = r.store.final_acks()
    assert key[:16] == a.store.qm_guid.bytes


async def test_a_burst_of_final_acks_to_keep_stops_at_the_room_there_is(
    network: Network,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The room counts the FinalAcks on their way to the store as well as those
    stored: a burst arriving in one run of writes does not pass it."""
    monkeypatch.setattr(relayed_acks, "MAX_KEPT_FINAL_ACKS", 10)
    a, r, c = await start_router_line(network)
    await c.start()
    await a.send(c.remote(QUEUE), bodies(200), journal=0x01, time_to_be_received=600)
    await wait_until(lambda: len(c.bodies(QUEUE)) == 200, what="C has them")
    await wait_until(settled(a), what="A has C's OrderAcks")
    await a.stop()
    # C owes A a FinalAck for each; R cannot pass them on. They come in bursts
    # of C's courier (IN_FLIGHT at a time), each in fewer writes than packets.
    ops = tuple(op for _, op in receipts(c, 200))
    assert (await c.committer.submit(storage.Unit(ops))).error is None
    await wait_until(lambda: c.store.final_ack_count() == 0, what="C's FinalAcks acknowledged")
    assert r.store.final_ack_count() == 10
    assert receiver(r).unroutable == 190


async def test_a_router_sends_a_queue_manager_no_final_ack_made_up_by_another_peer(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """While X has no session with the router, M (another peer of the router)
    sends it a FinalAck about a message of X's. The router never relayed X's
    stream: it keeps nothing, and has nothing to send X when X connects (X,
    which does not route through it, would refuse a FinalAck of M's on its
    session, and close it, every time)."""
    r = await network.start("qm-r", 1902, ["peers.router=true", *QUICK])
    x = await network.start("qm-x", 1903, QUICK)
    x_guid = x.store.qm_guid
    await x.stop()
    m, connection = await peer_of(network, r)
    connection.send_user_packet(junk_final_ack(m, x_guid, 1), recoverable=True)
    await wait_until(lambda: receiver(r).unroutable == 1, what="R dropped it")
    assert r.store.final_ack_count() == 0
    await x.start()
    await x.send(r.remote("inbox"), [b"from-x"])
    await wait_until(settled(x), what="X's message at R, acknowledged")
    assert r.peering.final_acks.sent == 0


@pytest.mark.parametrize("forge", [False, True], ids=["control", "forged"])
@pytest.mark.parametrize("where", ["lost-on-the-way", "held-at-the-router"])
async def test_a_router_passes_on_an_order_ack_only_from_the_streams_next_hop(
    network: Network, autojump_clock: trio.testing.MockClock, forge: bool, where: str
) -> None:
    """A -> R -> C, C down. M, another peer of the router, sends R an OrderAck
    for A's stream (its numbers guessed) while A's messages are lost on the way
    to R, or held at R: R does not pass it on, since only C, the stream's next
    hop, acknowledges it (said, for a stream it relays). Passed on, A would
    have taken it from its hop, R, and forgotten messages C never had."""
    a, r, c = await start_router_line(network, "peers.ack_timeout=30.0")
    await c.start()
    await a.send(c.remote(QUEUE), [b"o0"])  # R's queue to C has a session: C's GUID
    await wait_until(lambda: c.bodies(QUEUE) == [b"o0"], what="C has the first")
    await wait_until(settled(a), what="A has C's OrderAck")
    await c.stop()
    held = relayed(r)
    m, connection = await peer_of(network, r)
    if where == "lost-on-the-way":
        network.channel(a, r).drop = lambda packet: is_data(packet)
    await a.send(c.remote(QUEUE), [b"o1", b"o2", b"o3"])
    [queue] = a.peering.outgoing.values()
    await wait_until(lambda: queue.machine.sent_number == 3, what="A sent them")
    if where == "held-at-the-router":
        await wait_until(lambda: relayed(r) == held + 3, what="R holds them")
    state = a.outgoing_state()
    sequence = wire.TxSequenceId(ordinal=state.sequence_ordinal, timestamp=state.sequence_timestamp)
    if forge:
        forged = wire.OrderAck(
            source_qm=m.store.qm_guid,
            destination=wire.ORDER_QUEUE,
            destination_qm=a.store.qm_guid,
            message_id=78,
            sent_time=1_700_000_000,
            sequence_id=sequence,  # the sequence rolled when o0 was forgotten
            sequence_number=3,
            previous_sequence_number=2,
        )
        with structlog.testing.capture_logs() as logged:
            connection.send_user_packet(wire.build_packet(forged))
            await wait_until(lambda: receiver(r).unroutable == 1, what="R dropped it")
        refused = [e["from_qm"] for e in logged if e["event"] == "order_ack_refused"]
        assert refused == ([str(m.store.qm_guid)] if where == "held-at-the-router" else [])
    await trio.sleep(5)
    assert a.outgoing_queue().depth == 3  # nothing forgotten
    network.channel(a, r).drop = None
    await c.start()
    await wait_until(lambda: c.bodies(QUEUE) == [b"o0", b"o1", b"o2", b"o3"], what="C has all")


async def test_a_router_acknowledges_a_resend_it_holds_without_storing_it_again(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Non-transactional messages are resent only when their SessionAcks are
    lost: R, which holds them, drops the resends and acknowledges them, so that
    A forgets them (the SessionAck's recoverable marks are all A waits for)."""
    a, r, c = await start_router_line(
        network, "peers.ack_timeout=2.0", queue="plain", transactional=False
    )
    network.channel(r, a).drop = lambda packet: (
        is_session_ack(packet) and len(network.connections) == 1
    )
    expected = bodies(4, "n")
    await a.send(c.remote("plain"), expected, transactional=False)
    await wait_until(settled(a), what="A forgets what R acknowledged")
    assert network.channel(a, r).count(is_data) == 8
    assert relayed(r) == 4
    assert receiver(r).relayed_duplicates == 4
    assert len(network.connections) == 2

    await c.start()
    await wait_until(lambda: relayed(r) == 0, what="R forwards and forgets")
    assert c.bodies("plain") == expected
    assert network.channel(r, c).count(is_data) == 4


async def test_arrivals_that_cannot_be_stored_close_the_session_with_a_warning(
    network: Network, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver that cannot store what arrived (a full store, a disk error) closes
    the session, so that the sender resends on the next one; an operator must see
    it, so the close is a warning, not the information of a session ending."""
    a, b = await start_pair(network)
    committer = b.committer
    real_submit = committer.submit
    failures = 1

    async def submit(unit: storage.Unit) -> storage.UnitOutcome:
        nonlocal failures
        if failures and any(isinstance(op, storage.AppendMessage) for op in unit.ops):
            failures -= 1
            raise OSError(28, "No space left on device")
        return await real_submit(unit)

    monkeypatch.setattr(committer, "submit", submit)
    expected = bodies(3)
    with structlog.testing.capture_logs() as logs:
        await a.send(b.remote(QUEUE), expected)
        await deliver(a, b, expected)
    [closed] = [
        e
        for e in logs
        if e["event"] == "peer_session_closed"
        and e["component"] == "peering"
        and "could not store" in e["reason"]
    ]
    assert closed["log_level"] == "warning"
    assert "No space left on device" in closed["reason"]


#: C's other address, which A reaches through a router.
ALIAS = "127.0.0.1:1904"


async def send_in_turns_and_settle(network: Network, a: Node, straight: Node, c: Node) -> None:
    """A sends five messages to ``straight``'s queue and five to C's ``audit``
    through its route for :data:`ALIAS`, in turns; each arrives once, in order, no
    OrderAck is refused, and A forgets both queues before the first OrderAck wait
    runs out (no resend was needed)."""
    routed = f"DIRECT=TCP:{ALIAS}\\private$\\audit"
    started = network.clock.time()
    with structlog.testing.capture_logs() as logs:
        for number in range(1, 6):
            await a.send(straight.remote(QUEUE), [b"o%d" % number])
            await a.send(routed, [b"a%d" % number])
        await wait_until(lambda: len(c.bodies("audit")) == 5, what="the routed messages")
        await wait_until(settled(a), what="A forgets both queues")
    assert straight.bodies(QUEUE) == bodies(5, "o")
    assert c.bodies("audit") == bodies(5, "a")
    assert [entry for entry in logs if entry["event"] == "order_ack_refused"] == []
    assert network.clock.time() - started < 30.0


async def test_a_source_reaching_one_queue_manager_by_two_hops_gets_each_order_ack_from_its_hop(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A sends to C straight (``127.0.0.1:1903``) and, under C's alias, through the
    router R. C sends each stream's OrderAcks back the way that stream came, so A
    takes every one (it takes an OrderAck only from the queue's next hop)."""
    a = await network.start("qm-a", 1901, [f'routes."{ALIAS}"="127.0.0.1:1902"'])
    await network.start("qm-r", 1902, ["peers.router=true", f'routes."{ALIAS}"="127.0.0.1:1903"'])
    c = await network.start("qm-c", 1903, [f'server.aliases=["{ALIAS}"]'])
    await c.create_queue(QUEUE)
    await c.create_queue("audit")
    await send_in_turns_and_settle(network, a, c, c)


async def test_a_router_passes_an_order_ack_back_the_way_its_stream_came(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A's queue for C goes A -> R1 -> R2 -> C, and A also sends to a queue on R2
    itself, so R2 has a session with A. R2 passes C's OrderAcks back through R1,
    the way the stream came, not over its session with A: A takes them (R1 is the
    queue's hop)."""
    a = await network.start("qm-a", 1901, [f'routes."{ALIAS}"="127.0.0.1:1902"'])
    await network.start("qm-r1", 1902, ["peers.router=true", f'routes."{ALIAS}"="127.0.0.1:1905"'])
    r2 = await network.start(
        "qm-r2", 1905, ["peers.router=true", f'routes."{ALIAS}"="127.0.0.1:1903"']
    )
    c = await network.start("qm-c", 1903, [f'server.aliases=["{ALIAS}"]'])
    await c.create_queue("audit")
    await r2.create_queue(QUEUE)
    await send_in_turns_and_settle(network, a, r2, c)
