"""The blocking client: :func:`connect`, :class:`QueueManager` and :class:`Transaction`.

Thin facades: every method runs one call of ``calls/`` on the connection
(``_blocking_io.SocketConnection``), or for the hot paths (sends, receives,
begin) asks the connection's ``ClientProtocol`` to pack the request and the
connection to exchange it. ``QueueManager``'s management calls are in its
base class (``_blocking_admin``); how the SDK is built, and why: ``_protocol``.

A :class:`QueueManager` is for one thread at a time; give each thread its own
connection (connections are cheap).
"""

from __future__ import annotations

import datetime as _dt
import socket
import ssl
import time
from typing import Self, Unpack

from ._blocking_admin import QueueManagerAdmin
from ._blocking_io import connection_for, open_socket, wrap_tls
from ._codec import SendOptions
from ._common import (
    DEFAULT_ADDRESS,
    QueueManagerIdentity,
    check_token,
    check_transport,
    connect_timeout,
)
from ._exceptions import QueueError
from ._message import Message, QueueInfo, Status
from ._transaction import TransactionHandle, TransactionState, abort_on_exit
from .calls import handshake, messages, poison, queues, transactions
from .calls.messages import RangeInfo

__all__ = ["QueueManager", "Transaction", "connect"]


def connect(
    address: str = DEFAULT_ADDRESS,
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
        ConnectionLost: the daemon could not be reached, or the connection
            broke during the handshake (the message says where and why).
        LimitExceeded: the daemon refused the connection at one of its
            limits (``server.max_connections``,
            ``limits.max_connections_per_address``; the message says which).
        ShuttingDown: the daemon refused the connection because it is stopping.
        UnsupportedVersion: the daemon speaks no version this SDK speaks.
        AccessDenied: the daemon did not accept ``token`` (a daemon without
            tokens accepts none).
        InvalidArgument: a bad address or timeout (``timeout`` must be None
            or above 0; a very large one is no limit), a token that is not
            valid Unicode text, or ``tls`` with a ``unix:PATH`` address.
    """
    timeout = connect_timeout(timeout)
    check_token(token)
    check_transport(address, tls)
    sock, host, where = open_socket(address, timeout)
    try:
        if tls is not None:
            sock = wrap_tls(sock, tls, host, where)
        qm = QueueManager(sock, where)
        qm._conn.limit_waits(timeout)
        qm._handshake(client_name, token)
        qm._conn.limit_waits(None)
    except BaseException:
        sock.close()
        raise
    return qm


class QueueManager(QueueManagerAdmin, QueueManagerIdentity):
    """A connection to a queue manager (blocking).

    Create it with :func:`connect`. Not thread-safe: use one per thread (a
    request made while another thread waits for a reply on the same client
    breaks the connection for both with :class:`ConnectionLost`, rather than
    let them read each other's replies).
    After :meth:`close`, or after the connection broke, every call raises
    :class:`ConnectionLost`; so does the call that finds the connection
    closed by the daemon (idle for ``server.idle_timeout``, evicted to make
    room, ...), with the daemon's reason in its message.

    Attributes:
        address: the ``HOST:PORT`` connected to.
        qm_name: the queue manager's name.
        qm_guid: its GUID.
        server_version: the daemon's version.
    """

    def __init__(self, sock: socket.socket, address: str) -> None:
        """Wrap a connected socket; use :func:`connect` instead."""
        self.address = address
        self._conn = connection_for(sock, address)

    # ------------------------------------------------------------------
    # Life cycle
    # ------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<QueueManager {self.qm_name!r} at {self.address} ({state})>"

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or once the connection broke."""
        return self._conn.proto.closed

    def close(self) -> None:
        """Close the connection. Open transactions are aborted by the daemon.

        Sends still buffered in an open transaction are discarded with it.
        Closing twice is harmless. Unlike the other calls, it may be made from
        another thread: a call waiting in the thread that uses the client (a
        receive with no timeout) then ends with :class:`ConnectionLost`, and
        the daemon takes nothing more for it.
        """
        self._conn.close()

    def _handshake(self, client_name: str | None, token: str | None = None) -> None:
        identity = self._conn.run(handshake.handshake, client_name, token)
        self.qm_name, self.qm_guid, self.server_version = identity

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
        retry = (retry_count, retry_cycles, retry_delay)
        self._conn.run(queues.create_queue, name, transactional, journal, quota, retry)

    def delete_queue(self, name: str) -> int:
        """Delete a queue, its journal and their messages; return how many messages went.

        Raises:
            QueueNotFound, AccessDenied (system and journal queues)
        """
        return self._conn.run(queues.delete_queue, name)

    def purge_queue(self, name: str) -> int:
        """Delete every message in a queue; return how many were deleted.

        Messages that open or prepared transactions hold are not counted: they
        stay theirs (a commit receives them; an abort leaves them purged then).

        Raises:
            QueueNotFound
        """
        return self._conn.run(queues.purge_queue, name)

    def list_queues(self) -> list[QueueInfo]:
        """Every queue with its counters, by name (system and journal queues included)."""
        return self._conn.run(queues.list_queues)

    def status(self) -> Status:
        """The queue manager's identity, connections, open transactions and queues."""
        return self._conn.run(queues.status)

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
        return self._conn.send(destination, body, transactional, options)

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
                not in the queue); a lookup id is 1 or more (0 raises
                InvalidArgument: it names no message).

        Returns:
            The message, or None if none arrived within the timeout.

        Raises:
            QueueNotFound, InvalidName
        """
        return self._conn.receive(None, queue, timeout, False, lookup_id)

    def peek(
        self, queue: str, timeout: float | None = 0.0, lookup_id: int | None = None
    ) -> Message | None:
        """Look at the next message (or the one with ``lookup_id``) without removing it.

        Waits like :meth:`receive`. Messages held by open transactions are not seen.
        """
        return self._conn.receive(None, queue, timeout, True, lookup_id)

    def peek_range(self, queue: str, after: int = 0, max: int = 1000) -> list[Message]:
        """Look at up to ``max`` messages with a lookup id above ``after``, in lookup-id order.

        To page through a queue, pass the last message's ``lookup_id`` as
        ``after``. Messages held by open transactions are skipped. The daemon
        answers at most about 4 MB of messages per request; this method asks
        again until it has ``max`` messages or the queue has no more.
        """
        return self._conn.run(messages.peek_range, queue, after, max)

    def remove_through(self, queue: str, lookup_id: int) -> int:
        """Remove every message of ``queue`` with a lookup id up to ``lookup_id``; return how many.

        For a reader that keeps its own position in a queue: once it has
        processed the messages up to ``lookup_id`` (read with
        :meth:`peek_range`), it removes them with one call. Messages held by
        open or prepared transactions stay. Journal copies are made as for a
        receive. The daemon removes in steps; if the call fails half-way,
        calling it again removes the rest.

        The reader must be the queue's only consumer: a message another
        consumer's transaction held while the reader read past it (so
        :meth:`peek_range` skipped it) goes back with its own lookup id if
        that transaction aborts, below the reader's position, and this call
        would remove it unread.

        Raises:
            QueueNotFound, InvalidName, AccessDenied; NotSupported: the
            daemon is too old.
        """
        return self._conn.run(messages.remove_through, queue, lookup_id)

    def measure_range(self, queue: str, after: int = 0, max_count: int = 0) -> RangeInfo:
        """Count the visible messages of ``queue`` with a lookup id above ``after``.

        Counts at most ``max_count`` (0: all of them) without reading their
        bodies, and says where they end (:class:`RangeInfo`): a reader can
        plan its next range of :meth:`peek_range` calls.

        Raises:
            QueueNotFound, InvalidName; NotSupported: the daemon is too old.
        """
        return self._conn.run(messages.measure_range, queue, after, max_count)

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
        with self._conn.held():
            proto = self._conn.proto
            tx = Transaction(self, proto.next_tx_id(), xid)
            proto.begin(tx._state)
        return tx


class Transaction(TransactionHandle):
    """An open transaction on a :class:`QueueManager`; make one with :meth:`QueueManager.begin`.

    Sends inside a transaction are pipelined: :meth:`send` buffers the frame
    and returns at once, and the message becomes visible only at commit. If
    a pipelined send fails (unknown queue, quota, ...), its error is raised
    by the next call on this transaction, and :meth:`commit` aborts the
    transaction and raises it: a commit never applies part of a transaction.
    The same holds for a receive or move the queue manager refuses (an
    unknown queue, a right missing, ...): the transaction can then only
    abort, and its later sends, receives and moves fail, saying which
    operation failed, rather than take messages its commit would hand back.

    A transaction begun with an xid can also be prepared (:meth:`prepare`),
    the first phase of a two-phase commit.

    Attributes:
        id: the daemon's id for the transaction.
    """

    __slots__ = ("_conn", "_proto")

    def __init__(self, qm: QueueManager, tx_id: int, xid: str | None = None) -> None:
        """Wrap an open transaction; use :meth:`QueueManager.begin` instead."""
        super().__init__(TransactionState(tx_id, xid))
        self._conn = qm._conn
        self._proto = qm._conn.proto

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, raised: BaseException | None, *_: object
    ) -> None:
        if self._state.ended:
            return
        if exc_type is None:
            self.commit()
            return
        try:
            self.abort()
        except QueueError as error:
            # If the connection is gone, the daemon aborts it; one that may be
            # prepared stays in doubt, and ``raised`` says so.
            abort_on_exit(self._state, error, raised)

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
        with self._conn.held():
            if self._proto.pipeline_send(self._state, destination, body, options, time.monotonic()):
                self._conn.write()

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
        return self._conn.receive(self._state, queue, timeout, False, lookup_id)

    def move(self, from_queue: str, to_queue: str, lookup_id: int | None = None) -> bool:
        """Move one message (the one named, or the next) between a queue and its
        subqueue, or out of ``system$;deadxact`` (``to_queue=""``: back to its
        queue), inside the transaction: it is held now and moves when the
        transaction commits; an abort leaves it where it was (not counted as an
        aborted receive). Both queues must be transactional. Returns False if
        there was no message to move. A transaction that moves cannot be prepared.

        Raises:
            as :meth:`QueueManager.move`; TransactionUsageError: a
            non-transactional queue.
        """
        return self._conn.run(poison.transaction_move, self._state, from_queue, to_queue, lookup_id)

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
        self._conn.run(transactions.prepare, self._state)

    def commit(self) -> None:
        """Commit: every send becomes visible and every receive final, at once.

        Returns after the daemon has synced the transaction to disk.

        Raises:
            TransactionAborted: the daemon aborted it (idle timeout, a
                received message's queue was deleted, ...); nothing applied.
            QuotaExceeded, StoreFull: it could not be stored; nothing applied.
            the error of a failed pipelined send: the transaction was aborted.
        """
        self._conn.run(transactions.end, self._state, commit=True)

    def abort(self) -> None:
        """Abort: discard the sends; received messages go back to their places.

        Raises:
            TransactionNotFound: it has already ended.
            TransactionCommitted: it was prepared, and committed by xid meanwhile.
        """
        self._conn.run(transactions.end, self._state, commit=False)
