"""What a request handler works with: one connection's state, and the daemon's parts.

Theory of operation
-------------------
A :class:`RequestContext` is made by the session for its connection and
handed to every request handler (``handlers``) as ``ctx``. It holds what
outlives one request: the connection's open transactions (by the id the
client knows them by), the transactions the daemon aborted (until the
client names them again), the receives waiting for a message, who the
client is, the agreed protocol version, and the nursery waiting receives
run in. It is also the *owner* of the connection's transactions in the core
(``Transaction.owner``), which the idle sweeper calls back through
:meth:`RequestContext.end_transaction`.

Replies go out through the functions the session gives it (``reply``,
``reply_bytes``, ``flush``): the context never sees the stream.

Writes follow one pattern: the core returns a unit, the committer writes it
(:meth:`RequestContext.write`), the core finishes the job with the outcome,
and the queues the write changed are signalled so that waiting receives
wake up. When the write itself fails, what the unit held must still be
released: :meth:`RequestContext.write_settled` takes the function that does
it, and raises the error the client is told.

A request that fails dooms the transaction it belonged to
(:meth:`RequestContext.failed`): the client may already have pipelined its
commit, which then aborts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Final, TypeVar

import structlog
import trio

import storage
from qmgr.core.errors import (
    AccessDenied,
    InvalidArgument,
    LimitExceeded,
    QueueManagerError,
    TransactionAborted,
    TransactionNotFound,
    TransactionUsageError,
    from_store_error,
)
from qmgr.core.permissions import Principal
from qmgr.core.transactions import Transaction, TransactionStage
from qmgr.protocol.client_connection import AUTHENTICATE_FIRST
from wire import client as cf

from .error_codes import error_frame
from .needs import Need
from .services import Services

__all__ = ["ABORTED_REMEMBERED", "RequestContext", "required", "settled_failure", "store_failure"]

T = TypeVar("T")

#: Transactions a connection keeps the reason for, until the client names them:
#: those the daemon aborted, and those whose Begin it refused (of each, the latest).
ABORTED_REMEMBERED: Final = 64


def required(part: T | None, error: QueueManagerError) -> T:
    """A part of the daemon that a request needs (``Services.peering``, ...).

    Raises:
        error: the part is not there.
    """
    if part is None:
        raise error
    return part


def store_failure(exc: BaseException) -> QueueManagerError | None:
    """The client's error for a write that raised ``exc`` and held nothing: a store
    error translated, anything else as it is (None)."""
    return from_store_error(exc) if isinstance(exc, storage.StoreError) else None


def settled_failure(
    exc: BaseException, settle: Callable[[BaseException], QueueManagerError | None]
) -> QueueManagerError | None:
    """For a block that holds something and raised ``exc``: release it with
    ``settle(exc)``, and say the error the client is told in its place (a store
    or core error that ``settle`` translated), or None when ``exc`` goes on as
    it is (cancellation and other exceptions, once settled). The caller raises
    it ``from exc`` (a plain ``try``: this runs on every write, where a
    generator-based context manager would cost a microsecond).
    """
    failure = settle(exc)
    if isinstance(exc, storage.StoreError | QueueManagerError) and failure is not None:
        return failure
    return None


@dataclass(slots=True, eq=False)
class RequestContext:
    """One connection's state as its request handlers see it (see the module docstring)."""

    services: Services
    _: KW_ONLY
    conn_id: int
    log: structlog.typing.FilteringBoundLogger
    #: Put a reply in the outbox.
    reply: Callable[[int, cf.ServerReply], None]
    #: Put an encoded reply frame in the outbox.
    reply_bytes: Callable[[bytes], None]
    #: Write the outbox.
    flush: Callable[[], Awaitable[None]]
    #: Who the client is, with its groups (None: nobody, or no permissions kept).
    principal: Principal | None = None
    #: Put a whole-list reply in the outbox, encoding a long one away from the
    #: event loop (None: as :attr:`reply` does; see :meth:`reply_whole_list`).
    reply_list: Callable[[int, cf.ServerReply], Awaitable[None]] | None = None
    #: The protocol version agreed in the Hello.
    version: int = 0
    #: Open transactions, by the id this connection knows them by.
    transactions: dict[int, Transaction] = field(default_factory=dict)
    #: Transactions the daemon aborted (idle timeout), by id, with the reason,
    #: until the client next names them; they no longer count as open.
    aborted: dict[int, str] = field(default_factory=dict)
    #: Transactions whose Begin the limit of open transactions refused, by id,
    #: with why, until the client next names them (its Begin is not answered).
    refused: dict[int, str] = field(default_factory=dict)
    #: Waiting receives: transaction id (or a negative key) -> their cancel scope.
    waiting: dict[int, trio.CancelScope] = field(default_factory=dict)
    #: Waiting receives by request id: what stops each waiting (a CancelReceive).
    cancels: dict[int, Callable[[], None]] = field(default_factory=dict)
    next_server_tx_id: int = cf.CLIENT_TX_ID_LIMIT
    #: Where waiting receives run (the session's, set once it runs).
    nursery: trio.Nursery | None = None
    #: Set once the connection is ending: waiting receives say nothing more.
    closing: bool = False
    #: Whether the outbox holds more than it writes at once: a receive that waits
    #: takes a message only once it does not (a client that does not read its
    #: replies must not make this daemon hold a copy of a message for each of its
    #: waiting receives).
    output_busy: Callable[[], bool] = lambda: False
    #: Wait until :attr:`output_busy` is false (written, by this call if nobody writes).
    output_room: Callable[[], Awaitable[None]] | None = None

    @property
    def busy(self) -> bool:
        """True while the connection has open transactions or waiting receives."""
        return bool(self.transactions) or bool(self.waiting)

    @property
    def counted(self) -> bool:
        """True when this connection's messages carry their counters (version 5)."""
        return self.version >= cf.POISON_VERSION

    # ------------------------------------------------------------------ authorization

    def refusal(self, request: object, need: Need) -> AccessDenied | None:
        """The error for a request this connection's principal may not make now
        (counted and logged as a denial), or None if it may (or auth is off).

        ``need`` is the request's entry in the request table. The session asks
        before a request runs, and a waiting receive again each time it wakes:
        a right revoked meanwhile ends the wait."""
        authorization = self.services.authorization
        if authorization is None or not authorization.enabled:
            return None
        # Requests are admitted only once a principal is known; should the two
        # ever disagree, nothing runs for nobody.
        why = (
            AUTHENTICATE_FIRST
            if self.principal is None
            else authorization.denial(self.principal, request, need)
        )
        if why is None:
            return None
        authorization.tally.denied += 1
        self.log.warning("access_denied", request=type(request).__name__, reason=why)
        return AccessDenied(why)

    # ------------------------------------------------------------------ replies

    async def reply_whole_list(self, request_id: int, reply: cf.ServerReply) -> None:
        """Put a reply that lists everything of a kind (queues, status, outgoing
        queues, distribution lists) in the outbox: a queue manager with tens of
        thousands of them takes seconds to encode it, which the session does in
        a worker thread so that other connections and peers are served meanwhile."""
        if self.reply_list is None:
            self.reply(request_id, reply)
        else:
            await self.reply_list(request_id, reply)

    def reply_error(self, request_id: int, error: QueueManagerError) -> None:
        """Put an error reply in the outbox."""
        self.reply_bytes(error_frame(request_id, error))

    def failed(self, request_id: int, request: object, error: QueueManagerError) -> None:
        """Answer a failed request; a transaction it belonged to can now only abort."""
        tx_id = getattr(request, "tx_id", 0)
        if tx_id and not isinstance(request, cf.Commit | cf.Abort):
            tx = self.transactions.get(tx_id)
            if tx is not None:
                tx.doom(error)
        self.reply_error(request_id, error)

    # ------------------------------------------------------------------ writes

    async def write(self, unit: storage.Unit) -> storage.UnitOutcome:
        """Write ``unit`` in the committer's next batch; a failed batch is the
        core's error (the unit's own failure is in the outcome)."""
        try:
            return await self.services.committer.submit(unit, source=self.conn_id)
        except storage.StoreError as exc:
            raise from_store_error(exc) from exc

    async def write_checked(self, unit: storage.Unit) -> storage.UnitOutcome:
        """:meth:`write`, with the unit's own failure raised as the core's error."""
        outcome = await self.write(unit)
        if outcome.error is not None:
            raise from_store_error(outcome.error)
        return outcome

    async def write_settled(
        self, unit: storage.Unit, settle: Callable[[BaseException], QueueManagerError | None]
    ) -> storage.UnitOutcome:
        """:meth:`write` a unit that holds something (messages, a transaction):
        if the write raises, ``settle(exc)`` releases it and returns the error
        the client is told in place of a store or core error (None: ``exc`` as
        it is); cancellation and other exceptions go on once settled."""
        try:
            return await self.services.committer.submit(unit, source=self.conn_id)
        except BaseException as exc:
            failure = settled_failure(exc, settle)
            if failure is not None:
                raise failure from exc
            raise

    # ------------------------------------------------------------------ transactions

    def transaction(self, tx_id: int) -> Transaction:
        """The open transaction this connection calls ``tx_id``.

        Raises:
            TransactionNotFound: unknown here, or already ended.
            TransactionAborted: ended by the daemon (idle timeout); it is forgotten now.
        """
        tx = self.transactions.get(tx_id)
        if tx is None:
            reason = self.aborted.pop(tx_id, None)
            if reason is not None:
                msg = f"transaction {tx_id} was aborted: {reason}"
                raise TransactionAborted(msg)
            refusal = self.refused.pop(tx_id, None)
            if refusal is not None:
                msg = f"transaction {tx_id} could not begin: {refusal}"
                raise LimitExceeded(msg)
            msg = f"transaction {tx_id} is not open on this connection"
            raise TransactionNotFound(msg)
        if tx.stage is not TransactionStage.OPEN:
            msg = f"transaction {tx_id} is already committing"
            raise TransactionNotFound(msg)
        return tx

    def usable_transaction(self, tx_id: int) -> Transaction:
        """:meth:`transaction`, for a send, receive or move in it: one that an
        earlier failure doomed refuses them.

        Raises:
            the doomed transaction's failure (``Transaction.check_usable``).
        """
        tx = self.transaction(tx_id)
        tx.check_usable()
        return tx

    def idle_transaction(self, tx_id: int) -> Transaction:
        """:meth:`transaction`, which must have no receive waiting (to commit or
        prepare it).

        Raises:
            TransactionUsageError: a receive waits in it.
        """
        tx = self.transaction(tx_id)
        if tx_id in self.waiting:
            msg = f"transaction {tx_id} still has a receive waiting; wait for it or abort"
            raise TransactionUsageError(msg)
        return tx

    def open_transaction(self, request_id: int, tx_id: int, xid: str | None) -> None:
        """Begin a transaction, with a global id if ``xid`` is given; ``tx_id`` 0
        lets the daemon choose the id, and the reply carries it."""
        chosen_by_client = tx_id != 0
        if not chosen_by_client:
            tx_id = self.next_server_tx_id
            self.next_server_tx_id += 1
        elif tx_id >= cf.CLIENT_TX_ID_LIMIT:
            msg = f"transaction id {tx_id} is reserved for the queue manager; use 1..2**63-1"
            raise InvalidArgument(msg)
        elif tx_id in self.transactions:
            msg = f"transaction id {tx_id} is already in use on this connection"
            raise TransactionUsageError(msg)
        limit = self.services.limits.max_transactions
        if len(self.transactions) >= limit:
            msg = f"a connection may have at most {limit} open transactions; commit or abort some"
            if chosen_by_client:
                # Its sends and receives follow unanswered: they say why, not "not open".
                self.aborted.pop(tx_id, None)  # the Begin names the id anew
                _remember(self.refused, tx_id, msg)
            raise LimitExceeded(msg)
        core = self.services.core
        now = trio.current_time()
        if xid is None:
            tx = core.begin(self, tx_id, now)
        else:
            tx = core.two_phase.begin(self, tx_id, now, xid)
            tx.principal = "" if self.principal is None else self.principal.name
        self.transactions[tx_id] = tx
        self.aborted.pop(tx_id, None)
        self.refused.pop(tx_id, None)
        if not chosen_by_client:
            self.reply_bytes(cf.encode_ok(request_id, tx_id))

    def abort(self, tx: Transaction, reason: str | None = None) -> None:
        """Abort ``tx``, which has left :attr:`transactions`, and wake the queues it held."""
        services = self.services
        services.signals.notify(services.core.abort(tx, reason))

    def end_transaction(self, tx: Transaction, reason: str) -> None:
        """Abort ``tx`` on the daemon's initiative (disconnect, idle timeout).

        It stops counting as open at once (for the connection's deadlines,
        its eviction and its limit of open transactions); the client learns
        why at its next request in it.
        """
        if self.transactions.pop(tx.client_id, None) is not None:
            _remember(self.aborted, tx.client_id, reason)
        self.cancel_waits(tx.client_id)
        self.abort(tx, reason)
        self.log.info("transaction_aborted", tx=tx.client_id, reason=reason)

    def abort_all(self, reason: str) -> None:
        """The connection ended: abort every transaction it opened."""
        for tx in list(self.transactions.values()):
            self.end_transaction(tx, reason)
        self.transactions.clear()
        self.aborted.clear()
        self.refused.clear()

    def cancel_waits(self, tx_id: int) -> None:
        """Cancel the receive waiting in transaction ``tx_id``, if any."""
        scope = self.waiting.get(tx_id)
        if scope is not None:
            scope.cancel()


def _remember(reasons: dict[int, str], tx_id: int, reason: str) -> None:
    """Keep why transaction ``tx_id`` is not open, forgetting the oldest past
    :data:`ABORTED_REMEMBERED`."""
    if len(reasons) >= ABORTED_REMEMBERED:
        del reasons[next(iter(reasons))]
    reasons[tx_id] = reason
