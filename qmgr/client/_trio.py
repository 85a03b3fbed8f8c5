"""The trio client: :func:`open_client`, :class:`AsyncQueueManager` and :class:`AsyncTransaction`.

Theory of operation
-------------------
One TCP connection (``TCP_NODELAY``) per client, and one
``_protocol.ClientProtocol`` that does all but the I/O, as for the blocking
client: it checks arguments, packs requests, allocates request and
transaction ids, routes replies and keeps the pipelining's books. A
background reader task feeds the daemon's stream to it, and it wakes the
task waiting for each reply's request id, so any number of tasks may share
one client: a receive waiting for a message does not hold up the others (the
daemon serves a waiting receive in a task of its own, too).
Writes are serialised with a ``trio.Lock`` and never cancelled half-way (a
torn frame would break the connection for everyone), so a cancelled request
either was not written at all or was written whole.

Sends inside a transaction are pipelined exactly as in the blocking client:
:meth:`AsyncTransaction.send` appends the frame to a shared output buffer
and returns; the buffer is written once it holds more than 16 KiB or with
the next request that needs a reply. ``begin()`` is pipelined as well (the
client chooses the transaction id), so a one-message transaction costs one
round trip: Begin, Send and Commit go out in one write. The first failure
among a transaction's pipelined requests is raised by the next call on that
transaction, and ``commit()`` of such a transaction aborts it and raises
that error: the daemon refuses to commit a transaction in which a send
failed, so a commit never applies part of a transaction.

Cancelling a task that waits for a reply abandons the reply, not the
request: a receive cancelled that way may still take a message, and a
receive with no timeout keeps waiting on the daemon (counting against
``limits.max_waiting_receives_per_connection``) until it takes one. Outside
a transaction that message is lost. Inside one, the transaction can then
only abort: ``commit()`` aborts it and raises, and the message returns to
its queue. Prefer the ``timeout`` argument to cancelling a receive. A
transaction's Commit or Abort is written even from a cancelled scope.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import socket
import ssl
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Final, Self, Unpack

import trio

from wire import client_frames as cf

from . import _common as common
from . import _protocol as protocol
from . import _replies as replies
from ._codec import SendOptions
from ._errors import ConnectionLost, QueueError
from ._lists_api import AsyncQueueManagerLists
from ._message import Message, QueueInfo, Status
from ._outgoing_api import AsyncQueueManagerOutgoing
from ._permissions_api import AsyncQueueManagerPermissions
from ._poison_api import AsyncQueueManagerPoison, AsyncTransactionPoison, create_request
from ._protocol import ClientProtocol, TransactionState, Waiter
from ._replies import PeekPages
from ._trace_api import AsyncQueueManagerTrace
from ._two_phase_api import AsyncQueueManagerTwoPhase, AsyncTransactionTwoPhase

__all__ = ["AsyncQueueManager", "AsyncTransaction", "open_client"]

#: Longest an abort after an exception may take before the client gives up on it.
_ABORT_GRACE: Final = 10.0


@asynccontextmanager
async def open_client(
    address: str = common.DEFAULT_ADDRESS,
    *,
    client_name: str | None = None,
    tls: ssl.SSLContext | None = None,
    token: str | None = None,
) -> AsyncIterator[AsyncQueueManager]:
    """Connect to a queue manager for the duration of an ``async with`` block.

    ::

        async with open_client("127.0.0.1:1802") as qm:
            await qm.send("orders", b"hello")

    Use ``trio.fail_after`` around it to bound the time spent connecting.
    With ``tls`` (``qmgr.client.tls_context()`` makes one) it connects over TLS;
    with ``token`` it authenticates with it.

    Raises:
        ConnectionLost: the daemon could not be reached (the message says
            where and why).
        UnsupportedVersion: the daemon speaks no version this SDK speaks.
    """
    stream, host, where = await _open_stream(address)
    connection: trio.abc.Stream = stream
    if tls is not None:
        connection = await _tls_handshake(stream, tls, host, where)
    qm = AsyncQueueManager(connection, where)
    # Exceptions are carried out of the nursery by hand so that the caller
    # sees its own exception, not an ExceptionGroup around it.
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(qm._read_loop)
        try:
            await qm._handshake(
                client_name if client_name is not None else common.default_client_name(), token
            )
        except BaseException as exc:
            error = exc
        if error is None:
            try:
                yield qm
            except BaseException as exc:
                error = exc
        nursery.cancel_scope.cancel()
        qm._proto.close("the connection was closed")
        await qm._close_stream()
    if error is not None:
        raise error


async def _open_stream(address: str) -> tuple[trio.SocketStream, str, str]:
    """A stream to ``address`` (``HOST:PORT`` or ``unix:PATH``), the host name TLS
    checks, and the address for messages."""
    path = common.unix_path(address)
    if path is not None:
        where = f"{common.UNIX_PREFIX}{path}"
        try:
            return await trio.open_unix_socket(path), "localhost", where
        except OSError as exc:
            msg = f"cannot connect to the queue manager at {where}: {_connect_failure(exc)}"
            raise ConnectionLost(msg) from None
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
    return stream, host, where


def _connect_failure(exc: OSError) -> str:
    """Why connecting failed, in words (trio wraps the attempts' errors in a group)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        for inner in cause.exceptions:
            if isinstance(inner, OSError) and inner.strerror:
                return inner.strerror.lower()
    return (exc.strerror or str(exc)).lower()


class _Waiter(Waiter):
    """A task waiting for the reply to one request."""

    __slots__ = ("event",)

    def __init__(self, request_id: int) -> None:
        super().__init__(request_id)
        self.event = trio.Event()

    def wake(self) -> None:
        self.event.set()


async def _tls_handshake(
    stream: trio.SocketStream, context: ssl.SSLContext, host: str, where: str
) -> trio.SSLStream[trio.SocketStream]:
    secure = trio.SSLStream(stream, context, server_hostname=host)
    try:
        await secure.do_handshake()
    except trio.BrokenResourceError as exc:
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = f"its certificate is not trusted ({cause.verify_message})"
        elif isinstance(cause, ssl.SSLError) and cause.reason:
            reason = f"TLS handshake failed: {cause.reason}"
        else:
            reason = "TLS handshake failed: the connection was closed"
        with trio.CancelScope(shield=True):
            await stream.aclose()
        msg = f"cannot connect to the queue manager at {where}: {reason}"
        raise ConnectionLost(msg) from None
    return secure


class AsyncQueueManager(
    AsyncQueueManagerTwoPhase,
    AsyncQueueManagerTrace,
    AsyncQueueManagerLists,
    AsyncQueueManagerPoison,
    AsyncQueueManagerOutgoing,
    AsyncQueueManagerPermissions,
):
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

    def __init__(self, stream: trio.abc.Stream, address: str) -> None:
        """Wrap a connected stream; use :func:`open_client` instead."""
        self.address = address
        self.qm_name = ""
        self.qm_guid = common.NO_GUID
        self.server_version = ""
        self._stream = stream
        self._send_lock = trio.Lock()
        self._proto = ClientProtocol(address, _Waiter, address_in_stream_errors=True)

    def __repr__(self) -> str:
        state = "closed" if self._proto.closed else "open"
        return f"<AsyncQueueManager {self.qm_name!r} at {self.address} ({state})>"

    @property
    def closed(self) -> bool:
        """True once the ``async with`` block ended or the connection broke."""
        return self._proto.closed

    async def _handshake(self, client_name: str, token: str | None = None) -> None:
        proto = self._proto
        frame = bytearray()
        try:
            reply = await self._exchange(proto.hello(frame, client_name), frame)
        except QueueError as exc:
            raise proto.handshake_error(exc) from None
        self.qm_name, self.qm_guid, self.server_version = proto.welcome(reply)
        if token is not None:
            await self._authenticate(token)

    # ------------------------------------------------------------------
    # Queues
    # ------------------------------------------------------------------

    async def create_queue(
        self,
        name: str,
        transactional: bool = False,
        journal: bool = False,
        quota: int | None = None,
        *,
        retry_count: int | None = None,
        retry_cycles: int | None = None,
        retry_delay: float | _dt.timedelta | None = None,
    ) -> None:
        """Create a private queue, its journal queue and its subqueues; see
        ``QueueManager.create_queue``."""
        request = create_request(
            self._proto,
            name=name,
            transactional=transactional,
            journal=journal,
            quota=quota,
            retry_count=retry_count,
            retry_cycles=retry_cycles,
            retry_delay=retry_delay,
        )
        replies.ok_value(await self._request(request))

    async def delete_queue(self, name: str) -> int:
        """Delete a queue, its journal and their messages; return how many messages went."""
        return replies.ok_value(await self._request(cf.DeleteQueue(name=name)))

    async def purge_queue(self, name: str) -> int:
        """Delete every message in a queue; return how many."""
        return replies.ok_value(await self._request(cf.PurgeQueue(name=name)))

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue with its counters, by name."""
        return replies.queue_list(await self._request(cf.ListQueues()))

    async def status(self) -> Status:
        """The queue manager's identity, connections, open transactions and queues."""
        return replies.status(await self._request(cf.GetStatus()))

    # ------------------------------------------------------------------
    # Messages
    # ------------------------------------------------------------------

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        *,
        transactional: bool | None = None,
        **options: Unpack[SendOptions],
    ) -> str:
        """Send one message outside any transaction; return its message id.

        The arguments are those of ``QueueManager.send``.
        """
        frame = bytearray()
        waiter = self._proto.send_request(frame, destination, body, transactional, options)
        return replies.message_id(await self._exchange(waiter, frame))

    async def receive(
        self,
        queue: str,
        timeout: float | None = 0.0,  # noqa: ASYNC109 - the daemon waits, not the client
        *,
        lookup_id: int | None = None,
    ) -> Message | None:
        """Receive (remove) one message outside any transaction; see ``QueueManager.receive``."""
        return await self._receive(None, queue, timeout, False, lookup_id)

    async def peek(
        self,
        queue: str,
        timeout: float | None = 0.0,  # noqa: ASYNC109 - the daemon waits, not the client
        lookup_id: int | None = None,
    ) -> Message | None:
        """Look at the next message (or the one with ``lookup_id``) without removing it."""
        return await self._receive(None, queue, timeout, True, lookup_id)

    async def peek_range(self, queue: str, after: int = 0, max: int = 1000) -> list[Message]:
        """Look at up to ``max`` messages with a lookup id above ``after``; see ``QueueManager``."""
        pages = PeekPages(queue, after, max)
        while (request := pages.next_request()) is not None:
            pages.add(await self._request(request))
        return pages.found

    # ------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------

    def begin(self, xid: str | None = None) -> AsyncTransaction:
        """Begin a transaction (no waiting: the Begin request is pipelined); with ``xid``
        a global one, which can be prepared (see ``QueueManager.begin``).

        Use it as an async context manager, which commits on normal exit and
        aborts on an exception::

            async with qm.begin() as tx:
                msg = await tx.receive("in", timeout=5)
                await tx.send("out", msg.body)

        ``tx = await qm.begin()`` works too.
        """
        tx = AsyncTransaction(self, self._proto.next_tx_id(), xid)
        self._proto.begin(tx._state)
        return tx

    # ------------------------------------------------------------------
    # The connection
    # ------------------------------------------------------------------

    async def _request(self, value: cf.ClientRequest) -> cf.ServerReply:
        """Send one request (after whatever is buffered) and wait for its reply."""
        frame = bytearray()
        return await self._exchange(self._proto.request(frame, value), frame)

    async def _receive(
        self,
        state: TransactionState | None,
        queue: str,
        wait: float | None,
        peek: bool,
        lookup_id: int | None,
    ) -> Message | None:
        """Receive or peek, in the transaction ``state`` or not, waiting up to ``wait`` s."""
        frame = bytearray()
        waiter = self._proto.receive_request(frame, state, queue, wait, peek, lookup_id)
        try:
            reply = await self._exchange(waiter, frame)
        except trio.Cancelled:
            if state is not None and not peek:
                # The daemon may have handed this transaction a message nobody
                # will see: committing would remove it unseen. Only abort is left.
                state.fail(
                    int(cf.ErrorCode.TRANSACTION_ABORTED),
                    "it was cancelled before its reply was read, and the message it may "
                    "have taken must not be committed unseen",
                    what="a receive",
                )
            raise
        return replies.message_or_none(reply, state)

    async def _end(self, state: TransactionState, *, commit: bool) -> None:
        """Commit or abort ``state``: the core says what goes out and what its outcome raises."""
        state.end(commit=commit)
        frame = bytearray()
        outcome: cf.ServerReply | QueueError
        try:
            waiter = self._proto.end_request(frame, state)
            # Once the transaction is marked ended its Commit or Abort must go
            # out, even in a cancelled scope: else its holds would stay on a
            # live connection until the idle timeout.
            outcome = await self._exchange(waiter, frame, shield_write=True)
        except QueueError as exc:
            outcome = exc
        protocol.transaction_ended(state, outcome)

    async def _exchange(
        self, waiter: _Waiter, frame: bytearray, *, shield_write: bool = False
    ) -> cf.ServerReply:
        """Write ``frame`` (after whatever is buffered) and wait for ``waiter``'s reply;
        with ``shield_write`` the frame is written even in a cancelled scope."""
        try:
            if shield_write:
                with trio.CancelScope(shield=True):
                    await self._write(frame)
            else:
                await self._write(frame)
            await waiter.event.wait()
        finally:
            self._proto.forget(waiter)
        return self._proto.result(waiter)

    async def _write(self, frame: bytes | bytearray = b"") -> None:
        """Write the output buffer and ``frame``, whole, in request order."""
        async with self._send_lock:
            data = self._proto.data_to_send(frame)
            if not data:
                return
            try:
                with trio.CancelScope(shield=True):
                    await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                reason = f"the connection failed: {exc}" if str(exc) else "the connection failed"
                error = self._proto.lost(reason)
                await self._close_stream()
                raise error from None

    async def _read_loop(self) -> None:
        """Read until the connection ends, feeding the core, which wakes each reply's waiter."""
        proto = self._proto
        reason = "the queue manager closed the connection"
        try:
            while True:
                data = await self._stream.receive_some(common.RECEIVE_SIZE)
                if not data:
                    break
                proto.receive_data(data)
        except QueueError:
            return  # a malformed or rejected stream: the core broke the connection
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = f"the connection failed: {exc}" if str(exc) else "the connection failed"
        proto.lost(reason)

    async def _close_stream(self) -> None:
        """Close the socket, even in a cancelled scope."""
        with trio.CancelScope(shield=True):
            await self._stream.aclose()


class AsyncTransaction(AsyncTransactionTwoPhase, AsyncTransactionPoison):
    """An open transaction on an :class:`AsyncQueueManager`; see the blocking ``Transaction``.

    Sends are pipelined: :meth:`send` returns without waiting for the
    daemon, errors it finds are raised by the next call on this transaction,
    and :meth:`commit` of a transaction with a failed send aborts it and
    raises that error. One begun with an xid can be prepared (:meth:`prepare`).
    Use from one task at a time.
    """

    __slots__ = ("_proto", "_qm", "_state")

    def __init__(self, qm: AsyncQueueManager, tx_id: int, xid: str | None = None) -> None:
        """Wrap an open transaction; use :meth:`AsyncQueueManager.begin` instead."""
        self._qm = qm
        self._proto = qm._proto
        self._state = TransactionState(tx_id, xid)

    @property
    def id(self) -> int:
        """The transaction's id on this connection."""
        return self._state.id

    @property
    def ended(self) -> bool:
        """True once committed or aborted."""
        return self._state.ended

    def __repr__(self) -> str:
        return f"<AsyncTransaction {self._state.id} ({self._state.phase})>"

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
            # If the connection is gone, the daemon aborts the transaction itself
            # (a prepared one stays in doubt until resolved by xid).
            with contextlib.suppress(QueueError):
                await self.abort()

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        **options: Unpack[SendOptions],
    ) -> None:
        """Add a message to the transaction (pipelined); see ``Transaction.send``."""
        if self._proto.pipeline_send(self._state, destination, body, options):
            await self._qm._write()

    async def receive(
        self,
        queue: str,
        timeout: float | None = 0.0,  # noqa: ASYNC109 - the daemon waits, not the client
        *,
        lookup_id: int | None = None,
    ) -> Message | None:
        """Receive a message inside the transaction; see ``Transaction.receive``."""
        return await self._qm._receive(self._state, queue, timeout, False, lookup_id)

    async def commit(self) -> None:
        """Commit: every send becomes visible and every receive final, at once.

        Raises:
            TransactionAborted, QuotaExceeded, StoreFull: nothing applied;
            the error of a failed pipelined send: the transaction was aborted.
        """
        await self._qm._end(self._state, commit=True)

    async def abort(self) -> None:
        """Abort: discard the sends; received messages go back to their places.

        Raises:
            TransactionNotFound: it has already ended.
        """
        await self._qm._end(self._state, commit=False)
