"""Subqueues (MSMQ 4.0): every NORMAL queue's ``;retry`` and ``;poison``.

Theory of operation
-------------------
Every NORMAL queue ``q`` has two subqueues, ``q;retry`` and ``q;poison``
(``QueueKind.SUBQUEUE``, named by :data:`SUBQUEUE_SUFFIXES`):
:class:`CreateSubqueues` makes them, with the queue or later for a queue made
before they existed, and :class:`DeleteSubqueues` deletes them with their
queue (it goes in the queue's delete unit, after its ``DeleteQueue``).
A subqueue's record has the queue as ``parent_id`` and the queue's
``journal`` and ``journal_id`` (a message received from a subqueue is
journaled in the queue's journal). Nothing is appended to a subqueue:
messages *move* in and out (``ops.poison``). Subqueues share their queue's
quota, so :func:`subqueue_bytes` counts their bytes for it
(``ops.messages.check_quota``), and a move never fails for quota.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..context import PlanContext
from ..errors import InvalidOperation, InvalidRecord, QueueMissing
from ..keys import MAX_KEY_SIZE
from ..overlay import QueueState
from ..records import QueueKind, QueueRecord
from ..units import Operation, Removal, Result
from .queues import refuse_pinned

__all__ = [
    "POISON_SUFFIX",
    "RETRY_SUFFIX",
    "SUBQUEUE_SUFFIXES",
    "CreateSubqueues",
    "DeleteSubqueues",
    "SubqueuesCreated",
    "SubqueuesDeleted",
    "subqueue_bytes",
    "subqueues_of",
]

#: The subqueues every NORMAL queue has, by the suffix of their names.
RETRY_SUFFIX: Final = ";retry"
POISON_SUFFIX: Final = ";poison"
SUBQUEUE_SUFFIXES: Final = (RETRY_SUFFIX, POISON_SUFFIX)


@dataclass(frozen=True, slots=True)
class SubqueuesCreated(Result):
    """The subqueues a :class:`CreateSubqueues` made (none if they existed)."""

    records: tuple[QueueRecord, ...]


@dataclass(frozen=True, slots=True)
class SubqueuesDeleted(Result):
    """A queue's subqueues were deleted; ``messages`` were in them."""

    queue_ids: tuple[int, ...]
    messages: int


def subqueues_of(ctx: PlanContext, name: str) -> list[QueueState]:
    """The subqueues of the queue called ``name``, as the batch sees them."""
    found = []
    for suffix in SUBQUEUE_SUFFIXES:
        state = ctx.queue_named(name + suffix)
        if state is not None:
            found.append(state)
    return found


def subqueue_bytes(ctx: PlanContext, record: QueueRecord) -> int:
    """Bytes in the subqueues of ``record``'s queue: they count against its quota."""
    return sum(state.bytes for state in subqueues_of(ctx, record.name))


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
            sub = record.companion(
                ctx.allocate_queue_ids(1), suffix, QueueKind.SUBQUEUE, self.created_at
            )
            ctx.add_queue(sub)
            made.append(sub)
        return SubqueuesCreated(tuple(made))


@dataclass(frozen=True, slots=True)
class DeleteSubqueues(Removal):
    """Delete the subqueues of the queue ``name`` at once (their messages are
    erased in steps, as a deleted queue's are). It follows the queue's
    ``DeleteQueue`` in one atomic unit.

    A subqueue that prepared transactions received from is not deleted:
    ``InvalidOperation``, saying how many.
    """

    name: str

    def plan(self, ctx: PlanContext) -> Result:
        subqueues = subqueues_of(ctx, self.name)
        for state in subqueues:
            refuse_pinned(ctx, state)
        for state in subqueues:
            ctx.doom(state.record.queue_id)
        return SubqueuesDeleted(
            tuple(state.record.queue_id for state in subqueues),
            sum(state.depth for state in subqueues),
        )
