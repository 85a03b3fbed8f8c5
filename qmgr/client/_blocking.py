"""The blocking client: :func:`connect`, :class:`QueueManager` and :class:`Transaction`.

Theory of operation
-------------------
A :class:`QueueManager` owns one TCP connection (``TCP_NODELAY``) to the
daemon's client listener, and a ``_protocol.ClientProtocol`` that does all
but the I/O: it checks arguments, packs requests, allocates request and
transaction ids, routes replies and keeps the pipelining's books. Every call
has the core append one request frame to the output buffer, writes the
buffer, and reads (in reads of up to 1 MiB), feeding the core, until the
reply with its request id arrives. Replies carry request ids, so replies to
*pipelined* requests may be interleaved with the one being waited for.

Two requests are pipelined: :meth:`QueueManager.begin` (the client chooses
the transaction id) and :meth:`Transaction.send`. They only append their
frame to the output buffer and return. The buffer is written once it holds
more than ``PIPELINE_FLUSH_BYTES`` (16 KiB), or together with the next
request that needs a reply: a one-message transaction (Begin, Send, Commit)
is one write and one round trip. Replies to pipelined requests are matched by request id; the first
failure is kept on its transaction and raised by the next call on that
transaction, and ``commit()`` of such a transaction aborts it and raises
that error. The daemon itself refuses to commit a transaction in which a
send failed, so a commit never applies part of a transaction even when the
failure and the commit cross on the wire.

Writes never deadlock against the daemon's replies: when the kernel will not
take all of a large buffer at once, the client reads whatever replies are
waiting before writing on.

A :class:`QueueManager` is for one thread at a time; give each thread its own
connection (connections are cheap).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import select
import socket
import ssl
from types import TracebackType
from typing import Final, Self, Unpack

from wire import client_frames as cf

from . import _common as common
from . import _protocol as protocol
from . import _replies as replies
from ._codec import SendOptions
from ._errors import ConnectionLost, QueueError
from ._lists_api import QueueManagerLists
from ._message import Message, QueueInfo, Status
from ._outgoing_api import QueueManagerOutgoing
from ._permissions_api import QueueManagerPermissions
from ._poison_api import QueueManagerPoison, TransactionPoison, create_request
from ._protocol import ClientProtocol, TransactionState, Waiter
from ._replies import PeekPages
from ._trace_api import QueueManagerTrace
from ._two_phase_api import QueueManagerTwoPhase, TransactionTwoPhase

__all__ = ["QueueManager", "Transaction", "connect"]

_MSG_DONTWAIT: Final = getattr(socket, "MSG_DONTWAIT", 0)
_CONN_ERRORS = (OSError, EOFError)


def connect(
    address: str = common.DEFAULT_ADDRESS,
    *,
    timeout: float | None = 10.0,
    client_name: str | None = None,
    tls: ssl.SSLContext | None = None,
    token: str | None = None,
) -> QueueManager:
    """Connect to a queue manager.

    Args:
        address: ``HOST:PORT`` of the daemon's client listener, or
            ``unix:PATH`` of its Unix-domain socket (``server.unix_socket``).
        timeout: seconds allowed for connecting and the handshake (``None``:
            no limit). Requests themselves are not limited by it: a commit
            waits for the disk, a receive for its own ``timeout``.
        client_name: shown in the daemon's logs; defaults to the program's
            name and process id.
        tls: connect over TLS with this context (:func:`tls_context` makes
            one); None: plain TCP.
        token: authenticate with this token (``qmgr auth token``), for a
            queue manager that requires authentication and a client without
            a certificate.

    Returns:
        A connected :class:`QueueManager`; use it as a context manager or
        call :meth:`QueueManager.close`.

    Raises:
        ConnectionLost: the daemon could not be reached (the message says
            where and why).
        UnsupportedVersion: the daemon speaks no version this SDK speaks.
    """
    sock, host, where = common.open_socket(address, timeout)
    name = client_name if client_name is not None else common.default_client_name()
    try:
        if tls is not None:
            from ._tls import connect_tls

            return connect_tls(sock, tls, host, where, timeout, name, token)
        qm = QueueManager(sock, where)
        qm._handshake(name, token)
        sock.settimeout(None)
    except BaseException:
        sock.close()
        raise
    return qm


class QueueManager(
    QueueManagerTwoPhase,
    QueueManagerTrace,
    QueueManagerLists,
    QueueManagerPoison,
    QueueManagerOutgoing,
    QueueManagerPermissions,
):
    """A connection to a queue manager (blocking).

    Create it with :func:`connect`. Not thread-safe: use one per thread.
    After :meth:`close`, or after the connection broke, every call raises
    :class:`ConnectionLost`.

    Attributes:
        address: the ``HOST:PORT`` connected to.
        qm_name: the queue manager's name.
        qm_guid: its GUID.
        server_version: the daemon's version.
    """

    def __init__(self, sock: socket.socket, address: str) -> None:
        """Wrap a connected socket; use :func:`connect` instead."""
        self.address = address
        self.qm_name = ""
        self.qm_guid = common.NO_GUID
        self.server_version = ""
        self._sock = sock
        self._recv_buffer = bytearray(common.RECEIVE_SIZE)
        self._recv_view = memoryview(self._recv_buffer)
        self._proto = ClientProtocol(address, Waiter, address_in_stream_errors=False)

    # ------------------------------------------------------------------
    # Life cycle
    # ------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._proto.closed else "open"
        return f"<QueueManager {self.qm_name!r} at {self.address} ({state})>"

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or once the connection broke."""
        return self._proto.closed

    def close(self) -> None:
        """Close the connection. Open transactions are aborted by the daemon.

        Sends still buffered in an open transaction are discarded with it.
        Closing twice is harmless.
        """
        self._proto.close(f"the connection to {self.address} was closed")
        self._sock.close()

    def _handshake(self, client_name: str, token: str | None = None) -> None:
        proto = self._proto
        try:
            reply = self._exchange(proto.hello(proto.out, client_name))
        except QueueError as exc:
            raise proto.handshake_error(exc) from None
        self.qm_name, self.qm_guid, self.server_version = proto.welcome(reply)
        if token is not None:
            self._authenticate(token)

    # ------------------------------------------------------------------
    # Queues
    # ------------------------------------------------------------------

    def create_queue(
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
        """Create a private queue (with its journal queue ``NAME;journal`` and its
        subqueues ``NAME;retry`` and ``NAME;poison``).

        Args:
            name: the queue's name (``orders``; ``.\\private$\\orders`` also works).
            transactional: accept only transactional messages.
            journal: copy every received message to ``NAME;journal``.
            quota: the most bytes of message bodies the queue (with its
                subqueues) may hold, or None.
            retry_count, retry_cycles, retry_delay: poison handling (see
                :meth:`set_queue_properties`); any of them turns it on, with
                WCF's defaults for the others. Without them it is off.

        Raises:
            QueueExists, InvalidName, InvalidArgument; NotSupported: retry
            settings for a daemon older than protocol version 4.
        """
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
        replies.ok_value(self._call(request))

    def delete_queue(self, name: str) -> int:
        """Delete a queue, its journal and their messages; return how many messages went.

        Raises:
            QueueNotFound, AccessDenied (system and journal queues)
        """
        return replies.ok_value(self._call(cf.DeleteQueue(name=name)))

    def purge_queue(self, name: str) -> int:
        """Delete every message in a queue; return how many.

        Messages held by open transactions leave when their transaction ends.

        Raises:
            QueueNotFound
        """
        return replies.ok_value(self._call(cf.PurgeQueue(name=name)))

    def list_queues(self) -> list[QueueInfo]:
        """Every queue with its counters, by name (system and journal queues included)."""
        return replies.queue_list(self._call(cf.ListQueues()))

    def status(self) -> Status:
        """The queue manager's identity, connections, open transactions and queues."""
        return replies.status(self._call(cf.GetStatus()))

    # ------------------------------------------------------------------
    # Messages
    # ------------------------------------------------------------------

    def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        *,
        transactional: bool | None = None,
        **options: Unpack[SendOptions],
    ) -> str:
        """Send one message outside any transaction; return its message id.

        The call returns once the daemon has stored the message.

        Args:
            destination: a queue name or format name (``orders``,
                ``DIRECT=OS:.\\private$\\orders``, several separated by commas).
            body: bytes, or a str (sent as UTF-8). At most 4 MB.
            transactional: None (default) sends to a transactional queue as a
                single-message transaction and to others without one; False
                insists on no transaction (an error on a transactional
                queue, as in MSMQ); True insists on a single-message
                transaction (an error on a non-transactional queue).
            options: the message's properties (label, correlation_id,
                priority, delivery, ...): see :class:`SendOptions`.

        Raises:
            QueueNotFound, InvalidName, AccessDenied (journal and system
            queues), TransactionUsageError, MessageTooLarge, QuotaExceeded,
            InvalidArgument, StoreFull, LimitExceeded
        """
        proto = self._proto
        waiter = proto.send_request(proto.out, destination, body, transactional, options)
        return replies.message_id(self._exchange(waiter))

    def receive(
        self, queue: str, timeout: float | None = 0.0, *, lookup_id: int | None = None
    ) -> Message | None:
        """Receive (remove) one message outside any transaction.

        Args:
            queue: the queue's name or format name.
            timeout: seconds to wait for a message if none is there; 0 does
                not wait, None waits for ever. The daemon wakes the receive as
                soon as a message arrives; nothing polls.
            lookup_id: receive exactly this message (returns None if it is
                not in the queue).

        Returns:
            The message, or None if none arrived within the timeout.

        Raises:
            QueueNotFound, InvalidName
        """
        return self._receive(None, queue, timeout, False, lookup_id)

    def peek(
        self, queue: str, timeout: float | None = 0.0, lookup_id: int | None = None
    ) -> Message | None:
        """Look at the next message (or the one with ``lookup_id``) without removing it.

        Waits like :meth:`receive`. Messages held by open transactions are not seen.
        """
        return self._receive(None, queue, timeout, True, lookup_id)

    def peek_range(self, queue: str, after: int = 0, max: int = 1000) -> list[Message]:
        """Look at up to ``max`` messages with a lookup id above ``after``, in lookup-id order.

        To page through a queue, pass the last message's ``lookup_id`` as
        ``after``. Messages held by open transactions are skipped. The daemon
        answers at most about 4 MB of messages per request; this method asks
        again until it has ``max`` messages or the queue has no more.
        """
        pages = PeekPages(queue, after, max)
        while (request := pages.next_request()) is not None:
            pages.add(self._call(request))
        return pages.found

    # ------------------------------------------------------------------
    # Transactions
    # ------------------------------------------------------------------

    def begin(self, xid: str | None = None) -> Transaction:
        """Begin a transaction; with ``xid``, a global one that :meth:`Transaction.prepare` can
        prepare (``xid``: 1..200 bytes of UTF-8, unique, chosen by the application).

        Nothing is waited for: the Begin request goes out with the
        transaction's first request that needs a reply (an error beginning
        it, such as an xid in use, is raised from there).

        Use it as a context manager: the block commits on normal exit and
        aborts on an exception::

            with qm.begin() as tx:
                msg = tx.receive("in", timeout=5)
                tx.send("out", msg.body)
        """
        tx = Transaction(self, self._proto.next_tx_id(), xid)
        self._proto.begin(tx._state)
        return tx

    # ------------------------------------------------------------------
    # The connection
    # ------------------------------------------------------------------

    def _call(self, value: cf.ClientRequest) -> cf.ServerReply:
        """Send one request (after whatever is buffered) and return its reply."""
        return self._exchange(self._proto.request(self._proto.out, value))

    def _receive(
        self,
        state: TransactionState | None,
        queue: str,
        timeout: float | None,
        peek: bool,
        lookup_id: int | None,
    ) -> Message | None:
        """Receive or peek, in the transaction ``state`` or outside any."""
        proto = self._proto
        waiter = proto.receive_request(proto.out, state, queue, timeout, peek, lookup_id)
        return replies.message_or_none(self._exchange(waiter), state)

    def _end(self, state: TransactionState, *, commit: bool) -> None:
        """Commit or abort ``state``: the core says what goes out and what its outcome raises."""
        proto = self._proto
        state.end(commit=commit)
        outcome: cf.ServerReply | QueueError
        try:
            outcome = self._exchange(proto.end_request(proto.out, state))
        except QueueError as exc:
            outcome = exc
        protocol.transaction_ended(state, outcome)

    def _exchange(self, waiter: Waiter) -> cf.ServerReply:
        """Write the buffer and wait for ``waiter``'s reply; raise error replies."""
        try:
            self._flush()
            while waiter.reply is None:
                self._read(block=True)
        except QueueError:
            raise
        except BaseException as exc:
            # Interrupted half-way (KeyboardInterrupt, ...): the stream can no longer be trusted.
            self._break(f"a request was interrupted ({type(exc).__name__})")
            raise
        return self._proto.result(waiter)

    def _flush_guarded(self) -> None:
        """Write the buffer; an interrupted write breaks the connection."""
        try:
            self._flush()
        except QueueError:
            raise
        except BaseException as exc:
            self._break(f"a write was interrupted ({type(exc).__name__})")
            raise

    def _flush(self) -> None:
        """Write the whole output buffer, reading replies whenever the kernel is full."""
        out = self._proto.out
        if not out:
            return
        sock = self._sock
        try:
            sent = sock.send(out, _MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except _CONN_ERRORS as exc:
            raise self._lost(exc) from None
        if sent == len(out):
            out.clear()
            return
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLOUT)
        with memoryview(out) as view:
            while sent < len(view):
                try:
                    events = poller.poll()
                    if any(event & select.POLLIN for _, event in events):
                        self._read(block=False)
                    sent += sock.send(view[sent:], _MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except _CONN_ERRORS as exc:
                    raise self._lost(exc) from None
        out.clear()

    def _read(self, *, block: bool) -> None:
        """Read what the daemon sent and dispatch every whole frame."""
        try:
            if block:
                count = self._sock.recv_into(self._recv_buffer)
            else:
                count = self._sock.recv_into(self._recv_buffer, 0, _MSG_DONTWAIT)
        except BlockingIOError:
            return
        except _CONN_ERRORS as exc:
            raise self._lost(exc) from None
        self._dispatch(count)

    def _dispatch(self, count: int) -> None:
        """Hand the ``count`` bytes read into the buffer to the protocol (0: closed)."""
        if not count:
            raise self._lost(None)
        try:
            self._proto.receive_data(self._recv_view[:count])
        except QueueError:
            # A malformed frame, or the daemon rejected the stream: the core broke the connection.
            self._sock.close()
            raise

    def _lost(self, exc: BaseException | None) -> ConnectionLost:
        reason = "the queue manager closed the connection"
        if exc is not None:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            reason = f"the connection failed: {detail.lower() or type(exc).__name__}"
        error = self._proto.lost(reason)
        self._sock.close()
        return error

    def _break(self, message: str) -> ConnectionLost:
        error = self._proto.fail(message)
        self._sock.close()
        return error


class Transaction(TransactionTwoPhase, TransactionPoison):
    """An open transaction on a :class:`QueueManager`; make one with :meth:`QueueManager.begin`.

    Sends inside a transaction are pipelined: :meth:`send` buffers the frame
    and returns at once, and the message becomes visible only at commit. If
    a pipelined send fails (unknown queue, quota, ...), its error is raised
    by the next call on this transaction, and :meth:`commit` aborts the
    transaction and raises it: a commit never applies part of a transaction.

    A transaction begun with an xid can also be prepared (:meth:`prepare`),
    the first phase of a two-phase commit.

    Attributes:
        id: the daemon's id for the transaction.
    """

    __slots__ = ("_proto", "_qm", "_state")

    def __init__(self, qm: QueueManager, tx_id: int, xid: str | None = None) -> None:
        """Wrap an open transaction; use :meth:`QueueManager.begin` instead."""
        self._qm = qm
        self._proto = qm._proto
        self._state = TransactionState(tx_id, xid)

    @property
    def id(self) -> int:
        """The daemon's id for the transaction."""
        return self._state.id

    @property
    def ended(self) -> bool:
        """True once committed or aborted."""
        return self._state.ended

    def __repr__(self) -> str:
        return f"<Transaction {self._state.id} ({self._state.phase})>"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state.ended:
            return
        if exc_type is None:
            self.commit()
            return
        # If the connection is gone, the daemon aborts it (a prepared one stays in doubt).
        with contextlib.suppress(QueueError):
            self.abort()

    def send(
        self,
        destination: str,
        body: bytes | bytearray | memoryview | str,
        **options: Unpack[SendOptions],
    ) -> None:
        """Add a message to the transaction; it becomes visible when the transaction commits.

        The arguments are those of :meth:`QueueManager.send`. The send is
        pipelined: it returns without waiting for the daemon, so errors the
        daemon finds (unknown queue, non-transactional destination, quota at
        commit) come from a later call on this transaction or from
        :meth:`commit`. Errors found here (body over 4 MB, values that cannot
        be encoded) are raised at once and leave the transaction usable.
        Committed messages of one transaction arrive in the order they were
        sent, with consecutive lookup ids.
        """
        if self._proto.pipeline_send(self._state, destination, body, options):
            self._qm._flush_guarded()

    def receive(
        self, queue: str, timeout: float | None = 0.0, *, lookup_id: int | None = None
    ) -> Message | None:
        """Receive a message inside the transaction.

        The message is hidden from every other reader until the transaction
        ends; a commit removes it, an abort puts it back in its place (same
        lookup id). Waits like :meth:`QueueManager.receive`.

        Raises:
            TransactionUsageError: the queue is not transactional.
            QueueNotFound, InvalidName; or the error of an earlier failed send.
        """
        return self._qm._receive(self._state, queue, timeout, False, lookup_id)

    def commit(self) -> None:
        """Commit: every send becomes visible and every receive final, at once.

        Returns after the daemon has synced the transaction to disk.

        Raises:
            TransactionAborted: the daemon aborted it (idle timeout, a
                received message's queue was deleted, ...); nothing applied.
            QuotaExceeded, StoreFull: it could not be stored; nothing applied.
            the error of a failed pipelined send: the transaction was aborted.
        """
        self._qm._end(self._state, commit=True)

    def abort(self) -> None:
        """Abort: discard the sends; received messages go back to their places.

        Raises:
            TransactionNotFound: it has already ended.
            TransactionCommitted: it was prepared, and committed by xid meanwhile.
        """
        self._qm._end(self._state, commit=False)
