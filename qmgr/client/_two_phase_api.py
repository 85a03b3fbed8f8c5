"""The global-transaction and range methods of the client classes.

Each client class inherits its part from here: :class:`QueueManagerTwoPhase`
and :class:`TransactionTwoPhase` for the blocking client,
:class:`AsyncQueueManagerTwoPhase` and :class:`AsyncTransactionTwoPhase` for
the trio client. The methods are thin: ``_two_phase`` checks arguments and
converts replies, ``_transaction`` decides about prepare; only the I/O
differs between the blocking and the trio versions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from wire import client_frames as cf

from . import _replies as replies
from . import _two_phase as two_phase
from ._errors import QueueError
from ._transaction import TransactionState, prepare_interrupted, prepare_request, prepared
from ._two_phase import RangeInfo, Resolution, TransactionInfo

if TYPE_CHECKING:
    from ._blocking import QueueManager
    from ._protocol import ClientProtocol
    from ._trio import AsyncQueueManager

__all__ = [
    "AsyncQueueManagerTwoPhase",
    "AsyncTransactionTwoPhase",
    "QueueManagerTwoPhase",
    "TransactionTwoPhase",
]


class _GlobalTransaction:
    """What both transaction classes show of a global transaction."""

    __slots__ = ()

    if TYPE_CHECKING:
        _state: TransactionState

    @property
    def xid(self) -> str | None:
        """The global transaction id given to ``begin(xid=...)``, or None."""
        return self._state.xid

    @property
    def prepared(self) -> bool:
        """True once :meth:`prepare` succeeded (until the transaction ends)."""
        return self._state.prepared and not self._state.ended


class TransactionTwoPhase(_GlobalTransaction):
    """``Transaction.prepare`` and the global transaction's properties."""

    __slots__ = ()

    if TYPE_CHECKING:
        _qm: QueueManager
        _proto: ClientProtocol[Any]

    def prepare(self) -> None:
        """Prepare the transaction: the first phase of a two-phase commit.

        Only a transaction begun with ``begin(xid=...)`` can be prepared.
        The call returns once the daemon has stored the transaction, synced:
        from then on it belongs to no connection. It survives the end of
        this connection and restarts of the daemon, is never timed out, its
        sends keep their room in their queues' quotas, and the messages it
        received stay hidden from other readers, until it is resolved: by
        :meth:`commit` or :meth:`abort` here, or by xid from any connection
        (:meth:`QueueManager.commit_prepared`,
        :meth:`QueueManager.abort_prepared`, ``qmgr tx commit XID``). After
        prepare() only commit() and abort() may be called; as a context
        manager the block still commits on normal exit.

        Raises:
            TransactionUsageError: the transaction has no xid, or was prepared already.
            LimitExceeded: too many transactions are prepared
                (``transactions.max_prepared``); only abort() may follow.
            QuotaExceeded, StoreFull, QueueNotFound: it could not be
                prepared; only abort() may follow.
            TransactionAborted: the daemon had aborted it (idle timeout, a
                received message's queue was deleted); it has ended.
            the error of a failed pipelined send: the transaction was aborted.
            ConnectionLost: the transaction may or may not have been
                prepared (the message says so): look with
                :meth:`QueueManager.transactions`.
        """
        proto = self._proto
        state = self._state
        waiter = prepare_request(proto, proto.out, state)
        outcome: cf.ServerReply | QueueError
        try:
            outcome = self._qm._exchange(waiter)
        except QueueError as exc:
            outcome = exc
        except BaseException:
            prepare_interrupted(state)
            raise
        prepared(state, outcome)


class AsyncTransactionTwoPhase(_GlobalTransaction):
    """``AsyncTransaction.prepare`` and the global transaction's properties."""

    __slots__ = ()

    if TYPE_CHECKING:
        _qm: AsyncQueueManager
        _proto: ClientProtocol[Any]

    async def prepare(self) -> None:
        """Prepare the transaction (the first phase of a two-phase commit); see
        ``Transaction.prepare``. A prepare cancelled before its reply came
        leaves a transaction that may be prepared and can only abort."""
        state = self._state
        frame = bytearray()
        waiter = prepare_request(self._proto, frame, state)
        outcome: cf.ServerReply | QueueError
        try:
            outcome = await self._qm._exchange(waiter, frame, shield_write=True)
        except QueueError as exc:
            outcome = exc
        except BaseException:
            prepare_interrupted(state)
            raise
        prepared(state, outcome)


class QueueManagerTwoPhase:
    """The global-transaction and range methods of ``QueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        def _call(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    def commit_prepared(self, xid: str) -> Resolution:
        """Commit the prepared transaction ``xid``, from any connection.

        Its sends become visible (in the order they were sent) and its
        receives final, at once; returns after the daemon has synced.
        Committing again is harmless while the daemon keeps the outcome
        (``transactions.outcome_retention``, 7 days by default).

        Returns:
            ``Resolution.COMMITTED``, or ``Resolution.ALREADY_COMMITTED`` if
            it had been committed before.

        Raises:
            TransactionNotFound: nothing is prepared under ``xid`` and no
                outcome is kept for it.
            TransactionUsageError: it is still open on its connection, not
                prepared (or its prepare is being written): try again later.
            TransactionAborted: it was aborted.
            InvalidArgument: ``xid`` is not a valid transaction id.
            NotSupported: the daemon is too old for global transactions.
        """
        return self._resolve("commit_prepared()", (xid,), commit=True)[0]

    def abort_prepared(self, xid: str) -> Resolution:
        """Abort the prepared transaction ``xid``, from any connection.

        Its sends are discarded and the messages it received go back to
        their places.

        Returns:
            ``Resolution.ABORTED``, or ``Resolution.ALREADY_ABORTED`` if it
            had been aborted before.

        Raises:
            TransactionNotFound: nothing is prepared under ``xid`` and no
                outcome is kept for it.
            TransactionCommitted: it was committed; it stays committed.
            InvalidArgument, NotSupported: as :meth:`commit_prepared`.
        """
        return self._resolve("abort_prepared()", (xid,), commit=False)[0]

    def commit_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Commit the prepared transactions ``xids`` at once: all of them or none.

        One synced write commits them all (at most 10000), as a coordinator
        commits the parts of one global transaction. Returns one
        :class:`Resolution` per xid, in order. If one cannot be committed,
        none is, and the error's message names the xid. An empty ``xids``
        asks nothing of the daemon.

        Raises:
            LimitExceeded: their sends together are more than the daemon
                holds in memory at once (``limits.max_uncommitted_bytes``);
                nothing was committed: commit fewer at once.
            the errors of :meth:`commit_prepared`.
        """
        return self._resolve("commit_prepared_all()", xids, commit=True)

    def abort_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Abort the prepared transactions ``xids`` at once: all of them or none."""
        return self._resolve("abort_prepared_all()", xids, commit=False)

    def transactions(
        self, prefix: str = "", *, resolved: bool = False, limit: int = 1000
    ) -> list[TransactionInfo]:
        """The prepared transactions whose xid starts with ``prefix``, by xid.

        Args:
            prefix: only xids that start with it ("" for all).
            resolved: also list the outcomes the daemon keeps of resolved
                transactions (after the prepared ones).
            limit: at most this many prepared transactions, and at most
                this many outcomes (the daemon returns at most 10000 of
                each, and no more outcomes than fit in one reply).
        """
        request = two_phase.list_request(prefix, resolved, limit)
        return two_phase.transaction_list(self._two_phase("transactions()", request))

    def remove_through(self, queue: str, lookup_id: int) -> int:
        """Remove every message of ``queue`` with a lookup id up to ``lookup_id``; return how many.

        For a reader that keeps its own position in a queue: once it has
        processed the messages up to ``lookup_id`` (read with
        :meth:`peek_range`), it removes them with one call. Messages held by
        open or prepared transactions stay. Journal copies are made as for a
        receive. The daemon removes in steps; if the call fails half-way,
        calling it again removes the rest.

        Raises:
            QueueNotFound, InvalidName, AccessDenied; NotSupported: the
            daemon is too old.
        """
        request = cf.RemoveThrough(queue=queue, lookup_id=lookup_id)
        return replies.ok_value(self._two_phase("remove_through()", request))

    def measure_range(self, queue: str, after: int = 0, max_count: int = 0) -> RangeInfo:
        """Count the visible messages of ``queue`` with a lookup id above ``after``.

        Counts at most ``max_count`` (0: all of them) without reading their
        bodies, and says where they end (:class:`RangeInfo`): a reader can
        plan its next range of :meth:`peek_range` calls.

        Raises:
            QueueNotFound, InvalidName; NotSupported: the daemon is too old.
        """
        request = cf.MeasureRange(queue=queue, after=after, max_count=max_count)
        return two_phase.range_info(self._two_phase("measure_range()", request))

    def _resolve(self, what: str, xids: Sequence[str], *, commit: bool) -> list[Resolution]:
        request = two_phase.resolve_request(xids, commit=commit)
        if request is None:
            return []
        return two_phase.resolutions(self._two_phase(what, request), len(request.xids))

    def _two_phase(self, what: str, request: cf.ClientRequest) -> cf.ServerReply:
        proto = self._proto
        two_phase.require_two_phase(proto.version, proto.address, what)
        return self._call(request)


class AsyncQueueManagerTwoPhase:
    """The global-transaction and range methods of ``AsyncQueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        async def _request(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    async def commit_prepared(self, xid: str) -> Resolution:
        """Commit the prepared transaction ``xid``; see ``QueueManager.commit_prepared``."""
        return (await self._resolve("commit_prepared()", (xid,), commit=True))[0]

    async def abort_prepared(self, xid: str) -> Resolution:
        """Abort the prepared transaction ``xid``; see ``QueueManager.abort_prepared``."""
        return (await self._resolve("abort_prepared()", (xid,), commit=False))[0]

    async def commit_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Commit prepared transactions, all or none; see ``QueueManager.commit_prepared_all``."""
        return await self._resolve("commit_prepared_all()", xids, commit=True)

    async def abort_prepared_all(self, xids: Sequence[str]) -> list[Resolution]:
        """Abort prepared transactions, all or none; see ``QueueManager.abort_prepared_all``."""
        return await self._resolve("abort_prepared_all()", xids, commit=False)

    async def transactions(
        self, prefix: str = "", *, resolved: bool = False, limit: int = 1000
    ) -> list[TransactionInfo]:
        """The prepared transactions (and outcomes); see ``QueueManager.transactions``."""
        request = two_phase.list_request(prefix, resolved, limit)
        return two_phase.transaction_list(await self._two_phase("transactions()", request))

    async def remove_through(self, queue: str, lookup_id: int) -> int:
        """Remove the messages up to ``lookup_id``; see ``QueueManager.remove_through``."""
        request = cf.RemoveThrough(queue=queue, lookup_id=lookup_id)
        return replies.ok_value(await self._two_phase("remove_through()", request))

    async def measure_range(self, queue: str, after: int = 0, max_count: int = 0) -> RangeInfo:
        """Count the messages above ``after``; see ``QueueManager.measure_range``."""
        request = cf.MeasureRange(queue=queue, after=after, max_count=max_count)
        return two_phase.range_info(await self._two_phase("measure_range()", request))

    async def _resolve(self, what: str, xids: Sequence[str], *, commit: bool) -> list[Resolution]:
        request = two_phase.resolve_request(xids, commit=commit)
        if request is None:
            return []
        return two_phase.resolutions(await self._two_phase(what, request), len(request.xids))

    async def _two_phase(self, what: str, request: cf.ClientRequest) -> cf.ServerReply:
        proto = self._proto
        two_phase.require_two_phase(proto.version, proto.address, what)
        return await self._request(request)
