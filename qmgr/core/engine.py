"""The queue-manager core: queues, transactions, sends and receives, decided without I/O.

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

* an open :class:`~qmgr.core.transactions.Transaction` keeps its sends
  (bounded per transaction and, across all of them, by the ``uncommitted``
  budget) and its receives;
* a received-but-uncommitted message is *held* (``holds``): every other
  reader passes over it.

A crash therefore aborts every open transaction by forgetting it: after a
restart the held messages are visible again, in their places, and the
uncommitted sends never existed.

A commit is one atomic unit: the removals of what the transaction received
(first, so that their space counts for its sends' quota), then its sends,
in order. A receive outside a transaction is a unit of one removal, written
before the message is returned.

Composition
-----------
:class:`QueueManagerCore` holds the state and gives each part the pieces
it needs; no part knows the engine (nor imports it):

* ``store``, read only, for every part;
* ``holds`` (``holds.Holds``): the held messages and each queue's receive
  start, shared by the receives and commits here, ``ranges``, ``expiry``,
  ``poison``, ``moves``, ``two_phase`` and ``queues``;
* ``tally`` (``transactions.Tally``): commits and aborts, counted by
  whoever ends one (a transaction, a removal step, a move, a resolution);
* ``uncommitted`` (``budget.MemoryBudget``): bytes of messages in open
  transactions, reserved by the sends here, given back when each ends, and
  reserved by commits of prepared transactions;
* ``ordinals``: message ids, for the sends here and the reports of
  ``outcomes``; ``addressing``: format names and queue references;
* ``outcomes`` (``outcomes.Outcomes``): the reports of a message's fate, for
  whoever decides it; ``confirmations`` builds on it; ``lists`` stands alone;
* ``poison``: what an aborted receive does (counts, returns from ``;retry``,
  moves to ``;retry`` and ``;poison``); ``moves``: moves by request, between a
  queue and its subqueues and out of the dead-letter queues (a move holds its
  message with :meth:`QueueManagerCore.take`, handed to it, and looks at it
  first with :meth:`QueueManagerCore.peek`);
* ``transactions`` (``transactions.OpenTransactions``): the open
  transactions and how each ends; an abort hands what it held to
  ``poison.aborted``;
* ``two_phase``: global ids over ``transactions``, and prepared
  transactions; ``queues`` (``queue_admin.QueueAdmin``) asks it whether a
  queue is pinned before deleting it;
* ``expiry`` and ``ranges``: expired messages, and LookupId ranges.

The daemon reaches each part through the engine (``core.two_phase.prepare``,
``core.queues.create``, ``core.ranges.removal_step``, ...); the engine's own
methods are the hot path: transactions, sends and receives.
"""

from __future__ import annotations

from dataclasses import dataclass

import storage
from storage import (
    Operation,
    QueueRecord,
    RemoveMessage,
    ReserveOrdinals,
    Store,
    Unit,
    UnitOutcome,
)
from wire import MessageClass, MessageProperties, quoted

from . import names
from .addressing import Addressing, Target
from .budget import MemoryBudget
from .confirmation import Confirmations
from .errors import (
    AccessDenied,
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    QueueManagerError,
    QueueNotFound,
    TransactionAborted,
    TransactionTooLarge,
    TransactionUsageError,
    from_store_error,
)
from .expiry import Expiry
from .holds import Holds
from .limits import Limits
from .lists import ListAdmin
from .moves import Moves
from .ordinals import OrdinalAllocator
from .outcomes import DESTINATION_KINDS, Outcomes, record_wants_report, wants_report
from .outgoing import RemoteDestination
from .poison import PoisonHandling
from .queue_admin import QueueAdmin
from .ranges import Ranges
from .send_copies import copies_of
from .sends import (
    SendMode,
    check_message,
    check_remote_message,
    fan_out_is_transactional,
    refused_copy,
    send_is_transactional,
)
from .transactions import OpenTransactions, Tally, Transaction, TransactionStage
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
    #: The position in ``unit`` of the first queue's copy (reports come before).
    first: int = 0


class QueueManagerCore:
    """Queue semantics over one store. Not thread-safe; one caller at a time.

    ``identity`` says which format names are this queue manager's; ``router``
    that it passes messages from other queue managers on (``peers.router``),
    so that their host names decide whether they are its own (``moves`` takes
    a dead letter back to its queue as its arrival took it).
    """

    def __init__(
        self,
        store: Store,
        *,
        identity: names.LocalIdentity | None = None,
        limits: Limits | None = None,
        router: bool = False,
    ) -> None:
        self.store = store
        self.identity = identity or names.LocalIdentity()
        self.limits = limits = limits or Limits()
        self._guid = store.qm_guid
        #: Held messages, and where receives start.
        self.holds = holds = Holds(store)
        #: Transactions committed and aborted since the start.
        self.tally = tally = Tally()
        #: Bytes of messages in open transactions, for all clients together.
        self.uncommitted = MemoryBudget(
            limits.max_uncommitted_bytes, what="messages in open transactions"
        )
        self.ordinals = OrdinalAllocator(store.ordinal_limit)
        self.addressing = addressing = Addressing(store, self.identity)
        #: Acknowledgments, dead-letter and journal copies of messages' fates.
        self.outcomes = outcomes = Outcomes(
            store, addressing, guid=self._guid, next_ordinal=self.ordinals.take
        )
        #: Distribution lists.
        self.lists = ListAdmin(store, self.identity)
        #: The source's copies awaiting confirmation.
        self.confirmations = Confirmations(store, outcomes, delay=limits.xact_delay_receive_nack)
        #: Aborted receives counted, poison handling.
        self.poison = poison = PoisonHandling(store, holds, addressing)
        #: Moves by request: within a queue's family, and dead letters back.
        self.moves = Moves(
            store,
            holds,
            tally,
            addressing,
            take=self.take,
            peek=self.peek,
            guid=self._guid,
            router=router,
            retry_queued=lambda: poison.wake(),
        )
        #: Open transactions, and how each ends.
        self.transactions = transactions = OpenTransactions(
            holds, self.uncommitted, tally, aborted=poison.aborted
        )
        #: Global transaction ids and prepared transactions.
        self.two_phase = two_phase = TwoPhase(
            store,
            transactions,
            holds,
            outcomes,
            tally,
            aborted=poison.aborted,
            max_prepared=limits.max_prepared,
            retention=limits.outcome_retention,
        )
        #: Creating, deleting, purging and erasing queues.
        self.queues = QueueAdmin(
            store, addressing, holds, outcomes, check_deletable=two_phase.check_deletable
        )
        #: Messages whose time to be received has passed (and copies past their deadline).
        self.expiry = Expiry(store, holds, outcomes, self.confirmations)
        #: LookupId ranges: reading, measuring, removing through.
        self.ranges = Ranges(store, holds, outcomes, tally)
        # Prepared transactions outlive restarts: hold their received messages again.
        two_phase.load()

    # ------------------------------------------------------------------ message ids

    def ordinal_reservation(self) -> Unit | None:
        """A unit raising the store's message-id limit, when it is time for one."""
        limit = self.ordinals.reservation()
        return None if limit is None else Unit((ReserveOrdinals(limit),))

    def ordinals_reserved(
        self, unit: Unit, outcome: UnitOutcome | None, batch_error: BaseException | None = None
    ) -> QueueManagerError | None:
        """The reservation unit was written (``outcome``) or failed (None, with the
        batch's error when known); returns why it failed, if it did."""
        op = unit.ops[0]
        assert isinstance(op, ReserveOrdinals)
        if outcome is not None and outcome.error is None:
            self.ordinals.reserved(op.limit)
            return None
        cause = outcome.error if outcome is not None else batch_error
        failure = None if cause is None else from_store_error(cause)
        self.ordinals.reservation_failed(failure)
        return failure

    @property
    def reservation_wanted(self) -> bool:
        """True when message ids run low and :meth:`ordinal_reservation` has a unit to write."""
        return self.ordinals.wanted

    # ------------------------------------------------------------------ queues

    def queue(self, reference: str) -> QueueRecord:
        """Resolve a local queue reference (name or format name) to its record.

        Raises:
            InvalidName, QueueNotFound
        """
        return self.addressing.queue(reference)

    # ------------------------------------------------------------------ transactions

    def begin(self, owner: object, client_id: int, now: float) -> Transaction:
        """Open a transaction owned by ``owner`` (a connection), known there as
        ``client_id`` (one with a global id: ``two_phase.begin``)."""
        return self.transactions.begin(owner, client_id, now)

    def commit(self, tx: Transaction, wall: float = 0.0) -> Unit:
        """The unit that commits ``tx``: its removals, then its sends (and, for a
        transaction with a global id, its outcome, stamped ``wall``).

        Raises:
            TransactionAborted: the daemon ended it (the caller aborts it).
            the error of a failed operation in it, saying so: it can only be
                aborted (the caller aborts it).
        """
        tx.check_committable()
        tx.stage = TransactionStage.COMMITTING
        moves = tx.moves
        removal = self.holds.removal
        removals = tuple(
            removal(queue_id, lookup_id)
            if not moves or (queue_id, lookup_id) not in moves
            else moves[(queue_id, lookup_id)]
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
            return self.commit_failed(tx, error)
        woken = self.transactions.end(tx, committed=True)
        holds = self.holds
        holds.appended(unit, outcome)
        moved_into: list[int] = []
        for op, result in zip(unit.ops, outcome.results, strict=True):
            if isinstance(result, storage.Appended):
                woken.add(result.queue_id)
            elif isinstance(op, RemoveMessage) and op.journal:
                woken.update(holds.journal_of(op.queue_id))
            elif isinstance(result, storage.Moved):
                holds.moved_in(result.target_id)
                woken.add(result.target_id)
                moved_into.append(result.target_id)
        if moved_into:
            self.moves.moved_into(moved_into)
        return woken, None

    def commit_failed(
        self, tx: Transaction, error: BaseException
    ) -> tuple[set[int], QueueManagerError]:
        """The unit of a commit was refused, or the writer could not write the
        batch holding it: abort the transaction.

        Returns:
            The queues to wake, and the error to report.
        """
        woken = self.transactions.end(tx, committed=False)
        context = f"transaction {tx.client_id} was aborted: "
        failure = from_store_error(error, context=context)
        if isinstance(failure, QueueNotFound):
            # A queue or message it used went away meanwhile: the transaction
            # itself is what failed (a full store or a quota keeps its own error).
            failure = TransactionAborted(str(failure))
        return woken, failure

    def abort(self, tx: Transaction, reason: str | None = None) -> set[int]:
        """Abort: drop the sends, release the received messages.

        Args:
            reason: set when the daemon ends the transaction on its own (the
                owner is told why the next time it uses it).

        Returns:
            The queues whose readers should wake up (messages visible again).
        """
        return self.transactions.abort(tx, reason)

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
        for admin, reference in ((True, message.admin_queue), (False, message.response_queue)):
            if reference:
                parsed = self.addressing.parse(reference)
                if parsed.is_multiple or parsed.elements[0].distribution_list:
                    msg = (
                        f"{quoted(reference)}: an admin or response queue is one queue, "
                        "not a distribution list or a multiple-element name"
                    )
                    raise InvalidName(msg)
                element = parsed.elements[0]
                if (
                    admin
                    and element.is_local
                    and (element.is_system or element.is_journal or element.is_subqueue)
                ):
                    msg = (
                        f"{quoted(reference)}: an admin queue takes acknowledgments, and journal, "
                        "dead-letter and subqueues take no messages sent to them"
                    )
                    raise AccessDenied(msg)
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
        if not wants_report(payload):
            # The usual case: no report, no copy awaiting confirmation.
            if tx is None:
                return PreparedSend(queues, stamped.message_id, transactional, Unit(tuple(appends)))
        else:
            accepted = [
                target
                for target in queues
                if not fans_out or refused_copy(target, transactional=transactional) is None
            ]
            # Its arrival reports first: a copy handed at once to a waiting
            # receive writes its receipt reports in its place, and the admin
            # queue must have "reached" before "received". A report to one of
            # the message's own queues comes after the message, as it arrives.
            own = {target.queue_id for target in queues if isinstance(target, QueueRecord)}
            before: list[storage.AppendMessage | storage.AppendOutgoing] = []
            after: list[storage.AppendMessage | storage.AppendOutgoing] = []
            for report in self.outcomes.arrival_reports(stamped, accepted, wall=wall):
                mine = isinstance(report, storage.AppendMessage) and report.queue_id in own
                (after if mine else before).append(report)
            appends = [*before, *appends, *after]
            copies = self.confirmations.copies(stamped, queues) if transactional else []
            if tx is None:
                unit = Unit((*appends, *copies))
                return PreparedSend(
                    queues, stamped.message_id, transactional, unit, first=len(before)
                )
            tx.confirmations.extend(copies)
        size = len(payload)
        if not self.uncommitted.try_reserve(size):
            raise LimitExceeded(self.uncommitted.refusal(size))
        tx.reserved_bytes += size
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
            self.tally.aborts += 1  # a single-message transaction the store refused
            raise from_store_error(error)
        self.tally.commits += 1
        self.holds.appended(prepared.unit, outcome)
        first = outcome.results[prepared.first]
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
                f"{limits.max_transaction_bytes} bytes (transactions.max_operations, "
                "transactions.max_bytes): it can only abort; put less in each transaction"
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
                f"queue {quoted(queue.display_name)} is not transactional; "
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
                f"transaction {tx.client_id} would hold more than "
                f"{self.limits.max_transaction_operations} operations "
                "(transactions.max_operations): it can only abort; put less in each transaction"
            )
            raise TransactionTooLarge(msg)
        found = self._find(queue, lookup_id)
        if found is None:
            return None
        found_id, band, record = found
        self.holds.hold(queue.queue_id, found_id, band, scanned_from_start=not lookup_id)
        if tx is not None:
            tx.receives.append((queue.queue_id, found_id))
            tx.last_activity = now
            if queue.kind in DESTINATION_KINDS and record_wants_report(record):
                tx.receipts.add((queue.queue_id, found_id))
        return found_id, record

    def _find(self, queue: QueueRecord, lookup_id: int) -> tuple[int, int, bytes] | None:
        queue_id = queue.queue_id
        holds = self.holds
        if lookup_id:
            if holds.is_held(queue_id, lookup_id):
                return None
            record = self.store.read_message(queue_id, lookup_id)
            if record is None:
                return None
            band = 0 if queue.transactional else 7 - storage.message_header(record)[0]
            return lookup_id, band, record
        held = holds.held(queue_id)
        band, start = holds.start(queue_id)
        if queue.transactional:
            found = self.store.first_fifo(queue_id, start=start, skip=held)
            return None if found is None else (found[0], 0, found[1])
        by_priority = self.store.first_by_priority(queue_id, start=(band, start), skip=held)
        return None if by_priority is None else (by_priority[1], by_priority[0], by_priority[2])

    def removal(self, queue: QueueRecord, lookup_id: int, record: bytes, *, wall: float) -> Unit:
        """The unit that removes a held message (a receive outside a transaction;
        ``record`` is what :meth:`take` returned), with the reports it asked for."""
        removal = self.holds.removal(queue.queue_id, lookup_id)
        return Unit((removal, *self.receipt_reports(queue, record, wall=wall)))

    def receipt_reports(
        self, queue: QueueRecord, record: bytes | memoryview, *, wall: float
    ) -> list[Operation]:
        """The reports a receive outside a transaction writes with its removal, for
        a message (``record``, as stored) it takes from ``queue``."""
        # Copies in journal and system queues report nothing: the message's
        # fate was decided when it left its destination queue.
        if queue.kind not in DESTINATION_KINDS or not record_wants_report(record):
            return []
        return self.outcomes.stored_reports(record, MessageClass.ACK_RECEIVE, wall=wall)

    def handed(self, queue_id: int) -> set[int]:
        """Finish a receive outside a transaction that was handed its message in
        the write that sent it (``storage.Handed``); returns the queues to wake
        (the journal its copy went to)."""
        self.tally.commits += 1
        return self.holds.journal_of(queue_id)

    def removal_done(
        self, queue_id: int, lookup_id: int, outcome: UnitOutcome | BaseException
    ) -> tuple[set[int], QueueManagerError | None]:
        """Finish a receive outside a transaction: its removal was written, failed
        (``outcome.error``) or never written (an exception).

        Returns:
            Queues to wake (the journal, and where its reports went), and the
            error if the message was not removed.
        """
        error = outcome if isinstance(outcome, BaseException) else outcome.error
        if error is None:
            assert isinstance(outcome, UnitOutcome)
            self.tally.commits += 1
            woken = self.holds.removed(queue_id, (lookup_id,))
            woken.update(r.queue_id for r in outcome.results if isinstance(r, storage.Appended))
            return woken, None
        self.tally.aborts += 1
        return self.holds.release([(queue_id, lookup_id)]), from_store_error(error)
