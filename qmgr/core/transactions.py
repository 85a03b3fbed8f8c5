"""Internal transactions: their sends and held messages, in memory until they end.

Theory of operation
-------------------
A transaction's :class:`TransactionStage` is OPEN while its owner sends and
receives in it; COMMITTING once its commit (or its prepare) has been handed
to the writer; ENDED after. Its sends are kept here as ready-to-write store
operations, and its receives as the messages it holds (``holds``); nothing
of it is written before the commit, so a crash aborts it by forgetting it.
A message it moves (``moves``) is held among its receives, and its commit
writes the move instead of the removal.

A transaction in which an operation failed is *doomed*: it can only abort.
Clients pipeline their sends and the commit, so the commit may arrive after
a send failed without the client having seen the failure yet; refusing the
commit is what keeps a transaction from ever committing in part. Its later
sends, receives and moves fail too (``check_usable``), so that a client that
went on after a failure takes no more messages it would process for nothing. The same
holds when the daemon ends a transaction on its own (an idle timeout, a
queue deleted under it): it is marked aborted, and the owner learns why
when it next uses it.

:class:`OpenTransactions` is the table of open transactions (by id, and by
global id for those begun with one) and how each ends: a commit forgets the
holds of what it received (the messages are gone); an abort hands them to
the ``aborted`` callable it was given (poison handling: count, release or
move each); a prepare ends the transaction here while its messages stay
held by the prepared transaction (``two_phase``). Either way the bytes its
sends held in memory go back to the daemon-wide budget, and the
:class:`Tally` counts it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable
from dataclasses import KW_ONLY, dataclass, field

from storage import AddConfirmation, AppendMessage, AppendOutgoing, MoveMessage

from .budget import MemoryBudget
from .errors import QueueManagerError, TransactionAborted
from .holds import Holds

__all__ = ["OpenTransactions", "Tally", "Transaction", "TransactionStage"]


class TransactionStage(enum.Enum):
    """Where an internal transaction is in its life: OPEN -> COMMITTING -> ENDED,
    or OPEN -> ENDED on abort. (Not the state of a global id, which is
    PREPARED, COMMITTED or ABORTED: see ``two_phase``.)"""

    OPEN = "open"
    COMMITTING = "committing"
    ENDED = "ended"


@dataclass(slots=True, eq=False)
class Transaction:
    """An internal transaction: its sends and its held receives."""

    tx_id: int
    owner: object
    #: The id the owning connection knows it by.
    client_id: int
    #: Monotonic seconds.
    started_at: float
    #: Monotonic seconds of the last operation (for the idle timeout).
    last_activity: float
    sends: list[AppendMessage | AppendOutgoing] = field(default_factory=list)
    #: Body bytes of the sends, counted once per destination queue.
    send_bytes: int = 0
    #: Bytes its sends take in memory, reserved in the daemon-wide budget.
    reserved_bytes: int = 0
    #: ``(queue_id, lookup_id)`` of every message received in it (held).
    receives: list[tuple[int, int]] = field(default_factory=list)
    stage: TransactionStage = TransactionStage.OPEN
    #: Why the daemon ended it on its own (idle timeout, queue deleted).
    abort_reason: str | None = None
    #: The first operation that failed in it: it can only abort.
    failure: QueueManagerError | None = None
    #: Receives in it waiting for a message now: it is not idle meanwhile.
    waiting: int = 0
    #: Its global id, if it was begun with one (it can then be prepared).
    xid: str | None = None
    #: The principal that began it ("": none, when clients do not authenticate):
    #: a prepared transaction is kept with it, and only it and administrators
    #: may resolve or list it.
    principal: str = ""
    #: Messages it moves (held like its receives, which they are among):
    #: ``(queue_id, lookup_id)`` -> the ``MoveMessage`` its commit writes.
    moves: dict[tuple[int, int], MoveMessage] = field(default_factory=dict)
    #: The receives whose messages ask for a report of their fate (an
    #: acknowledgment or journal level): the commit reports them.
    receipts: set[tuple[int, int]] = field(default_factory=set)
    #: Copies its sends to other queue managers keep until confirmed (written
    #: by its commit, or kept with it by its prepare).
    confirmations: list[AddConfirmation] = field(default_factory=list)

    @property
    def operations(self) -> int:
        """Sends plus receives so far."""
        return len(self.sends) + len(self.receives)

    def doom(self, error: QueueManagerError) -> None:
        """Record a failed operation (the first one is kept): the transaction can only abort."""
        if self.failure is None:
            self.failure = error

    def check_usable(self) -> None:
        """Raise, for a send, receive or move in it, the failure that doomed it.

        A doomed transaction hands out nothing more: a client that went on
        after a failed operation learns at its next one, not at the commit,
        that the transaction can only abort.

        Raises:
            the error of the failed operation (its type), saying so.
        """
        self._raise_failure("can only abort: an earlier operation in it failed")

    def check_committable(self) -> None:
        """Raise the reason it can only abort, if it has one.

        Raises:
            TransactionAborted: the daemon ended it.
            the error of a failed operation in it, saying so.
        """
        if self.abort_reason is not None:
            msg = f"transaction {self.client_id} was aborted: {self.abort_reason}"
            raise TransactionAborted(msg)
        self._raise_failure("was aborted because an operation in it failed")

    def _raise_failure(self, what: str) -> None:
        """If an operation doomed it, raise that failure's type: ``transaction N
        {what}: {its message}``."""
        failure = self.failure
        if failure is not None:
            msg = f"transaction {self.client_id} {what}: {failure.message}"
            raise type(failure)(msg)


@dataclass(slots=True)
class Tally:
    """Transactions committed and aborted since the start (``qmgr status``); a
    unit written for a request outside a transaction counts as a commit."""

    commits: int = 0
    aborts: int = 0


#: What becomes of the messages an aborted transaction held:
#: ``aborted(receives, uncounted)`` returns the queues to wake (``uncounted``:
#: those it held to move them, which an abort does not count).
AbortedReceives = Callable[[Iterable[tuple[int, int]], Collection[tuple[int, int]]], set[int]]


@dataclass(slots=True, eq=False)
class OpenTransactions:
    """The open transactions, by id and by global id, and how each ends."""

    _holds: Holds
    #: Bytes of messages in open transactions, for all clients together
    #: (a commit of prepared transactions reserves here too, ``two_phase``).
    budget: MemoryBudget
    _tally: Tally
    _: KW_ONLY
    #: Poison handling's hand for the receives of an aborted transaction.
    aborted: AbortedReceives
    _by_id: dict[int, Transaction] = field(default_factory=dict, init=False, repr=False)
    _by_xid: dict[str, Transaction] = field(default_factory=dict, init=False, repr=False)
    _next_id: int = field(default=1, init=False, repr=False)

    def __len__(self) -> int:
        """Transactions not yet ended."""
        return len(self._by_id)

    def has_xid(self, xid: str) -> bool:
        """True if an open transaction has the global id ``xid``."""
        return xid in self._by_xid

    def begin(
        self, owner: object, client_id: int, now: float, xid: str | None = None
    ) -> Transaction:
        """Open a transaction owned by ``owner`` (a connection), known there as
        ``client_id``, with the global id ``xid`` if given (checked by the caller)."""
        tx = Transaction(
            tx_id=self._next_id,
            owner=owner,
            client_id=client_id,
            started_at=now,
            last_activity=now,
            xid=xid,
        )
        self._next_id += 1
        self._by_id[tx.tx_id] = tx
        if xid is not None:
            self._by_xid[xid] = tx
        return tx

    def idle(self, now: float, timeout: float) -> list[Transaction]:
        """Open transactions with no activity for ``timeout`` seconds (monotonic ``now``);
        a transaction with a receive waiting for a message is busy, not idle."""
        return [
            tx
            for tx in self._by_id.values()
            if tx.stage is TransactionStage.OPEN
            and not tx.waiting
            and now - tx.last_activity > timeout
        ]

    def abort(self, tx: Transaction, reason: str | None = None) -> set[int]:
        """Abort ``tx`` (unless it ended already): drop its sends, and hand what it
        held to poison handling. ``reason``: the daemon ends it on its own (its
        owner is told why the next time it uses it). Returns the queues to wake."""
        if tx.stage is TransactionStage.ENDED:
            return set()
        if reason is not None:
            tx.abort_reason = reason
        return self.end(tx, committed=False)

    def end(self, tx: Transaction, *, committed: bool) -> set[int]:
        """End ``tx``: committed (its unit was written: forget its holds) or
        aborted. Returns the queues to wake."""
        self._close(tx)
        if committed:
            self._tally.commits += 1
            holds = self._holds
            for queue_id, lookup_id in tx.receives:
                holds.forget(queue_id, lookup_id)
            woken: set[int] = set()
        else:
            self._tally.aborts += 1
            woken = self.aborted(tx.receives, tx.moves)
        tx.receives.clear()
        tx.moves.clear()
        return woken

    def end_prepared(self, tx: Transaction) -> None:
        """``tx`` was prepared: it leaves its owner, its received messages stay held."""
        self._close(tx)
        tx.receives.clear()

    def _close(self, tx: Transaction) -> None:
        tx.stage = TransactionStage.ENDED
        self._by_id.pop(tx.tx_id, None)
        if tx.xid is not None and self._by_xid.get(tx.xid) is tx:
            del self._by_xid[tx.xid]
        self.budget.release(tx.reserved_bytes)
        tx.reserved_bytes = 0
        tx.sends.clear()
        tx.receipts.clear()
        tx.confirmations.clear()
