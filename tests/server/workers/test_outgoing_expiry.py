"""Giving up outgoing entries whose time to reach the queue passed
(``qmgr.server.workers.outgoing_expiry``), on a queue manager of :mod:`peer_kit`: only what its
sequence machine never sent goes, with its reports."""

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
    [queue] = a.peering.outgoing.values()
    assert queue.machine.next_transmission(trio.current_time()) is not None  # sent
    queue.machine.connection_lost()  # waiting again, but perhaps at B
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1
    # Sent by an earlier run of the daemon, perhaps: it stays too.
    await a.stop()
    await a.start()
    assert await expire_outgoing(a.peering, due) == 0
    assert a.outgoing_queue().depth == 1
    assert a.messages("system$;deadxact") == []
