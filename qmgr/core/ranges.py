"""LookupId ranges of a queue: how far its visible messages reach, and removing through one.

Theory of operation
-------------------
A reader that follows a queue by LookupId (a streaming query) asks two
things the receive path does not: *where does the range of the next N
visible messages end* (:func:`measure_range`, keys only, no message read),
and *remove everything visible up to a LookupId* once it has processed it
(:func:`removal_step`). LookupIds are given when an append commits, so
every message appended later has a higher one than any the
reader has seen: the range below a measured end gains no new message. It
can regain an old one: a message held by another transaction is not visible,
and comes back in its place when that transaction aborts. A reader that
follows LookupIds must therefore be the queue's only consumer.

Removing through a LookupId is done in bounded steps: each step holds up to
``limit`` visible messages (so that no receive takes them meanwhile) and
returns the non-atomic unit that removes them, journal copies included, as
receives outside a transaction would. The caller writes one step after the
other until a step finds nothing; a message that is gone by the time its
removal is written (purged meanwhile) is simply not counted. Messages held
by other transactions are not visible and are left alone. Asking again for
a LookupId already removed through finds nothing: the operation is
idempotent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import storage
from storage import QueueRecord, Unit, UnitOutcome
from wire import MessageClass, MessageProperties

from .outcomes import record_wants_report

if TYPE_CHECKING:
    from .engine import QueueManagerCore

__all__ = ["hold_through", "measure_range", "removal_done", "removal_step"]


def measure_range(
    core: QueueManagerCore, queue: QueueRecord, *, after: int, limit: int
) -> tuple[int, int]:
    """``(count, last)``: how many visible messages have a LookupId above ``after``
    (at most ``limit`` of them; 0 means no limit), and the LookupId of the last
    one counted (``after`` if there is none)."""
    return core.store.range_end(
        queue.queue_id, after=after, limit=limit, skip=core.locks.held(queue.queue_id)
    )


class _Outside:
    """Every lookup id but those of ``index`` (a ``skip`` for reading exactly them)."""

    __slots__ = ("_index",)

    def __init__(self, index: dict[int, int]) -> None:
        self._index = index

    def __contains__(self, lookup_id: object) -> bool:
        return lookup_id not in self._index


def hold_through(core: QueueManagerCore, queue_id: int, *, through: int, limit: int) -> list[int]:
    """Hold up to ``limit`` free visible messages of a queue with a LookupId up to
    ``through``; returns their LookupIds (a removal or a move follows)."""
    found = core.store.read_through(
        queue_id, through=through, limit=limit, skip=core.locks.held(queue_id)
    )
    for lookup_id in found:
        # The band only places a receive's start, which these holds do not move.
        core.locks.hold(queue_id, lookup_id, 0, scanned_from_start=False)
    return found


def removal_step(
    core: QueueManagerCore, queue: QueueRecord, *, through: int, limit: int, wall: float = 0.0
) -> tuple[list[int], Unit] | None:
    """Hold up to ``limit`` visible messages with a LookupId up to ``through`` and
    return them with the unit that removes them (and reports, stamped ``wall``,
    what their receipt asked for); None when there is none left."""
    queue_id = queue.queue_id
    found = hold_through(core, queue_id, through=through, limit=limit)
    if not found:
        return None
    ops: list[storage.Operation] = [core.removal_op(queue_id, lookup_id) for lookup_id in found]
    if core.outcomes.reports_on_receive(queue_id):
        # These are receives: each removal carries the reports its message asked for.
        index = {lookup_id: position for position, lookup_id in enumerate(found)}
        records = core.store.read_range(
            queue_id, after=found[0] - 1, limit=len(found), skip=_Outside(index)
        )
        for lookup_id, record in records:
            payload = storage.message_payload(record)
            if record_wants_report(record):
                message = MessageProperties.from_bytes(payload)
                reports = core.outcomes.effects(
                    message, MessageClass.ACK_RECEIVE, wall=wall, note=storage.message_note(record)
                )
                ops[index[lookup_id]] = storage.Together((ops[index[lookup_id]], *reports))
    return found, Unit(tuple(ops), atomic=False)


def removal_done(
    core: QueueManagerCore,
    queue: QueueRecord,
    held: list[int],
    outcome: UnitOutcome | BaseException,
) -> tuple[int, set[int]]:
    """Finish a step: ``(messages removed, queues to wake)``.

    A step that was never written releases what it held. Raises the store's
    error as the core's when the whole step failed.
    """
    queue_id = queue.queue_id
    if isinstance(outcome, BaseException):
        woken = core.release((queue_id, lookup_id) for lookup_id in held)
        return 0, woken
    removed = 0
    released: list[tuple[int, int]] = []
    for lookup_id, result in zip(held, outcome.results, strict=True):
        if isinstance(result, storage.Removed):
            removed += 1
            core.locks.forget(queue_id, lookup_id)
        else:
            released.append((queue_id, lookup_id))
    woken = core.release(released)
    if removed:
        core.commits += 1
        woken |= core.journal_of(queue_id)
    return removed, woken
