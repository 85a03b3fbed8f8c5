"""The trio client: :func:`open_client`, :class:`AsyncQueueManager` and :class:`AsyncTransaction`.

Thin facades, the twins of ``_blocking``'s: every method awaits one call of
``calls/`` on the connection (``_trio_io.StreamConnection``), or for the hot
paths (sends, receives, begin) asks the connection's ``ClientProtocol`` to
pack the request and the connection to exchange it. ``AsyncQueueManager``'s
management calls are in its base class (``_trio_admin``). How the client
uses trio (a reader task, a send lock, what cancelling does): ``_trio_io``.
"""

# ruff: noqa: ASYNC109 - a ``timeout`` here is how long the daemon waits, not the client

from __future__ import annotations

import datetime as _dt
import ssl
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from typing import Any, Final, Self, Unpack

import trio

from ._codec import SendOptions
from ._common import DEFAULT_ADDRESS, QueueManagerIdentity, check_token, check_transport
from ._exceptions import QueueError
from ._message import Message, QueueInfo, Status
from ._transaction import TransactionHandle, TransactionState, abort_on_exit
from ._trio_admin import AsyncQueueManagerAdmin
from ._trio_io import StreamConnection, open_stream, tls_handshake
from .calls import handshake, messages, poison, queues, transactions
from .calls.messages import RangeInfo

__all__ = ["AsyncQueueManager", "AsyncTransaction", "open_client"]

#: Longest an abort after an exception may take before the client gives up on it.
_ABORT_GRACE: Final = 10.0


@asynccontextmanager
async def open_client(
    address: str = DEFAULT_ADDRESS,
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
        ConnectionLost: the daemon could not be reached, or the connection
            broke during the handshake (the message says where and why).
        LimitExceeded: the daemon refused the connection at one of its
            limits (``server.max_connections``,
            ``limits.max_connections_per_address``; the message says which).
        ShuttingDown: the daemon refused the connection because it is stopping.
        UnsupportedVersion: the daemon speaks no version this SDK speaks.
        AccessDenied: the daemon did not accept ``token`` (a daemon without
            tokens accepts none).
        InvalidArgument: a bad address, a token that is not valid Unicode
            text, or ``tls`` with a ``unix:PATH`` address.

    Once the connection broke or the daemon closed it (idle for
    ``server.idle_timeout``, evicted to make room, ...), every call on the
    client raises :class:`ConnectionLost`, with the daemon's reason if it gave one.
    """
    check_token(token)
    check_transport(address, tls)
    stream, host, where = await open_stream(address)
    connection: trio.abc.Stream = stream
    if tls is not None:
        connection = await tls_handshake(stream, tls, host, where)
    qm = AsyncQueueManager(connection, where)
    # Exceptions are carried out of the nursery by hand so that the caller
    # sees its own exception, not an ExceptionGroup around it.
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(qm._conn.read_loop)
        try:
            await qm._handshake(client_name, token)
        except BaseException as exc:
            error = exc
        if error is None:
            try:
                yield qm
            except BaseException as exc:
                error = exc
        nursery.cancel_scope.cancel()
        await qm._conn.close("the connection was closed")
    if error is not None:
        raise error


class AsyncQueueManager(AsyncQueueManagerAdmin, QueueManagerIdentity):
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
        self._conn = StreamConnection(stream, address)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<AsyncQueueManager {self.qm_name!r} at {self.address} ({state})>"

    @property
    def closed(self) -> bool:
        """True once the ``async with`` block ended or the connection broke."""
        return self._conn.proto.closed

    async def close(self) -> None:
        """Close the connection before the end of :func:`open_client`'s block
        (which closes it in any case). Open transactions are aborted by the
        daemon, and sends still buffered in one are discarded with it. Closing
        twice is harmless."""
        await self._conn.close("the connection was closed")

    async def _handshake(self, client_name: str | None, token: str | None = None) -> None:
        identity = await self._conn.run(handshake.handshake, client_name, token)
        self.qm_name, self.qm_guid, self.server_version = identity

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
        retry = (retry_count, retry_cycles, retry_delay)
        await self._conn.run(queues.create_queue, name, transactional, journal, quota, retry)

    async def delete_queue(self, name: str) -> int:
        """Delete a queue, its journal and their messages; return how many messages went."""
        return await self._conn.run(queues.delete_queue, name)

    async def purge_queue(self, name: str) -> int:
        """Delete every message in a queue; return how many were deleted (see the
        blocking :meth:`~qmgr.client.QueueManager.purge_queue`)."""
        return await self._conn.run(queues.purge_queue, name)

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue with its counters, by name."""
        return await self._conn.run(queues.list_queues)

    async def status(self) -> Status:
        """The queue manager's identity, connections, open transactions and queues."""
        return await self._conn.run(queues.status)

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
        return await self._conn.send(destination, body, transactional, options)

    async def receive(
        self, queue: str, timeout: float | None = 0.0, *, lookup_id: int | None = None
    ) -> Message | None:
        """Receive (remove) one message outside any transaction; see ``QueueManager.receive``."""
        return await self._conn.receive(None, queue, timeout, False, lookup_id)

    async def peek(
        self, queue: str, timeout: float | None = 0.0, lookup_id: int | None = None
    ) -> Message | None:
        """Look at the next message (or the one with ``lookup_id``) without removing it."""
        return await self._conn.receive(None, queue, timeout, True, lookup_id)

    async def peek_range(self, queue: str, after: int = 0, max: int = 1000) -> list[Message]:
        """Look at up to ``max`` messages with a lookup id above ``after``; see ``QueueManager``."""
        return await self._conn.run(messages.peek_range, queue, after, max)

    async def remove_through(self, queue: str, lookup_id: int) -> int:
        """Remove the messages up to ``lookup_id``; see ``QueueManager.remove_through``."""
        return await self._conn.run(messages.remove_through, queue, lookup_id)

    async def measure_range(self, queue: str, after: int = 0, max_count: int = 0) -> RangeInfo:
        """Count the messages above ``after``; see ``QueueManager.measure_range``."""
        return await self._conn.run(messages.measure_range, queue, after, max_count)

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
        proto = self._conn.proto
        tx = AsyncTransaction(self, proto.next_tx_id(), xid)
        proto.begin(tx._state)
        return tx


class AsyncTransaction(TransactionHandle):
    """An open transaction on an :class:`AsyncQueueManager`; see the blocking ``Transaction``.

    Sends are pipelined: :meth:`send` returns without waiting for the
    daemon, errors it finds are raised by the next call on this transaction,
    and :meth:`commit` of a transaction with a failed send aborts it and
    raises that error; after a refused receive or move it can only abort too.
    One begun with an xid can be prepared (:meth:`prepare`).
    Use from one task at a time.
    """

    __slots__ = ("_conn", "_proto")

    def __init__(self, qm: AsyncQueueManager, tx_id: int, xid: str | None = None) -> None:
        """Wrap an open transaction; use :meth:`AsyncQueueManager.begin` instead."""
        super().__init__(TransactionState(tx_id, xid))
        self._conn = qm._conn
        self._proto = qm._conn.proto

    def __await__(self) -> Generator[Any, None, Self]:
        return self._itself().__await__()

    async def _itself(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, raised: BaseException | None, *_: object
    ) -> None:
        if self._state.ended:
            return
        if exc_type is None:
            try:
                await self.commit()
            except trio.Cancelled as cancelled:
                if not self._state.ended:  # cancelled before it was written: abort below
                    await self._abort_shielded(cancelled)
                raise
            return
        await self._abort_shielded(raised)

    async def _abort_shielded(self, raised: BaseException | None) -> None:
        """Abort even if we are being cancelled, so that received messages go back now."""
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + _ABORT_GRACE
            try:
                await self.abort()
            except QueueError as error:
                # If the connection is gone, the daemon aborts the transaction
                # itself; one that may be prepared stays in doubt (``raised`` says so).
                abort_on_exit(self._state, error, raised)

    async def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        **options: Unpack[SendOptions],
    ) -> None:
        """Add a message to the transaction (pipelined); see ``Transaction.send``."""
        if self._proto.pipeline_send(self._state, destination, body, options, trio.current_time()):
            await self._conn.write()

    async def receive(
        self, queue: str, timeout: float | None = 0.0, *, lookup_id: int | None = None
    ) -> Message | None:
        """Receive a message inside the transaction; see ``Transaction.receive``."""
        return await self._conn.receive(self._state, queue, timeout, False, lookup_id)

    async def move(self, from_queue: str, to_queue: str, lookup_id: int | None = None) -> bool:
        """Move one message inside the transaction; see ``Transaction.move``."""
        return await self._conn.run(
            poison.transaction_move, self._state, from_queue, to_queue, lookup_id
        )

    async def prepare(self) -> None:
        """Prepare the transaction (the first phase of a two-phase commit); see
        ``Transaction.prepare``. A prepare cancelled before its reply came
        (in a scope already cancelled too: it is sent all the same) leaves a
        transaction that may be prepared and can only abort, by xid, which
        ``abort()``, ``commit()`` and ``async with`` do."""
        await self._conn.run(transactions.prepare, self._state)

    async def commit(self) -> None:
        """Commit: every send becomes visible and every receive final, at once.

        In a scope already cancelled it raises ``Cancelled`` and sends nothing:
        the transaction is still open (``async with`` aborts it). Once sent, the
        commit goes on even if the scope is cancelled while its reply is awaited,
        and ``Cancelled`` then means its outcome is unknown.

        Raises:
            TransactionAborted, QuotaExceeded, StoreFull: nothing applied;
            the error of a failed pipelined send: the transaction was aborted.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._conn.run(transactions.end, self._state, commit=True)

    async def abort(self) -> None:
        """Abort: discard the sends; received messages go back to their places.

        Raises:
            TransactionNotFound: it has already ended.
        """
        await self._conn.run(transactions.end, self._state, commit=False)
