"""Two-phase requests over a session: bounds on what a reply may hold and on what a
commit reads back, races between connections that end up in one writer batch,
maintenance around prepared transactions, and a long RemoveThrough that lets
other connections in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from kit import (
    Connection,
    FrameClient,
    error,
    make_queue,
    message,
    open_connection,
    open_services,
    open_session,
)

import storage
from qmgr.core.engine import Limits
from qmgr.core.ranges import Ranges
from qmgr.server.client.handlers import two_phase
from qmgr.server.client.services import Services
from qmgr.server.workers.maintenance import PRUNE_INTERVAL, Maintenance
from wire import client as cf
from wire.client import MAX_XID_BYTES


async def test_the_longest_transaction_list_is_one_frame(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    """As many prepared transactions and outcomes as one ListTransactions may
    return, all with the longest xids: the reply must still be one frame (every
    prepared one, then the outcomes that fit), not an internal error."""
    limit = two_phase.MAX_LISTED

    def xid(kind: str, index: int) -> str:
        return f"{kind}{index:06d}".ljust(MAX_XID_BYTES, "x")

    ops: list[storage.Operation] = [
        storage.PrepareTransaction(xid("p", i), (), (), created_at=1.0) for i in range(limit)
    ]
    ops += [
        storage.RecordOutcome(xid("r", i), committed=True, resolved_at=2.0) for i in range(limit)
    ]
    outcome = await services.committer.submit(storage.Unit(tuple(ops)))
    assert outcome.error is None
    reply = await conn.client.call(cf.ListTransactions(resolved=True, max_count=limit))
    assert isinstance(reply, cf.TransactionList), reply
    states = [t.state for t in reply.transactions]
    assert states[:limit] == [cf.TransactionState.PREPARED] * limit
    assert set(states[limit:]) == {cf.TransactionState.COMMITTED}
    assert len(states) > limit + 1000
    # Listing fewer, or only the prepared ones, is not cut.
    reply = await conn.client.call(cf.ListTransactions(resolved=True, max_count=1000))
    assert isinstance(reply, cf.TransactionList)
    assert len(reply.transactions) == 2000


async def prepare_sends(client: FrameClient, tx_id: int, xid: str, *bodies: bytes) -> None:
    await client.send(
        cf.BeginGlobal(tx_id=tx_id, xid=xid),
        *(cf.Send(tx_id=tx_id, message=message("q", body)) for body in bodies),
    )
    assert isinstance(await client.call(cf.Prepare(tx_id=tx_id)), cf.Ok)


async def test_a_commit_of_many_prepared_transactions_is_bounded_in_memory(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A commit reads every send of its transactions back and appends them in one
    write: together they count against the memory budget of open transactions."""
    async with (
        open_services(tmp_path / "s", core_limits=Limits(max_uncommitted_bytes=4096)) as services,
        open_session(services) as a,
    ):
        await make_queue(a.client, "q", transactional=True)
        await prepare_sends(a.client, 1, "x1", b"a" * 1500)
        await prepare_sends(a.client, 2, "x2", b"b" * 1500)
        await prepare_sends(a.client, 3, "x3", b"c" * 1500)
        refused = await a.client.call(cf.Resolve(commit=True, xids=("x1", "x2", "x3")))
        assert "commit fewer at once" in error(refused, cf.ErrorCode.LIMIT_EXCEEDED).message
        assert services.core.two_phase.prepared_count == 3
        assert services.core.uncommitted.in_use == 0
        # Fewer at once, and aborts (which append nothing), go through.
        reply = await a.client.call(cf.Resolve(commit=True, xids=("x1", "x2")))
        assert reply == cf.Resolutions(outcomes=(1, 1))
        reply = await a.client.call(cf.Resolve(commit=False, xids=("x3", "x1")))
        error(reply, cf.ErrorCode.TRANSACTION_COMMITTED)  # x1 was committed: none is aborted
        assert await a.client.call(cf.Resolve(commit=False, xids=("x3",))) == cf.Resolutions(
            outcomes=(3,)
        )
        assert services.core.uncommitted.in_use == 0
        assert services.core.two_phase.prepared_count == 0


async def test_the_same_xid_resolved_from_two_connections_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        open_services(tmp_path / "s") as services,
        open_session(services) as a,
        open_session(services) as b,
    ):
        await make_queue(a.client, "q", transactional=True)
        await prepare_sends(a.client, 1, "x1", b"one")
        replies: list[cf.FrameValue] = []

        async def resolve(client: FrameClient) -> None:
            replies.append(await client.call(cf.Resolve(commit=True, xids=("x1",))))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(resolve, a.client)
            nursery.start_soon(resolve, b.client)
        assert sorted(replies, key=repr) == [
            cf.Resolutions(outcomes=(int(cf.Resolution.COMMITTED),)),
            cf.Resolutions(outcomes=(int(cf.Resolution.ALREADY_COMMITTED),)),
        ]
        peeked = await a.client.call(cf.PeekRange(queue="q"))
        assert isinstance(peeked, cf.MessageList)
        assert len(peeked.messages) == 1
        error(
            await b.client.call(cf.Resolve(commit=False, xids=("x1",))),
            cf.ErrorCode.TRANSACTION_COMMITTED,
        )


async def test_maintenance_neither_aborts_nor_polls_a_prepared_transaction(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A prepared transaction holding a purged message may stay in doubt for days:
    the idle sweeper leaves it alone, and erasing waits for its resolution
    instead of writing an empty step every second."""
    async with open_connection(tmp_path, idle_timeout=86400) as a:
        services = a.services
        core = services.core
        maintenance = Maintenance(
            store=core.store,
            core=core,
            committer=services.committer,
            signals=services.signals,
            wakeup=services.maintenance,
            erase_step=100,
            idle_timeout=5.0,
        )
        await make_queue(a.client, "q", transactional=True)
        assert isinstance(await a.client.call(cf.Send(message=message("q", b"held"))), cf.Sent)
        await a.client.send(cf.BeginGlobal(tx_id=1, xid="x1"))
        received = await a.client.call(cf.Receive(queue="q", tx_id=1))
        assert isinstance(received, cf.MessageReply)
        assert isinstance(await a.client.call(cf.Prepare(tx_id=1)), cf.Ok)
        # Held by the prepared transaction: left to it, not counted.
        assert await a.client.call(cf.PurgeQueue(name="q")) == cf.Ok(value=0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(maintenance.run)
            await trio.sleep(1.0)
            batches = services.committer.batches
            await trio.sleep(3600.0)
            # Only the pruner's minutely steps were written, not an erase step a second.
            assert services.committer.batches - batches <= 3600 / PRUNE_INTERVAL + 1
            assert core.two_phase.prepared_count == 1
            assert list(core.store.queues_to_erase()) == [core.queue("q").queue_id]
            reply = await a.client.call(cf.Resolve(commit=False, xids=("x1",)))
            assert reply == cf.Resolutions(outcomes=(int(cf.Resolution.ABORTED),))
            await trio.testing.wait_all_tasks_blocked()  # woken, maintenance erases it
            assert list(core.store.queues_to_erase()) == []
            nursery.cancel_scope.cancel()
        assert await a.client.call(cf.PeekRange(queue="q")) == cf.MessageList(messages=())


async def test_a_long_remove_through_lets_other_connections_in_between_its_steps(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(two_phase, "REMOVE_STEP", 1)
    steps: list[int] = []
    started = trio.Event()
    real_step = Ranges.removal_step

    def step(*args: Any, **kwargs: Any) -> Any:
        steps.append(1)
        started.set()
        return real_step(*args, **kwargs)

    monkeypatch.setattr(Ranges, "removal_step", step)
    async with (
        open_services(tmp_path / "s") as services,
        open_session(services) as a,
        open_session(services) as b,
    ):
        assert isinstance(await a.client.call(cf.CreateQueue(name="q")), cf.Ok)
        for index in range(40):
            await a.client.send(cf.Send(message=message("q", bytes([index]))))
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(1.0)  # both connections quiet: each step is written at once
        async with trio.open_nursery() as nursery:
            removed: list[cf.FrameValue] = []

            async def remove() -> None:
                removed.append(await a.client.call(cf.RemoveThrough(queue="q", lookup_id=40)))

            nursery.start_soon(remove)
            await started.wait()
            assert isinstance(await b.client.call(cf.ListQueues()), cf.QueueList)
            assert len(steps) < 40  # answered while the removal went on
        assert removed == [cf.Ok(value=40)]


async def test_a_prepared_transaction_outlives_its_connection(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    with structlog.testing.capture_logs() as logs:
        async with open_session(services) as a:
            await make_queue(a.client, "q", transactional=True)
            await prepare_sends(a.client, 1, "x1", b"one", b"two")
        await trio.testing.wait_all_tasks_blocked()
        assert services.core.two_phase.prepared_count == 1
        async with open_session(services) as b:
            listed = await b.client.call(cf.ListTransactions())
            assert isinstance(listed, cf.TransactionList)
            [info] = listed.transactions
            assert (info.xid, info.state, info.sends) == ("x1", cf.TransactionState.PREPARED, 2)
            committed = await b.client.call(cf.Resolve(commit=True, xids=("x1",)))
            assert committed == cf.Resolutions(outcomes=(int(cf.Resolution.COMMITTED),))
            page = await b.client.call(cf.PeekRange(queue="q"))
            assert isinstance(page, cf.MessageList)
            assert [m.message.body for m in page.messages] == [b"one", b"two"]
    events = [e["event"] for e in logs if e["event"].startswith("transaction")]
    assert events == ["transaction_prepared", "transactions_committed"]


async def test_a_doomed_transaction_is_aborted_by_its_prepare(
    conn: Connection, services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q", transactional=True)
    await conn.client.send(
        cf.BeginGlobal(tx_id=1, xid="x1"),
        cf.Send(tx_id=1, message=message("q", b"fine")),
        cf.Send(tx_id=1, message=message("missing", b"lost")),
    )
    failed = await conn.client.reply()
    assert failed is not None
    error(failed.value, cf.ErrorCode.QUEUE_NOT_FOUND)
    with structlog.testing.capture_logs() as logs:
        error(await conn.client.call(cf.Prepare(tx_id=1)), cf.ErrorCode.QUEUE_NOT_FOUND)
    assert [e["event"] for e in logs] == ["transaction_aborted"]
    assert services.core.two_phase.prepared_count == 0
    assert len(services.core.transactions) == 0
    error(await conn.client.call(cf.Prepare(tx_id=1)), cf.ErrorCode.TRANSACTION_NOT_FOUND)


async def test_measure_range_says_where_the_next_messages_end(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    await make_queue(conn.client, "q")
    for body in (b"1", b"2", b"3"):
        await conn.client.send(cf.Send(message=message("q", body)))
    measured = await conn.client.call(cf.MeasureRange(queue="q", after=1, max_count=5))
    assert isinstance(measured, cf.RangeInfo)
    assert (measured.count, measured.last) == (2, 3)
    removed = await conn.client.call(cf.RemoveThrough(queue="q", lookup_id=2))
    assert removed == cf.Ok(value=2)
    measured = await conn.client.call(cf.MeasureRange(queue="q"))
    assert isinstance(measured, cf.RangeInfo)
    assert (measured.count, measured.last) == (1, 3)
