"""The requests of two-phase transactions and LookupId ranges.

BeginGlobal (a transaction with a global id), Prepare, Resolve (commit or
abort prepared transactions by id, from any connection), ListTransactions,
RemoveThrough and MeasureRange. The core decides (``qmgr.core.two_phase``,
``qmgr.core.ranges``); these handlers write its units and answer. A
prepared transaction leaves its connection: it survives disconnects and
restarts until it is resolved. Resolving is its preparer's (or an
administrator's), and listing shows a principal its own. A long
RemoveThrough goes in bounded steps, letting the other connections in
between them.
"""

from __future__ import annotations

import time
from typing import Final

import trio

import storage
from qmgr.core.errors import QueueManagerError
from qmgr.core.permissions import Right
from wire import client as cf

from ...signals import touched_queues
from ..needs import OPEN, PREPARER, QueueRight
from ..registry import Registry
from ..request_context import RequestContext, store_failure

__all__ = ["HANDLERS", "MAX_LISTED", "MAX_MEASURE", "REMOVE_STEP"]

HANDLERS: Final = Registry()

#: Messages one RemoveThrough step removes (one unit; other clients' commits
#: share the batches in between).
REMOVE_STEP: Final = 2048
#: Most messages one MeasureRange counts.
MAX_MEASURE: Final = 100_000
#: Resolutions that ended a prepared transaction (released what it held).
_RESOLVED_NOW: Final = frozenset({storage.Resolution.COMMITTED, storage.Resolution.ABORTED})
#: Most transactions of each kind one ListTransactions returns.
MAX_LISTED: Final = 10_000
_NO_XID: Final = cf.TransactionInfo(xid="", state=1, since=0.0, sends=0, receives=0, bytes=0)
#: Bytes of a TransactionList besides its entries' xids: the frame's, and each entry's.
_LIST_OVERHEAD: Final = len(cf.encode_frame(0, cf.TransactionList(transactions=())))
_ENTRY_OVERHEAD: Final = (
    len(cf.encode_frame(0, cf.TransactionList(transactions=(_NO_XID,)))) - _LIST_OVERHEAD
)
#: What the entries of one TransactionList may take: a reply is one frame.
_LIST_BUDGET: Final = cf.MAX_FRAME_BODY + cf.HEADER_SIZE - _LIST_OVERHEAD


# ---------------------------------------------------------------------- transactions


@HANDLERS.handles(cf.BeginGlobal, need=OPEN)
def begin_global(ctx: RequestContext, request_id: int, request: cf.BeginGlobal) -> None:
    """Open a transaction with a global id."""
    ctx.open_transaction(request_id, request.tx_id, request.xid)


@HANDLERS.handles(cf.Prepare, need=OPEN)
async def prepare(ctx: RequestContext, request_id: int, request: cf.Prepare) -> None:
    """Write what the transaction holds as prepared; it leaves the connection."""
    tx_id = request.tx_id
    tx = ctx.idle_transaction(tx_id)
    two_phase = ctx.services.core.two_phase
    log = ctx.log
    try:
        unit = two_phase.prepare(tx, time.time())
    except QueueManagerError as exc:
        if tx.failure is not None or tx.abort_reason is not None:
            # It can only abort: abort it now, as a commit would.
            del ctx.transactions[tx_id]
            ctx.abort(tx)
            log.info("transaction_aborted", tx=tx_id, xid=tx.xid, reason=exc.message)
        raise
    del ctx.transactions[tx_id]
    signals = ctx.services.signals

    def failed(exc: BaseException) -> QueueManagerError | None:
        woken, failure = two_phase.prepared(tx, unit, exc)
        signals.notify(woken)
        log.warning("transaction_aborted", tx=tx_id, xid=tx.xid, reason=str(exc))
        return failure

    outcome = await ctx.write_settled(unit, failed)
    woken, error = two_phase.prepared(tx, unit, outcome)
    signals.notify(woken)
    if error is not None:
        log.info("transaction_aborted", tx=tx_id, xid=tx.xid, reason=error.message)
        raise error
    log.info("transaction_prepared", tx=tx_id, xid=tx.xid)
    ctx.reply(request_id, cf.Ok())


@HANDLERS.handles(cf.Resolve, need=PREPARER)
async def resolve(ctx: RequestContext, request_id: int, request: cf.Resolve) -> None:
    """Commit or abort prepared transactions by id, in one atomic unit."""
    services = ctx.services
    two_phase = services.core.two_phase
    unit = two_phase.resolve(request.xids, commit=request.commit, wall=time.time())
    reserved = two_phase.reserve_for_commit(request.xids) if request.commit else 0
    try:
        outcome = await ctx.write(unit)
    finally:
        two_phase.release(reserved)
    woken, resolutions = two_phase.resolved(outcome)
    services.signals.notify(woken)
    if any(r in _RESOLVED_NOW for r in resolutions):
        services.wake_maintenance()  # purged messages they held can be erased now
    ctx.log.info(
        "transactions_committed" if request.commit else "transactions_aborted",
        xid=request.xids[0],
        count=len(request.xids),
        resolutions=[resolution.name.lower() for resolution in resolutions[:8]],
    )
    ctx.reply(request_id, cf.Resolutions(outcomes=tuple(int(r) for r in resolutions)))


@HANDLERS.handles(cf.ListTransactions, need=OPEN)
def list_transactions(ctx: RequestContext, request_id: int, request: cf.ListTransactions) -> None:
    """The prepared transactions (the principal's own), and recent outcomes if asked."""
    store = ctx.services.core.store
    limit = max(0, min(request.max_count, MAX_LISTED))
    authorization = ctx.services.authorization
    owner = None if authorization is None else authorization.owner_filter(ctx.principal)
    listed = [
        cf.TransactionInfo(
            xid=info.xid,
            state=cf.TransactionState.PREPARED,
            since=info.created_at,
            sends=info.sends,
            receives=len(info.receives),
            bytes=info.send_bytes,
        )
        for info in store.prepared_transactions(request.prefix, limit, owner=owner)
    ]
    if request.resolved:
        # The prepared ones always fit (MAX_LISTED of the longest xid); the
        # outcomes after them are as many as still fit in the frame.
        room = _LIST_BUDGET - sum(_entry_size(info.xid) for info in listed)
        for outcome in store.outcomes(request.prefix, limit, owner=owner):
            room -= _entry_size(outcome.xid)
            if room < 0:
                break
            state = (
                cf.TransactionState.COMMITTED if outcome.committed else cf.TransactionState.ABORTED
            )
            listed.append(
                cf.TransactionInfo(
                    xid=outcome.xid,
                    state=state,
                    since=outcome.resolved_at,
                    sends=0,
                    receives=0,
                    bytes=0,
                )
            )
    ctx.reply(request_id, cf.TransactionList(transactions=tuple(listed)))


def _entry_size(xid: str) -> int:
    """Bytes a TransactionList entry takes in the frame."""
    return _ENTRY_OVERHEAD + len(xid.encode("utf-8"))


# ---------------------------------------------------------------------- LookupId ranges


@HANDLERS.handles(cf.MeasureRange, need=QueueRight("queue", Right.PEEK))
def measure_range(ctx: RequestContext, request_id: int, request: cf.MeasureRange) -> None:
    """Where the next ``max_count`` visible messages end (keys only)."""
    core = ctx.services.core
    queue = core.queue(request.queue)
    limit = max(0, min(request.max_count, MAX_MEASURE))
    count, last = core.ranges.measure_range(queue, after=request.after, limit=limit)
    ctx.reply(request_id, cf.RangeInfo(queue_id=queue.queue_id, count=count, last=last))


@HANDLERS.handles(cf.RemoveThrough, need=QueueRight("queue", Right.RECEIVE))
async def remove_through(ctx: RequestContext, request_id: int, request: cf.RemoveThrough) -> None:
    """Remove every visible message up to a LookupId, in bounded steps."""
    services = ctx.services
    core = services.core
    total = 0
    while True:
        queue = core.queue(request.queue)  # QueueNotFound if deleted meanwhile
        step = core.ranges.removal_step(
            queue, through=request.lookup_id, limit=REMOVE_STEP, wall=time.time()
        )
        if step is None:
            break
        held, unit = step

        def failed(exc: BaseException) -> QueueManagerError | None:
            _, woken = core.ranges.removal_done(queue, held, exc)  # noqa: B023 - awaited at once
            services.signals.notify(woken)
            return store_failure(exc)

        outcome = await ctx.write_settled(unit, failed)
        removed, woken = core.ranges.removal_done(queue, held, outcome)
        services.signals.notify(woken | touched_queues(core.store, unit.ops))
        total += removed
        if not removed:
            break  # every removal failed: gone meanwhile; nothing more to do
        # A step written at once (no other client active) is no checkpoint: let
        # the other connections in between the steps of a long removal.
        await trio.lowlevel.checkpoint()
    ctx.log.debug("removed_through", queue=request.queue, through=request.lookup_id, count=total)
    ctx.reply(request_id, cf.Ok(value=total))
