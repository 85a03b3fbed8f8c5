"""Two-phase transactions: global ids, prepared transactions and their outcomes.

Theory of operation
-------------------
A client may give a transaction a *global id* (an ``xid``) when it begins
it. Such a transaction can be *prepared*: one atomic unit
(``storage.PrepareTransaction``) writes its sends, whole, and the LookupIds
of the messages it holds into the store, and reserves the quota bytes of its sends on
their queues. From then on it belongs to no connection: a disconnect, a
crash or an idle timeout no longer aborts it, its received messages stay
held (after a restart too: :meth:`TwoPhase.load` holds them again) and its
sends stay invisible. Any connection, or an operator, then *resolves* it by
id: a commit (``storage.ResolvePrepared``) removes the received messages
and appends the sends, which get their LookupIds then, in commit order, so
a reader that follows LookupIds never sees one appear behind it; an abort
drops the sends and releases the messages. Several ids may be resolved in
one atomic unit. A commit does not fail for quota: the quota was reserved
at prepare, and the write may use the store's headroom, as removals do (on
a full store, a commit larger than that headroom, its sends and the copies
its remote sends keep for confirmation, fails with ``StoreFull`` and stays
in doubt); and a queue a prepared transaction uses cannot be deleted.

The outcome of each id is kept in the store for a configurable time, so
that resolving an id twice says what happened the first time and changes
nothing, and an id is never used twice while its outcome is kept. A
transaction with an id that is committed without being prepared records
its outcome in the same unit.

Here, in memory, are only what answers quickly without a read: for each
prepared transaction the queues it pins (so that deleting one is refused
with the reason) and the bytes its commit will read back; the ids of open
transactions are in their table (``transactions.OpenTransactions``), which
begins, aborts and ends them for :class:`TwoPhase`. The store holds
everything else and is the authority; its operations check again inside
the write, so a race between two connections fails cleanly.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

import storage
from storage import AppendMessage, Store, Unit, UnitOutcome
from wire import client as cf
from wire import quoted

from .errors import (
    AccessDenied,
    InvalidArgument,
    LimitExceeded,
    QueueManagerError,
    TransactionAborted,
    TransactionCommitted,
    TransactionNotFound,
    TransactionUsageError,
    from_store_error,
)
from .holds import Holds
from .outcomes import Outcomes
from .transactions import AbortedReceives, OpenTransactions, Tally, Transaction, TransactionStage

__all__ = ["MAX_RESOLVE", "PreparedSummary", "TwoPhase", "check_xid"]

#: Most ids resolved in one unit.
MAX_RESOLVE: Final = 10_000
#: Outcomes pruned per step.
PRUNE_STEP: Final = 1024


def check_xid(xid: str, *, new: bool = False) -> str:
    """Validate a global transaction id (``new``: of a transaction being begun); returns it.

    Raises:
        InvalidArgument: empty, too long, not valid Unicode text, with
            control characters, or (``new``) with a character that does not
            print (``wire.client.xid_error``).
    """
    error = cf.xid_error(xid, new=new)
    if error is not None:
        raise InvalidArgument(error)
    return xid


@dataclass(frozen=True, slots=True)
class PreparedSummary:
    """What the core keeps in memory of a prepared transaction."""

    xid: str
    #: Wall seconds when it was prepared.
    created_at: float
    #: Queue ids it sends to or receives from (they cannot be deleted meanwhile).
    queue_ids: frozenset[int]
    #: Bytes of the messages it sends (its commit holds them in memory while written).
    send_bytes: int = 0


@dataclass(slots=True, eq=False)
class TwoPhase:
    """Global ids and prepared transactions: open ones begin, abort and end in
    ``transactions``; prepared ones are read from ``store`` and keep their
    messages in ``holds``; their resolution reports receipts through
    ``outcomes``, counts in ``tally``, and hands the receives of an aborted one
    to ``aborted`` (poison handling).

    Like the core: no I/O, no clock (``wall`` is an argument), no logging.
    """

    _store: Store
    _transactions: OpenTransactions
    _holds: Holds
    _outcomes: Outcomes
    _tally: Tally
    _: KW_ONLY
    #: Poison handling's hand for the receives of an aborted transaction.
    aborted: AbortedReceives
    #: Most prepared transactions at once.
    max_prepared: int
    #: Seconds an outcome is kept.
    retention: float
    #: Prepared transactions, by id.
    _prepared: dict[str, PreparedSummary] = field(default_factory=dict, init=False, repr=False)
    #: Prepares being written (they count against ``max_prepared`` already).
    _preparing: int = field(default=0, init=False, repr=False)
    #: How many messages of each queue prepared transactions hold.
    _held: collections.Counter[int] = field(
        default_factory=collections.Counter, init=False, repr=False
    )

    # ------------------------------------------------------------------ start-up

    def load(self) -> int:
        """Take the prepared transactions from the store (the core does at its
        start): hold their received messages again. Returns how many there are."""
        holds = self._holds
        for info in self._store.prepared_transactions():
            for queue_id, lookup_id in info.receives:
                holds.hold(queue_id, lookup_id)
            self._remember(info)
        return len(self._prepared)

    def _remember(self, info: storage.PreparedInfo) -> None:
        self._held.update(queue_id for queue_id, _ in info.receives)
        queue_ids = frozenset(info.queue_ids) | {queue_id for queue_id, _ in info.receives}
        self._prepared[info.xid] = PreparedSummary(
            info.xid, info.created_at, queue_ids, info.send_bytes
        )

    # ------------------------------------------------------------------ queries

    @property
    def prepared_count(self) -> int:
        """Prepared transactions not yet resolved."""
        return len(self._prepared)

    def oldest_prepared(self) -> float | None:
        """When the transaction in doubt the longest was prepared (unix seconds),
        or None when none is."""
        return min((summary.created_at for summary in self._prepared.values()), default=None)

    def held(self, queue_id: int) -> int:
        """How many messages of the queue prepared transactions hold (their
        resolution, not time, releases them)."""
        return self._held.get(queue_id, 0)

    def check_deletable(self, queue_ids: Sequence[int], display_name: str) -> None:
        """Refuse deleting a queue that prepared transactions use.

        Raises:
            AccessDenied: saying how many, and what to do.
        """
        count = sum(
            1
            for summary in self._prepared.values()
            if any(queue_id in summary.queue_ids for queue_id in queue_ids)
        )
        if count:
            msg = (
                f"queue {quoted(display_name)} is used by {count} prepared transaction(s); "
                "resolve them first (qmgr tx list)"
            )
            raise AccessDenied(msg)

    # ------------------------------------------------------------------ beginning

    def begin(self, owner: object, client_id: int, now: float, xid: str) -> Transaction:
        """Open a transaction with a global id.

        Raises:
            InvalidArgument: the id is malformed, or in use (open, prepared,
                or resolved and its outcome still kept).
        """
        check_xid(xid, new=True)
        self._check_unused(xid)
        return self._transactions.begin(owner, client_id, now, xid)

    def _check_unused(self, xid: str) -> None:
        state: str | None = None
        if self._transactions.has_xid(xid):
            state = "open"
        elif xid in self._prepared:
            state = "prepared"
        else:
            outcome = self._store.outcome(xid)
            if outcome is not None:
                state = "committed" if outcome.committed else "aborted"
        if state is not None:
            msg = f"transaction id {quoted(xid)} is already in use ({state}); choose a new one"
            raise InvalidArgument(msg)

    # ------------------------------------------------------------------ preparing

    def prepare(self, tx: Transaction, wall: float) -> Unit:
        """The unit that prepares ``tx``; it stays OPEN until :meth:`prepared`, which
        the caller must call whatever becomes of the unit.

        Raises:
            TransactionUsageError: it has no global id.
            LimitExceeded: too many prepared transactions.
            the error that doomed it, or TransactionAborted: it can only abort
                (the caller aborts it).
        """
        if tx.xid is None:
            msg = (
                f"transaction {tx.client_id} has no global id; "
                "begin it with one to prepare it, or commit it"
            )
            raise TransactionUsageError(msg)
        tx.check_committable()
        if tx.moves:
            msg = (
                f"transaction {tx.client_id} moves messages (between a queue and its "
                "subqueues, or out of a dead-letter queue), which a prepared transaction "
                "cannot; commit it instead"
            )
            raise TransactionUsageError(msg)
        if len(self._prepared) + self._preparing >= self.max_prepared:
            msg = (
                f"{self.max_prepared} transactions are already prepared "
                "(transactions.max_prepared); resolve some first"
            )
            raise LimitExceeded(msg)
        tx.stage = TransactionStage.COMMITTING
        # Its copies awaiting confirmation are kept with it and added by its commit.
        op = storage.PrepareTransaction(
            tx.xid,
            tuple(tx.sends),
            tuple(tx.receives),
            created_at=wall,
            owner=tx.principal,
            copies=tuple(tx.confirmations),
        )
        self._preparing += 1
        return Unit((op,))

    def prepared(
        self, tx: Transaction, unit: Unit, outcome: UnitOutcome | BaseException
    ) -> tuple[set[int], QueueManagerError | None]:
        """Finish a prepare whose unit was written, refused (``outcome.error``) or
        never written (an exception).

        On success the transaction leaves its connection: it is ENDED there
        and lives on as a prepared transaction, its received messages still
        held. On failure it was aborted.

        Returns:
            The queues to wake (an abort makes messages visible again), and
            the error if the prepare failed.
        """
        self._preparing -= 1
        error = outcome if isinstance(outcome, BaseException) else outcome.error
        if error is not None:
            woken = self._transactions.abort(tx)
            context = f"transaction {tx.client_id} was aborted: "
            return woken, from_store_error(error, context=context)
        op = unit.ops[0]
        assert isinstance(op, storage.PrepareTransaction)
        self._transactions.end_prepared(tx)
        self._remember(
            storage.PreparedInfo(
                xid=op.xid,
                created_at=op.created_at,
                sends=len(op.sends),
                send_bytes=sum(send.size for send in op.sends),
                receives=op.receives,
                queue_ids=frozenset(
                    send.queue_id for send in op.sends if isinstance(send, AppendMessage)
                ),
                owner=op.owner,
            )
        )
        return set(), None

    # ------------------------------------------------------------------ resolving

    def resolve(self, xids: Sequence[str], *, commit: bool, wall: float) -> Unit:
        """The atomic unit that commits (or aborts) every id in ``xids``.

        Raises:
            InvalidArgument: no id, too many, a malformed or repeated one.
            TransactionUsageError: one is open on a connection and not prepared.
        """
        if not xids:
            msg = "name at least one transaction id"
            raise InvalidArgument(msg)
        if len(xids) > MAX_RESOLVE:
            msg = f"at most {MAX_RESOLVE} transactions can be resolved at once, not {len(xids)}"
            raise InvalidArgument(msg)
        if len(set(xids)) != len(xids):
            msg = "a transaction id is named twice"
            raise InvalidArgument(msg)
        for xid in xids:
            check_xid(xid)
            if self._transactions.has_xid(xid):
                msg = (
                    f"transaction {quoted(xid)} is open and not prepared; "
                    "its connection commits or aborts it"
                )
                raise TransactionUsageError(msg)
        resolutions = tuple(
            storage.ResolvePrepared(xid, commit=commit, resolved_at=wall) for xid in xids
        )
        if not commit:
            return Unit(resolutions)
        # What the committed transactions received is reported with their commit
        # (a repeated commit finds those messages gone, and reports nothing again).
        outcomes = self._outcomes
        receives: list[tuple[int, int]] = []
        for xid in xids:
            info = self._store.prepared(xid) if xid in self._prepared else None
            if info is not None:
                receives.extend(
                    (queue_id, lookup_id)
                    for queue_id, lookup_id in info.receives
                    if outcomes.reports_on_receive(queue_id)
                )
        return Unit((*resolutions, *outcomes.receipts(receives, wall=wall)))

    def reserve_for_commit(self, xids: Sequence[str]) -> int:
        """Reserve, in the memory budget of open transactions, the bytes that
        committing ``xids`` takes in memory while it is written (their sends are
        read back and appended in one unit); returns them, for :meth:`release`.

        Raises:
            LimitExceeded: they do not fit now (or at all: commit fewer at once, or
                raise the limit for one that alone is larger).
        """
        size = sum(
            summary.send_bytes
            for summary in (self._prepared.get(xid) for xid in xids)
            if summary is not None
        )
        budget = self._transactions.budget
        if size and not budget.try_reserve(size):
            msg = budget.refusal(size)
            if size > budget.limit and len(xids) > 1:
                msg = (
                    f"committing these {len(xids)} transactions at once would hold {size} "
                    f"bytes of messages in memory, more than limits.max_uncommitted_bytes "
                    f"({budget.limit}); commit fewer at once"
                )
            elif size > budget.limit:
                msg = (
                    f"committing transaction {quoted(xids[0])} would hold its {size} bytes of "
                    f"messages in memory, more than limits.max_uncommitted_bytes "
                    f"({budget.limit}) allows: raise the limit to at least {size} and "
                    "restart the queue manager to commit it (or abort it)"
                )
            raise LimitExceeded(msg)
        return size

    def release(self, size: int) -> None:
        """Give back what :meth:`reserve_for_commit` reserved, once the unit is written (or not)."""
        self._transactions.budget.release(size)

    def resolved(self, outcome: UnitOutcome) -> tuple[set[int], list[storage.Resolution]]:
        """Finish a resolve unit.

        Returns:
            The queues whose readers should wake, and each id's resolution.

        Raises:
            TransactionNotFound, TransactionAborted, TransactionCommitted, or the
                store's error: nothing was resolved.
        """
        error = outcome.error
        if error is not None:
            raise _resolve_error(error)
        holds = self._holds
        tally = self._tally
        woken: set[int] = set()
        resolutions: list[storage.Resolution] = []
        for result in outcome.results:
            if isinstance(result, storage.Appended):  # a report of a receipt
                woken.add(result.queue_id)
                continue
            assert isinstance(result, storage.Resolved)
            resolutions.append(result.resolution)
            summary = self._prepared.pop(result.xid, None)
            if summary is not None:
                self._held.subtract(queue_id for queue_id, _ in result.receives)
                self._held += collections.Counter()  # drop the zero counts
            if result.resolution is storage.Resolution.COMMITTED:
                tally.commits += 1
                for queue_id, lookup_id in result.receives:
                    woken |= holds.removed(queue_id, (lookup_id,))
                woken.update(appended.queue_id for appended in result.appended)
            elif result.resolution is storage.Resolution.ABORTED:
                tally.aborts += 1
                # Its receives were aborted: counted, and poison handling applies.
                woken |= self.aborted(result.receives, ())
        return woken, resolutions

    # ------------------------------------------------------------------ outcomes

    def prune_unit(self, wall: float) -> Unit:
        """A bounded step deleting the outcomes older than the retention."""
        return Unit((storage.PruneOutcomes(before=wall - self.retention, limit=PRUNE_STEP),))


def _resolve_error(error: BaseException) -> QueueManagerError:
    if isinstance(error, storage.XidUnknown):
        return TransactionNotFound(
            f"no prepared transaction has id {quoted(error.xid)}, and no outcome of it is kept"
        )
    if isinstance(error, storage.XidResolved):
        if error.committed:
            return TransactionCommitted(
                f"transaction {quoted(error.xid)} was committed; it cannot be aborted"
            )
        return TransactionAborted(
            f"transaction {quoted(error.xid)} was aborted; it cannot be committed"
        )
    return from_store_error(error, context="nothing was resolved: ")
