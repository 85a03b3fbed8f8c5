"""The queue-manager core: queues, transactions and receives, decided without I/O.

Theory of operation
-------------------
The core decides and the writer writes. Every change the core wants is a
``storage.Unit`` it *returns*; the daemon hands the unit to its writer, and
gives the unit's outcome back to the matching ``..._done`` method, which
finishes the job (releases holds, counts, translates a failure into the
core's own error). The core reads the store (queues, messages) but never
writes it, never awaits, never reads a clock (``now`` is an argument:
monotonic seconds for timeouts, ``wall`` unix seconds for message times)
and never logs.

What is not yet committed lives here, in memory, on purpose:

* an open :class:`Transaction` keeps its sends (bounded per transaction and,
  across all of them, by the ``uncommitted`` budget) and its receives;
* a received-but-uncommitted message is *held* (``locks``): every other
  reader passes over it.

A crash therefore aborts every open transaction by forgetting it: after a
restart the held messages are visible again, in their places, and the
uncommitted sends never existed.

Queue administration is in ``queue_admin`` (a base class), global ids and
prepared transactions in ``two_phase`` (``core.two_phase``), LookupId ranges
in ``ranges``, counting aborted receives, poison handling and moves between
a queue and its subqueues in ``poison`` (``core.poison``).

A commit is one atomic unit: the removals of what the transaction received
(first, so that their space counts for its sends' quota), then its sends,
in order. A receive outside a transaction is a unit of one removal, written
before the message is returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import storage
from storage import (
    AppendMessage,
    QueueRecord,
    RemoveMessage,
    ReserveOrdinals,
    Store,
    Unit,
    UnitOutcome,
)
from wire import MessageClass, MessageProperties

from . import names
from .addressing import Addressing, Target
from .budget import MemoryBudget
from .confirmation import Confirmations
from .errors import (
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    QueueManagerError,
    TransactionAborted,
    TransactionTooLarge,
    TransactionUsageError,
    from_store_error,
)
from .expiry import Expiry
from .limits import Limits
from .lists import ListAdmin
from .locks import LockTable
from .ordinals import OrdinalAllocator
from .outcomes import (
    DESTINATION_KINDS,
    Outcomes,
    record_wants_report,
    wants_outcome,
)
from .outgoing import RemoteDestination
from .poison import PoisonHandling
from .queue_admin import QueueAdmin
from .send_copies import copies_of
from .sends import (
    SendMode,
    check_message,
    check_remote_message,
    fan_out_is_transactional,
    refused_copy,
    send_is_transactional,
)
from .transactions import Transaction, TransactionState
from .two_phase import TwoPhase

__all__ = ["Limits", "PreparedSend", "QueueManagerCore"]


@dataclass(frozen=True, slots=True)
class PreparedSend:
    """A validated, stamped send."""

    #: Where it goes, in format-name order: local queues, or queues on other
    #: queue managers (their copies go to outgoing queues).
    queues: tuple[Target, ...]
    #: The message id it was given.
    message_id: str
    #: True if it is (part of) a transaction: written with a sync before any reply.
    transactional: bool
    #: Outside a transaction: the unit to write now. Inside one: None (kept in it).
    unit: Unit | None


class QueueManagerCore(QueueAdmin):
    """Queue semantics over one store. Not thread-safe; one caller at a time."""

    def __init__(
        self,
        store: Store,
        *,
        identity: names.LocalIdentity | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.store = store
        self.identity = identity or names.LocalIdentity()
        self.limits = limits or Limits()
        self.locks = LockTable()
        #: Bytes of messages in open transactions, for all clients together.
        self.uncommitted = MemoryBudget(
            self.limits.max_uncommitted_bytes, what="messages in open transactions"
        )
        self.ordinals = OrdinalAllocator(store.ordinal_limit)
        #: Transactions committed and aborted since the start.
        self.commits = 0
        self.aborts = 0
        self._guid = store.qm_guid
        self._transactions: dict[int, Transaction] = {}
        self._next_tx_id = 1
        self.addressing = Addressing(store, self.identity)
        #: Acknowledgments, dead-letter and journal copies of messages' fates.
        self.outcomes = Outcomes(
            store, self.addressing, guid=self._guid, next_ordinal=self.ordinals.take
        )
        #: Distribution lists.
        self.lists = ListAdmin(store, self.identity)
        #: The source's copies awaiting confirmation.
        self.confirmations = Confirmations(
            store, self.outcomes, delay=self.limits.xact_delay_receive_nack
        )
        #: Messages whose time to be received has passed (and copies past their deadline).
        self.expiry = Expiry(self)
        #: Global transaction ids and prepared transactions.
        self.two_phase = TwoPhase(
            self,
            max_prepared=self.limits.max_prepared,
            retention=self.limits.outcome_retention,
        )
        # Prepared transactions outlive restarts: hold their received messages again.
        self.two_phase.load()
        #: Aborted receives counted, poison handling, moves to and from subqueues.
        self.poison = PoisonHandling(self)

    # ------------------------------------------------------------------ message ids

    def ordinal_reservation(self) -> Unit | None:
        """A unit raising the store's message-id limit, when it is time for one."""
        limit = self.ordinals.reservation()
        return None if limit is None else Unit((ReserveOrdinals(limit),))

    def ordinals_reserved(self, unit: Unit, outcome: UnitOutcome | None) -> None:
        """The reservation unit was written (``outcome``) or failed (None)."""
        op = unit.ops[0]
        assert isinstance(op, ReserveOrdinals)
        if outcome is None or outcome.error is not None:
            self.ordinals.reservation_failed()
        else:
            self.ordinals.reserved(op.limit)

    # ------------------------------------------------------------------ transactions

    @property
    def reservation_wanted(self) -> bool:
        """True when message ids run low and :meth:`ordinal_reservation` has a unit to write."""
        return self.ordinals.wanted

    @property
    def open_transactions(self) -> int:
        """Transactions not yet ended."""
        return len(self._transactions)

    def begin(self, owner: object, client_id: int, now: float) -> Transaction:
        """Open a transaction owned by ``owner`` (a connection), known there as ``client_id``."""
        tx = Transaction(
            tx_id=self._next_tx_id,
            owner=owner,
            client_id=client_id,
            started_at=now,
            last_activity=now,
        )
        self._next_tx_id += 1
        self._transactions[tx.tx_id] = tx
        return tx

    def idle_transactions(self, now: float, timeout: float) -> list[Transaction]:
        """Open transactions with no activity for ``timeout`` seconds (monotonic ``now``);
        a transaction with a receive waiting for a message is busy, not idle."""
        return [
            tx
            for tx in self._transactions.values()
            if tx.state is TransactionState.OPEN
            and not tx.waiting
            and now - tx.last_activity > timeout
        ]

    def commit(self, tx: Transaction, wall: float = 0.0) -> Unit:
        """The unit that commits ``tx``: its removals, then its sends (and, for a
        transaction with a global id, its outcome, stamped ``wall``).

        Raises:
            TransactionAborted: the daemon ended it (the caller aborts it).
            the error of a failed operation in it, saying so: it can only be
                aborted (the caller aborts it).
        """
        self.check_committable(tx)
        tx.state = TransactionState.COMMITTING
        moves = tx.moves
        removals = tuple(
            self.removal_op(queue_id, lookup_id)
            if not moves or (queue_id, lookup_id) not in moves
            else storage.MoveMessage(queue_id, lookup_id, moves[(queue_id, lookup_id)])
            for queue_id, lookup_id in tx.receives
        )
        if tx.receipts or tx.confirmations:
            reports = self.outcomes.receipts(tx.receipts, wall=wall)
            ops = (*removals, *tx.sends, *reports, *tx.confirmations)
        else:
            ops = (*removals, *tx.sends)
        if tx.xid is None:
            return Unit(ops)
        # A transaction with a global id committed in one phase: its outcome is kept too.
        outcome = storage.RecordOutcome(
            tx.xid, committed=True, resolved_at=wall, owner=tx.principal
        )
        return Unit((*ops, outcome))

    @staticmethod
    def check_committable(tx: Transaction) -> None:
        """Raise the reason ``tx`` can only abort, if it has one.

        Raises:
            TransactionAborted: the daemon ended it.
            the error of a failed operation in it, saying so.
        """
        if tx.abort_reason is not None or tx.failure is not None:
            raise _abort_error(tx)

    def commit_done(
        self, tx: Transaction, unit: Unit, outcome: UnitOutcome
    ) -> tuple[set[int], QueueManagerError | None]:
        """Finish a commit whose unit was written, or refused (``outcome.error``).

        Returns:
            The queues whose readers should wake up, and the error if the unit
            failed (quota, a queue deleted, the store full): the transaction
            was then aborted instead.
        """
        error = outcome.error
        if error is not None:
            woken = self._end(tx, committed=False)
            context = f"transaction {tx.client_id} was aborted: "
            return woken, from_store_error(error, context=context)
        woken = self._end(tx, committed=True)
        self._note_arrivals(unit, outcome)
        for op, result in zip(unit.ops, outcome.results, strict=True):
            if isinstance(result, storage.Appended):
                woken.add(result.queue_id)
            elif isinstance(op, RemoveMessage) and op.journal:
                woken.update(self.journal_of(op.queue_id))
            elif isinstance(result, storage.Moved):
                woken.add(result.target_id)
        return woken, None

    def commit_failed(
        self, tx: Transaction, error: BaseException
    ) -> tuple[set[int], QueueManagerError]:
        """The writer could not write the batch holding the commit: abort the transaction.

        Returns:
            The queues to wake, and the error to report.
        """
        woken = self._end(tx, committed=False)
        context = f"transaction {tx.client_id} was aborted: "
        return woken, from_store_error(error, context=context)

    def abort(self, tx: Transaction, reason: str | None = None) -> set[int]:
        """Abort: drop the sends, release the received messages.

        Args:
            reason: set when the daemon ends the transaction on its own (the
                owner is told why the next time it uses it).

        Returns:
            The queues whose readers should wake up (messages visible again).
        """
        if tx.state is TransactionState.ENDED:
            return set()
        if reason is not None:
            tx.abort_reason = reason
        return self._end(tx, committed=False)

    def end_prepared(self, tx: Transaction) -> None:
        """``tx`` was prepared: it leaves its owner, its received messages stay held."""
        tx.state = TransactionState.ENDED
        self._transactions.pop(tx.tx_id, None)
        self.uncommitted.release(tx.held_bytes)
        tx.held_bytes = 0
        tx.sends.clear()
        tx.receives.clear()
        tx.receipts.clear()
        tx.confirmations.clear()
        self.two_phase.ended(tx)

    def _end(self, tx: Transaction, *, committed: bool) -> set[int]:
        tx.state = TransactionState.ENDED
        self._transactions.pop(tx.tx_id, None)
        self.two_phase.ended(tx)
        self.uncommitted.release(tx.held_bytes)
        tx.held_bytes = 0
        tx.sends.clear()
        tx.receipts.clear()
        tx.confirmations.clear()
        if committed:
            self.commits += 1
            for queue_id, lookup_id in tx.receives:
                self.locks.forget(queue_id, lookup_id)
            tx.receives.clear()
            tx.moves.clear()
            return set()
        self.aborts += 1
        woken = self.poison.aborted(tx.receives, uncounted=tx.moves)
        tx.receives.clear()
        tx.moves.clear()
        return woken

    # ------------------------------------------------------------------ sending

    def prepare_send(
        self,
        message: MessageProperties,
        *,
        tx: Transaction | None,
        mode: SendMode = SendMode.AUTO,
        now: float,
        wall: float,
    ) -> PreparedSend | None:
        """Validate a send, give the message its id, and keep it in ``tx`` (returning
        None) or, outside a transaction, return it with the unit that writes it.

        Raises:
            InvalidName, QueueNotFound, AccessDenied, NotSupported,
            TransactionUsageError, MessageTooLarge, InvalidArgument,
            TransactionTooLarge, LimitExceeded
        """
        check_message(message)
        for reference in (message.admin_queue, message.response_queue):
            if reference:
                parsed = self.addressing.parse(reference)
                if parsed.is_multiple or parsed.elements[0].distribution_list:
                    msg = (
                        f"{reference!r}: an admin or response queue is one queue, "
                        "not a distribution list or a multiple-element name"
                    )
                    raise InvalidName(msg)
        queues = self.addressing.destinations(message.destination)
        if any(isinstance(target, RemoteDestination) for target in queues):
            check_remote_message(message)
        fans_out = self.addressing.fans_out(message.destination)
        if fans_out:
            transactional = fan_out_is_transactional(
                queues, in_transaction=tx is not None, mode=mode
            )
        else:
            transactional = send_is_transactional(queues, in_transaction=tx is not None, mode=mode)
        body_size = message.body_size
        if tx is not None:
            self._check_room(tx, operations=len(queues), body_bytes=body_size * len(queues))
        stamped = message.stamp(
            source_qm=self._guid,
            ordinal=self.ordinals.take(),
            sent_time=wall,
            transactional=transactional,
        )
        payload = stamped.raw
        appends = copies_of(
            stamped,
            queues,
            transactional=transactional,
            fans_out=fans_out,
            outcomes=self.outcomes,
            wall=wall,
        )
        if not wants_outcome(payload):
            # The usual case: no report, no copy awaiting confirmation.
            if tx is None:
                return PreparedSend(queues, stamped.message_id, transactional, Unit(tuple(appends)))
        else:
            accepted = [
                target
                for target in queues
                if not fans_out or refused_copy(target, transactional=transactional) is None
            ]
            appends.extend(self.outcomes.arrival_reports(stamped, accepted, wall=wall))
            copies = self.confirmations.copies(stamped, queues) if transactional else []
            if tx is None:
                unit = Unit((*appends, *copies))
                return PreparedSend(queues, stamped.message_id, transactional, unit)
            tx.confirmations.extend(copies)
        size = len(payload)
        if not self.uncommitted.try_reserve(size):
            raise LimitExceeded(self.uncommitted.refusal(size))
        tx.held_bytes += size
        tx.sends.extend(appends)
        tx.send_bytes += body_size * len(queues)
        tx.last_activity = now
        return None

    def send_done(self, prepared: PreparedSend, outcome: UnitOutcome) -> int:
        """Finish a send outside a transaction; returns the first queue's lookup id.

        Raises:
            QueueManagerError: it could not be written (quota, queue gone, store full).
        """
        assert prepared.unit is not None
        error = outcome.error
        if error is not None:
            raise from_store_error(error)
        self.commits += 1
        self._note_arrivals(prepared.unit, outcome)
        first = outcome.results[0]
        assert isinstance(first, storage.Appended)
        return first.lookup_id

    def _check_room(self, tx: Transaction, *, operations: int, body_bytes: int) -> None:
        limits = self.limits
        if (
            tx.operations + operations > limits.max_transaction_operations
            or tx.send_bytes + body_bytes > limits.max_transaction_bytes
        ):
            msg = (
                f"transaction {tx.client_id} would hold more than "
                f"{limits.max_transaction_operations} operations or "
                f"{limits.max_transaction_bytes} bytes; commit it and start another"
            )
            raise TransactionTooLarge(msg)

    # ------------------------------------------------------------------ receiving

    @staticmethod
    def check_receive(queue: QueueRecord, tx: Transaction | None, *, peek: bool) -> None:
        """Apply MSMQ's rules for who may receive from a queue.

        Raises:
            TransactionUsageError: receiving inside a transaction from a
                non-transactional queue.
            InvalidArgument: peeking inside a transaction.
        """
        if tx is not None and peek:
            msg = "peeking inside a transaction is not meaningful; peek outside it"
            raise InvalidArgument(msg)
        if tx is not None and not queue.transactional:
            msg = (
                f"queue {queue.display_name!r} is not transactional; "
                "receive from it outside the transaction"
            )
            raise TransactionUsageError(msg)

    def peek(self, queue: QueueRecord, *, lookup_id: int = 0) -> tuple[int, bytes] | None:
        """The message a receive would take now (or the one named), without holding it."""
        found = self._find(queue, lookup_id)
        return None if found is None else (found[0], found[2])

    def take(
        self, queue: QueueRecord, *, lookup_id: int = 0, tx: Transaction | None, now: float
    ) -> tuple[int, bytes] | None:
        """Find the next free message (or the one named) and hold it, for ``tx`` or,
        without one, for a removal the caller writes with :meth:`removal`.

        Returns:
            ``(lookup_id, record)`` (the store's record: ``storage.message_payload``
            reads the message), or None if there is none free.

        Raises:
            TransactionTooLarge: the transaction holds too many operations.
        """
        if tx is not None and tx.operations + 1 > self.limits.max_transaction_operations:
            msg = (
                f"transaction {tx.client_id} holds too many operations; commit it and start another"
            )
            raise TransactionTooLarge(msg)
        found = self._find(queue, lookup_id)
        if found is None:
            return None
        found_id, band, record = found
        self.locks.hold(queue.queue_id, found_id, band, scanned_from_start=not lookup_id)
        if tx is not None:
            tx.receives.append((queue.queue_id, found_id))
            tx.last_activity = now
            if queue.kind in DESTINATION_KINDS and record_wants_report(record):
                tx.receipts.add((queue.queue_id, found_id))
        return found_id, record

    def _find(self, queue: QueueRecord, lookup_id: int) -> tuple[int, int, bytes] | None:
        queue_id = queue.queue_id
        if lookup_id:
            if self.locks.is_held(queue_id, lookup_id):
                return None
            record = self.store.read_message(queue_id, lookup_id)
            if record is None:
                return None
            band = 0 if queue.transactional else 7 - storage.message_header(record)[0]
            return lookup_id, band, record
        held = self.locks.held(queue_id)
        band, start = self.locks.start(queue_id)
        if queue.transactional:
            found = self.store.first_fifo(queue_id, start=start, skip=held)
            return None if found is None else (found[0], 0, found[1])
        by_priority = self.store.first_by_priority(queue_id, start=(band, start), skip=held)
        return None if by_priority is None else (by_priority[1], by_priority[0], by_priority[2])

    def removal(self, queue: QueueRecord, lookup_id: int, record: bytes, *, wall: float) -> Unit:
        """The unit that removes a held message (a receive outside a transaction;
        ``record`` is what :meth:`take` returned), with the reports it asked for."""
        removal = self.removal_op(queue.queue_id, lookup_id)
        # Copies in journal and system queues report nothing: the message's
        # fate was decided when it left its destination queue.
        if queue.kind not in DESTINATION_KINDS or not record_wants_report(record):
            return Unit((removal,))
        message = MessageProperties.from_bytes(storage.message_payload(record))
        note = storage.message_note(record)
        reports = self.outcomes.effects(message, MessageClass.ACK_RECEIVE, wall=wall, note=note)
        return Unit((removal, *reports))

    def removal_done(
        self, queue_id: int, lookup_id: int, outcome: UnitOutcome | BaseException
    ) -> tuple[set[int], QueueManagerError | None]:
        """Finish a receive outside a transaction: its removal was written, failed
        (``outcome.error``) or never written (an exception).

        Returns:
            Queues to wake, and the error if the message was not removed.
        """
        error = outcome if isinstance(outcome, BaseException) else outcome.error
        if error is None:
            self.commits += 1
            self.locks.forget(queue_id, lookup_id)
            return self.journal_of(queue_id), None
        return self.release([(queue_id, lookup_id)]), from_store_error(error)

    def journal_of(self, queue_id: int) -> set[int]:
        """The journal queue a removal from ``queue_id`` copied its message to, if any."""
        record = self.store.get_queue_by_id(queue_id)
        if record is None or not record.journal or record.journal_id is None:
            return set()
        return {record.journal_id}

    def peek_range(self, queue: QueueRecord, *, after: int, limit: int) -> list[tuple[int, bytes]]:
        """Visible messages with a LookupId above ``after``, in LookupId order."""
        return self.store.read_range(
            queue.queue_id, after=after, limit=limit, skip=self.locks.held(queue.queue_id)
        )

    # ------------------------------------------------------------------ holds

    def removal_op(self, queue_id: int, lookup_id: int) -> RemoveMessage:
        """The operation that removes a message (copied to the journal if its queue has one)."""
        record = self.store.get_queue_by_id(queue_id)
        # A subqueue's messages go to its queue's journal (its record names it).
        journal = bool(record is not None and record.journal and record.kind in DESTINATION_KINDS)
        return RemoveMessage(queue_id, lookup_id, journal)

    def release(self, receives: Iterable[tuple[int, int]]) -> set[int]:
        """Release held messages that stay in their queue; returns the queues to wake.

        A message purged while held stays invisible; it is erased now that
        nothing holds it.
        """
        woken: set[int] = set()
        for queue_id, lookup_id in receives:
            self.locks.release(queue_id, lookup_id)
            queue = self.store.get_queue_by_id(queue_id)
            if queue is not None and lookup_id >= queue.purged_below:
                woken.add(queue_id)
        return woken

    def _note_arrivals(self, unit: Unit, outcome: UnitOutcome) -> None:
        """Let receives on non-transactional queues see messages that arrived ahead of them."""
        for op, result in zip(unit.ops, outcome.results, strict=True):
            if isinstance(op, AppendMessage) and isinstance(result, storage.Appended):
                queue = self.store.get_queue_by_id(op.queue_id)
                if queue is not None and not queue.transactional:
                    self.locks.arrived(op.queue_id, (7 - op.priority,))


def _abort_error(tx: Transaction) -> QueueManagerError:
    if tx.abort_reason is not None:
        return TransactionAborted(f"transaction {tx.client_id} was aborted: {tx.abort_reason}")
    failure = tx.failure
    assert failure is not None
    text = (
        f"transaction {tx.client_id} was aborted because an operation in it failed: "
        f"{failure.message}"
    )
    return type(failure)(text)
