"""Two-phase requests in a client session over memory streams: what an older
protocol may not send, bounds on what a reply may hold, and races between
connections that end up in one writer batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kit import FrameClient, limits, message, open_services, open_session

import storage
from qmgr.core.engine import Limits
from qmgr.core.ranges import Ranges
from qmgr.core.two_phase import MAX_XID_BYTES
from qmgr.server import two_phase_requests
from qmgr.server.maintenance import PRUNE_INTERVAL, Maintenance
from wire import client as cf

TWO_PHASE_SAMPLES: list[cf.ClientRequest] = [
    cf.BeginGlobal(tx_id=1, xid="x"),
    cf.Prepare(tx_id=1),
    cf.Resolve(commit=True, xids=("x",)),
    cf.ListTransactions(),
    cf.RemoveThrough(queue="q", lookup_id=1),
    cf.MeasureRange(queue="q"),
]


def test_the_samples_cover_every_two_phase_request() -> None:
    assert {type(request) for request in TWO_PHASE_SAMPLES} == cf.TWO_PHASE_REQUESTS


@pytest.mark.parametrize("request_", TWO_PHASE_SAMPLES, ids=lambda r: type(r).__name__)
async def test_a_protocol_2_connection_is_refused_the_two_phase_requests(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, request_: cf.ClientRequest
) -> None:
    async with (
        open_services(tmp_path / "s") as services,
        open_session(services, greet=False) as a,
    ):
        await a.client.send(cf.Hello(client_name="old", min_version=2, max_version=2))
        hello = await a.client.reply()
        assert hello is not None
        assert isinstance(hello.value, cf.HelloOk)
        assert hello.value.version == 2
        [request_id] = await a.client.send(request_)
        frame = await a.client.reply()
        assert frame is not None
        assert frame.request_id == request_id
        assert isinstance(frame.value, cf.ErrorReply)
        assert frame.value.code == cf.ErrorCode.BAD_REQUEST
        assert "protocol version 3" in frame.value.message
        assert await a.client.reply() is None  # and the connection is closed
        assert services.core.two_phase.prepared_count == 0
        assert len(services.core.transactions) == 0


async def test_the_longest_transaction_list_is_one_frame(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """As many prepared transactions and outcomes as one ListTransactions may
    return, all with the longest xids: the reply must still be one frame (every
    prepared one, then the outcomes that fit), not an internal error."""
    limit = two_phase_requests.MAX_LISTED

    def xid(kind: str, index: int) -> str:
        return f"{kind}{index:06d}".ljust(MAX_XID_BYTES, "x")

    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        ops: list[storage.Operation] = [
            storage.PrepareTransaction(xid("p", i), (), (), created_at=1.0) for i in range(limit)
        ]
        ops += [
            storage.RecordOutcome(xid("r", i), committed=True, resolved_at=2.0)
            for i in range(limit)
        ]
        outcome = await services.committer.submit(storage.Unit(tuple(ops)))
        assert outcome.error is None
        reply = await a.client.call(cf.ListTransactions(resolved=True, max_count=limit))
        assert isinstance(reply, cf.TransactionList), reply
        states = [t.state for t in reply.transactions]
        assert states[:limit] == [cf.TransactionState.PREPARED] * limit
        assert set(states[limit:]) == {cf.TransactionState.COMMITTED}
        assert len(states) > limit + 1000
        # Listing fewer, or only the prepared ones, is not cut.
        reply = await a.client.call(cf.ListTransactions(resolved=True, max_count=1000))
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
        assert isinstance(await a.client.call(cf.CreateQueue(name="q", transactional=True)), cf.Ok)
        await prepare_sends(a.client, 1, "x1", b"a" * 1500)
        await prepare_sends(a.client, 2, "x2", b"b" * 1500)
        await prepare_sends(a.client, 3, "x3", b"c" * 1500)
        error = await a.client.call(cf.Resolve(commit=True, xids=("x1", "x2", "x3")))
        assert isinstance(error, cf.ErrorReply), error
        assert error.code == cf.ErrorCode.LIMIT_EXCEEDED
        assert "commit fewer at once" in error.message
        assert services.core.two_phase.prepared_count == 3
        assert services.core.uncommitted.in_use == 0
        # Fewer at once, and aborts (which append nothing), go through.
        reply = await a.client.call(cf.Resolve(commit=True, xids=("x1", "x2")))
        assert reply == cf.Resolutions(outcomes=(1, 1))
        reply = await a.client.call(cf.Resolve(commit=False, xids=("x3", "x1")))
        assert isinstance(reply, cf.ErrorReply)  # x1 was committed: none is aborted
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
        assert isinstance(await a.client.call(cf.CreateQueue(name="q", transactional=True)), cf.Ok)
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
        error = await b.client.call(cf.Resolve(commit=False, xids=("x1",)))
        assert isinstance(error, cf.ErrorReply)
        assert error.code == cf.ErrorCode.TRANSACTION_COMMITTED


async def test_maintenance_neither_aborts_nor_polls_a_prepared_transaction(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A prepared transaction holding a purged message may stay in doubt for days:
    the idle sweeper leaves it alone, and erasing waits for its resolution
    instead of writing an empty step every second."""
    async with (
        open_services(tmp_path / "s", limits=limits(idle_timeout=86400)) as services,
        open_session(services) as a,
    ):
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
        assert isinstance(await a.client.call(cf.CreateQueue(name="q", transactional=True)), cf.Ok)
        assert isinstance(await a.client.call(cf.Send(message=message("q", b"held"))), cf.Sent)
        await a.client.send(cf.BeginGlobal(tx_id=1, xid="x1"))
        received = await a.client.call(cf.Receive(queue="q", tx_id=1))
        assert isinstance(received, cf.MessageReply)
        assert isinstance(await a.client.call(cf.Prepare(tx_id=1)), cf.Ok)
        assert await a.client.call(cf.PurgeQueue(name="q")) == cf.Ok(value=1)
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
    monkeypatch.setattr(two_phase_requests, "REMOVE_STEP", 1)
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
