"""Giving up outgoing entries whose time to reach the queue passed
(``qmgr.server.workers.outgoing_expiry``), on a queue manager of :mod:`peer_kit`: only what its
sequence machine never sent goes, with its reports; after an orderly restart, what the last
run's marks say never went out goes too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing
from peer_kit import Network, Node, open_network

import storage
import wire
from qmgr.core.outcomes import JOURNAL_DEADLETTER
from qmgr.server.peering.outgoing_queue import OutgoingQueue, clear_sent_marks, sent_marks
from qmgr.server.workers.outgoing_expiry import expire_outgoing


@pytest.fixture
async def network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> AsyncIterator[Network]:
    async with open_network(tmp_path, monkeypatch) as net:
        net.auto_connect = False  # nothing leaves A unless a test sends it
        yield net


async def waiting_entry(network: Network) -> tuple[Node, list[storage.DueMessage]]:
    """A, with one message committed for B (which never runs); the expiry index's
    entry for it."""
    a = await network.start("qm-a", 1901)
    b = network.node("qm-b", 1902)
    await a.send(b.remote("orders"), [b"late"], journal=JOURNAL_DEADLETTER)
    queue_id = a.outgoing_queue().queue_id
    [(lookup_id, _)] = a.store.read_range(queue_id, limit=2)
    return a, [storage.DueMessage(0.0, queue_id, lookup_id)]


def send_it(a: Node) -> OutgoingQueue:
    """A's one outgoing queue, whose entry its sequence machine now sent."""
    [queue] = a.peering.outgoing.values()
    assert queue.machine.next_transmission(trio.current_time()) is not None
    return queue


async def test_an_entry_never_sent_is_given_up_with_its_reports(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, due = await waiting_entry(network)
    assert await expire_outgoing(a.peering, due) == 1
    assert a.outgoing_queue().depth == 0
    [queue] = a.peering.outgoing.values()
    assert len(queue.machine) == 0
    [dead] = a.messages("system$;deadxact")
    assert (bytes(dead.body), dead.message_class) == (
        b"late",
        wire.MessageClass.NACK_REACH_QUEUE_TIMEOUT,
    )
    assert await expire_outgoing(a.peering, due) == 0  # gone already


async def test_an_entry_the_destination_may_have_stays(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, due = await waiting_entry(network)
    send_it(a).machine.connection_lost()  # waiting again, but perhaps at B
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1
    # Sent by an earlier run of the daemon, perhaps: it stays too.
    await a.stop()
    await a.start()
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1
    assert a.messages("system$;deadxact") == []


async def restart_in_order(a: Node) -> None:
    """What an orderly stop and the next start write around the restart (the
    daemon's: each queue's mark, then their clearing before any link runs)."""
    await a.committer.submit(storage.Unit((sent_marks(a.store, a.peering.outgoing.values()),)))
    await a.stop()
    await a.start()
    assert a.peering.outgoing_queues.marks_read
    await a.committer.submit(storage.Unit((clear_sent_marks(),)))


async def test_after_an_orderly_restart_an_entry_never_sent_is_given_up(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, due = await waiting_entry(network)
    await restart_in_order(a)
    assert await expire_outgoing(a.peering, due) == 1
    assert [m.message_class for m in a.messages("system$;deadxact")] == [
        wire.MessageClass.NACK_REACH_QUEUE_TIMEOUT
    ]


async def test_after_an_orderly_restart_an_entry_that_went_out_stays(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    a, due = await waiting_entry(network)
    send_it(a)
    await restart_in_order(a)
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1


async def test_marks_serve_one_start_only(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """Cleared by the start that read them: a crash of that run leaves none, and
    every stored entry counts as perhaps sent again (that run may have sent it)."""
    a, due = await waiting_entry(network)
    await restart_in_order(a)
    await a.stop()  # a crash: no marks written
    await a.start()
    assert not a.peering.outgoing_queues.marks_read
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1


async def test_marks_are_not_used_after_another_run_came_between(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """A rollback to a release that knows no marks: it starts (raising the
    message-id limit, as every start does), may send what they call never sent,
    and leaves them; the next start must not use them."""
    a, due = await waiting_entry(network)
    await a.committer.submit(storage.Unit((sent_marks(a.store, a.peering.outgoing.values()),)))
    await a.stop()
    await a.start()  # the other release's run: it does not read the marks
    limit = a.store.ordinal_limit
    await a.committer.submit(storage.Unit((storage.ReserveOrdinals(limit + 1),)))
    send_it(a)
    await a.stop()
    await a.start()
    assert not a.peering.outgoing_queues.marks_read
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1


async def test_an_entry_behind_megabytes_of_others_is_given_up_all_the_same(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    # Only loaded entries are given up: one behind large messages that wait for
    # a hop that is down is loaded all the same, its payload left in the store.
    a = await network.start("qm-a", 1901)
    b = network.node("qm-b", 1902)  # never runs
    await a.send(b.remote("orders"), [bytes([i]) * 300_000 for i in range(1, 31)])  # 9 MB
    await a.send(b.remote("orders"), [b"late"], journal=JOURNAL_DEADLETTER, time_to_reach_queue=2)
    queue_id = a.outgoing_queue().queue_id
    late_id = a.store.read_range(queue_id, limit=100)[-1][0]
    await trio.sleep(30)  # long past its time to reach the queue; B still down
    assert await expire_outgoing(a.peering, [storage.DueMessage(0.0, queue_id, late_id)]) == 1
    [dead] = a.messages("system$;deadxact")
    assert bytes(dead.body) == b"late"
