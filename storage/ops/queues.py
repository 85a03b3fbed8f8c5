"""Queues: creating, deleting and purging them, and erasing their messages in steps.

Theory of operation
-------------------
:class:`CreateQueue` makes a queue and, for a NORMAL queue, its
``<name>;journal`` queue, under new queue ids (never reused). Journal and
outgoing queues are not created on their own: a journal queue comes with
its queue, an outgoing queue with its first ``AppendOutgoing``
(``ops.peering``); subqueues with ``CreateSubqueues`` (``ops.subqueues``).

Deleting and purging are bounded: :class:`DeleteQueue` and
:class:`PurgeQueue` only mark (the queue disappears, or its messages become
invisible, at once); :class:`EraseStep` then removes at most ``limit``
messages per batch until none are left, each step durable on its own. The
marks are in the file (a deleted queue's record moves to ``doomed``; a
purged queue's counters keep its purge mark), so erasing resumes after a
restart. A queue that prepared transactions use is not deleted
(:func:`refuse_pinned`).

:class:`SetQuota` rewrites a NORMAL queue's record with a new quota, or
none. The quota is in the record already (a flag and a u64), so this changes
no schema. It is judged at the next write that adds bytes (``check_quota``),
the batch's own later writes included: nothing already stored is refused,
so a quota below the bytes a queue holds stops new messages until it is
below again; bytes that prepared transactions reserved stay reserved.

An outgoing queue the layer above found idle is removed by
``ops.retired.RemoveEmptyOutgoing``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final

from ..context import PlanContext
from ..errors import InvalidOperation, InvalidRecord, MessageMissing, QueueExists, QueueMissing
from ..keys import MAX_KEY_SIZE, queue_id_key
from ..overlay import QueueState
from ..records import QueueKind, QueueRecord, encode_queue
from ..units import Operation, Removal, Result

__all__ = [
    "CreateQueue",
    "DeleteQueue",
    "EraseStep",
    "Erased",
    "PurgeQueue",
    "QueueCreated",
    "QueueDeleted",
    "QueuePurged",
    "QuotaSet",
    "SetQuota",
    "refuse_pinned",
]

_JOURNAL_SUFFIX: Final = ";journal"


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
    """Every message of a queue was purged; ``messages`` were in it and held by
    no transaction."""

    queue_id: int
    messages: int


@dataclass(frozen=True, slots=True)
class Erased(Result):
    """An erase step removed ``messages``; ``done`` when none are left to erase."""

    queue_id: int
    messages: int
    done: bool


@dataclass(frozen=True, slots=True)
class QuotaSet(Result):
    """A queue's quota was written; ``record`` is the queue now."""

    record: QueueRecord


def refuse_pinned(ctx: PlanContext, state: QueueState) -> None:
    """Refuse to delete a queue that prepared transactions use.

    Raises:
        InvalidOperation: some do, saying how many.
    """
    pins = ctx.reservations.of(state.record.queue_id)[1]
    if pins:
        msg = (
            f"queue {state.record.name!r} is used by {pins} prepared transaction(s); "
            "resolve them first"
        )
        raise InvalidOperation(msg)


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
            existing = None if taken is None else ctx.queue_named(taken)
            if existing is not None:
                raise QueueExists(existing.record.name, display_name=existing.record.display_name)
        queue_id = ctx.allocate_queue_ids(1 if journal_name is None else 2)
        record = QueueRecord(
            queue_id=queue_id,
            name=self.name,
            display_name=self.display_name,
            kind=self.kind,
            transactional=self.transactional,
            journal=self.journal,
            quota=self.quota,
            journal_id=None if journal_name is None else queue_id + 1,
            created_at=self.created_at,
        )
        ctx.add_queue(record)
        journal = None
        if journal_name is not None:
            journal = record.companion(
                queue_id + 1, _JOURNAL_SUFFIX, QueueKind.JOURNAL, self.created_at
            )
            ctx.add_queue(journal)
        return QueueCreated(record, journal)


def normal_queue(ctx: PlanContext, name: str, lacks: str) -> QueueState:
    """The NORMAL queue ``name`` (canonical), whose own settings a write changes.

    Raises:
        QueueMissing: there is none.
        InvalidOperation: it is another kind of queue, which has no ``lacks``.
    """
    state = ctx.queue_named(name)
    if state is None:
        raise QueueMissing(name)
    if state.record.kind is not QueueKind.NORMAL:
        msg = f"queue {state.record.name!r} is not a normal queue; it has no {lacks}"
        raise InvalidOperation(msg)
    return state


def change_record(ctx: PlanContext, state: QueueState, **changes: Any) -> QueueRecord:
    """Change fields of a queue's record; returns the record as the batch leaves it.

    The batch's state takes the record (later writes of the batch are judged
    by it, and the catalog takes it at the end); a queue created in this
    batch is written whole by the batch.

    Raises:
        InvalidRecord: a value the record cannot hold (checked before anything changes).
    """
    queue_id = state.record.queue_id
    record = dataclasses.replace(state.record, **changes)
    encoded = encode_queue(record)
    writable = ctx.writable(queue_id)
    writable.record = record
    if ctx.txn.get(queue_id_key(queue_id), db=ctx.dbs.queue_ids) is not None:
        ctx.put(ctx.dbs.queues, record.name.encode(), encoded)
    return writable.final_record()


@dataclass(frozen=True, slots=True)
class SetQuota(Operation):
    """Give the NORMAL queue ``name`` (canonical) a quota of ``quota`` bytes, or none.

    Its subqueues share it; its journal queue has none. Refused
    (``InvalidOperation``) for another kind of queue, and (``InvalidRecord``)
    for a quota below 0 or above 2**64 - 1.
    """

    name: str
    quota: int | None

    def plan(self, ctx: PlanContext) -> Result:
        state = normal_queue(ctx, self.name, "a quota of its own")
        if self.quota is not None and self.quota < 0:
            msg = f"quota must not be negative: {self.quota}"
            raise InvalidRecord(msg)
        return QuotaSet(change_record(ctx, state, quota=self.quota))


@dataclass(frozen=True, slots=True)
class DeleteQueue(Removal):
    """Delete a queue and its journal queue at once; their messages are erased in steps.

    An outgoing queue's sequence state is deleted with it. A queue that
    prepared transactions use (send to, receive from it or from its journal
    queue) is not deleted: ``InvalidOperation``, saying how many.
    """

    queue_id: int

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        if queue.record.kind is QueueKind.JOURNAL:
            msg = f"journal queue {queue.record.name!r} is deleted with its parent queue"
            raise InvalidOperation(msg)
        refuse_pinned(ctx, queue)
        doomed = [queue]
        journal_id = queue.record.journal_id
        if journal_id is not None and ctx.queue(journal_id) is not None:
            doomed.append(ctx.live_queue(journal_id))
        messages = sum(state.depth for state in doomed)
        for state in doomed:
            ctx.doom(state.record.queue_id)
        return QueueDeleted(tuple(state.record.queue_id for state in doomed), messages)


@dataclass(frozen=True, slots=True)
class PurgeQueue(Removal):
    """Make every message of a queue invisible at once; they are erased in steps.

    ``held`` names messages that transactions hold: they become invisible
    too, but are left for those transactions (the ``keep`` of the erase
    steps), so :attr:`QueuePurged.messages` does not count those of them
    still in the queue.
    """

    queue_id: int
    held: frozenset[int] = field(default_factory=frozenset)

    def plan(self, ctx: PlanContext) -> Result:
        kept = 0
        if self.held:
            # Those below the last purge's mark were left out of its count already.
            floor = ctx.live_queue(self.queue_id).purged_below
            kept = sum(
                1
                for lookup_id in self.held
                if lookup_id >= floor and _stored(ctx, self.queue_id, lookup_id)
            )
        return QueuePurged(self.queue_id, ctx.purge(self.queue_id) - kept)


def _stored(ctx: PlanContext, queue_id: int, lookup_id: int) -> bool:
    """True if the message is in the queue as the batch sees it."""
    try:
        ctx.message(queue_id, lookup_id)
    except MessageMissing:
        return False
    return True


@dataclass(frozen=True, slots=True)
class EraseStep(Removal):
    """Erase at most ``limit`` messages of a deleted queue, or purged ones of a queue.

    ``keep`` names purged messages that open transactions still hold: they
    are left for those transactions to remove. ``below`` is the purge mark
    ``keep`` was taken for: only messages below it are erased, so that a
    later purge (of messages taken since) waits for a step built after it.
    ``None`` means the queue's mark when the step is planned.
    """

    queue_id: int
    limit: int
    keep: frozenset[int] = field(default_factory=frozenset)
    below: int | None = None

    def plan(self, ctx: PlanContext) -> Result:
        count, done = ctx.erase(self.queue_id, self.limit, self.keep, self.below)
        return Erased(self.queue_id, count, done)
