"""The client requests: what each one does with the core, the committer and the signals.

Every handler takes the request id and the request. One that completes
without waiting queues its reply and returns None; one that must wait for
a write returns the awaitable the session awaits before reading on. Handlers
raise the core's errors; the session answers them, dooming the request's
transaction if it had one.

Writes follow one pattern: the core returns a unit, the committer writes it
in the next batch, the core finishes the job with the outcome, and the
queues the write changed are signalled so that waiting receives wake up.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final

import structlog
import trio

import storage
from qmgr.core.engine import PreparedSend
from qmgr.core.errors import (
    InvalidArgument,
    LimitExceeded,
    NotSupported,
    QueueManagerError,
    ShuttingDown,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
    from_store_error,
)
from qmgr.core.names import display_format_name
from qmgr.core.permissions import Principal
from qmgr.core.poison import merge_settings
from qmgr.core.sends import SendMode
from qmgr.core.transactions import Transaction, TransactionStage
from storage import QueueKind, QueueRecord
from wire import client as cf

from .list_requests import ListRequests
from .permission_requests import PermissionRequests
from .poison_requests import PoisonRequests
from .services import OutgoingAction, PeeringControl, Services
from .trace_requests import TraceRequests
from .two_phase_requests import TwoPhaseRequests

__all__ = ["RequestHandlers", "queue_info"]

#: Send modes by their number on the wire.
_SEND_MODES: Final = tuple(SendMode)
#: Bytes a PeekRange reply leaves free below the frame limit.
_PEEK_RANGE_SLACK: Final = 64 * 1024
_NO_WAIT: Final = 0
#: Daemon-aborted transactions whose reason a connection keeps for the client.
ABORTED_REMEMBERED: Final = 64
#: The event logged for each ``ControlOutgoing`` action.
_OUTGOING_EVENTS: Final = {
    OutgoingAction.PAUSE: "outgoing_paused",
    OutgoingAction.RESUME: "outgoing_resumed",
    OutgoingAction.PURGE: "outgoing_purged",
}


class RequestHandlers(
    TwoPhaseRequests, TraceRequests, ListRequests, PoisonRequests, PermissionRequests
):
    """The request handlers of a client session (the session supplies the I/O)."""

    #: Who the client authenticated as, with its groups (None: nobody).
    _principal: Principal | None = None

    log: structlog.typing.FilteringBoundLogger
    conn_id: int
    _nursery: trio.Nursery
    _closing: bool

    def __init__(self, services: Services) -> None:
        self.services = services
        #: Open transactions, by the id this connection knows them by.
        self._transactions: dict[int, Transaction] = {}
        #: Transactions the daemon aborted (idle timeout), by id, with the reason,
        #: until the client next names them; they no longer count as open.
        self._aborted: dict[int, str] = {}
        #: Waiting receives: transaction id (or a negative key) -> their cancel scope.
        self._waiting: dict[int, trio.CancelScope] = {}
        self._next_server_tx_id = cf.CLIENT_TX_ID_LIMIT

    @abc.abstractmethod
    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply."""

    @abc.abstractmethod
    def reply_bytes(self, frame: bytes) -> None:
        """Queue an encoded reply frame."""

    @abc.abstractmethod
    def reply_error(self, request_id: int, error: QueueManagerError) -> None:
        """Queue an error reply."""

    @abc.abstractmethod
    async def flush(self) -> None:
        """Write the queued replies."""

    def request_handlers(self) -> dict[type[Any], Callable[[int, Any], Awaitable[None] | None]]:
        """The handler of each request class."""
        return {
            cf.Send: self._send,
            cf.Commit: self._commit,
            cf.Begin: self._begin,
            cf.Receive: self._receive,
            cf.Abort: self._abort,
            cf.PeekRange: self._peek_range,
            cf.CreateQueue: self._create_queue,
            cf.DeleteQueue: self._delete_queue,
            cf.PurgeQueue: self._purge_queue,
            cf.ListQueues: self._list_queues,
            cf.GetStatus: self._get_status,
            cf.ListOutgoing: self._list_outgoing,
            cf.ControlOutgoing: self._control_outgoing,
            **self.two_phase_handlers(),
            **self.poison_handlers(),
            **self.trace_handlers(),
            **self.list_handlers(),
            **self.permission_handlers(),
        }

    def _failed(self, request_id: int, request: object, error: QueueManagerError) -> None:
        """Answer a failed request; a transaction it belonged to can now only abort."""
        tx_id = getattr(request, "tx_id", 0)
        if tx_id and not isinstance(request, cf.Commit | cf.Abort):
            tx = self._transactions.get(tx_id)
            if tx is not None:
                tx.doom(error)
        self.reply_error(request_id, error)

    # ------------------------------------------------------------------ queues

    async def _write(self, unit: storage.Unit) -> storage.UnitOutcome:
        try:
            return await self.services.committer.submit(unit, source=self.conn_id)
        except storage.StoreError as exc:
            raise from_store_error(exc) from exc

    async def _create_queue(self, request_id: int, request: cf.CreateQueue) -> None:
        core = self.services.core
        poison = merge_settings(
            None,
            retry_count=request.retry_count,
            retry_cycles=request.retry_cycles,
            retry_delay=request.retry_delay,
        )
        unit = core.queues.create(
            request.name,
            transactional=request.transactional,
            journal=request.journal,
            quota=request.quota,
            poison=poison,
            wall=time.time(),
        )
        authorization = self.services.authorization
        if authorization is not None:
            # The queue and its list are one write: a new queue is never without one.
            creator = self._principal
            name = unit.ops[0].name  # type: ignore[attr-defined]
            acl = authorization.new_queue_acl(name, creator)
            unit = storage.Unit((*unit.ops, acl))
        record = core.queues.created(await self._write(unit))
        if authorization is not None:
            authorization.written(acl)
        self.log.info("queue_created", queue=record.name, transactional=record.transactional)
        self.reply(request_id, cf.Ok(value=record.queue_id))

    async def _delete_queue(self, request_id: int, request: cf.DeleteQueue) -> None:
        services = self.services
        record, unit = services.core.queues.delete(request.name)
        count, gone = services.core.queues.deleted(await self._write(unit))
        services.signals.notify(gone)
        services.wake_maintenance()
        self.log.info("queue_deleted", queue=record.name, messages=count)
        self.reply(request_id, cf.Ok(value=count))

    async def _purge_queue(self, request_id: int, request: cf.PurgeQueue) -> None:
        services = self.services
        record, unit = services.core.queues.purge(request.name)
        count = services.core.queues.purged(await self._write(unit))
        services.wake_maintenance()
        self.log.info("queue_purged", queue=record.name, messages=count)
        self.reply(request_id, cf.Ok(value=count))

    def _list_queues(self, request_id: int, request: cf.ListQueues) -> None:
        self.reply(request_id, cf.QueueList(queues=self.for_version(self.services.queue_infos())))

    def _get_status(self, request_id: int, request: cf.GetStatus) -> None:
        status = self.services.status()
        queues = self.for_version(status.queues)
        if queues is not status.queues:
            status = dataclasses.replace(status, queues=queues)
        self.reply(request_id, status)

    # ------------------------------------------------------------------ outgoing queues

    def _peering(self) -> PeeringControl:
        peering = self.services.peering
        if peering is None:
            msg = "delivery to other queue managers (peering) is not running on this queue manager"
            raise NotSupported(msg)
        return peering

    def _list_outgoing(self, request_id: int, request: cf.ListOutgoing) -> None:
        self.reply(request_id, cf.OutgoingList(outgoing=self._peering().outgoing_infos()))

    async def _control_outgoing(self, request_id: int, request: cf.ControlOutgoing) -> None:
        try:
            action = OutgoingAction(request.action)
        except ValueError:
            choices = ", ".join(f"{a.value} ({a.name.lower()})" for a in OutgoingAction)
            msg = f"outgoing queue action must be {choices}, not {request.action}"
            raise InvalidArgument(msg) from None
        info, purged = await self._peering().control(action, request.destination)
        self.log.info(_OUTGOING_EVENTS[action], destination=info.destination, messages=purged)
        self.reply(request_id, cf.OutgoingList(outgoing=(info,), purged=purged))

    # ------------------------------------------------------------------ transactions

    def transaction(self, tx_id: int) -> Transaction:
        """The open transaction this connection calls ``tx_id``.

        Raises:
            TransactionNotFound: unknown here, or already ended.
            TransactionAborted: ended by the daemon (idle timeout); it is forgotten now.
        """
        tx = self._transactions.get(tx_id)
        if tx is None:
            reason = self._aborted.pop(tx_id, None)
            if reason is not None:
                msg = f"transaction {tx_id} was aborted: {reason}"
                raise TransactionAborted(msg)
            msg = f"transaction {tx_id} is not open on this connection"
            raise TransactionNotFound(msg)
        if tx.stage is not TransactionStage.OPEN:
            msg = f"transaction {tx_id} is already committing"
            raise TransactionNotFound(msg)
        return tx

    def end_transaction(self, tx: Transaction, reason: str) -> None:
        """Abort ``tx`` on the daemon's initiative (disconnect, idle timeout).

        It stops counting as open at once (for the connection's deadlines,
        its eviction and its limit of open transactions); the client learns
        why at its next request in it.
        """
        if self._transactions.pop(tx.client_id, None) is not None:
            aborted = self._aborted
            if len(aborted) >= ABORTED_REMEMBERED:
                del aborted[next(iter(aborted))]  # the oldest
            aborted[tx.client_id] = reason
        self.cancel_waits(tx.client_id)
        self.services.signals.notify(self.services.core.abort(tx, reason))
        self.log.info("transaction_aborted", tx=tx.client_id, reason=reason)

    def _begin(self, request_id: int, request: cf.Begin) -> None:
        self.open_transaction(request_id, request.tx_id, None)

    def open_transaction(self, request_id: int, tx_id: int, xid: str | None) -> None:
        """Begin a transaction, with a global id if ``xid`` is given; ``tx_id`` 0
        lets the daemon choose the id, and the reply carries it."""
        chosen_by_client = tx_id != 0
        if not chosen_by_client:
            tx_id = self._next_server_tx_id
            self._next_server_tx_id += 1
        elif tx_id >= cf.CLIENT_TX_ID_LIMIT:
            msg = f"transaction id {tx_id} is reserved for the queue manager; use 1..2**63-1"
            raise InvalidArgument(msg)
        elif tx_id in self._transactions:
            msg = f"transaction id {tx_id} is already in use on this connection"
            raise TransactionUsageError(msg)
        limit = self.services.limits.max_transactions
        if len(self._transactions) >= limit:
            msg = f"a connection may have at most {limit} open transactions; commit or abort some"
            raise LimitExceeded(msg)
        core = self.services.core
        now = trio.current_time()
        if xid is None:
            tx = core.begin(self, tx_id, now)
        else:
            tx = core.two_phase.begin(self, tx_id, now, xid)
            tx.principal = "" if self._principal is None else self._principal.name
        self._transactions[tx_id] = tx
        self._aborted.pop(tx_id, None)
        if not chosen_by_client:
            self.reply_bytes(cf.encode_ok(request_id, tx_id))

    def _abort(self, request_id: int, request: cf.Abort) -> None:
        tx = self.transaction(request.tx_id)
        del self._transactions[request.tx_id]
        self.cancel_waits(request.tx_id)
        services = self.services
        services.signals.notify(services.core.abort(tx))
        self.log.debug("transaction_aborted", tx=request.tx_id, reason="by client")
        self.reply_bytes(cf.encode_ok(request_id))

    async def _commit(self, request_id: int, request: cf.Commit) -> None:
        tx_id = request.tx_id
        tx = self.transaction(tx_id)
        if tx_id in self._waiting:
            msg = f"transaction {tx_id} still has a receive waiting; wait for it or abort"
            raise TransactionUsageError(msg)
        del self._transactions[tx_id]
        services = self.services
        core = services.core
        try:
            unit = core.commit(tx, wall=time.time())
        except QueueManagerError as exc:
            services.signals.notify(core.abort(tx))
            self.log.info("transaction_aborted", tx=tx_id, reason=exc.message)
            raise
        try:
            outcome = await services.committer.submit(unit, source=self.conn_id)
        except BaseException as exc:
            woken, failure = core.commit_failed(tx, exc)
            services.signals.notify(woken)
            self.log.warning("transaction_aborted", tx=tx_id, reason=failure.message)
            if isinstance(exc, storage.StoreError | QueueManagerError):
                raise failure from exc
            raise
        woken, error = core.commit_done(tx, unit, outcome)
        services.signals.notify(woken)
        if error is not None:
            self.log.info("transaction_aborted", tx=tx_id, reason=error.message)
            raise error
        self.log.debug("transaction_committed", tx=tx_id, operations=len(unit.ops))
        self.reply_bytes(cf.encode_ok(request_id))

    # ------------------------------------------------------------------ sending

    def _send(self, request_id: int, request: cf.Send) -> Awaitable[None] | None:
        tx = self.transaction(request.tx_id) if request.tx_id else None
        try:
            mode = _SEND_MODES[request.mode]
        except IndexError:
            msg = f"send mode must be 0 (auto), 1 (none) or 2 (single message), not {request.mode}"
            raise InvalidArgument(msg) from None
        services = self.services
        core = services.core
        prepared = core.prepare_send(
            request.message, tx=tx, mode=mode, now=trio.current_time(), wall=time.time()
        )
        if core.ordinals.wanted:
            services.wake_maintenance()
        if prepared is None:
            return None
        return self._send_now(request_id, prepared)

    async def _send_now(self, request_id: int, prepared: PreparedSend) -> None:
        assert prepared.unit is not None
        services = self.services
        outcome = await self._write(prepared.unit)
        lookup_id = services.core.send_done(prepared, outcome)
        services.signals.notify(
            result.queue_id for result in outcome.results if isinstance(result, storage.Appended)
        )
        sent = cf.Sent(
            message_id=prepared.message_id,
            queue=prepared.queues[0].display_name,
            lookup_id=lookup_id,
        )
        self.reply(request_id, sent)

    # ------------------------------------------------------------------ receiving

    def _receive(self, request_id: int, request: cf.Receive) -> Awaitable[None] | None:
        tx = self.transaction(request.tx_id) if request.tx_id else None
        core = self.services.core
        queue = core.queue(request.queue)
        core.check_receive(queue, tx, peek=request.peek)
        answered = self._try_receive(request_id, request, queue, tx)
        if answered is not _NOT_FOUND:
            return None if answered is _ANSWERED else answered
        if request.timeout_ms == _NO_WAIT:
            self.reply(request_id, cf.NoMessage())
            return None
        if tx is not None and tx.client_id in self._waiting:
            msg = f"transaction {tx.client_id} already has a receive waiting"
            raise TransactionUsageError(msg)
        limit = self.services.limits.max_waiting_receives
        if len(self._waiting) >= limit:
            msg = f"a connection may have at most {limit} receives waiting at once"
            raise LimitExceeded(msg)
        key = tx.client_id if tx is not None else -request_id - 1
        scope = trio.CancelScope()
        self._waiting[key] = scope
        self._nursery.start_soon(self._wait_and_receive, request_id, request, tx, key, scope)
        return None

    def _try_receive(
        self, request_id: int, request: cf.Receive, queue: QueueRecord, tx: Transaction | None
    ) -> Awaitable[None]:
        """Take (or peek) a message now if one is free.

        Returns:
            ``_ANSWERED``, ``_NOT_FOUND``, or an awaitable that writes the
            removal and then answers.
        """
        core = self.services.core
        if request.peek:
            peeked = core.peek(queue, lookup_id=request.lookup_id)
            if peeked is None:
                return _NOT_FOUND
            self.reply_bytes(self.message_frame(request_id, queue, *peeked))
            return _ANSWERED
        found = core.take(queue, lookup_id=request.lookup_id, tx=tx, now=trio.current_time())
        if found is None:
            return _NOT_FOUND
        if tx is not None:
            self.reply_bytes(self.message_frame(request_id, queue, *found))
            return _ANSWERED
        return self._remove_and_reply(request_id, queue, *found)

    async def _remove_and_reply(
        self, request_id: int, queue: QueueRecord, lookup_id: int, record: bytes
    ) -> None:
        """A receive outside a transaction: the message is removed durably, then returned."""
        services = self.services
        core = services.core
        try:
            # Made first: the removal takes the message's counters with it.
            frame = self.message_frame(request_id, queue, lookup_id, record)
            removal = core.removal(queue, lookup_id, record, wall=time.time())
            outcome = await services.committer.submit(removal, source=self.conn_id)
        except BaseException as exc:
            woken, failure = core.removal_done(queue.queue_id, lookup_id, exc)
            services.signals.notify(woken)
            if isinstance(exc, storage.StoreError | QueueManagerError) and failure is not None:
                raise failure from exc
            raise
        woken, error = core.removal_done(queue.queue_id, lookup_id, outcome)
        services.signals.notify(woken)
        if error is not None:
            raise error
        self.reply_bytes(frame)

    async def _wait_and_receive(
        self,
        request_id: int,
        request: cf.Receive,
        tx: Transaction | None,
        key: int,
        scope: trio.CancelScope,
    ) -> None:
        timeout = (
            math.inf if request.timeout_ms == cf.INFINITE_TIMEOUT_MS else request.timeout_ms / 1000
        )
        deadline = trio.current_time() + timeout
        if tx is not None:
            tx.waiting += 1
        with scope:
            try:
                answered = await self._wait_loop(request_id, request, tx, deadline)
            except QueueManagerError as exc:
                self._failed(request_id, request, exc)
                answered = True
            finally:
                self._waiting.pop(key, None)
                if tx is not None:
                    tx.waiting -= 1
                    tx.last_activity = trio.current_time()
            if not answered:
                self.reply(request_id, cf.NoMessage())
        if scope.cancelled_caught:
            if self._closing:
                return
            why = f": {tx.abort_reason}" if tx is not None and tx.abort_reason else ""
            message = f"transaction {key} was aborted while this receive waited{why}"
            self.reply_error(request_id, TransactionAborted(message))
        await self.flush()

    async def _wait_loop(
        self, request_id: int, request: cf.Receive, tx: Transaction | None, deadline: float
    ) -> bool:
        services = self.services
        while True:
            queue = services.core.queue(request.queue)
            event = services.signals.event(queue.queue_id)
            if tx is not None:
                tx = self.transaction(tx.client_id)
            answered = self._try_receive(request_id, request, queue, tx)
            if answered is not _NOT_FOUND:
                if answered is not _ANSWERED:
                    await answered
                return True
            if services.stopping:
                msg = "the queue manager is shutting down"
                raise ShuttingDown(msg)
            with trio.move_on_at(deadline):
                await event.wait()
                continue
            return False

    def cancel_waits(self, tx_id: int) -> None:
        """Cancel the receive waiting in transaction ``tx_id``, if any."""
        scope = self._waiting.get(tx_id)
        if scope is not None:
            scope.cancel()

    # ------------------------------------------------------------------ peek range

    def _peek_range(self, request_id: int, request: cf.PeekRange) -> None:
        core = self.services.core
        queue = core.queue(request.queue)
        limit = max(0, min(request.max_count, self.services.limits.max_peek_range))
        found = core.ranges.peek_range(queue, after=request.after, limit=limit)
        name = queue.display_name.encode("utf-8")
        parts: list[bytes | memoryview] = []
        count = 0
        size = 0
        if self._counted:  # room for the counters trailer (version 4)
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
        trailer = self.counters_trailer(queue, (lookup_id for lookup_id, _ in found[:count]))
        body = b"".join((count.to_bytes(4, "little"), *parts, trailer))
        header = (len(body), int(cf.FrameKind.MESSAGE_LIST), 0, request_id)
        self.reply_bytes(_frame_header(*header) + body)


class _Answer:
    """An awaitable that is never awaited: what ``_try_receive`` says without a write."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:  # pragma: no cover - never awaited
        yield from ()


_ANSWERED: Final = _Answer()
_NOT_FOUND: Final = _Answer()


def _frame_header(length: int, kind: int, flags: int, request_id: int) -> bytes:
    return (
        length.to_bytes(4, "little")
        + kind.to_bytes(2, "little")
        + flags.to_bytes(2, "little")
        + request_id.to_bytes(4, "little")
    )


#: How clients see each kind of stored queue (the system journal is a journal
#: queue to them; outgoing queues are not listed as queues).
_WIRE_KINDS: Final = {
    QueueKind.NORMAL: cf.QueueKind.NORMAL,
    QueueKind.JOURNAL: cf.QueueKind.JOURNAL,
    QueueKind.DEADLETTER: cf.QueueKind.DEADLETTER,
    QueueKind.DEADXACT: cf.QueueKind.DEADXACT,
    QueueKind.SYSTEM_JOURNAL: cf.QueueKind.JOURNAL,
    QueueKind.SUBQUEUE: cf.QueueKind.SUBQUEUE,
}


def queue_info(record: QueueRecord, held: int) -> cf.QueueInfo:
    """The client-protocol view of a queue."""
    poison = record.poison
    return cf.QueueInfo(
        name=record.display_name,
        format_name=display_format_name(record.name),
        kind=int(_WIRE_KINDS[record.kind]),
        transactional=record.transactional,
        journal=record.journal,
        quota=record.quota,
        depth=record.depth,
        bytes=record.bytes,
        locked=held,
        created_at=record.created_at,
        retry=None
        if poison is None
        else cf.RetrySettings(
            retry_count=poison.retry_count,
            retry_cycles=poison.retry_cycles,
            retry_delay=poison.retry_delay,
        ),
    )
