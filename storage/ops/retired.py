"""Removing an empty outgoing queue, and the sequence it leaves to the next queue of its name.

Theory of operation
-------------------
The layer above removes an outgoing queue that stayed empty and quiet
(:class:`RemoveEmptyOutgoing`), so that destinations no longer used cost
nothing. The removal is planned like any operation: it is refused unless the
queue is empty as the batch sees it (an append planned before it in the
batch keeps it), not paused (a pause planned before it keeps it too) and not
used by prepared transactions; then the queue, its counters and its sequence
state go in one write, with nothing left to erase.

The receiver of a source's messages keeps one stream per (source, sequence
timestamp, queue). A queue created again for the same destination must not
open a new stream there each time (the receiver keeps streams for good), nor
use up a sequence timestamp per removal. So the removal keeps, in
``retired_sequences`` under the queue's name, the timestamp and ordinal of
its sequence; the :class:`~.peering.AppendOutgoing` that creates a queue of
that name again takes them back (:func:`take_retired`) and starts the
next ordinal under the same timestamp, as a roll of the old queue would: the
receiver takes it as the same stream's next sequence. Every entry of the old
one was acknowledged before the removal, so nothing of it is still expected.
The record is deleted when it is taken back: the database holds one record
per destination that has no outgoing queue now and had one before.

Retired sequence, format version 1 (in ``retired_sequences``, keyed by the
outgoing queue's name, UTF-8)::

    off  size  field
      0     1  format version (1)
      1     4  sequence_timestamp        u32
      5     4  sequence_ordinal          u32: the last ordinal the queue had
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from ..context import PlanContext
from ..errors import InvalidOperation, StoreCorrupt
from ..keys import MAX_U32
from ..records import QueueKind
from ..units import Removal, Result
from .confirmations import awaits_confirmation
from .queues import QueueDeleted, refuse_pinned

__all__ = ["RemoveEmptyOutgoing", "take_retired"]

_RETIRED: Final = struct.Struct(">BII")
#: The format version of a retired sequence record.
RETIRED_FORMAT_VERSION: Final = 1


def take_retired(ctx: PlanContext, name: str) -> tuple[int, int] | None:
    """The ``(sequence timestamp, ordinal)`` a new outgoing queue called ``name``
    takes over from the one removed before it, or None; the record is deleted.

    None also when the old ordinal is the last a u32 holds: the new queue then
    takes a new timestamp.

    Raises:
        StoreCorrupt: the record does not decode.
    """
    key = name.encode()
    data = ctx.record(ctx.dbs.retired, key)
    if data is None:
        return None
    if len(data) != _RETIRED.size or data[0] != RETIRED_FORMAT_VERSION:
        msg = f"retired sequence of {name!r} is corrupt ({len(data)} bytes)"
        raise StoreCorrupt(msg)
    _, stamp, ordinal = _RETIRED.unpack(data)
    ctx.write_record(ctx.dbs.retired, key, None)
    return None if ordinal >= MAX_U32 else (stamp, ordinal + 1)


@dataclass(frozen=True, slots=True)
class RemoveEmptyOutgoing(Removal):
    """Remove an outgoing queue with its sequence state, if it is empty; keep its
    sequence for the next queue of its name.

    Raises:
        InvalidOperation: it is not an outgoing queue, holds entries (purged
            ones not yet erased included), had entries earlier in the batch,
            is paused, copies of messages sent through it await confirmation,
            or prepared transactions use it.
    """

    queue_id: int

    def plan(self, ctx: PlanContext) -> Result:
        queue = ctx.live_queue(self.queue_id)
        name = queue.record.name
        state = ctx.peering.outgoing_state(self.queue_id)
        if queue.record.kind is not QueueKind.OUTGOING or state is None:
            msg = f"queue {name!r} is not an outgoing queue"
            raise InvalidOperation(msg)
        if queue.depth or queue.erasing:
            msg = f"outgoing queue {name!r} is not empty"
            raise InvalidOperation(msg)
        if state.paused:
            msg = f"outgoing queue {name!r} is paused"
            raise InvalidOperation(msg)
        if awaits_confirmation(ctx, name):
            # Its link carries the FinalAcks back (see ``ops.confirmations``).
            msg = f"copies of messages sent through outgoing queue {name!r} await confirmation"
            raise InvalidOperation(msg)
        refuse_pinned(ctx, queue)
        ctx.doom(self.queue_id)
        if ctx.erase(self.queue_id, 1, frozenset()) != (0, True):
            # Entries appended and removed in this batch: left for a later try.
            msg = f"outgoing queue {name!r} changed in this batch"
            raise InvalidOperation(msg)
        key = name.encode()
        value = _RETIRED.pack(
            RETIRED_FORMAT_VERSION, state.sequence_timestamp, state.sequence_ordinal
        )
        ctx.write_record(ctx.dbs.retired, key, value)
        return QueueDeleted((self.queue_id,), 0)
