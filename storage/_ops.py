"""Write operations, units of work, and the result of each operation.

Theory of operation
-------------------
Every change to the store is an :class:`Operation` inside a :class:`Unit`.
The writer takes units in batches (one LMDB write transaction and one sync
per batch); ``_plan`` turns a batch into the exact keys and values to write
and gives every operation a result. An operation's :meth:`~Operation.plan`
checks what it needs first (the queue exists, the quota holds, the message
is there) and either raises one of the per-operation errors (``QueueMissing``,
``QueueExists``, ``QuotaExceeded``, ``MessageMissing``, ``InvalidRecord``,
``InvalidOperation``) or records its writes and returns its result.

* An *atomic* unit (a client transaction) applies all of its operations or
  none: the first failure rolls the unit back, and its outcome carries that
  operation's :class:`Failed` result and :data:`SKIPPED` for the others.
* A non-atomic unit applies each operation on its own; a failed one is
  rolled back alone.
* :class:`Attempt` tries one operation and, if it fails, another in its
  place, in the same unit: this is how a batch of arriving messages accepts
  some and sends others to a dead-letter queue without failing the batch.

New kinds of operation are new subclasses; the planner and the writer do
not change. The operations of peering (outgoing queues, incoming streams,
message history) are in ``_peering_ops``, those of prepared (two-phase)
transactions in ``_prepared_ops``.

Deleting and purging are bounded: :class:`DeleteQueue` and
:class:`PurgeQueue` only mark (the queue disappears, or its messages become
invisible, at once); :class:`EraseStep` then removes at most ``limit``
messages per batch until none are left, each step durable on its own. The
marks are in the file, so erasing resumes after a restart.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ._errors import (
    ConfirmationMissing,
    InvalidOperation,
    InvalidRecord,
    ListExists,
    ListMissing,
    MessageMissing,
    QueueExists,
    QueueMissing,
    QuotaExceeded,
    StoreError,
    XidInUse,
    XidResolved,
    XidUnknown,
)
from ._keys import MAX_KEY_SIZE, META_RECLAIM, setting_key
from ._poison import subqueue_bytes
from ._records import (
    TIMED_MESSAGE_VERSION,
    QueueKind,
    QueueRecord,
    encode_message_record,
    message_arrived_time,
    message_header,
    message_payload,
)

if TYPE_CHECKING:
    from ._plan import PlanContext

__all__ = [
    "OPERATION_ERRORS",
    "SKIPPED",
    "AppendMessage",
    "Appended",
    "Attempt",
    "CreateQueue",
    "DeleteQueue",
    "Done",
    "EraseStep",
    "Erased",
    "Failed",
    "Fallback",
    "Operation",
    "PurgeQueue",
    "QueueCreated",
    "QueueDeleted",
    "QueuePurged",
    "ReclaimSpace",
    "RemoveMessage",
    "Removed",
    "ReserveOrdinals",
    "Result",
    "SetSetting",
    "Skipped",
    "Unit",
    "UnitOutcome",
]

#: Errors that fail one operation (and its unit, if atomic), not the batch.
OPERATION_ERRORS: Final = (
    ConfirmationMissing,
    ListExists,
    ListMissing,
    QueueMissing,
    QueueExists,
    QuotaExceeded,
    MessageMissing,
    InvalidRecord,
    InvalidOperation,
    XidInUse,
    XidResolved,
    XidUnknown,
)
_JOURNAL_SUFFIX: Final = ";journal"


# --------------------------------------------------------------------------- results


class Result:
    """What became of one operation."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Appended(Result):
    """A message was appended."""

    queue_id: int
    lookup_id: int


@dataclass(frozen=True, slots=True)
class Removed(Result):
    """A message was removed (and copied to the journal queue, if asked)."""

    queue_id: int
    lookup_id: int


@dataclass(frozen=True, slots=True)
class QueueCreated(Result):
    """A queue was created; ``journal`` is its journal queue, if it has one."""

    record: QueueRecord
    journal: QueueRecord | None


@dataclass(frozen=True, slots=True)
class QueueDeleted(Result):
    """A queue (and its journal queue) was deleted; ``messages`` were in them."""

    queue_ids: tuple[int, ...]
    messages: int


@dataclass(frozen=True, slots=True)
class QueuePurged(Result):
    """Every message of a queue was purged; ``messages`` were in it."""

    queue_id: int
    messages: int


@dataclass(frozen=True, slots=True)
class Erased(Result):
    """An erase step removed ``messages``; ``done`` when none are left to erase."""

    queue_id: int
    messages: int
    done: bool


@dataclass(frozen=True, slots=True)
class Done(Result):
    """An operation that has nothing to report succeeded."""


@dataclass(frozen=True, slots=True)
class Failed(Result):
    """The operation failed; nothing of it was applied."""

    error: StoreError


@dataclass(frozen=True, slots=True)
class Skipped(Result):
    """Not applied: another operation of its atomic unit failed."""


#: The result of every operation of a failed atomic unit but the failing one.
SKIPPED: Final = Skipped()


@dataclass(frozen=True, slots=True)
class Fallback(Result):
    """An :class:`Attempt`'s first operation failed with ``error``; the second gave ``result``."""

    error: StoreError
    result: Result


# --------------------------------------------------------------------------- operations


class Operation(abc.ABC):
    """One change to the store, planned by :meth:`plan`."""

    __slots__ = ()

    @property
    def frees_space(self) -> bool:
        """True if the operation never needs more room than it frees, so that it
        may use the headroom kept for removals when the store is full."""
        return False

    @abc.abstractmethod
    def plan(self, ctx: PlanContext) -> Result:
        """Check, record the writes, and return the result.

        Raises:
            one of ``OPERATION_ERRORS``: the operation cannot be applied; it
                must raise before recording any write or change.
        """


@dataclass(frozen=True, slots=True)
class AppendMessage(Operation):
    """Append a message to a queue; it gets the queue's next lookup id.

    ``payload`` is the message as the layer above keeps it (parts are joined
    into the record without copying them first); ``size`` counts against
    the queue's quota.
    """

    queue_id: int
    payload: Sequence[bytes | bytearray | memoryview] | bytes | memoryview
    priority: int
    size: int
    #: When it expires (unix seconds; indexed in ``expiry``), or None.
    deadline: float | None = None
    #: Up to 255 opaque bytes the layer above keeps with the message.
    note: bytes = b""
    #: Not refused by the queue's quota (its bytes still count): for the queue
    #: manager's own messages (acknowledgments, dead-letter and journal copies).
    exempt: bool = False

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        quota = queue.record.quota
        if quota is not None and not self.exempt:
            # Bytes reserved by prepared transactions' sends count as used, and so
            # do the messages of the queue's subqueues (they share its quota).
            used = queue.bytes + subqueue_bytes(ctx, queue.record)
            would_be = used + ctx.reservation(self.queue_id)[0] + self.size
            if would_be > quota:
                raise QuotaExceeded(queue.record.name, quota, would_be)
        record = encode_message_record(
            self.payload,
            priority=self.priority,
            size=self.size,
            arrived_time=ctx.now,
            deadline=self.deadline,
            note=self.note,
        )
        return Appended(self.queue_id, ctx.append(self.queue_id, record, self.priority, self.size))


@dataclass(frozen=True, slots=True)
class RemoveMessage(Operation):
    """Remove a message; with ``journal``, copy it into the queue's journal queue."""

    @property
    def frees_space(self) -> bool:
        """Removing data, unless it copies the message to a journal: that needs as
        much room as it frees (LMDB reuses no page freed in the same transaction)."""
        return not self.journal

    queue_id: int
    lookup_id: int
    journal: bool = False

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        journal_id = queue.record.journal_id if self.journal else None
        if journal_id is not None:
            ctx.live_queue(journal_id)
        data = ctx.message(self.queue_id, self.lookup_id)
        priority, size = message_header(data)
        ctx.remove(self.queue_id, self.lookup_id, priority, size, data)
        if journal_id is not None:
            # The journal keeps the message, not its deadline or note.
            if data[0] == TIMED_MESSAGE_VERSION:
                data = encode_message_record(
                    message_payload(data),
                    priority=priority,
                    size=size,
                    arrived_time=message_arrived_time(data),
                )
            ctx.append(journal_id, bytes(data), priority, size)
        return Removed(self.queue_id, self.lookup_id)


@dataclass(frozen=True, slots=True)
class CreateQueue(Operation):
    """Create a queue; a NORMAL queue also gets its ``<name>;journal`` queue.

    JOURNAL and OUTGOING queues are not created this way (``InvalidOperation``):
    a journal queue comes with its queue, an outgoing queue with its first
    ``AppendOutgoing``.
    """

    name: str
    display_name: str
    kind: QueueKind = QueueKind.NORMAL
    transactional: bool = False
    journal: bool = False
    quota: int | None = None
    created_at: float = 0.0

    def plan(self, ctx: PlanContext) -> Result:
        if self.kind is QueueKind.JOURNAL:
            msg = f"journal queue {self.name!r} cannot be created on its own"
            raise InvalidOperation(msg)
        if self.kind is QueueKind.OUTGOING:
            msg = f"outgoing queue {self.name!r} is created by AppendOutgoing, with its state"
            raise InvalidOperation(msg)
        journal_name = self.name + _JOURNAL_SUFFIX if self.kind is QueueKind.NORMAL else None
        longest = journal_name or self.name
        if not self.name or len(longest.encode()) > MAX_KEY_SIZE:
            limit = MAX_KEY_SIZE
            msg = f"queue name must be 1..{limit} bytes of UTF-8 (with suffixes): {self.name!r}"
            raise InvalidRecord(msg)
        if self.quota is not None and self.quota < 0:
            msg = f"quota must not be negative: {self.quota}"
            raise InvalidRecord(msg)
        for taken in (self.name, journal_name):
            if taken is not None and ctx.queue_named(taken) is not None:
                raise QueueExists(taken)
        queue_id = ctx.allocate_queue_ids(1 if journal_name is None else 2)
        record = QueueRecord(
            queue_id=queue_id,
            name=self.name,
            display_name=self.display_name,
            kind=self.kind,
            transactional=self.transactional,
            journal=self.journal,
            quota=self.quota,
            parent_id=None,
            journal_id=None if journal_name is None else queue_id + 1,
            created_at=self.created_at,
        )
        ctx.add_queue(record)
        journal = None
        if journal_name is not None:
            journal = QueueRecord(
                queue_id=queue_id + 1,
                name=journal_name,
                display_name=self.display_name + _JOURNAL_SUFFIX,
                kind=QueueKind.JOURNAL,
                transactional=self.transactional,
                journal=False,
                quota=None,
                parent_id=queue_id,
                journal_id=None,
                created_at=self.created_at,
            )
            ctx.add_queue(journal)
        return QueueCreated(record, journal)


@dataclass(frozen=True, slots=True)
class DeleteQueue(Operation):
    """Delete a queue and its journal queue at once; their messages are erased in steps.

    An outgoing queue's sequence state is deleted with it. A queue that
    prepared transactions use (send to, receive from it or from its journal
    queue) is not deleted: ``InvalidOperation``, saying how many.
    """

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True

    queue_id: int

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        if queue.record.kind is QueueKind.JOURNAL:
            msg = f"journal queue {queue.record.name!r} is deleted with its parent queue"
            raise InvalidOperation(msg)
        pins = ctx.reservation(self.queue_id)[1]
        if pins:
            msg = (
                f"queue {queue.record.name!r} is used by {pins} prepared transaction(s); "
                "resolve them first"
            )
            raise InvalidOperation(msg)
        doomed = [queue]
        journal_id = queue.record.journal_id
        if journal_id is not None and ctx.queue(journal_id) is not None:
            doomed.append(ctx.live_queue(journal_id))
        messages = sum(state.depth for state in doomed)
        for state in doomed:
            ctx.doom(state.record.queue_id)
        return QueueDeleted(tuple(state.record.queue_id for state in doomed), messages)


@dataclass(frozen=True, slots=True)
class PurgeQueue(Operation):
    """Make every message of a queue invisible at once; they are erased in steps."""

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True

    queue_id: int

    def plan(self, ctx: PlanContext) -> Result:
        return QueuePurged(self.queue_id, ctx.purge(self.queue_id))


@dataclass(frozen=True, slots=True)
class EraseStep(Operation):
    """Erase at most ``limit`` messages of a deleted queue, or purged ones of a queue.

    ``keep`` names purged messages that open transactions still hold: they
    are left for those transactions to remove. ``below`` is the purge mark
    ``keep`` was taken for: only messages below it are erased, so that a
    later purge (of messages taken since) waits for a step built after it.
    ``None`` means the queue's mark when the step is planned.
    """

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True

    queue_id: int
    limit: int
    keep: frozenset[int] = field(default_factory=frozenset)
    below: int | None = None

    def plan(self, ctx: PlanContext) -> Result:
        count, done = ctx.erase(self.queue_id, self.limit, self.keep, self.below)
        return Erased(self.queue_id, count, done)


@dataclass(frozen=True, slots=True)
class ReserveOrdinals(Operation):
    """Raise the store's message-id ordinal limit to ``limit`` (never lowers it)."""

    limit: int

    def plan(self, ctx: PlanContext) -> Result:
        ctx.reserve_ordinals(self.limit)
        return Done()


@dataclass(frozen=True, slots=True)
class SetSetting(Operation):
    """Store a setting (UTF-8 text under a key)."""

    key: str
    value: str

    def plan(self, ctx: PlanContext) -> Result:
        ctx.put_meta(setting_key(self.key), self.value.encode())
        return Done()


@dataclass(frozen=True, slots=True)
class ReclaimSpace(Operation):
    """A write that changes nothing that matters, so that LMDB may reuse the pages
    freed by the writes before it (it does so two write transactions later)."""

    @property
    def frees_space(self) -> bool:
        """It needs a page or two, and is written in the headroom."""
        return True

    def plan(self, ctx: PlanContext) -> Result:
        ctx.put_meta(META_RECLAIM, b"")
        return Done()


@dataclass(frozen=True, slots=True)
class Together(Operation):
    """Apply ``ops`` in order, all or none: the first that fails undoes the
    others and fails this operation (inside an :class:`Attempt`, or an atomic
    unit, that is what lets one branch be several operations)."""

    ops: tuple[Operation, ...]

    @property
    def frees_space(self) -> bool:
        """Only if every operation does."""
        return all(op.frees_space for op in self.ops)

    def plan(self, ctx: PlanContext) -> Result:
        with ctx.savepoint() as savepoint:
            try:
                results = [op.plan(ctx) for op in self.ops]
            except OPERATION_ERRORS:
                savepoint.roll_back()
                raise
        return results[0] if results else Done()


@dataclass(frozen=True, slots=True)
class Attempt(Operation):
    """Apply ``first``; if it fails with a per-operation error, apply ``otherwise`` instead."""

    first: Operation
    otherwise: Operation

    @property
    def frees_space(self) -> bool:
        """Only if both operations do."""
        return self.first.frees_space and self.otherwise.frees_space

    def plan(self, ctx: PlanContext) -> Result:
        with ctx.savepoint() as savepoint:
            try:
                return self.first.plan(ctx)
            except OPERATION_ERRORS as exc:
                savepoint.roll_back()
                error: StoreError = exc
        return Fallback(error, self.otherwise.plan(ctx))


# --------------------------------------------------------------------------- units


@dataclass(frozen=True, slots=True)
class Unit:
    """Operations applied together; ``atomic`` ones all or none."""

    ops: tuple[Operation, ...]
    atomic: bool = True

    @property
    def frees_space(self) -> bool:
        """True if every operation only frees space (see :attr:`Operation.frees_space`)."""
        return all(op.frees_space for op in self.ops)


@dataclass(frozen=True, slots=True)
class UnitOutcome:
    """What became of a unit: one result per operation, in order."""

    results: tuple[Result, ...]

    @property
    def error(self) -> StoreError | None:
        """The first failure among the results, or ``None``."""
        for result in self.results:
            if type(result) is Failed:
                return result.error
        return None

    @classmethod
    def failed(cls, unit: Unit, error: StoreError) -> UnitOutcome:
        """The outcome of a unit none of whose operations could be applied."""
        return cls((Failed(error),) + (SKIPPED,) * (len(unit.ops) - 1))
