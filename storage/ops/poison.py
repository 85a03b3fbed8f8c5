"""Poison handling (MSMQ 4.0): message counters, moves (subqueues, dead letters), retries.

Theory of operation
-------------------
MSMQ 4.0 counts, for every message, how often a transaction that received it
aborted (``PROPID_M_ABORT_COUNT``, since the message entered its current
queue), how often it was moved (``PROPID_M_MOVE_COUNT``) and when it last
was (``PROPID_M_LAST_MOVE_TIME``).
An abort must not rewrite the message, so the counters live beside it, in
the database ``message_counters``, keyed by the message's queue id and
lookup id (the message key without its leading zero byte): a message that
was never aborted or moved has no entry at all, and every removal of a
message (a receive, a purge's or a deletion's erase step, a move) deletes
its entry in the same write (the context discards the key with the
message's). Lookup ids are never reused within a queue, nor queue ids, so an
entry can never be taken for another message's.

Messages *move* with :class:`MoveMessage`, which removes the message from
one queue and appends it to the other in one write: between a queue and its
subqueues (``ops.subqueues``), or out of a dead-letter queue
(``system$;deadletter``, ``system$;deadxact``) into a NORMAL queue that is
transactional exactly when the dead-letter queue is. The record is made
again with :func:`moved_record`, the one place that carries what a message
record holds besides its payload into the message's new place: its payload
(its id, its body), its priority, its size and its arrival time, its
deadline (the expiry index follows it: the removal drops its old key, the
append writes its new one) and the layer above's note; it gets a new lookup
id in its new queue. The payload goes as it is, but for the bytes the layer
above may ask to write over it (``MoveMessage.patch``, at an offset of its
choosing: a dead letter's class set back to normal), which the store writes
without reading them. A queue's subqueues share its quota, so a move within
a family never fails for it; a move out of a dead-letter queue needs room
in its target's quota, as an arrival does. Each move also writes the
message's counters: abort count 0, move count + 1, the last move time, and,
when the message goes to ``;retry`` of a queue with poison handling, when it
comes back. :class:`RecordAbort` adds one to a message's abort count (a
message that is gone meanwhile is passed over).
:class:`SetPoisonSettings` rewrites a queue's record with its poison
settings (format version 3) or without (version 2).

A message that poison handling moved to a queue's ``;retry`` subqueue comes
back after the queue's retry delay. The database ``retry_due`` is the time
index of those returns: its key is the due time (u64 milliseconds of unix
time), the queue id and the lookup id, so the first key is the next message
due and the daemon reads a bounded number of keys per step from the start
(:func:`read_retries_due`). Nothing is loaded when a store opens: restarting
costs the same whatever the number of waiting messages. A move out of
``;retry`` deletes the entry (the counters record keeps the due time for
that); an entry whose message left ``;retry`` another way (received,
purged, deleted) is dropped with :class:`DropRetryEntry` when it comes due.

The operations decide nothing about poison handling: the core chooses where a
message goes and when; they check what the store must (the queues exist
and are one family, or a dead-letter queue and a queue of its kind, the
message is there and not purged) and write.
Within a batch, each message's counters as the batch changed them are kept
in the batch's scratch state, so two aborts of one message in one batch
both count.

Message counters, format version 1 (30 bytes)::

    off  size  field
      0     1  format version (1)
      1     1  flags                     0
      2     4  abort_count               u32: aborts since it entered its current queue
      6     4  move_count                u32: moves in its lifetime
     10     4  retry_cycles              u32: trips poison handling gave it through ``;retry``
     14     8  last_move_time            f64 unix seconds, 0.0 if never moved
     22     8  retry_due                 u64 ms of unix time it leaves ``;retry``, 0 if none

Keys::

    message_counters  queue_id u32 + lookup_id u64 (12 B)
    retry_due         due u64 ms + queue_id u32 + lookup_id u64 (20 B), empty value
"""

from __future__ import annotations

import dataclasses
import enum
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment
from ..errors import InvalidOperation, MessageMissing, StoreCorrupt
from ..keys import MAX_U32, MAX_U64
from ..overlay import MISSING, QueueState
from ..records import (
    PoisonSettings,
    QueueKind,
    QueueRecord,
    encode_message_record,
    message_arrived_time,
    message_deadline,
    message_header,
    message_note,
    message_payload,
    pack,
)
from ..units import Done, Operation, Removal, Result
from .messages import check_quota
from .queues import change_record, normal_queue
from .subqueues import RETRY_SUFFIX

__all__ = [
    "COUNTERS_RECORD_VERSION",
    "NO_COUNTERS",
    "AbortCounted",
    "DropRetryEntry",
    "MessageCounters",
    "MoveMessage",
    "MoveReason",
    "Moved",
    "PoisonSet",
    "RecordAbort",
    "SetPoisonSettings",
    "counters_key",
    "decode_message_counters",
    "due_milliseconds",
    "encode_message_counters",
    "moved_record",
    "read_counters",
    "read_retries_due",
    "retry_key",
    "split_retry_key",
]

COUNTERS_RECORD_VERSION: Final = 1
_KEY = struct.Struct(">IQ")
_RETRY_KEY = struct.Struct(">QIQ")
_RECORD = struct.Struct(">BBIIIdQ")
#: Scratch keys of the batch's counters: ``(_COUNTERS, counters key)``.
_COUNTERS: Final = "counters"


@dataclass(frozen=True, slots=True)
class MessageCounters:
    """What MSMQ counts of a message (see the module docstring)."""

    #: Aborted receives since the message entered its current queue.
    abort_count: int = 0
    #: Moves in the message's lifetime (within its queue's family, out of a
    #: dead-letter queue; a dead-letter copy is a new message and starts at 0).
    move_count: int = 0
    #: Trips poison handling gave it through ``;retry`` (since it was last
    #: moved into its queue by request).
    retry_cycles: int = 0
    #: Unix seconds of the last move, 0.0 if it never moved.
    last_move_time: float = 0.0
    #: While it waits in ``;retry``: when it comes back (u64 milliseconds of unix time).
    retry_due: int = 0


#: The counters of a message without an entry.
NO_COUNTERS: Final = MessageCounters()


def counters_key(queue_id: int, lookup_id: int) -> bytes:
    """Key of ``message_counters``: the message key without its zero byte."""
    return _KEY.pack(queue_id, lookup_id)


def retry_key(due: int, queue_id: int, lookup_id: int) -> bytes:
    """Key of ``retry_due``: due time (u64 ms), queue id, lookup id."""
    return _RETRY_KEY.pack(due, queue_id, lookup_id)


def split_retry_key(key: bytes | memoryview) -> tuple[int, int, int]:
    """``(due ms, queue_id, lookup_id)`` of a ``retry_due`` key.

    Raises:
        StoreCorrupt: it is not 20 bytes long.
    """
    if len(key) != _RETRY_KEY.size:
        msg = f"retry index key {bytes(key).hex()} is corrupt"
        raise StoreCorrupt(msg)
    due, queue_id, lookup_id = _RETRY_KEY.unpack(key)
    return due, queue_id, lookup_id


def due_milliseconds(wall: float) -> int:
    """Unix seconds as the index's u64 milliseconds (rounded up, clamped)."""
    if wall != wall or wall <= 0:
        return 0
    return min(math.ceil(wall * 1000.0), MAX_U64)


def encode_message_counters(counters: MessageCounters) -> bytes:
    """Encode a counters record.

    Raises:
        InvalidRecord: a counter does not fit its width.
    """
    return pack(
        _RECORD,
        "message counters",
        COUNTERS_RECORD_VERSION,
        0,
        counters.abort_count,
        counters.move_count,
        counters.retry_cycles,
        counters.last_move_time,
        counters.retry_due,
    )


def decode_message_counters(data: bytes | memoryview) -> MessageCounters:
    """Decode a counters record.

    Raises:
        StoreCorrupt: the bytes are not one.
    """
    if len(data) != _RECORD.size or data[0] != COUNTERS_RECORD_VERSION or data[1]:
        msg = f"message counters record of {len(data)} bytes is corrupt"
        raise StoreCorrupt(msg)
    _, _, aborts, moves, cycles, last_move, due = _RECORD.unpack(data)
    return MessageCounters(aborts, moves, cycles, last_move, due)


def read_counters(
    env: Environment, catalog: Catalog, queue_id: int, lookup_ids: Iterable[int]
) -> dict[int, MessageCounters]:
    """The counters of the messages that have some, by lookup id (one read transaction).

    Raises:
        StoreCorrupt: a record does not decode.
    """
    found: dict[int, MessageCounters] = {}
    db = catalog.dbs.message_counters
    with env.read("message_counters") as txn:
        for lookup_id in lookup_ids:
            data = txn.get(_KEY.pack(queue_id, lookup_id), db=db)
            if data is not None:
                found[lookup_id] = decode_message_counters(data)
    return found


def read_retries_due(
    env: Environment, catalog: Catalog, *, before: int | None, limit: int
) -> list[tuple[int, int, int]]:
    """The first ``limit`` entries of the retry index, ``(due ms, queue_id, lookup_id)``,
    in due order; with ``before``, only those due before it.

    Raises:
        StoreCorrupt: a key is corrupt.
    """
    found: list[tuple[int, int, int]] = []
    if limit <= 0:
        return found
    with env.read("retry_due") as txn, txn.cursor(db=catalog.dbs.retry_due) as cursor:
        for key in cursor.iternext(keys=True, values=False):
            entry = split_retry_key(key)
            if before is not None and entry[0] >= before:
                break
            found.append(entry)
            if len(found) >= limit:
                break
    return found


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


def moved_record(data: bytes | memoryview, patch: tuple[int, bytes] | None = None) -> bytes:
    """The record a message gets in the queue it moves to.

    Made with ``encode_message_record``, the function ``AppendMessage``
    uses, from what the old record holds: whatever a message record keeps
    besides its payload must be carried over here. ``patch``, ``(offset,
    bytes)``, is written over the payload at that offset.

    Raises:
        InvalidOperation: the patch does not lie within the payload.
    """
    priority, size = message_header(data)
    whole = message_payload(data)
    payload: memoryview | tuple[memoryview, bytes, memoryview] = whole
    if patch is not None:
        offset, replacement = patch
        end = offset + len(replacement)
        if offset < 0 or end > len(whole):
            msg = (
                f"a move cannot write {len(replacement)} bytes at offset {offset} "
                f"of a {len(whole)}-byte message"
            )
            raise InvalidOperation(msg)
        payload = (whole[:offset], replacement, whole[end:])
    return encode_message_record(
        payload,
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


@dataclass(frozen=True, slots=True)
class SetPoisonSettings(Operation):
    """Give the NORMAL queue ``name`` (canonical) poison settings, or none (off)."""

    name: str
    poison: PoisonSettings | None

    def plan(self, ctx: PlanContext) -> Result:
        state = normal_queue(ctx, self.name, "poison settings")
        return PoisonSet(change_record(ctx, state, poison=self.poison))


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
        aborts = min(counters.abort_count + 1, MAX_U32)
        _put_counters(
            ctx, self.queue_id, self.lookup_id, dataclasses.replace(counters, abort_count=aborts)
        )
        return AbortCounted(self.queue_id, self.lookup_id, aborts)


@dataclass(frozen=True, slots=True)
class MoveMessage(Operation):
    """Move a message between a queue and one of its subqueues, between two
    subqueues of one queue, or out of a dead-letter queue into a NORMAL queue
    of its transactional kind (see the module docstring).

    Raises (when planned):
        QueueMissing: either queue is gone.
        InvalidOperation: the queues are none of those pairs (or are the same
            queue); the patch does not lie within the payload.
        MessageMissing: the message is not there (or was purged).
        QuotaExceeded: out of a dead-letter queue, the target's quota is full
            (a family shares one quota: a move within it needs no room).
    """

    queue_id: int
    lookup_id: int
    target_id: int
    reason: MoveReason = MoveReason.REQUEST
    #: ``(offset, bytes)`` written over the payload as it moves (the layer
    #: above's choice: a dead letter's class back to normal), or None.
    patch: tuple[int, bytes] | None = None

    def plan(self, ctx: PlanContext) -> Result:
        source = ctx.live_queue(self.queue_id)
        target = ctx.live_queue(self.target_id)
        parent = _move_parent(ctx, source, target)
        data = _visible_message(ctx, source, self.lookup_id)
        priority, size = message_header(data)
        if parent is None:
            check_quota(ctx, target, size)  # a family shares one quota; this is new room
        counters = _counters(ctx, self.queue_id, self.lookup_id)
        record = moved_record(data, self.patch)
        ctx.remove(self.queue_id, self.lookup_id, priority, size, data)
        ctx.set_scratch((_COUNTERS, counters_key(self.queue_id, self.lookup_id)), None)
        new_lookup_id = ctx.append(self.target_id, record, priority, size)
        dbs = ctx.dbs
        if counters.retry_due:
            ctx.discard(dbs.retry_due, retry_key(counters.retry_due, self.queue_id, self.lookup_id))
        cycles = counters.retry_cycles
        if self.reason is MoveReason.RETRY:
            cycles = min(cycles + 1, MAX_U32)
        elif parent is None or (self.reason is MoveReason.REQUEST and target is parent):
            cycles = 0
        due = 0
        poison = None if parent is None else parent.record.poison
        if (
            poison is not None
            and target.record.name.endswith(RETRY_SUFFIX)
            and self.reason in (MoveReason.RETRY, MoveReason.REQUEST)
        ):
            due = due_milliseconds(ctx.now + poison.retry_delay)
            ctx.put(dbs.retry_due, retry_key(due, self.target_id, new_lookup_id), b"")
        moved = MessageCounters(
            abort_count=0,
            move_count=min(counters.move_count + 1, MAX_U32),
            retry_cycles=cycles,
            last_move_time=ctx.now,
            retry_due=due,
        )
        _put_counters(ctx, self.target_id, new_lookup_id, moved)
        return Moved(self.queue_id, self.lookup_id, self.target_id, new_lookup_id, moved)


#: The dead-letter queues, out of which messages move into NORMAL queues.
_DEAD_LETTER_KINDS: Final = (QueueKind.DEADLETTER, QueueKind.DEADXACT)


def _move_parent(ctx: PlanContext, source: QueueState, target: QueueState) -> QueueState | None:
    """The queue whose family both belong to; None for a move out of a dead-letter queue.

    Raises:
        InvalidOperation: they are not one queue and its subqueue, two
            subqueues of one queue, nor a dead-letter queue and a NORMAL queue
            that is transactional exactly when it is.
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
        if (
            a.kind in _DEAD_LETTER_KINDS
            and b.kind is QueueKind.NORMAL
            and a.transactional == b.transactional
        ):
            return None
    msg = (
        f"cannot move a message from {a.name!r} to {b.name!r}: messages move only between "
        "a queue and its own subqueues, or out of a dead-letter queue into a queue of its "
        "transactional kind"
    )
    raise InvalidOperation(msg)


@dataclass(frozen=True, slots=True)
class DropRetryEntry(Removal):
    """Delete an entry of the retry index (its message left ``;retry`` another way)."""

    due: int
    queue_id: int
    lookup_id: int

    def plan(self, ctx: PlanContext) -> Result:
        ctx.discard(ctx.dbs.retry_due, retry_key(self.due, self.queue_id, self.lookup_id))
        return Done()
