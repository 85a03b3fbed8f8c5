"""The trio client: :func:`open_client`, :class:`AsyncQueueManager` and :class:`AsyncTransaction`.

Theory of operation
-------------------
One TCP connection (``TCP_NODELAY``) per client. A background reader task
splits the daemon's stream into frames (``_codec.ReplyReader``) and hands
each reply to the task waiting for its request id, so any number of tasks
may share one client: a receive waiting for a message does not hold up the
others (the daemon serves a waiting receive in a task of its own, too).
Writes are serialised with a ``trio.Lock`` and never cancelled half-way (a
torn frame would break the connection for everyone), so a cancelled request
either was not written at all or was written whole.

Sends inside a transaction are pipelined exactly as in the blocking client:
:meth:`AsyncTransaction.send` appends the frame to a shared output buffer
and returns; the buffer is written once it holds more than 256 KiB or with
the next request that needs a reply. ``begin()`` is pipelined as well (the
client chooses the transaction id), so a one-message transaction costs one
round trip: Begin, Send and Commit go out in one write. The first failure
among a transaction's pipelined requests is raised by the next call on that
transaction, and ``commit()`` of such a transaction aborts it and raises
that error: the daemon refuses to commit a transaction in which a send
failed, so a commit never applies part of a transaction.

Cancelling a task that waits for a reply abandons the reply, not the
request: a receive cancelled that way may still take a message (outside a
transaction that message is lost; inside one it returns when the
transaction aborts). Prefer the ``timeout`` argument to cancelling a receive.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Final, Self

import trio

from wire import RemoteProtocolError
from wire import client_frames as cf

from . import _common as common
from ._codec import (
    ABORT,
    BEGIN,
    COMMIT,
    ReplyReader,
    append_receive,
    append_send,
    append_tx_request,
)
from ._common import PIPELINE_FLUSH_BYTES, TransactionState
from ._errors import (
    ConnectionLost,
    InvalidArgument,
    QueueError,
    TransactionAborted,
    TransactionNotFound,
    error_from_reply,
)
from ._message import Delivery, Message, QueueInfo, Status

__all__ = ["AsyncQueueManager", "AsyncTransaction", "open_client"]

#: Longest an abort after an exception may take before the client gives up on it.
_ABORT_GRACE: Final = 10.0


@asynccontextmanager
async def open_client(
    address: str = common.DEFAULT_ADDRESS, *, client_name: str | None = None
) -> AsyncIterator[AsyncQueueManager]:
    """Connect to a queue manager for the duration of an ``async with`` block.

    ::

        async with open_client("127.0.0.1:1802") as qm:
            await qm.send("orders", b"hello")

    Use ``trio.fail_after`` around it to bound the time spent connecting.

    Raises:
        ConnectionLost: the daemon could not be reached (the message says
            where and why).
        UnsupportedVersion: the daemon speaks no version this SDK speaks.
    """
    host, port = common.parse_address(address)
    where = f"{host}:{port}"
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        msg = f"cannot connect to the queue manager at {where}: {_connect_failure(exc)}"
        raise ConnectionLost(msg) from None
    try:
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, True)
    except OSError:
        pass
    qm = AsyncQueueManager(stream, where)
    # Exceptions are carried out of the nursery by hand so that the caller
    # sees its own exception, not an ExceptionGroup around it.
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(qm._read_loop)
        try:
            await qm._handshake(
                client_name if client_name is not None else common.default_client_name()
            )
        except BaseException as exc:
            error = exc
        if error is None:
            try:
                yield qm
            except BaseException as exc:
                error = exc
        nursery.cancel_scope.cancel()
        await qm._close("the connection was closed")
    if error is not None:
        raise error


def _connect_failure(exc: OSError) -> str:
    """Why connecting failed, in words (trio wraps the attempts' errors in a group)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        for inner in cause.exceptions:
            if isinstance(inner, OSError) and inner.strerror:
                return inner.strerror.lower()
    return (exc.strerror or str(exc)).lower()


class _StreamRejected(Exception):
    """The daemon answered request id 0: it rejected the stream and closes the connection."""


class _Waiter:
    """A task waiting for the reply to one request."""

    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.reply: cf.FrameValue | None = None


class AsyncQueueManager:
    """A connection to a queue manager, for trio; get one from :func:`open_client`.

    Every method of the blocking :class:`~qmgr.client.QueueManager` is here,
    awaited. Several tasks may use one client at the same time; a transaction
    belongs to one task at a time.

    Attributes:
        address: the ``HOST:PORT`` connected to.
        qm_name: the queue manager's name.
        qm_guid: its GUID.
        server_version: the daemon's version.
    """

    def __init__(self, stream: trio.SocketStream, address: str) -> None:
        """Wrap a connected stream; use :func:`open_client` instead."""
        self.address = address
        self.qm_name = ""
        self.qm_guid = common.NO_GUID
        self.server_version = ""
        self._stream = stream
        self._send_lock = trio.Lock()
        self._out = bytearray()
        self._next_id = 0
        self._next_tx_id = 0
        self._waiters: dict[int, _Waiter] = {}
        self._pipelined: dict[int, TransactionState] = {}
        self._broken: ConnectionLost | None = None

    def __repr__(self) -> str:
        state = "closed" if self._broken is not None else "open"
        return f"<AsyncQueueManager {self.qm_name!r} at {self.address} ({state})>"

    @property
    def closed(self) -> bool:
        """True once the ``async with`` block ended or the connection broke."""
        return self._broken is not None

    async def _handshake(self, client_name: str) -> None:
        try:
            reply = await self._request(cf.Hello(client_name=client_name[:200]))
        except ConnectionLost as exc:
            msg = f"handshake with the queue manager at {self.address} failed: {exc.message}"
            raise ConnectionLost(msg) from None
        except QueueError as exc:
            msg = f"the queue manager at {self.address} refused the connection: {exc.message}"
            raise error_from_reply(int(exc.code or 0), msg) from None
        if type(reply) is not cf.HelloOk:
            msg = f"{self.address} answered {type(reply).__name__} to Hello; is it a qmgr daemon?"
            raise ConnectionLost(msg)
        self.qm_name = reply.qm_name
        self.qm_guid = reply.qm_guid
        self.server_version = reply.server_version

    # ------------------------------------------------------------------
    # Queues
    # ------------------------------------------------------------------

    async def create_queue(
        self,
        name: str,
        transactional: bool = False,
        journal: bool = False,
        quota: int | None = None,
    ) -> None:
        """Create a private queue and its journal queue; see ``QueueManager.create_queue``."""
        request = cf.CreateQueue(
            name=name, transactional=transactional, journal=journal, quota=quota
        )
        common.expect_ok(await self._request(request))

    async def delete_queue(self, name: str) -> int:
        """Delete a queue, its journal and their messages; return how many messages went."""
        return common.expect_ok(await self._request(cf.DeleteQueue(name=name)))

    async def purge_queue(self, name: str) -> int:
        """Delete every message in a queue; return how many."""
        return common.expect_ok(await self._request(cf.PurgeQueue(name=name)))

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue with its counters, by name."""
        reply = await self._request(cf.ListQueues())
        if type(reply) is not cf.QueueList:
            raise common.unexpected(reply, "QueueList")
        return [QueueInfo.from_wire(q) for q in reply.queues]

    async def status(self) -> Status:
        """The queue manager's identity, connections, open transactions and queues."""
        reply = await self._request(cf.GetStatus())
        if type(reply) is not cf.StatusInfo:
            raise common.unexpected(reply, "StatusInfo")
        return Status.from_wire(reply)

    # ------------------------------------------------------------------
    # Messages
    # ------------------------------------------------------------------

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        *,
        label: str = "",
        correlation_id: bytes | None = None,
        app_specific: int = 0,
        priority: int = 3,
        delivery: str | Delivery = "recoverable",
        acknowledge: int = 0,
        journal: int = 0,
        admin_queue: str = "",
        response_queue: str = "",
        time_to_reach_queue: float | None = None,
        time_to_be_received: float | None = None,
        transactional: bool | None = None,
    ) -> str:
        """Send one message outside any transaction; return its message id.

        The arguments are those of ``QueueManager.send``.
        """
        mode = common.SEND_MODES.get(transactional)
        if mode is None:
            msg = f"transactional must be None, False or True, not {transactional!r}"
            raise InvalidArgument(msg)
        self._check_open()
        request_id = self._new_id()
        frame = bytearray()
        append_send(
            frame, request_id, 0, mode, destination, body, label, correlation_id,
            app_specific, priority, delivery, acknowledge, journal, admin_queue,
            response_queue, time_to_reach_queue, time_to_be_received,
        )  # fmt: skip
        reply = await self._exchange(request_id, frame)
        if type(reply) is cf.Sent:
            return reply.message_id
        raise common.unexpected(reply, "Sent")

    async def receive(
        self,
        queue: str,
        timeout: float | None = 0.0,  # noqa: ASYNC109 - the daemon waits, not the client
        *,
        lookup_id: int | None = None,
    ) -> Message | None:
        """Receive (remove) one message outside any transaction; see ``QueueManager.receive``."""
        return await self._receive(0, queue, timeout, False, lookup_id)

    async def peek(
        self,
        queue: str,
        timeout: float | None = 0.0,  # noqa: ASYNC109 - the daemon waits, not the client
        lookup_id: int | None = None,
    ) -> Message | None:
        """Look at the next message (or the one with ``lookup_id``) without removing it."""
        return await self._receive(0, queue, timeout, True, lookup_id)

    async def peek_range(self, queue: str, after: int = 0, max: int = 1000) -> list[Message]:
        """Look at up to ``max`` messages with a lookup id above ``after``; see ``QueueManager``."""
        found: list[Message] = []
        while len(found) < max:
            request = cf.PeekRange(queue=queue, after=after, max_count=max - len(found))
            reply = await self._request(request)
            if type(reply) is not cf.MessageList:
                raise common.unexpected(reply, "MessageList")
            if not reply.messages:
                break
            found.extend(Message.from_wire(m) for m in reply.messages)
            after = found[-1].lookup_id
        return found

    # ------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------

    def begin(self) -> AsyncTransaction:
        """Begin a transaction (no waiting: the Begin request is pipelined).

        Use it as an async context manager, which commits on normal exit and
        aborts on an exception::

            async with qm.begin() as tx:
                msg = await tx.receive("in", timeout=5)
                await tx.send("out", msg.body)

        ``tx = await qm.begin()`` works too.
        """
        self._check_open()
        tx_id = self._next_tx_id = self._next_tx_id % common.MAX_CLIENT_TX_ID + 1
        tx = AsyncTransaction(self, tx_id)
        request_id = self._new_id()
        append_tx_request(self._out, BEGIN, request_id, tx_id)
        self._pipelined[request_id] = tx._state
        return tx

    # ------------------------------------------------------------------
    # The connection
    # ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._broken is not None:
            raise ConnectionLost(self._broken.message)

    def _new_id(self) -> int:
        request_id = self._next_id + 1
        if request_id > 0xFFFFFFFF:
            request_id = 1
        self._next_id = request_id
        return request_id

    async def _request(self, value: cf.ClientRequest) -> cf.ServerReply:
        """Send one request (after whatever is buffered) and wait for its reply."""
        self._check_open()
        request_id = self._new_id()
        return await self._exchange(request_id, common.encode(request_id, value))

    async def _receive(
        self, tx_id: int, queue: str, wait: float | None, peek: bool, lookup_id: int | None
    ) -> Message | None:
        """Receive or peek, in a transaction or not, waiting up to ``wait`` s in the daemon."""
        timeout_ms = common.timeout_ms(wait)
        self._check_open()
        request_id = self._new_id()
        frame = bytearray()
        append_receive(frame, request_id, tx_id, queue, timeout_ms, peek, lookup_id)
        return common.message_or_none(await self._exchange(request_id, frame))

    async def _tx_call(self, kind: int, tx_id: int) -> None:
        """Commit or abort."""
        self._check_open()
        request_id = self._new_id()
        frame = bytearray()
        append_tx_request(frame, kind, request_id, tx_id)
        common.expect_ok(await self._exchange(request_id, frame))

    async def _exchange(self, request_id: int, frame: bytes | bytearray) -> cf.ServerReply:
        """Write ``frame`` (after whatever is buffered) and wait for its reply."""
        waiter = _Waiter()
        self._waiters[request_id] = waiter
        try:
            await self._write(frame)
            await waiter.event.wait()
        finally:
            del self._waiters[request_id]
        reply = waiter.reply
        if reply is None:
            raise ConnectionLost(self._broken.message if self._broken else "connection closed")
        if type(reply) is cf.ErrorReply:
            raise error_from_reply(reply.code, reply.message)
        return reply  # type: ignore[return-value]

    async def _write(self, frame: bytes | bytearray = b"") -> None:
        """Write the output buffer and ``frame``, whole, in request order."""
        async with self._send_lock:
            self._check_open()
            if self._out:
                self._out += frame
                data: bytes | bytearray = self._out
                self._out = bytearray()
            else:
                data = frame
            if not data:
                return
            try:
                with trio.CancelScope(shield=True):
                    await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                reason = f"the connection failed: {exc}" if str(exc) else "the connection failed"
                await self._close(
                    f"lost the connection to the queue manager at {self.address}: {reason}"
                )
                raise ConnectionLost(self._broken.message if self._broken else reason) from None

    async def _flush_if_large(self) -> None:
        if len(self._out) > common.PIPELINE_FLUSH_BYTES:
            await self._write()

    async def _read_loop(self) -> None:
        """Read frames until the connection ends; hand each reply to its waiter."""
        reader = ReplyReader(self._pipelined, self._deliver)
        reason = "the queue manager closed the connection"
        try:
            while True:
                data = await self._stream.receive_some(common.RECEIVE_SIZE)
                if not data:
                    break
                reader.feed(data)
        except _StreamRejected as exc:
            reason = str(exc)
        except RemoteProtocolError as exc:
            reason = f"the queue manager sent a malformed frame: {exc}"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = f"the connection failed: {exc}" if str(exc) else "the connection failed"
        self._fail(f"lost the connection to the queue manager at {self.address}: {reason}")

    def _deliver(self, request_id: int, value: cf.FrameValue) -> None:
        waiter = self._waiters.get(request_id)
        if waiter is not None:
            waiter.reply = value
            waiter.event.set()
        elif request_id == 0 and type(value) is cf.ErrorReply:
            # The daemon rejected the stream itself and is closing the connection.
            msg = f"the queue manager closed the connection: {value.message}"
            raise _StreamRejected(msg)
        # else: the reply to a request whose waiter was cancelled

    def _fail(self, message: str) -> None:
        """Mark the connection broken and wake every waiter."""
        if self._broken is None:
            self._broken = ConnectionLost(message)
        self._out = bytearray()
        self._pipelined.clear()
        for waiter in self._waiters.values():
            waiter.event.set()

    async def _close(self, message: str) -> None:
        self._fail(message)
        with trio.CancelScope(shield=True):
            await self._stream.aclose()


class AsyncTransaction:
    """An open transaction on an :class:`AsyncQueueManager`; see the blocking ``Transaction``.

    Sends are pipelined: :meth:`send` returns without waiting for the
    daemon, errors it finds are raised by the next call on this transaction,
    and :meth:`commit` of a transaction with a failed send aborts it and
    raises that error. Use from one task at a time.
    """

    __slots__ = ("_qm", "_state")

    def __init__(self, qm: AsyncQueueManager, tx_id: int) -> None:
        """Wrap an open transaction; use :meth:`AsyncQueueManager.begin` instead."""
        self._qm = qm
        self._state = TransactionState(tx_id)

    @property
    def id(self) -> int:
        """The transaction's id on this connection."""
        return self._state.id

    @property
    def ended(self) -> bool:
        """True once committed or aborted."""
        return self._state.ended

    def __repr__(self) -> str:
        state = "ended" if self._state.ended else "failed" if self._state.failed else "open"
        return f"<AsyncTransaction {self._state.id} ({state})>"

    def __await__(self) -> Generator[Any, None, Self]:
        return self._itself().__await__()

    async def _itself(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state.ended:
            return
        if exc_type is None:
            await self.commit()
            return
        # Abort even if we are being cancelled, so that received messages go back now.
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + _ABORT_GRACE
            # If the connection is gone, the daemon aborts the transaction itself.
            with contextlib.suppress(QueueError):
                await self.abort()

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        *,
        label: str = "",
        correlation_id: bytes | None = None,
        app_specific: int = 0,
        priority: int = 3,
        delivery: str | Delivery = "recoverable",
        acknowledge: int = 0,
        journal: int = 0,
        admin_queue: str = "",
        response_queue: str = "",
        time_to_reach_queue: float | None = None,
        time_to_be_received: float | None = None,
    ) -> None:
        """Add a message to the transaction (pipelined); see ``Transaction.send``."""
        state = self._state
        if state.ended or state.failed:
            state.check()
        qm = self._qm
        if qm._broken is not None:
            raise ConnectionLost(qm._broken.message)
        request_id = qm._next_id + 1
        if request_id > 0xFFFFFFFF:
            request_id = 1
        out = qm._out
        append_send(
            out, request_id, state.id, 0, destination, body, label, correlation_id,
            app_specific, priority, delivery, acknowledge, journal, admin_queue,
            response_queue, time_to_reach_queue, time_to_be_received,
        )  # fmt: skip
        qm._next_id = request_id
        qm._pipelined[request_id] = state
        if len(out) > PIPELINE_FLUSH_BYTES:
            await qm._write()

    async def receive(
        self,
        queue: str,
        timeout: float | None = 0.0,  # noqa: ASYNC109 - the daemon waits, not the client
        *,
        lookup_id: int | None = None,
    ) -> Message | None:
        """Receive a message inside the transaction; see ``Transaction.receive``."""
        state = self._state
        state.check()
        message = await self._qm._receive(state.id, queue, timeout, False, lookup_id)
        state.check()
        return message

    async def commit(self) -> None:
        """Commit: every send becomes visible and every receive final, at once.

        Raises:
            TransactionAborted, QuotaExceeded, StoreFull: nothing applied;
            the error of a failed pipelined send: the transaction was aborted.
        """
        state = self._state
        if state.ended:
            state.check()
        if state.failed:
            await self._end(quiet=True)
            raise state.commit_error()
        try:
            await self._qm._tx_call(COMMIT, state.id)
        except QueueError:
            if state.failed:
                raise state.commit_error() from None
            raise
        finally:
            state.ended = True
        if state.failed:  # cannot happen with a daemon that refuses such commits
            raise state.commit_error()

    async def abort(self) -> None:
        """Abort: discard the sends; received messages go back to their places.

        Raises:
            TransactionNotFound: it has already ended.
        """
        state = self._state
        if state.ended:
            state.check()
        await self._end(quiet=False)

    async def _end(self, *, quiet: bool) -> None:
        self._state.ended = True
        try:
            await self._qm._tx_call(ABORT, self._state.id)
        except (TransactionNotFound, TransactionAborted):
            pass  # the daemon has already ended it: nothing of it was applied
        except ConnectionLost:
            if not quiet:
                raise
