"""The client requests of two-phase transactions and LookupId ranges.

Begin with a global id, Prepare, Resolve (commit or abort prepared
transactions by id, from any connection), ListTransactions, RemoveThrough
and MeasureRange. The core decides (``qmgr.core.two_phase``,
``qmgr.core.ranges``); these handlers write its units through the
committer and answer, in the same pattern as ``requests``. A connection
that negotiated a version before ``TWO_PHASE_VERSION`` is refused these
frames by the session.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog
import trio

import storage
from qmgr.core.errors import QueueManagerError, TransactionUsageError, from_store_error
from qmgr.core.outcomes import touched_queues
from qmgr.core.permissions import Principal
from qmgr.core.transactions import Transaction
from wire import client as cf

from .services import Services

__all__ = ["TwoPhaseRequests"]

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


class TwoPhaseRequests(abc.ABC):
    """The two-phase and range request handlers of a client session."""

    services: Services
    log: structlog.typing.FilteringBoundLogger
    conn_id: int
    _principal: Principal | None
    _transactions: dict[int, Transaction]
    _waiting: dict[int, trio.CancelScope]

    @abc.abstractmethod
    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply."""

    @abc.abstractmethod
    def transaction(self, tx_id: int) -> Transaction:
        """The open transaction this connection calls ``tx_id``."""

    @abc.abstractmethod
    def open_transaction(self, request_id: int, tx_id: int, xid: str | None) -> None:
        """Begin a transaction (see ``requests``)."""

    def two_phase_handlers(self) -> dict[type[Any], Callable[[int, Any], Awaitable[None] | None]]:
        """The handler of each two-phase or range request class."""
        return {
            cf.BeginGlobal: self._begin_global,
            cf.Prepare: self._prepare,
            cf.Resolve: self._resolve,
            cf.ListTransactions: self._list_transactions,
            cf.RemoveThrough: self._remove_through,
            cf.MeasureRange: self._measure_range,
        }

    async def _submit(self, unit: storage.Unit) -> storage.UnitOutcome:
        try:
            return await self.services.committer.submit(unit, source=self.conn_id)
        except storage.StoreError as exc:
            raise from_store_error(exc) from exc

    # ------------------------------------------------------------------ transactions

    def _begin_global(self, request_id: int, request: cf.BeginGlobal) -> None:
        self.open_transaction(request_id, request.tx_id, request.xid)

    async def _prepare(self, request_id: int, request: cf.Prepare) -> None:
        tx_id = request.tx_id
        tx = self.transaction(tx_id)
        if tx_id in self._waiting:
            msg = f"transaction {tx_id} still has a receive waiting; wait for it or abort"
            raise TransactionUsageError(msg)
        services = self.services
        two_phase = services.core.two_phase
        try:
            unit = two_phase.prepare(tx, time.time())
        except QueueManagerError as exc:
            if tx.failure is not None or tx.abort_reason is not None:
                # It can only abort: abort it now, as a commit would.
                del self._transactions[tx_id]
                services.signals.notify(services.core.abort(tx))
                self.log.info("transaction_aborted", tx=tx_id, xid=tx.xid, reason=exc.message)
            raise
        del self._transactions[tx_id]
        try:
            outcome = await services.committer.submit(unit, source=self.conn_id)
        except BaseException as exc:
            woken, failure = two_phase.prepared(tx, unit, exc)
            services.signals.notify(woken)
            self.log.warning("transaction_aborted", tx=tx_id, xid=tx.xid, reason=str(exc))
            if isinstance(exc, storage.StoreError | QueueManagerError) and failure is not None:
                raise failure from exc
            raise
        woken, error = two_phase.prepared(tx, unit, outcome)
        services.signals.notify(woken)
        if error is not None:
            self.log.info("transaction_aborted", tx=tx_id, xid=tx.xid, reason=error.message)
            raise error
        self.log.info("transaction_prepared", tx=tx_id, xid=tx.xid)
        self.reply(request_id, cf.Ok())

    async def _resolve(self, request_id: int, request: cf.Resolve) -> None:
        services = self.services
        two_phase = services.core.two_phase
        unit = two_phase.resolve(request.xids, commit=request.commit, wall=time.time())
        reserved = two_phase.reserve_for_commit(request.xids) if request.commit else 0
        try:
            outcome = await self._submit(unit)
        finally:
            two_phase.release(reserved)
        woken, resolutions = two_phase.resolved(outcome)
        services.signals.notify(woken)
        if any(r in _RESOLVED_NOW for r in resolutions):
            services.wake_maintenance()  # purged messages they held can be erased now
        self.log.info(
            "transactions_committed" if request.commit else "transactions_aborted",
            xid=request.xids[0],
            count=len(request.xids),
            resolutions=[resolution.name.lower() for resolution in resolutions[:8]],
        )
        self.reply(request_id, cf.Resolutions(outcomes=tuple(int(r) for r in resolutions)))

    def _list_transactions(self, request_id: int, request: cf.ListTransactions) -> None:
        store = self.services.core.store
        limit = max(0, min(request.max_count, MAX_LISTED))
        authorization = self.services.authorization
        owner = None if authorization is None else authorization.owner_filter(self._principal)
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
                    cf.TransactionState.COMMITTED
                    if outcome.committed
                    else cf.TransactionState.ABORTED
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
        self.reply(request_id, cf.TransactionList(transactions=tuple(listed)))

    # ------------------------------------------------------------------ LookupId ranges

    def _measure_range(self, request_id: int, request: cf.MeasureRange) -> None:
        core = self.services.core
        queue = core.queue(request.queue)
        limit = max(0, min(request.max_count, MAX_MEASURE))
        count, last = core.ranges.measure_range(queue, after=request.after, limit=limit)
        self.reply(request_id, cf.RangeInfo(queue_id=queue.queue_id, count=count, last=last))

    async def _remove_through(self, request_id: int, request: cf.RemoveThrough) -> None:
        services = self.services
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
            try:
                outcome = await services.committer.submit(unit, source=self.conn_id)
            except BaseException as exc:
                _, woken = core.ranges.removal_done(queue, held, exc)
                services.signals.notify(woken)
                if isinstance(exc, storage.StoreError):
                    raise from_store_error(exc) from exc
                raise
            removed, woken = core.ranges.removal_done(queue, held, outcome)
            services.signals.notify(woken | touched_queues(core.store, unit.ops))
            total += removed
            if not removed:
                break  # every removal failed: gone meanwhile; nothing more to do
            # A step written at once (no other client active) is no checkpoint: let
            # the other connections in between the steps of a long removal.
            await trio.lowlevel.checkpoint()
        self.log.debug(
            "removed_through", queue=request.queue, through=request.lookup_id, count=total
        )
        self.reply(request_id, cf.Ok(value=total))


def _entry_size(xid: str) -> int:
    """Bytes a TransactionList entry takes in the frame."""
    return _ENTRY_OVERHEAD + len(xid.encode("utf-8"))
