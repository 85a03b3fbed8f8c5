"""A connection's request context: its transactions (ids, bounds, the daemon's aborts,
doom), and its writes through the committer (errors translated, holds settled).

Most tests drive a :class:`RequestContext` directly with a recording outbox;
those about what the client sees go through a session (``conn``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from kit import Connection, error, limits, open_connection, open_services

import storage
from qmgr.core.errors import (
    InvalidArgument,
    LimitExceeded,
    QueueManagerError,
    StoreFull,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
)
from qmgr.server.client.request_context import ABORTED_REMEMBERED, RequestContext, store_failure
from qmgr.server.client.services import Services
from wire import client as cf


@dataclass
class Outbox:
    """What a context put in its outbox."""

    frames: list[Any] = field(default_factory=list)
    flushes: int = 0

    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        self.frames.append((request_id, value))

    def reply_bytes(self, frame: bytes) -> None:
        self.frames.append(frame)

    async def flush(self) -> None:
        self.flushes += 1


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


def context_of(services: Services, outbox: Outbox) -> RequestContext:
    """A context on ``services`` that replies into ``outbox``."""
    return RequestContext(
        services,
        conn_id=1,
        log=structlog.get_logger("test"),
        reply=outbox.reply,
        reply_bytes=outbox.reply_bytes,
        flush=outbox.flush,
    )


@pytest.fixture
async def ctx(services: Services, outbox: Outbox) -> AsyncIterator[RequestContext]:
    context = context_of(services, outbox)
    yield context
    context.abort_all("test over")


@asynccontextmanager
async def limited_context(path: Path, **changes: Any) -> AsyncIterator[RequestContext]:
    """A context on services of their own in ``path``, whose connection limits
    have ``changes`` (``max_transactions=2``, ...); its transactions are aborted
    when it ends."""
    async with open_services(path, limits=limits(**changes)) as services:
        context = context_of(services, Outbox())
        yield context
        context.abort_all("test over")


def decode(frame: bytes) -> cf.Frame:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(frame)
    decoded = decoder.next_frame()
    assert decoded is not None
    return decoded


async def test_the_daemon_chooses_ids_above_the_clients_range(
    ctx: RequestContext, outbox: Outbox
) -> None:
    ctx.open_transaction(5, 0, None)
    ctx.open_transaction(6, 0, None)
    ids = [decode(frame).value for frame in outbox.frames]
    assert ids == [cf.Ok(value=cf.CLIENT_TX_ID_LIMIT), cf.Ok(value=cf.CLIENT_TX_ID_LIMIT + 1)]
    assert set(ctx.transactions) == {cf.CLIENT_TX_ID_LIMIT, cf.CLIENT_TX_ID_LIMIT + 1}


async def test_a_client_chosen_id_is_answered_only_if_it_fails(
    ctx: RequestContext, outbox: Outbox
) -> None:
    ctx.open_transaction(1, 9, None)
    assert outbox.frames == []
    assert ctx.transactions[9].owner is ctx  # the sweeper calls ctx.end_transaction
    with pytest.raises(TransactionUsageError, match="already in use"):
        ctx.open_transaction(2, 9, None)
    with pytest.raises(InvalidArgument, match="reserved for the queue manager"):
        ctx.open_transaction(3, cf.CLIENT_TX_ID_LIMIT, None)


async def test_open_transactions_per_connection_are_bounded(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with limited_context(tmp_path / "s", max_transactions=2) as context:
        context.open_transaction(1, 1, None)
        context.open_transaction(2, 2, "xid")
        with pytest.raises(LimitExceeded, match="at most 2 open transactions"):
            context.open_transaction(3, 3, None)
        # Its sends and receives came unanswered behind the Begin: the first
        # to name it learns why it is not open, once.
        with pytest.raises(LimitExceeded) as refused:
            context.transaction(3)
        assert str(refused.value) == (
            "transaction 3 could not begin: a connection may have at most 2 open "
            "transactions; commit or abort some"
        )
        with pytest.raises(TransactionNotFound, match="not open on this connection"):
            context.transaction(3)
        for tx_id in range(4, 4 + ABORTED_REMEMBERED + 1):
            with pytest.raises(LimitExceeded):
                context.open_transaction(tx_id, tx_id, None)
        assert len(context.refused) == ABORTED_REMEMBERED  # the oldest went first
        context.abort_all("test over")
        assert context.refused == {}


async def test_a_refused_begin_of_an_id_aborted_before_says_why_it_was_refused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with limited_context(tmp_path / "s", max_transactions=1) as context:
        context.open_transaction(1, 1, None)
        context.end_transaction(context.transactions[1], "idle timeout")
        context.open_transaction(2, 2, None)  # the one allowed
        with pytest.raises(LimitExceeded):
            context.open_transaction(3, 1, None)  # Begin(1) again: refused
        with pytest.raises(LimitExceeded, match="could not begin"):
            context.transaction(1)  # its pipelined send, not the old abort
        with pytest.raises(TransactionNotFound):
            context.transaction(1)


async def test_a_transaction_ended_by_the_daemon_is_reported_once(ctx: RequestContext) -> None:
    ctx.open_transaction(1, 4, None)
    tx = ctx.transactions[4]
    assert ctx.busy
    ctx.end_transaction(tx, "idle timeout")
    assert not ctx.busy
    with pytest.raises(TransactionAborted, match="transaction 4 was aborted: idle timeout"):
        ctx.transaction(4)
    with pytest.raises(TransactionNotFound, match="not open on this connection"):
        ctx.transaction(4)


async def test_the_reasons_kept_for_the_client_are_bounded(ctx: RequestContext) -> None:
    for tx_id in range(1, ABORTED_REMEMBERED + 2):
        ctx.open_transaction(tx_id, tx_id, None)
        ctx.end_transaction(ctx.transactions[tx_id], f"reason {tx_id}")
    assert len(ctx.aborted) == ABORTED_REMEMBERED
    assert 1 not in ctx.aborted  # the oldest went first
    with pytest.raises(TransactionNotFound):
        ctx.transaction(1)


async def test_a_failed_request_dooms_its_transaction_but_not_a_commit(
    ctx: RequestContext, outbox: Outbox
) -> None:
    ctx.open_transaction(1, 3, None)
    tx = ctx.transactions[3]
    ctx.failed(7, cf.Commit(tx_id=3), InvalidArgument("not this one"))
    assert tx.failure is None
    ctx.failed(8, cf.Send(tx_id=3, message=cf.MessageProperties()), InvalidArgument("bad"))
    assert isinstance(tx.failure, InvalidArgument)
    replies = [decode(frame) for frame in outbox.frames]
    assert [r.request_id for r in replies] == [7, 8]
    assert error(replies[1].value, cf.ErrorCode.INVALID_ARGUMENT).message == "bad"


async def test_a_receive_waiting_keeps_a_transaction_from_committing(ctx: RequestContext) -> None:
    ctx.open_transaction(1, 2, None)
    ctx.waiting[2] = trio.CancelScope()
    with pytest.raises(TransactionUsageError, match="still has a receive waiting"):
        ctx.idle_transaction(2)
    ctx.cancel_waits(2)
    assert ctx.waiting[2].cancel_called


async def test_a_failed_batch_is_the_cores_error(
    ctx: RequestContext, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def full(unit: storage.Unit, *, source: int = 0) -> storage.UnitOutcome:
        raise storage.StoreFull("the store is full")

    monkeypatch.setattr(services.committer, "submit", full)
    unit = storage.Unit(())
    with pytest.raises(StoreFull):
        await ctx.write(unit)
    settled: list[BaseException] = []

    def settle(exc: BaseException) -> QueueManagerError | None:
        settled.append(exc)
        return store_failure(exc)

    with pytest.raises(StoreFull) as raised:
        await ctx.write_settled(unit, settle)
    assert [type(exc) for exc in settled] == [storage.StoreFull]
    assert isinstance(raised.value.__cause__, storage.StoreFull)


async def test_a_cancelled_write_is_settled_and_stays_cancelled(
    ctx: RequestContext, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def never(unit: storage.Unit, *, source: int = 0) -> storage.UnitOutcome:
        await trio.sleep_forever()
        raise AssertionError

    monkeypatch.setattr(services.committer, "submit", never)
    settled: list[BaseException] = []

    def settle(exc: BaseException) -> QueueManagerError | None:
        settled.append(exc)
        return InvalidArgument("not this")

    with trio.move_on_after(0.01):
        await ctx.write_settled(storage.Unit(()), settle)
    assert [type(exc) for exc in settled] == [trio.Cancelled]


async def test_a_units_own_failure_is_raised_when_checked(ctx: RequestContext) -> None:
    missing = storage.Unit((storage.DeleteList("no such list"),))
    outcome = await ctx.write(missing)
    assert outcome.error is not None
    with pytest.raises(QueueManagerError):
        await ctx.write_checked(missing)


async def test_a_transaction_the_daemon_aborted_no_longer_keeps_the_connection(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_connection(tmp_path, idle_timeout=60) as a:
        await a.client.send(cf.Begin(tx_id=1))
        await trio.testing.wait_all_tasks_blocked()
        context = a.session.context
        [tx] = context.transactions.values()
        assert a.session.idle_since is None
        # What the idle-transaction sweeper does.
        context.end_transaction(tx, "idle timeout: no activity for more than 1 s")
        assert a.session.idle_since is not None  # it may be evicted now
        # The client is told why when it names the transaction again ...
        reply = error(await a.client.call(cf.Commit(tx_id=1)), cf.ErrorCode.TRANSACTION_ABORTED)
        assert "idle timeout" in reply.message
        # ... and the connection closes at its own idle timeout.
        started = trio.current_time()
        farewell = await a.client.error()
        assert "idle" in farewell.message
        assert trio.current_time() - started == pytest.approx(60, abs=1)


async def test_the_counters_come_with_version_5(conn: Connection) -> None:
    context = conn.session.context
    assert context.version == cf.PROTOCOL_VERSION
    assert context.counted
    context.version = 4
    assert not context.counted
