"""The trio client's management calls against a scripted daemon (see test_blocking_admin;
their one-request rows, ``facade_cases.ADMIN``, run in test_trio)."""

from __future__ import annotations

import pytest
import trio
from fake_daemon import FakeDaemon
from wire_samples import BILLING, ORDERS

from qmgr.client import (
    NotSupported,
    QueueNotFound,
    RangeInfo,
    Resolution,
    TransactionAborted,
    TransactionCommitted,
    TransactionStatus,
    open_client,
)
from wire import client as cf


async def test_resolving_listing_and_ranges(fake_daemon: FakeDaemon) -> None:
    script = fake_daemon.two_phase
    script.prepared["a"] = (1.0, 1, 0, 10)
    script.prepared["b"] = (2.0, 0, 1, 0)
    async with open_client(fake_daemon.address) as qm:
        listed = await qm.transactions()
        assert [(t.xid, t.sends, t.receives) for t in listed] == [("a", 1, 0), ("b", 0, 1)]
        assert await qm.commit_prepared("a") is Resolution.COMMITTED
        assert await qm.abort_prepared_all(["b"]) == [Resolution.ABORTED]
        assert await qm.commit_prepared_all([]) == []
        with pytest.raises(TransactionCommitted):
            await qm.abort_prepared("a")
        with pytest.raises(TransactionAborted):
            await qm.commit_prepared_all(["b"])
        assert await qm.abort_prepared("b") is Resolution.ALREADY_ABORTED
        resolved = await qm.transactions(resolved=True)
        assert [(t.xid, t.state) for t in resolved] == [
            ("a", TransactionStatus.COMMITTED),
            ("b", TransactionStatus.ABORTED),
        ]
        assert await qm.measure_range("orders", after=3) == RangeInfo(queue_id=7, count=4, last=12)
        assert await qm.remove_through("orders", 9) == 4
        with pytest.raises(QueueNotFound):
            await qm.measure_range("nowhere")
    assert fake_daemon.requests_of(cf.ListTransactions)[1] == cf.ListTransactions(resolved=True)


async def test_outgoing_calls(fake_daemon: FakeDaemon) -> None:
    async with open_client(fake_daemon.address) as qm:
        listed = await qm.outgoing()
        assert [q.destination for q in listed] == [ORDERS, BILLING]
        assert (await qm.pause_outgoing(BILLING)).state == "paused"
        assert (await qm.resume_outgoing(BILLING)).state == "connecting"
        assert await qm.purge_outgoing(ORDERS) == 12
        with pytest.raises(QueueNotFound):
            await qm.resume_outgoing("nowhere")
        async with trio.open_nursery() as nursery:  # several tasks share the client
            for _ in range(3):
                nursery.start_soon(qm.outgoing)
        status = await qm.status()
    assert status.outgoing[0].waiting == 0
    assert status.incoming[0].reject_count == 2
    controls = fake_daemon.requests_of(cf.ControlOutgoing)
    assert [(c.action, c.destination) for c in controls] == [
        (1, BILLING),
        (2, BILLING),
        (3, ORDERS),
        (2, "nowhere"),
    ]
    assert len(fake_daemon.requests_of(cf.ListOutgoing)) == 4


async def test_calls_say_when_peering_is_not_running(fake_daemon: FakeDaemon) -> None:
    fake_daemon.peering.running = False
    async with open_client(fake_daemon.address) as qm:
        with pytest.raises(NotSupported):
            await qm.pause_outgoing(ORDERS)
        assert (await qm.status()).outgoing == ()
