"""LookupId ranges of a queue: reading them, how far they reach, and removing through one.

Theory of operation
-------------------
A reader that follows a queue by LookupId (a streaming query) asks three
things the receive path does not: *the visible messages after a LookupId*
(:meth:`Ranges.peek_range`, nothing held), *where does the range of the
next N visible messages end* (:meth:`Ranges.measure_range`, keys only, no
message read), and *remove everything visible up to a LookupId* once it has
processed it (:meth:`Ranges.removal_step`). LookupIds are given when an
append commits, so every message appended later has a higher one than any
the reader has seen: the range below a measured end gains no new message.
It can regain an old one: a message held by another transaction is not
visible, and comes back in its place when that transaction aborts. A reader
that follows LookupIds must therefore be the queue's only consumer.

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

import storage
from storage import QueueRecord, Store, Unit, UnitOutcome
from wire import MessageClass

from .holds import Holds
from .outcomes import Outcomes, record_wants_report
from .transactions import Tally

__all__ = ["Ranges"]


class _Outside:
    """Every lookup id but those of ``index`` (a ``skip`` for reading exactly them)."""

    __slots__ = ("_index",)

    def __init__(self, index: dict[int, int]) -> None:
        self._index = index

    def __contains__(self, lookup_id: object) -> bool:
        return lookup_id not in self._index


class Ranges:
    """LookupId ranges over ``store`` (read only), passing over what ``holds``
    holds; removals report through ``outcomes`` and count in ``tally``."""

    __slots__ = ("_holds", "_outcomes", "_store", "_tally")

    def __init__(self, store: Store, holds: Holds, outcomes: Outcomes, tally: Tally) -> None:
        self._store = store
        self._holds = holds
        self._outcomes = outcomes
        self._tally = tally

    def peek_range(self, queue: QueueRecord, *, after: int, limit: int) -> list[tuple[int, bytes]]:
        """Visible messages with a LookupId above ``after``, in LookupId order."""
        return self._store.read_range(
            queue.queue_id, after=after, limit=limit, skip=self._holds.held(queue.queue_id)
        )

    def measure_range(self, queue: QueueRecord, *, after: int, limit: int) -> tuple[int, int]:
        """``(count, last)``: how many visible messages have a LookupId above ``after``
        (at most ``limit`` of them; 0 means no limit), and the LookupId of the last
        one counted (``after`` if there is none)."""
        return self._store.range_end(
            queue.queue_id, after=after, limit=limit, skip=self._holds.held(queue.queue_id)
        )

    def removal_step(
        self, queue: QueueRecord, *, through: int, limit: int, wall: float = 0.0
    ) -> tuple[list[int], Unit] | None:
        """Hold up to ``limit`` visible messages with a LookupId up to ``through`` and
        return them with the unit that removes them (and reports, stamped ``wall``,
        what their receipt asked for); None when there is none left."""
        queue_id = queue.queue_id
        holds = self._holds
        found = holds.hold_through(queue_id, through=through, limit=limit)
        if not found:
            return None
        ops: list[storage.Operation] = [holds.removal(queue_id, lookup_id) for lookup_id in found]
        outcomes = self._outcomes
        if outcomes.reports_on_receive(queue_id):
            # These are receives: each removal carries the reports its message asked for.
            index = {lookup_id: position for position, lookup_id in enumerate(found)}
            records = self._store.read_range(
                queue_id, after=found[0] - 1, limit=len(found), skip=_Outside(index)
            )
            for lookup_id, record in records:
                if record_wants_report(record):
                    reports = outcomes.stored_reports(record, MessageClass.ACK_RECEIVE, wall=wall)
                    ops[index[lookup_id]] = storage.Together((ops[index[lookup_id]], *reports))
        return found, Unit(tuple(ops), atomic=False)

    def removal_done(
        self, queue: QueueRecord, held: list[int], outcome: UnitOutcome | BaseException
    ) -> tuple[int, set[int]]:
        """Finish a step: ``(messages removed, queues to wake)``.

        A step that was never written releases what it held.
        """
        queue_id = queue.queue_id
        holds = self._holds
        if isinstance(outcome, BaseException):
            return 0, holds.release((queue_id, lookup_id) for lookup_id in held)
        removed: list[int] = []
        released: list[tuple[int, int]] = []
        for lookup_id, result in zip(held, outcome.results, strict=True):
            if isinstance(result, storage.Removed):
                removed.append(lookup_id)
            else:
                released.append((queue_id, lookup_id))
        woken = holds.release(released)
        if removed:
            self._tally.commits += 1
            woken |= holds.removed(queue_id, removed)
        return len(removed), woken
