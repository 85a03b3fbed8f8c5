"""One client connection: frames in, queue operations, replies out.

Theory of operation
-------------------
A session reads bytes, feeds them to a ``ClientFrameDecoder`` and handles the
frames in order. The first frame must be ``Hello``. Most requests complete
without waiting and are answered inline; their replies are gathered in an
outbox and written with one ``send_all`` once every frame of the current read
has been handled, so a client that pipelines a hundred sends costs one
write. Two things wait:

* a commit (or a non-transacted send or receive) waits for the committer's
  sync; the reader pauses meanwhile, which keeps a connection's requests in
  order and applies back-pressure to a client that outruns the disk. Replies
  gathered before it are sent together with its own after the sync, so that a
  pipelined Begin, Send, Commit costs one write each way;
* a receive that finds its queue empty waits in a task of its own, so the
  requests behind it on the same connection are still served. Its reply
  comes whenever a message arrives or the timeout passes (replies carry the
  request id, so order does not matter to the client).

A connection that does not send Hello within ``hello_timeout`` (10 s) is
closed, so that idle sockets cannot use up the connection limit.

Malformed bytes get an ``ErrorReply(BAD_REQUEST)`` naming what was wrong, and
the connection is closed: after a framing error nothing that follows can be
trusted. An error in one request (unknown queue, bad name, quota) is answered
and the session goes on, with one exception: a transaction in which a send
failed can no longer commit (its Commit aborts it and answers
TRANSACTION_ABORTED), because clients pipeline a transaction's sends with
its commit and must never see part of it applied. When the connection ends
for any reason, every transaction it opened is aborted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
import trio

import storage
from qmgr import __version__
from qmgr.core.engine import (
    SendMode,
    Transaction,
    TransactionState,
    translate_store_error,
)
from qmgr.core.errors import (
    InvalidArgument,
    QueueManagerError,
    ShuttingDown,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
)
from qmgr.core.names import display_format_name
from storage import CommitOutcome, MessageRecord, QueueRecord
from wire import RemoteProtocolError
from wire import client_frames as cf

from .connection import RawConnection

if TYPE_CHECKING:
    from .daemon import Daemon

RECEIVE_CHUNK = 256 * 1024
MAX_PEEK_RANGE = 10_000


class ClientSession:
    """Serves one client connection until it closes."""

    def __init__(self, daemon: Daemon, stream: RawConnection, conn_id: int, peer: str) -> None:
        self.daemon = daemon
        self.core = daemon.core
        self.stream = stream
        self.conn_id = conn_id
        self.log = structlog.get_logger("qmgr.session").bind(conn=conn_id, peer=peer)
        self._decoder = cf.ClientFrameDecoder()
        self._outbox: list[bytes] = []
        self._send_lock = trio.Lock()
        self._greeted = False
        self._hello_scope = trio.CancelScope()
        self._closing = False
        self._waiting: dict[int, trio.CancelScope] = {}
        # Transactions by the id this connection knows them by.
        self._transactions: dict[int, Transaction] = {}
        self._next_server_tx_id = cf.CLIENT_TX_ID_LIMIT
        # Transactions in which a send failed, with the first failure: they cannot commit.
        self._failed_sends: dict[int, str] = {}
        self._handlers: dict[type[Any], Callable[[int, Any], Any]] = {
            cf.CreateQueue: self._create_queue,
            cf.DeleteQueue: self._delete_queue,
            cf.PurgeQueue: self._purge_queue,
            cf.ListQueues: self._list_queues,
            cf.GetStatus: self._get_status,
            cf.Begin: self._begin,
            cf.Abort: self._abort,
            cf.PeekRange: self._peek_range,
        }

    # ------------------------------------------------------------------
    # The read loop
    # ------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection; returns when it is closed by either side."""
        self.log.info("connection_opened")
        reason = "closed by client"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    with trio.move_on_after(self.daemon.hello_timeout) as hello_scope:
                        self._hello_scope = hello_scope
                        reason = await self._read_loop()
                    if hello_scope.cancelled_caught:
                        reason = f"no Hello within {self.daemon.hello_timeout:g} s"
                        self.log.warning("hello_timeout")
                finally:
                    self._closing = True
                    nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            reason = "connection lost"
        finally:
            self._abort_all("client disconnected")
            with trio.CancelScope(shield=True):
                await self.stream.aclose()
            self.log.info("connection_closed", reason=reason)

    async def _read_loop(self) -> str:
        while True:
            data = await self.stream.receive_some(RECEIVE_CHUNK)
            if not data:
                return "closed by client"
            self._decoder.receive_data(data)
            while True:
                try:
                    frame = self._decoder.next_frame()
                except RemoteProtocolError as exc:
                    self.log.warning("bad_frame", error=str(exc))
                    self._reply(0, cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=str(exc)))
                    await self._flush()
                    return f"malformed frame: {exc}"
                if frame is None:
                    break
                if not await self._handle(frame.request_id, frame.value):
                    await self._flush()
                    return "protocol violation"
            await self._flush()

    async def _handle(self, request_id: int, value: cf.FrameValue) -> bool:
        """Handle one frame; False means the connection must close."""
        if not self._greeted:
            return self._hello(request_id, value)
        if not cf.is_request(value) or isinstance(value, cf.Hello):
            message = f"{type(value).__name__} is not a request a client may send now"
            self._reply(request_id, cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message))
            return False
        if self.daemon.stopping:
            self._reply_error(request_id, ShuttingDown("the queue manager is shutting down"))
            return True
        try:
            if isinstance(value, cf.Send):
                await self._send_message(request_id, value)
            elif isinstance(value, cf.Receive):
                await self._receive(request_id, value)
            elif isinstance(value, cf.Commit):
                await self._commit(request_id, value)
            else:
                self._handlers[type(value)](request_id, value)
        except QueueManagerError as exc:
            self._note_failed_send(value, exc)
            self._reply_error(request_id, exc)
        except storage.StoreError as exc:
            error = translate_store_error(exc)
            self._note_failed_send(value, error)
            self._reply_error(request_id, error)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.Cancelled):
            raise
        except Exception as exc:
            self.log.exception("request_failed", request=type(value).__name__)
            self._reply(
                request_id,
                cf.ErrorReply(
                    code=cf.ErrorCode.INTERNAL, message=f"internal error: {type(exc).__name__}"
                ),
            )
        return True

    def _hello(self, request_id: int, value: cf.FrameValue) -> bool:
        if not isinstance(value, cf.Hello):
            message = f"the first frame must be Hello, not {type(value).__name__}"
            self._reply(request_id, cf.ErrorReply(code=cf.ErrorCode.BAD_REQUEST, message=message))
            return False
        version = min(value.max_version, cf.PROTOCOL_VERSION)
        if version < max(value.min_version, cf.MIN_PROTOCOL_VERSION):
            message = (
                f"client speaks versions {value.min_version}..{value.max_version}; "
                f"this queue manager speaks {cf.MIN_PROTOCOL_VERSION}..{cf.PROTOCOL_VERSION}"
            )
            self._reply(
                request_id, cf.ErrorReply(code=cf.ErrorCode.UNSUPPORTED_VERSION, message=message)
            )
            return False
        self._greeted = True
        # Greeted in time: the connection may now stay open as long as it likes.
        self._hello_scope.deadline = float("inf")
        if value.client_name:
            self.log = self.log.bind(client=value.client_name)
        self._reply(
            request_id,
            cf.HelloOk(
                version=version,
                server_version=__version__,
                qm_name=self.daemon.name,
                qm_guid=self.daemon.store.qm_guid,
            ),
        )
        return True

    # ------------------------------------------------------------------
    # Replies
    # ------------------------------------------------------------------

    def _reply(self, request_id: int, value: cf.ServerReply) -> None:
        self._outbox.append(cf.encode_frame(request_id, value))

    def _reply_ok(self, request_id: int, value: int = 0) -> None:
        # The most frequent reply (every pipelined send), packed in one call.
        self._outbox.append(cf.encode_ok(request_id, value))

    def _reply_error(self, request_id: int, error: QueueManagerError) -> None:
        self._reply(request_id, cf.ErrorReply(code=error.code, message=error.message))

    async def _flush(self) -> None:
        if not self._outbox:
            return
        async with self._send_lock:
            if not self._outbox:
                return
            data = b"".join(self._outbox)
            self._outbox.clear()
            await self.stream.send_all(data)

    # ------------------------------------------------------------------
    # Queues
    # ------------------------------------------------------------------

    def _create_queue(self, request_id: int, request: cf.CreateQueue) -> None:
        record = self.core.create_queue(
            request.name,
            transactional=request.transactional,
            journal=request.journal,
            quota=request.quota,
            now=time.time(),
        )
        self.log.info("queue_created", queue=record.name, transactional=record.transactional)
        self._reply_ok(request_id, record.queue_id)

    def _delete_queue(self, request_id: int, request: cf.DeleteQueue) -> None:
        record = self.core.queue(request.name)
        count = self.core.delete_queue(request.name)
        self.daemon.signals.notify(
            [record.queue_id] + ([record.journal_id] if record.journal_id else [])
        )
        self.log.info("queue_deleted", queue=record.name, messages=count)
        self._reply_ok(request_id, count)

    def _purge_queue(self, request_id: int, request: cf.PurgeQueue) -> None:
        count = self.core.purge_queue(request.name)
        self.log.info("queue_purged", queue=request.name, messages=count)
        self._reply_ok(request_id, count)

    def _list_queues(self, request_id: int, request: cf.ListQueues) -> None:
        self._reply(request_id, cf.QueueList(queues=self.daemon.queue_infos()))

    def _get_status(self, request_id: int, request: cf.GetStatus) -> None:
        self._reply(request_id, self.daemon.status())

    # ------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------

    def _begin(self, request_id: int, request: cf.Begin) -> None:
        tx_id = request.tx_id
        if tx_id == 0:
            tx_id = self._next_server_tx_id
            self._next_server_tx_id += 1
        elif tx_id >= cf.CLIENT_TX_ID_LIMIT:
            msg = f"transaction id {tx_id} is reserved for the queue manager; use 1..2**63-1"
            raise InvalidArgument(msg)
        elif tx_id in self._transactions:
            msg = f"transaction id {tx_id} is already in use on this connection"
            raise TransactionUsageError(msg)
        tx = self.core.begin(self, time.time())
        tx.client_id = tx_id
        self._transactions[tx_id] = tx
        self._reply_ok(request_id, tx_id)

    def transaction(self, tx_id: int) -> Transaction:
        """The open transaction this connection calls ``tx_id``.

        Raises:
            TransactionNotFound: unknown here, or already ended.
            TransactionAborted: ended by the daemon (idle timeout, failure).
        """
        tx = self._transactions.get(tx_id)
        if tx is None:
            msg = f"transaction {tx_id} is not open on this connection"
            raise TransactionNotFound(msg)
        if tx.abort_reason is not None:
            del self._transactions[tx_id]
            msg = f"transaction {tx_id} was aborted: {tx.abort_reason}"
            raise TransactionAborted(msg)
        if tx.state is not TransactionState.OPEN:
            msg = f"transaction {tx_id} is already committing"
            raise TransactionNotFound(msg)
        return tx

    def _note_failed_send(self, value: cf.FrameValue, error: QueueManagerError) -> None:
        """Remember the first failed send of an open transaction: it may only abort now.

        Clients pipeline a transaction's sends and its commit; refusing the
        commit is what keeps a failed send from committing the others alone.
        """
        if isinstance(value, cf.Send) and value.tx_id in self._transactions:
            self._failed_sends.setdefault(value.tx_id, error.message)

    def _abort(self, request_id: int, request: cf.Abort) -> None:
        self._failed_sends.pop(request.tx_id, None)
        tx = self.transaction(request.tx_id)
        del self._transactions[request.tx_id]
        self.cancel_waits(request.tx_id)
        woken = self.core.abort(tx)
        self.daemon.signals.notify(woken)
        self.log.info("transaction_aborted", tx=request.tx_id, reason="by client")
        self._reply_ok(request_id)

    async def _commit(self, request_id: int, request: cf.Commit) -> None:
        failed = self._failed_sends.pop(request.tx_id, None)
        tx = self.transaction(request.tx_id)
        if failed is not None:
            del self._transactions[request.tx_id]
            self.cancel_waits(request.tx_id)
            self.daemon.signals.notify(self.core.abort(tx))
            self.log.info("transaction_aborted", tx=request.tx_id, reason="a send failed")
            msg = f"transaction {request.tx_id} was aborted because a send in it failed: {failed}"
            raise TransactionAborted(msg)
        if request.tx_id in self._waiting:
            msg = f"transaction {request.tx_id} still has a receive waiting; wait for it or abort"
            raise TransactionUsageError(msg)
        del self._transactions[request.tx_id]
        sends, receives = len(tx.sends), len(tx.receives)
        try:
            unit = self.core.prepare_commit(tx)
            # Replies gathered so far go out with the commit's own, after the
            # sync: one write per transaction (see the module docstring).
            outcome = await self._submit(tx, unit)
        except BaseException:
            # Whatever went wrong, the transaction must not keep its locks.
            if tx.state is not TransactionState.ENDED:
                self.daemon.signals.notify(self.core.abort(tx))
            raise
        woken, error = self.core.finish_commit(tx, outcome)
        self.daemon.signals.notify(woken)
        if error is not None:
            self.log.info("transaction_aborted", tx=request.tx_id, reason=error.message)
            raise error
        self.log.info("transaction_committed", tx=request.tx_id, sends=sends, receives=receives)
        self._reply_ok(request_id)

    async def _submit(self, tx: Transaction, unit: storage.CommitUnit) -> CommitOutcome:
        """Hand a transaction to the committer; on a failed batch abort it and re-raise."""
        try:
            return await self.daemon.committer.submit(unit)
        except storage.StoreError as exc:
            self.daemon.signals.notify(self.core.abort(tx))
            self.log.warning("transaction_aborted", tx=tx.client_id, reason=str(exc))
            error = translate_store_error(exc)
            msg = f"transaction {tx.client_id} was aborted: {error.message}"
            raise type(error)(msg) from exc

    def _abort_all(self, reason: str) -> None:
        for tx_id, tx in list(self._transactions.items()):
            if tx.state is TransactionState.OPEN:
                self.daemon.signals.notify(self.core.expire(tx, reason))
                self.log.info("transaction_aborted", tx=tx_id, reason=reason)
        self._transactions.clear()
        self._failed_sends.clear()

    # ------------------------------------------------------------------
    # Sending
    # ------------------------------------------------------------------

    async def _send_message(self, request_id: int, request: cf.Send) -> None:
        tx = self.transaction(request.tx_id) if request.tx_id else None
        try:
            mode = SendMode(request.mode)
        except ValueError:
            msg = f"send mode must be 0 (auto), 1 (none) or 2 (single message), not {request.mode}"
            raise InvalidArgument(msg) from None
        # The Send frame carries exactly the properties the core needs.
        prepared = self.core.prepare_send(
            request.destination, request, tx=tx, mode=mode, now=time.time()
        )
        if tx is not None:
            self._reply_ok(request_id)
            return
        try:
            outcome = await self.daemon.committer.submit(
                storage.CommitUnit(sends=prepared.messages)
            )
        except storage.StoreError as exc:
            raise translate_store_error(exc) from exc
        if outcome.error is not None:
            raise translate_store_error(outcome.error)
        self.daemon.signals.notify({send.queue_id for send in outcome.sends})
        first = outcome.sends[0]
        self._reply(
            request_id,
            cf.Sent(
                message_id=first.message_id,
                queue=prepared.queues[0].display_name,
                lookup_id=first.lookup_id,
            ),
        )

    # ------------------------------------------------------------------
    # Receiving
    # ------------------------------------------------------------------

    async def _receive(self, request_id: int, request: cf.Receive) -> None:
        tx = self.transaction(request.tx_id) if request.tx_id else None
        queue = self.core.queue(request.queue)
        self.core.check_receive(queue, tx, peek=request.peek)
        if tx is not None and request.peek:
            msg = "peeking inside a transaction is not meaningful; peek outside it"
            raise InvalidArgument(msg)
        if await self._try_receive(request_id, request, queue, tx):
            return
        if request.timeout_ms == 0:
            self._reply(request_id, cf.NoMessage())
            return
        if tx is not None and tx.client_id in self._waiting:
            msg = f"transaction {tx.client_id} already has a receive waiting"
            raise TransactionUsageError(msg)
        self._nursery.start_soon(self._wait_and_receive, request_id, request, tx)

    async def _try_receive(
        self, request_id: int, request: cf.Receive, queue: QueueRecord, tx: Transaction | None
    ) -> bool:
        """Take (or peek) a message now if one is visible; True if answered."""
        found = self.core.find(queue, lookup_id=request.lookup_id)
        if found is None:
            return False
        lookup_id, record = found
        if request.peek:
            self._reply(request_id, _message_reply(queue, lookup_id, record))
            return True
        now = time.time()
        self.core.lock(queue, lookup_id, tx, now)
        if tx is not None:
            self._reply(request_id, _message_reply(queue, lookup_id, record))
            return True
        # A non-transacted receive, or a single-message transaction on a
        # transactional queue: the message is removed durably before it is returned.
        unit = self.core.removal_unit(queue, lookup_id)
        try:
            outcome = await self.daemon.committer.submit(unit)
        except storage.StoreError as exc:
            self.daemon.signals.notify(self.core.finish_removal(queue.queue_id, lookup_id, None)[0])
            raise translate_store_error(exc) from exc
        except BaseException:
            # Whatever went wrong, the message must not stay locked.
            self.daemon.signals.notify(self.core.finish_removal(queue.queue_id, lookup_id, None)[0])
            raise
        woken, error = self.core.finish_removal(queue.queue_id, lookup_id, outcome)
        self.daemon.signals.notify(woken)
        if error is not None:
            raise error
        self._reply(request_id, _message_reply(queue, lookup_id, record))
        return True

    async def _wait_and_receive(
        self, request_id: int, request: cf.Receive, tx: Transaction | None
    ) -> None:
        key = tx.client_id if tx is not None else -request_id - 1
        timeout = (
            None if request.timeout_ms == cf.INFINITE_TIMEOUT_MS else request.timeout_ms / 1000
        )
        deadline = trio.current_time() + timeout if timeout is not None else float("inf")
        with trio.CancelScope() as scope:
            self._waiting[key] = scope
            try:
                answered = await self._wait_loop(request_id, request, tx, deadline)
            except QueueManagerError as exc:
                self._reply_error(request_id, exc)
                answered = True
            except storage.StoreError as exc:
                self._reply_error(request_id, translate_store_error(exc))
                answered = True
            finally:
                self._waiting.pop(key, None)
            if not answered:
                self._reply(request_id, cf.NoMessage())
        if scope.cancelled_caught:
            if self._closing:
                return
            # The transaction was aborted while its receive waited.
            message = f"transaction {key} was aborted while this receive waited"
            self._reply_error(request_id, TransactionAborted(message))
        await self._flush()

    async def _wait_loop(
        self, request_id: int, request: cf.Receive, tx: Transaction | None, deadline: float
    ) -> bool:
        while True:
            queue = self.core.queue(request.queue)
            event = self.daemon.signals.event(queue.queue_id)
            if tx is not None:
                tx = self.transaction(tx.client_id)
            if await self._try_receive(request_id, request, queue, tx):
                return True
            if self.daemon.stopping:
                msg = "the queue manager is shutting down"
                raise ShuttingDown(msg)
            with trio.move_on_at(deadline):
                await event.wait()
                continue
            return False

    def cancel_waits(self, tx_id: int) -> None:
        scope = self._waiting.get(tx_id)
        if scope is not None:
            scope.cancel()

    # ------------------------------------------------------------------
    # Peek range
    # ------------------------------------------------------------------

    def _peek_range(self, request_id: int, request: cf.PeekRange) -> None:
        queue = self.core.queue(request.queue)
        limit = max(0, min(request.max_count, MAX_PEEK_RANGE))
        found = self.core.peek_range(queue, after=request.after, limit=limit)
        messages: list[cf.MessageData] = []
        size = 0
        for lookup_id, record in found:
            size += len(record.body) + 1024
            if messages and size > cf.MAX_FRAME_BODY - 64 * 1024:
                break  # the client asks again from the last LookupId it got
            messages.append(_message_data(queue, lookup_id, record))
        self._reply(request_id, cf.MessageList(messages=tuple(messages)))


def _message_data(queue: QueueRecord, lookup_id: int, record: MessageRecord) -> cf.MessageData:
    return cf.MessageData(
        queue=queue.display_name,
        lookup_id=lookup_id,
        message_id=storage.format_message_id(record.message_id_qm, record.message_id_ordinal),
        label=record.label,
        body=record.body,
        correlation_id=record.correlation_id,
        app_specific=record.app_specific,
        priority=record.priority,
        delivery=record.delivery,
        acknowledge=record.acknowledge,
        journal=record.journal_level,
        admin_queue=record.admin_queue,
        response_queue=record.response_queue,
        time_to_reach_queue=record.time_to_reach_queue,
        time_to_be_received=record.time_to_be_received,
        message_class=record.message_class,
        sent_time=record.sent_time,
        arrived_time=record.arrived_time,
        source_qm=record.source_qm,
        transactional=record.transactional,
        destination=record.destination,
    )


def _message_reply(queue: QueueRecord, lookup_id: int, record: MessageRecord) -> cf.MessageReply:
    return cf.MessageReply(message=_message_data(queue, lookup_id, record))


def queue_info(record: QueueRecord, locked: int) -> cf.QueueInfo:
    """The client-protocol view of a queue."""
    return cf.QueueInfo(
        name=record.display_name,
        format_name=display_format_name(record.name),
        kind=int(record.kind),
        transactional=record.transactional,
        journal=record.journal,
        quota=record.quota,
        depth=record.depth,
        bytes=record.bytes,
        locked=locked,
        created_at=record.created_at,
    )
