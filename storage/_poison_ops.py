"""Write operations of poison handling and subqueues (MSMQ 4.0).

Theory of operation
-------------------
Every NORMAL queue ``q`` has two subqueues, ``q;retry`` and ``q;poison``
(``QueueKind.SUBQUEUE``): :class:`CreateSubqueues` makes them, with the
queue or later for a queue made before they existed, and
:class:`DeleteSubqueues` deletes them with their queue (it goes in the
queue's delete unit). Nothing is appended to a subqueue; messages *move*
between a queue and its subqueues with :class:`MoveMessage`, which removes
the message from one and appends it to the other in one write. The record is
made again with :func:`moved_record`, the one place that carries what a
message record holds besides its payload into the message's new place. The
message keeps its payload (its id, its body), its priority, its size and
its arrival time, its deadline (the expiry index follows it: the removal
drops its old key, the append writes its new one) and the layer above's
note; it gets a new lookup id in its new queue. Subqueues share
their queue's quota (``AppendMessage`` counts their bytes), so a move never
fails for quota.

Each move also writes the message's counters (``_poison``): abort count 0,
move count + 1, the last move time, and, when the message goes to
``;retry`` of a queue with poison handling, when it comes back: that due
time is written into the ``retry_due`` index too. A move out of ``;retry``
deletes the index entry. :class:`RecordAbort` adds one to a message's abort
count (a message that is gone meanwhile is passed over). :class:`SetPoisonSettings`
rewrites a queue's record with its poison settings (format version 3) or
without (version 2). :class:`DropRetryEntry` deletes an index entry whose
message left ``;retry`` another way.

The operations decide nothing about poison handling: the core chooses where a
message goes and when; they check what the store must (the queues exist
and are one family, the message is there and not purged) and write.
Within a batch, each message's counters as the batch changed them are kept
in the plan's scratch state, so two aborts of one message in one batch both
count.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ._errors import InvalidOperation, InvalidRecord, MessageMissing, QueueMissing
from ._keys import MAX_KEY_SIZE, queue_id_key
from ._ops import Done, Operation, Result
from ._overlay import MISSING
from ._poison import (
    NO_COUNTERS,
    RETRY_SUFFIX,
    SUBQUEUE_SUFFIXES,
    MessageCounters,
    counters_key,
    decode_message_counters,
    due_milliseconds,
    encode_message_counters,
    retry_key,
    subqueues_of,
)
from ._records import (
    PoisonSettings,
    QueueKind,
    QueueRecord,
    encode_message_record,
    encode_queue,
    message_arrived_time,
    message_deadline,
    message_header,
    message_note,
    message_payload,
)

if TYPE_CHECKING:
    from ._overlay import QueueState
    from ._plan import PlanContext

__all__ = [
    "AbortCounted",
    "CreateSubqueues",
    "DeleteSubqueues",
    "DropRetryEntry",
    "MoveMessage",
    "MoveReason",
    "Moved",
    "PoisonSet",
    "RecordAbort",
    "SetPoisonSettings",
    "SubqueuesCreated",
    "SubqueuesDeleted",
    "moved_record",
]

#: Scratch keys of the batch's counters: ``(_COUNTERS, counters key)``.
_COUNTERS: Final = "counters"
_MAX_U32: Final = 0xFFFFFFFF


class MoveReason(enum.IntEnum):
    """Why a message moves (it decides what becomes of its counters)."""

    #: An application or an operator asked (MQMoveMessage). Into the queue
    #: itself, the message starts afresh: no retry cycle done.
    REQUEST = 1
    #: Poison handling: it was received in too many aborted transactions.
    RETRY = 2
    #: Poison handling: it used up its retry cycles.
    POISON = 3
    #: Poison handling: its time in ``;retry`` is over.
    RETURN = 4


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class SubqueuesCreated(Result):
    """The subqueues a :class:`CreateSubqueues` made (none if they existed)."""

    records: tuple[QueueRecord, ...]


@dataclass(frozen=True, slots=True)
class SubqueuesDeleted(Result):
    """A queue's subqueues were deleted; ``messages`` were in them."""

    queue_ids: tuple[int, ...]
    messages: int


@dataclass(frozen=True, slots=True)
class PoisonSet(Result):
    """A queue's poison settings were written; ``record`` is the queue now."""

    record: QueueRecord


@dataclass(frozen=True, slots=True)
class AbortCounted(Result):
    """A message's abort count grew to ``abort_count`` (``None``: it was gone)."""

    queue_id: int
    lookup_id: int
    abort_count: int | None


@dataclass(frozen=True, slots=True)
class Moved(Result):
    """A message moved from ``(queue_id, lookup_id)`` to ``(target_id, target_lookup_id)``."""

    queue_id: int
    lookup_id: int
    target_id: int
    target_lookup_id: int
    #: Its counters in its new place.
    counters: MessageCounters


# --------------------------------------------------------------------------- counters


def _counters(ctx: PlanContext, queue_id: int, lookup_id: int) -> MessageCounters:
    """A message's counters as the batch sees them."""
    key = counters_key(queue_id, lookup_id)
    found = ctx.scratch((_COUNTERS, key))
    if found is not MISSING:
        assert found is None or isinstance(found, MessageCounters)
        return NO_COUNTERS if found is None else found
    data = ctx.txn.get(key, db=ctx.dbs.message_counters)
    return NO_COUNTERS if data is None else decode_message_counters(data)


def _put_counters(
    ctx: PlanContext, queue_id: int, lookup_id: int, counters: MessageCounters
) -> None:
    key = counters_key(queue_id, lookup_id)
    ctx.put(ctx.dbs.message_counters, key, encode_message_counters(counters))
    ctx.set_scratch((_COUNTERS, key), counters)


def moved_record(data: bytes | memoryview) -> bytes:
    """The record a message gets in the queue it moves to.

    Made with ``encode_message_record``, the function ``AppendMessage``
    uses, from what the old record holds: whatever a message record keeps
    besides its payload must be carried over here.
    """
    priority, size = message_header(data)
    return encode_message_record(
        message_payload(data),
        priority=priority,
        size=size,
        arrived_time=message_arrived_time(data),
        deadline=message_deadline(data),
        note=message_note(data),
    )


def _visible_message(ctx: PlanContext, state: QueueState, lookup_id: int) -> bytes | memoryview:
    """The committed message, if it is there and not purged.

    Raises:
        MessageMissing: it is not.
    """
    queue_id = state.record.queue_id
    if lookup_id < state.purged_below:
        raise MessageMissing(queue_id, lookup_id)
    return ctx.message(queue_id, lookup_id)


# --------------------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class CreateSubqueues(Operation):
    """Create ``;retry`` and ``;poison`` for the NORMAL queue ``name`` (canonical),
    those it does not have yet; the queue may be created in the same batch."""

    name: str
    created_at: float = 0.0

    def plan(self, ctx: PlanContext) -> Result:
        parent = ctx.queue_named(self.name)
        if parent is None:
            raise QueueMissing(self.name)
        record = parent.record
        if record.kind is not QueueKind.NORMAL:
            msg = f"queue {record.name!r} is not a normal queue; it has no subqueues"
            raise InvalidOperation(msg)
        made: list[QueueRecord] = []
        for suffix in SUBQUEUE_SUFFIXES:
            name = record.name + suffix
            if ctx.queue_named(name) is not None:
                continue
            if len(name.encode()) > MAX_KEY_SIZE:
                msg = f"subqueue name {name!r} is longer than {MAX_KEY_SIZE} bytes"
                raise InvalidRecord(msg)
            sub = QueueRecord(
                queue_id=ctx.allocate_queue_ids(1),
                name=name,
                display_name=record.display_name + suffix,
                kind=QueueKind.SUBQUEUE,
                transactional=record.transactional,
                journal=record.journal,
                quota=None,
                parent_id=record.queue_id,
                journal_id=record.journal_id,
                created_at=self.created_at,
            )
            ctx.add_queue(sub)
            made.append(sub)
        return SubqueuesCreated(tuple(made))


@dataclass(frozen=True, slots=True)
class DeleteSubqueues(Operation):
    """Delete the subqueues of the queue ``name`` at once (their messages are
    erased in steps, as a deleted queue's are). It follows the queue's
    ``DeleteQueue`` in one atomic unit.

    A subqueue that prepared transactions received from is not deleted:
    ``InvalidOperation``, saying how many.
    """

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True

    name: str

    def plan(self, ctx: PlanContext) -> Result:
        subqueues = subqueues_of(ctx, self.name)
        for state in subqueues:
            pins = ctx.reservation(state.record.queue_id)[1]
            if pins:
                msg = (
                    f"queue {state.record.name!r} is used by {pins} prepared transaction(s); "
                    "resolve them first"
                )
                raise InvalidOperation(msg)
        for state in subqueues:
            ctx.doom(state.record.queue_id)
        return SubqueuesDeleted(
            tuple(state.record.queue_id for state in subqueues),
            sum(state.depth for state in subqueues),
        )


@dataclass(frozen=True, slots=True)
class SetPoisonSettings(Operation):
    """Give the NORMAL queue ``name`` (canonical) poison settings, or none (off)."""

    name: str
    poison: PoisonSettings | None

    def plan(self, ctx: PlanContext) -> Result:
        state = ctx.queue_named(self.name)
        if state is None:
            raise QueueMissing(self.name)
        if state.record.kind is not QueueKind.NORMAL:
            msg = f"queue {state.record.name!r} is not a normal queue; it has no poison settings"
            raise InvalidOperation(msg)
        queue_id = state.record.queue_id
        record = dataclasses.replace(state.record, poison=self.poison)
        encoded = encode_queue(record)  # refuse bad settings before changing anything
        # The record changes in the batch's state (the catalog takes it at the
        # end); a queue created in this batch is written whole by the batch.
        writable = ctx._writable(queue_id)
        writable.record = record
        if ctx.txn.get(queue_id_key(queue_id), db=ctx.dbs.queue_ids) is not None:
            ctx.put(ctx.dbs.queues, record.name.encode(), encoded)
        return PoisonSet(writable.final_record())


@dataclass(frozen=True, slots=True)
class RecordAbort(Operation):
    """Count one aborted receive of a message (passed over if it is gone)."""

    queue_id: int
    lookup_id: int

    def plan(self, ctx: PlanContext) -> Result:
        state = ctx.queue(self.queue_id)
        if state is None:
            return AbortCounted(self.queue_id, self.lookup_id, None)
        try:
            _visible_message(ctx, state, self.lookup_id)
        except MessageMissing:
            return AbortCounted(self.queue_id, self.lookup_id, None)
        counters = _counters(ctx, self.queue_id, self.lookup_id)
        aborts = min(counters.abort_count + 1, _MAX_U32)
        _put_counters(
            ctx, self.queue_id, self.lookup_id, dataclasses.replace(counters, abort_count=aborts)
        )
        return AbortCounted(self.queue_id, self.lookup_id, aborts)


@dataclass(frozen=True, slots=True)
class MoveMessage(Operation):
    """Move a message between a queue and one of its subqueues, or between two
    subqueues of one queue (see the module docstring).

    Raises (when planned):
        QueueMissing: either queue is gone.
        InvalidOperation: the queues are not one queue and its subqueue (or
            two subqueues of one queue), or are the same queue.
        MessageMissing: the message is not there (or was purged).
    """

    queue_id: int
    lookup_id: int
    target_id: int
    reason: MoveReason = MoveReason.REQUEST

    def plan(self, ctx: PlanContext) -> Result:
        source = ctx.live_queue(self.queue_id)
        target = ctx.live_queue(self.target_id)
        parent = _family_parent(ctx, source, target)
        data = _visible_message(ctx, source, self.lookup_id)
        priority, size = message_header(data)
        counters = _counters(ctx, self.queue_id, self.lookup_id)
        record = moved_record(data)
        ctx.remove(self.queue_id, self.lookup_id, priority, size, data)
        ctx.set_scratch((_COUNTERS, counters_key(self.queue_id, self.lookup_id)), None)
        new_lookup_id = ctx.append(self.target_id, record, priority, size)
        dbs = ctx.dbs
        if counters.retry_due:
            ctx.discard(dbs.retry_due, retry_key(counters.retry_due, self.queue_id, self.lookup_id))
        cycles = counters.retry_cycles
        if self.reason is MoveReason.RETRY:
            cycles = min(cycles + 1, _MAX_U32)
        elif self.reason is MoveReason.REQUEST and target is parent:
            cycles = 0
        due = 0
        poison = parent.record.poison
        if (
            poison is not None
            and target.record.name.endswith(RETRY_SUFFIX)
            and self.reason in (MoveReason.RETRY, MoveReason.REQUEST)
        ):
            due = due_milliseconds(ctx.now + poison.retry_delay)
            ctx.put(dbs.retry_due, retry_key(due, self.target_id, new_lookup_id), b"")
        moved = MessageCounters(
            abort_count=0,
            move_count=min(counters.move_count + 1, _MAX_U32),
            retry_cycles=cycles,
            last_move_time=ctx.now,
            retry_due=due,
        )
        _put_counters(ctx, self.target_id, new_lookup_id, moved)
        return Moved(self.queue_id, self.lookup_id, self.target_id, new_lookup_id, moved)


def _family_parent(ctx: PlanContext, source: QueueState, target: QueueState) -> QueueState:
    """The queue whose family both belong to.

    Raises:
        InvalidOperation: they are not one queue and its subqueue, or two
            subqueues of one queue.
    """
    a, b = source.record, target.record
    sub = QueueKind.SUBQUEUE
    if a.queue_id != b.queue_id:
        if a.kind is QueueKind.NORMAL and b.kind is sub and b.parent_id == a.queue_id:
            return source
        if a.kind is sub and b.kind is QueueKind.NORMAL and a.parent_id == b.queue_id:
            return target
        if a.kind is sub and b.kind is sub and a.parent_id == b.parent_id:
            assert a.parent_id is not None
            return ctx.live_queue(a.parent_id)
    msg = (
        f"cannot move a message from {a.name!r} to {b.name!r}: messages move only between "
        "a queue and its own subqueues"
    )
    raise InvalidOperation(msg)


@dataclass(frozen=True, slots=True)
class DropRetryEntry(Operation):
    """Delete an entry of the retry index (its message left ``;retry`` another way)."""

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True

    due: int
    queue_id: int
    lookup_id: int

    def plan(self, ctx: PlanContext) -> Result:
        ctx.discard(ctx.dbs.retry_due, retry_key(self.due, self.queue_id, self.lookup_id))
        return Done()
