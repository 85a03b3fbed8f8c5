"""The requests of messages and transactions: Begin, Send, Receive, CancelReceive,
PeekRange, Commit, Abort.

These are the hot requests: a client pipelines ``Begin``, its ``Send``\\ s and
``Commit`` in one write, and only the commit waits (for the committer's
synced batch). A Begin with a client-chosen id and a Send in a transaction
are answered only if they fail.

A receive that finds a free message answers at once (in a transaction, or
a peek) or after its removal is written (outside a transaction: the message
is removed durably before it is returned). One that finds its queue empty
waits in a task of its own in the connection's nursery, woken by the
queue's signal, so that the requests behind it are still served; waiting
receives are bounded per connection, and a transaction has at most one.
A CancelReceive from the client stops one from waiting: it is answered as
at its timeout, unless a sender's write is already handing it a message,
which it then answers with (the client returns that message rather than
lose it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Final

import trio

import storage
from qmgr.core.engine import PreparedSend
from qmgr.core.errors import (
    InvalidArgument,
    LimitExceeded,
    QueueManagerError,
    ShuttingDown,
    TransactionAborted,
    TransactionUsageError,
)
from qmgr.core.permissions import Right
from qmgr.core.sends import SendMode
from qmgr.core.transactions import Transaction
from storage import QueueRecord
from wire import client as cf

from ..handover import WaitingReceive
from ..needs import OPEN, SEND_RIGHTS, QueueRight
from ..registry import Registry
from ..request_context import RequestContext, settled_failure
from .replies import counters_trailer, message_frame

__all__ = ["HANDLERS"]

HANDLERS: Final = Registry()

#: Send modes by their number on the wire.
_SEND_MODES: Final = tuple(SendMode)
#: Bytes a PeekRange reply leaves free below the frame limit.
_PEEK_RANGE_SLACK: Final = 64 * 1024
_NO_WAIT: Final = 0


# ---------------------------------------------------------------------- transactions


@HANDLERS.handles(cf.Begin, need=OPEN)
def begin(ctx: RequestContext, request_id: int, request: cf.Begin) -> None:
    """Open a transaction (see ``RequestContext.open_transaction``)."""
    ctx.open_transaction(request_id, request.tx_id, None)


@HANDLERS.handles(cf.Abort, need=OPEN)
def abort(ctx: RequestContext, request_id: int, request: cf.Abort) -> None:
    """Forget the transaction's sends and release what it received."""
    # One whose Begin was refused is not open: "not found", as it always was.
    ctx.refused.pop(request.tx_id, None)
    tx = ctx.transaction(request.tx_id)
    del ctx.transactions[request.tx_id]
    ctx.cancel_waits(request.tx_id)
    ctx.abort(tx)
    ctx.log.debug("transaction_aborted", tx=request.tx_id, reason="by client")
    ctx.reply_bytes(cf.encode_ok(request_id))


@HANDLERS.handles(cf.Commit, need=OPEN)
async def commit(ctx: RequestContext, request_id: int, request: cf.Commit) -> None:
    """Write the transaction as one atomic unit; answer once it is synced."""
    tx_id = request.tx_id
    tx = ctx.idle_transaction(tx_id)
    del ctx.transactions[tx_id]
    services = ctx.services
    core = services.core
    log = ctx.log
    try:
        unit = core.commit(tx, wall=time.time())
    except QueueManagerError as exc:
        ctx.abort(tx)
        log.info("transaction_aborted", tx=tx_id, reason=exc.message)
        raise

    def failed(exc: BaseException) -> QueueManagerError:
        woken, failure = core.commit_failed(tx, exc)
        services.signals.notify(woken)
        log.warning("transaction_aborted", tx=tx_id, reason=failure.message)
        return failure

    unit, claims = services.handover.claim(unit)
    if claims:
        outcome = await _write_handing(ctx, unit, claims, failed)
    else:
        outcome = await ctx.write_settled(unit, failed)
    woken, error = core.commit_done(tx, unit, outcome)
    services.signals.notify(woken)
    if error is not None:
        log.info("transaction_aborted", tx=tx_id, reason=error.message)
        raise error
    log.debug("transaction_committed", tx=tx_id, operations=len(unit.ops))
    ctx.reply_bytes(cf.encode_ok(request_id))


# ---------------------------------------------------------------------- sending


@HANDLERS.handles(cf.Send, need=SEND_RIGHTS)
def send(ctx: RequestContext, request_id: int, request: cf.Send) -> Awaitable[None] | None:
    """Send a message: kept in its transaction, or written at once (answered ``Sent``)."""
    tx = ctx.usable_transaction(request.tx_id) if request.tx_id else None
    try:
        mode = _SEND_MODES[request.mode]
    except IndexError:
        msg = f"send mode must be 0 (auto), 1 (none) or 2 (single message), not {request.mode}"
        raise InvalidArgument(msg) from None
    services = ctx.services
    core = services.core
    prepared = core.prepare_send(
        request.message, tx=tx, mode=mode, now=trio.current_time(), wall=time.time()
    )
    if core.ordinals.wanted:
        services.wake_maintenance()
    if prepared is None:
        return None
    return _send_now(ctx, request_id, prepared)


async def _write_handing(
    ctx: RequestContext,
    unit: storage.Unit,
    claims: list[tuple[int, WaitingReceive]],
    failed: Callable[[BaseException], QueueManagerError | None] | None = None,
) -> storage.UnitOutcome:
    """Write a unit that hands messages to waiting receives, then settle them
    (``handover``): before the sender's own answer and wake-ups."""
    services = ctx.services
    outcome = None
    try:
        if failed is None:
            outcome = await ctx.write(unit)
        else:
            outcome = await ctx.write_settled(unit, failed)
    finally:
        services.signals.notify(services.handover.settle(claims, outcome))
    return outcome


async def _send_now(ctx: RequestContext, request_id: int, prepared: PreparedSend) -> None:
    assert prepared.unit is not None
    services = ctx.services
    unit, claims = services.handover.claim(prepared.unit)
    outcome = await (_write_handing(ctx, unit, claims) if claims else ctx.write(unit))
    lookup_id = services.core.send_done(prepared, outcome)
    services.signals.notify(
        result.queue_id for result in outcome.results if isinstance(result, storage.Appended)
    )
    sent = cf.Sent(
        message_id=prepared.message_id,
        queue=prepared.queues[0].display_name,
        lookup_id=lookup_id,
    )
    ctx.reply(request_id, sent)


# ---------------------------------------------------------------------- receiving


#: What a receive needs: the right to receive, or to peek for a peek.
_RECEIVE_NEED: Final = QueueRight("queue", Right.RECEIVE, peek=Right.PEEK)


@HANDLERS.handles(cf.Receive, need=_RECEIVE_NEED)
def receive(ctx: RequestContext, request_id: int, request: cf.Receive) -> Awaitable[None] | None:
    """Take (or peek) a message; wait for one in a task of its own if there is none."""
    tx = ctx.usable_transaction(request.tx_id) if request.tx_id else None
    core = ctx.services.core
    queue = core.queue(request.queue)
    core.check_receive(queue, tx, peek=request.peek)
    answered = _try_receive(ctx, request_id, request, queue, tx)
    if answered is not _NOT_FOUND:
        return None if answered is _ANSWERED else answered
    if request.timeout_ms == _NO_WAIT:
        ctx.reply(request_id, cf.NoMessage())
        return None
    waiting = ctx.waiting
    if tx is not None and tx.client_id in waiting:
        msg = f"transaction {tx.client_id} already has a receive waiting"
        raise TransactionUsageError(msg)
    key = tx.client_id if tx is not None else -request_id - 1
    if key in waiting or request_id in ctx.cancels:
        # Its answer could not be told from the other's, and it would replace
        # the other in the count of waiting receives.
        msg = f"request id {request_id} is already used by a receive that waits"
        raise InvalidArgument(msg)
    limit = ctx.services.limits.max_waiting_receives
    if len(waiting) >= limit:
        msg = f"a connection may have at most {limit} receives waiting at once"
        raise LimitExceeded(msg)
    scope = trio.CancelScope()
    waiting[key] = scope
    timeout = (
        math.inf if request.timeout_ms == cf.INFINITE_TIMEOUT_MS else request.timeout_ms / 1000
    )
    wait = _Wait(trio.current_time() + timeout)
    # Registered now: a CancelReceive read with this request may come before the task runs.
    ctx.cancels[request_id] = wait.cancel
    assert ctx.nursery is not None
    ctx.nursery.start_soon(_wait_and_receive, ctx, request_id, request, tx, key, scope, wait)
    return None


def _try_receive(
    ctx: RequestContext,
    request_id: int,
    request: cf.Receive,
    queue: QueueRecord,
    tx: Transaction | None,
) -> Awaitable[None]:
    """Take (or peek) a message now if one is free.

    Returns:
        ``_ANSWERED``, ``_NOT_FOUND``, or an awaitable that writes the
        removal and then answers.
    """
    core = ctx.services.core
    if request.peek:
        peeked = core.peek(queue, lookup_id=request.lookup_id)
        if peeked is None:
            return _NOT_FOUND
        ctx.reply_bytes(message_frame(ctx, request_id, queue, *peeked))
        return _ANSWERED
    found = core.take(queue, lookup_id=request.lookup_id, tx=tx, now=trio.current_time())
    if found is None:
        return _NOT_FOUND
    if tx is not None:
        ctx.reply_bytes(message_frame(ctx, request_id, queue, *found))
        return _ANSWERED
    return _remove_and_reply(ctx, request_id, queue, *found)


async def _remove_and_reply(
    ctx: RequestContext, request_id: int, queue: QueueRecord, lookup_id: int, record: bytes
) -> None:
    """A receive outside a transaction: the message is removed durably, then returned."""
    services = ctx.services
    core = services.core

    def settle(result: storage.UnitOutcome | BaseException) -> QueueManagerError | None:
        woken, error = core.removal_done(queue.queue_id, lookup_id, result)
        services.signals.notify(woken)
        return error

    try:
        # Made first: the removal takes the message's counters with it.
        frame = message_frame(ctx, request_id, queue, lookup_id, record)
        removal = core.removal(queue, lookup_id, record, wall=time.time())
        outcome = await services.committer.submit(removal, source=ctx.conn_id)
    except BaseException as exc:
        failure = settled_failure(exc, settle)
        if failure is not None:
            raise failure from exc
        raise
    error = settle(outcome)
    if error is not None:
        raise error
    ctx.reply_bytes(frame)


@HANDLERS.handles(cf.CancelReceive, need=OPEN)
def cancel_receive(ctx: RequestContext, request_id: int, request: cf.CancelReceive) -> None:
    """Stop the named receive of this connection from waiting, if it still
    does; never answered (the receive is)."""
    cancel = ctx.cancels.get(request.request_id)
    if cancel is not None:
        cancel()


@dataclass(slots=True, eq=False)
class _Wait:
    """When a waiting receive stops waiting: its deadline, or a CancelReceive."""

    deadline: float
    #: The wait in progress, if any (a CancelReceive ends it).
    scope: trio.CancelScope | None = None
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()

    async def until(self, wait_for: Callable[[], Awaitable[object]]) -> bool:
        """Await ``wait_for()`` until the deadline or a cancel; True if one ended it."""
        with trio.move_on_at(self.deadline) as scope:
            self.scope = scope
            await wait_for()
        self.scope = None
        return scope.cancelled_caught


async def _wait_and_receive(
    ctx: RequestContext,
    request_id: int,
    request: cf.Receive,
    tx: Transaction | None,
    key: int,
    scope: trio.CancelScope,
    wait: _Wait,
) -> None:
    if tx is not None:
        tx.waiting += 1
    with scope:
        try:
            answered = await _wait_loop(ctx, request_id, request, tx, wait)
        except QueueManagerError as exc:
            ctx.failed(request_id, request, exc)
            answered = True
        finally:
            ctx.waiting.pop(key, None)
            if ctx.cancels.get(request_id) == wait.cancel:
                del ctx.cancels[request_id]
            if tx is not None:
                tx.waiting -= 1
                tx.last_activity = trio.current_time()
        if not answered:
            ctx.reply(request_id, cf.NoMessage())
    if scope.cancelled_caught:
        if ctx.closing:
            return
        why = f": {tx.abort_reason}" if tx is not None and tx.abort_reason else ""
        message = f"transaction {key} was aborted while this receive waited{why}"
        ctx.reply_error(request_id, TransactionAborted(message))
    await ctx.flush()


async def _wait_loop(
    ctx: RequestContext,
    request_id: int,
    request: cf.Receive,
    tx: Transaction | None,
    wait: _Wait,
) -> bool:
    services = ctx.services
    handover = services.handover
    # A receive that waits in line for any message (outside a transaction, not a
    # peek, not by lookup id) is woken alone, the first of its queue's line: the
    # queue it was woken on until it has looked, so that the turn is passed on
    # if it stops waiting without looking (``handover``: one wakes at a time).
    in_line = tx is None and not request.peek and not request.lookup_id
    woken: int | None = None
    looked = False
    try:
        while True:
            if ctx.output_room is not None and ctx.output_busy():
                # Its answer waits for the replies before it to be written: a
                # client that does not read holds back only its own receives.
                if woken is not None:
                    # Woken, it cannot look now: the next in line looks instead.
                    handover.pass_on(woken)
                    woken = None
                if await wait.until(ctx.output_room):
                    return False
            if wait.cancelled:
                return False
            refused = ctx.refusal(request, _RECEIVE_NEED)  # a right revoked while it waited
            if refused is not None:
                raise refused
            queue = services.core.queue(request.queue)
            event = services.signals.event(queue.queue_id)
            if tx is not None:
                tx = ctx.usable_transaction(tx.client_id)
            answered = _try_receive(ctx, request_id, request, queue, tx)
            woken = None
            if answered is not _NOT_FOUND:
                if in_line:
                    handover.pass_on(queue.queue_id)  # there may be more: the next looks
                if answered is not _ANSWERED:
                    await answered
                return True
            if services.stopping:
                msg = "the queue manager is shutting down"
                raise ShuttingDown(msg)
            if not in_line:
                if await wait.until(event.wait):
                    return False
                continue
            waiting = handover.wait(
                queue,
                event,
                lambda: ctx.closing or wait.cancelled or ctx.output_busy(),
                first=looked,
            )
            looked = True
            try:
                ended = await wait.until(waiting.wake.wait)
                while waiting.claimed:
                    # A sender's write on its way may hand it the message: that
                    # write decides, past the deadline too (a claim released puts
                    # it back in line, where another may claim it before this task
                    # runs: ``settled`` is renewed for each).
                    await waiting.settled.wait()
            finally:
                handover.leave(waiting)
                if waiting.wake.is_set() and not waiting.handed:
                    woken = queue.queue_id  # its turn to look
            if waiting.handed:
                record = waiting.record
                ctx.reply_bytes(message_frame(ctx, request_id, queue, waiting.lookup_id, record))
                return True
            if ended:
                return False
    finally:
        if woken is not None:
            # Woken, it stops waiting without looking: the next in line looks.
            handover.pass_on(woken)


class _Answer:
    """An awaitable that is never awaited: what ``_try_receive`` says without a write."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:  # pragma: no cover - never awaited
        yield from ()


_ANSWERED: Final = _Answer()
_NOT_FOUND: Final = _Answer()


# ---------------------------------------------------------------------- peek range


@HANDLERS.handles(cf.PeekRange, need=QueueRight("queue", Right.PEEK))
def peek_range(ctx: RequestContext, request_id: int, request: cf.PeekRange) -> None:
    """The visible messages after a LookupId, as many as fit in one frame."""
    core = ctx.services.core
    queue = core.queue(request.queue)
    limit = max(0, min(request.max_count, ctx.services.limits.max_peek_range))
    found = core.ranges.peek_range(queue, after=request.after, limit=limit)
    name = queue.display_name.encode("utf-8")
    parts: list[bytes | memoryview] = []
    count = 0
    size = 0
    if ctx.counted:  # room for the counters trailer (version 5)
        size = len(cf.counters_record(cf.MessageCounters())) * len(found)
    for lookup_id, record in found:
        payload = storage.message_payload(record)
        entry = cf.queued_message_parts(
            name, lookup_id, storage.message_arrived_time(record), payload
        )
        size += sum(len(part) for part in entry)
        if count and size > cf.MAX_FRAME_BODY - _PEEK_RANGE_SLACK:
            break  # the client asks again from the last LookupId it got
        parts.extend(entry)
        count += 1
    trailer = counters_trailer(ctx, queue, (lookup_id for lookup_id, _ in found[:count]))
    body = b"".join((count.to_bytes(4, "little"), *parts, trailer))
    header = (len(body), int(cf.FrameKind.MESSAGE_LIST), 0, request_id)
    ctx.reply_bytes(_frame_header(*header) + body)


def _frame_header(length: int, kind: int, flags: int, request_id: int) -> bytes:
    return (
        length.to_bytes(4, "little")
        + kind.to_bytes(2, "little")
        + flags.to_bytes(2, "little")
        + request_id.to_bytes(4, "little")
    )
