"""One outgoing queue (``qmgr.server.peering.outgoing_queue``): entries loaded in chunks,
every kind of message, transactional numbering across the others."""

from __future__ import annotations

import dataclasses

import pytest
import trio
import trio.testing
from peer_kit import Network, Node, is_data, is_order_ack, wait_until

import storage
import wire
from qmgr.config import Address
from qmgr.core.names import split_host_port
from qmgr.server.peering.payloads import PAYLOAD_BUDGET

from .conftest import (
    QUEUE,
    append_outgoing,
    bodies,
    deliver,
    incoming_state,
    settled,
    start_pair,
)


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


@pytest.mark.parametrize("forget_fails_once", [False, True], ids=["", "forget-written-again"])
async def test_a_message_too_large_for_a_packet_is_dead_lettered_at_the_source(
    network: Network,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    forget_fails_once: bool,
) -> None:
    # A send refuses such a message (``check_remote_message``); one already in an
    # outgoing queue (an older version took it) can still never be sent.
    monkeypatch.setattr("qmgr.core.engine.check_remote_message", lambda message: None)
    a, b = await start_pair(network)
    await a.create_queue("acks", transactional=False)
    submit = a.committer.submit
    failed: list[storage.Unit] = []

    async def failing_once(unit: storage.Unit) -> storage.UnitOutcome:
        if not failed and any(isinstance(op, storage.ForgetOutgoing) for op in unit.ops):
            failed.append(unit)
            msg = "the disk failed this once"
            raise storage.StoreError(msg)
        return await submit(unit)

    if forget_fails_once:  # the give-up's reports are kept for the forget written again
        monkeypatch.setattr(a.committer, "submit", failing_once)
    big = b"x" * (wire.MAX_PACKET_SIZE - 100)
    nack_reach_queue, deadletter = 0x04, 0x01  # MQMSG_ACKNOWLEDGMENT_*, MQMSG_DEADLETTER
    started = trio.current_time()
    await a.send(
        b.remote(QUEUE), [big], admin_queue="acks", acknowledge=nack_reach_queue, journal=deadletter
    )
    await a.send(b.remote(QUEUE), [b"after"])
    await deliver(a, b, [b"after"])
    assert len(failed) == forget_fails_once
    if not forget_fails_once:
        # At once: the next message's previous number passed over the one given
        # up (not after a resend interval without an OrderAck).
        assert trio.current_time() - started < 1.0
    too_large = wire.MessageClass.NACK_MESSAGE_TOO_LARGE
    dead = a.messages("system$;deadxact")
    assert [(m.body_size, m.message_class) for m in dead] == [(len(big), too_large)]
    assert [m.message_class for m in a.messages("acks")] == [too_large]
    assert b.bodies(QUEUE) == [b"after"]


async def test_a_resumed_queue_with_messages_is_not_shown_idle(
    first_delivered: tuple[Node, Node], autojump_clock: trio.testing.MockClock
) -> None:
    a, b = first_delivered
    [queue] = a.peering.outgoing.values()
    await wait_until(lambda: queue.info().state == "idle", what="nothing to send")
    await queue.set_paused(True)
    await a.send(b.remote(QUEUE), [b"second"])
    assert queue.info().state == "paused"
    await queue.set_paused(False)
    # Woken, its link has not run yet: it has work, so it is not idle.
    assert (queue.info().state, queue.info().waiting) == ("connecting", 1)
    await deliver(a, b, [b"first", b"second"])


async def test_a_purge_forgets_what_was_acknowledged_before_it(
    first_delivered: tuple[Node, Node], autojump_clock: trio.testing.MockClock
) -> None:
    """Entries acknowledged but not yet forgotten when a purge comes are
    forgotten first, with their delivery reports: they are not purged."""
    a, b = first_delivered
    [queue] = a.peering.outgoing.values()
    queue.purging = True  # as while a purge is written: the forgetter leaves the queue alone
    deadletter_and_journal = 0x03  # MQMSG_DEADLETTER | MQMSG_JOURNAL: a copy awaits confirmation
    await a.send(b.remote(QUEUE), [b"delivered"], journal=deadletter_and_journal)
    await wait_until(lambda: bool(queue.to_forget), what="the OrderAck")
    assert await queue.purge() == 0
    ordinal = b.messages(QUEUE)[-1].ordinal
    [copy] = a.store.confirmations(ordinal)
    assert copy.delivered  # waits for its FinalAck, not purged
    await wait_until(settled(a), what="nothing left to send or forget")
    await a.send(b.remote(QUEUE), [b"after"])
    await deliver(a, b, [b"first", b"delivered", b"after"])


@pytest.mark.parametrize(
    ("listen", "written"),
    [
        ("10.55.0.1:1801", "TCP:10.55.0.1\\private$\\acks"),
        ("10.55.0.1:28001", "TCP:10.55.0.1:28001\\private$\\acks"),
        ("[FD55:0::1]:28001", "TCP:[fd55::1]:28001\\private$\\acks"),
        ("[fd55::1]:1801", "TCP:[fd55::1]\\private$\\acks"),
        ("qm-a.example:28001", "OS:qm-a.example:28001\\private$\\acks"),  # TCP: takes addresses
        ("0.0.0.0:28001", "OS:qm-a:28001\\private$\\acks"),
        ("[::]:28001", "OS:qm-a:28001\\private$\\acks"),
        ("[fe80::1%lo]:28001", "OS:qm-a:28001\\private$\\acks"),  # a scope is this host's
    ],
)
async def test_a_local_reply_queue_is_named_as_the_destination_reaches_back(
    network: Network, autojump_clock: trio.testing.MockClock, listen: str, written: str
) -> None:
    """An admin or response queue here travels as a direct name the destination can
    use: the address this queue manager listens on, the host name it listens on, or
    its name when it listens on every address."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"x"])
    [queue] = a.peering.outgoing.values()
    config = dataclasses.replace(queue.parts.config, listen=Address.parse(listen, what="listen"))
    queue.parts = dataclasses.replace(queue.parts, config=config)
    for text in ("acks", ".\\private$\\acks", "DIRECT=OS:.\\private$\\acks"):
        reply = queue._wire_queue(text)
        assert isinstance(reply, wire.DirectQueue)
        assert reply.name == written


@pytest.mark.parametrize(
    ("listen", "aliases", "written"),
    [
        ("0.0.0.0:1801", ["203.0.113.5:11801"], "TCP:203.0.113.5:11801\\private$\\acks"),
        ("[::]:28001", ["qm1.example.net", "x:1"], "OS:qm1.example.net:28001\\private$\\acks"),
        ("0.0.0.0:28001", ["[2001:db8::5]:1801"], "TCP:[2001:db8::5]\\private$\\acks"),
        # Listening on one address, the aliases are names besides it.
        ("10.55.0.1:28001", ["203.0.113.5:11801"], "TCP:10.55.0.1:28001\\private$\\acks"),
        # Names its own clients use, which no other host reaches, are passed over.
        (
            "0.0.0.0:28001",
            ["localhost", "127.0.0.1", "[::1]:5", "[fe80::1]:7", "qm1.example.net"],
            "OS:qm1.example.net:28001\\private$\\acks",
        ),
        ("0.0.0.0:28001", ["localhost", "127.0.0.2:9"], "OS:qm-a:28001\\private$\\acks"),
    ],
)
async def test_listening_everywhere_a_reply_queue_names_the_first_alias(
    network: Network,
    autojump_clock: trio.testing.MockClock,
    listen: str,
    aliases: list[str],
    written: str,
) -> None:
    """Behind a port map or a NAT (a container listening on every address), the
    destination reaches this queue manager back by the name peers reach it by
    (``server.aliases``), not by a host name only it knows."""
    a, b = await start_pair(network)
    await a.send(b.remote(QUEUE), [b"x"])
    [queue] = a.peering.outgoing.values()
    config = dataclasses.replace(
        queue.parts.config,
        listen=Address.parse(listen, what="listen"),
        aliases=tuple(split_host_port(alias) for alias in aliases),
    )
    queue.parts = dataclasses.replace(queue.parts, config=config)
    reply = queue._wire_queue("acks")
    assert isinstance(reply, wire.DirectQueue)
    assert reply.name == written


async def test_entries_appended_while_a_purge_is_written_are_sent_after_it(
    first_delivered: tuple[Node, Node],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transaction that commits while a purge is written, and that the queue
    loads before the purge's answer comes back, is not purged: the store keeps
    it, and so must the queue, or it would wait unsent while later messages
    overtook it (and after a restart, the destination would take it for a
    duplicate of what it already has)."""
    a, b = first_delivered
    [queue] = a.peering.outgoing.values()
    await queue.set_paused(True)
    await a.send(b.remote(QUEUE), [b"purged"])
    submit = a.committer.submit

    async def send_during_the_purge(unit: storage.Unit) -> storage.UnitOutcome:
        outcome = await submit(unit)
        if any(isinstance(op, storage.PurgeQueue) for op in unit.ops):
            await a.send(b.remote(QUEUE), [b"after-1", b"after-2"])
            queue.fill()  # as the link does when it looks for the next packet
        return outcome

    monkeypatch.setattr(a.committer, "submit", send_during_the_purge)
    assert await queue.purge() == 1
    monkeypatch.setattr(a.committer, "submit", submit)
    loaded = [queue.payloads.get(lookup_id, queue._read) for lookup_id in queue.payloads]
    assert sorted(bytes(p)[-7:] for p in loaded if p is not None) == [b"after-1", b"after-2"]
    await queue.set_paused(False)
    await a.send(b.remote(QUEUE), [b"later"])
    await deliver(a, b, [b"first", b"after-1", b"after-2", b"later"])
    await wait_until(settled(a), what="nothing left to send or forget")


async def test_purges_of_one_queue_are_written_one_at_a_time(
    first_delivered: tuple[Node, Node],
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The forgetter and the expirer leave a queue alone while a purge is written:
    a second purge at the same time waits for the first, so that the queue counts
    as being purged until both are done."""
    a, b = first_delivered
    [queue] = a.peering.outgoing.values()
    await queue.set_paused(True)
    await a.send(b.remote(QUEUE), [b"purged"])
    submit = a.committer.submit
    writing: list[bool] = []

    async def slow_purge(unit: storage.Unit) -> storage.UnitOutcome:
        if any(isinstance(op, storage.PurgeQueue) for op in unit.ops):
            assert queue.purging
            writing.append(True)
            assert len(writing) == 1, "two purges written at once"
            await trio.sleep(1)
            writing.pop()
        return await submit(unit)

    monkeypatch.setattr(a.committer, "submit", slow_purge)
    counts: list[int] = []

    async def purge() -> None:
        counts.append(await queue.purge())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(purge)
        nursery.start_soon(purge)
    assert sorted(counts) == [0, 1]
    assert not queue.purging


async def test_after_a_crash_what_may_have_gone_out_is_unacknowledged_loaded_or_not(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A crash leaves no mark of what went out: every entry the queue held may be at
    its destination, so none is shown waiting to go for the first time, including
    those beyond what is loaded (the documented check before moving an address)."""
    a = await network.start("qm-a", 1901)
    away = network.node("qm-c", 1903)  # never started: nothing answers there
    count = 3000
    await a.send(away.remote(QUEUE), bodies(count))
    [queue] = a.peering.outgoing.values()
    assert (queue.info().waiting, queue.info().unacknowledged) == (count, 0)
    await a.stop()
    await a.start()
    [queue] = a.peering.outgoing.values()
    assert len(queue.machine) < count  # loaded in chunks
    assert (queue.info().waiting, queue.info().unacknowledged) == (0, count)


async def test_large_messages_for_a_peer_that_is_down_hold_a_bounded_memory(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    # Past the budget, an entry is loaded without its payload, which is read from
    # the store to be sent (and again to be resent, after B's restart).
    a, b = await start_pair(network)
    await b.stop()
    large = [bytes([i]) * 300_000 for i in range(1, 13)]  # 3.6 MB in all
    await a.send(b.remote(QUEUE), large)
    [queue] = a.peering.outgoing.values()
    await wait_until(lambda: len(queue.payloads) == len(large), what="A loads them all")
    assert queue.payloads.kept_bytes <= PAYLOAD_BUDGET
    await b.start()
    await deliver(a, b, large)
    assert queue.payloads.kept_bytes == 0
