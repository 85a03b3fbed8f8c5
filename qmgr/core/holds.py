"""Held messages: taken by a transaction or a removal on its way, passed over by every other reader.

Theory of operation
-------------------
A message received inside an open transaction, or by a receive, a move, an
expiry or a removal step whose write is on its way, is *held*: every other
reader passes over it. Holds live only in memory, on purpose: a crash
aborts every open transaction simply by forgetting them, and the messages
are visible again after the restart, in their places (prepared transactions
hold theirs again at start-up, ``two_phase``).

A hold ends in one of two ways:

* *released* (:meth:`Holds.release`): the message stays in its queue (an
  abort, a failed write). Its queue's readers are woken, unless it was
  purged while held: it is erased now that nothing holds it;
* *removed* (:meth:`Holds.removed`): the write that removes (or moves) it
  succeeded. :meth:`Holds.removal` is that write's operation, journaled
  when the message's queue keeps a journal, whose readers are woken.

Each queue's holds also keep a *start position* for receives: every message
before it is held (or gone). A receive scans from there, so the held
messages at the head of a busy queue are passed over by one seek, not
walked one by one on every receive: its cost follows what it returns, not
how many transactions hold messages ahead of it. Positions are lookup ids
for a transactional (FIFO) queue and ``(band, lookup id)`` pairs, band
``7 - priority``, for a non-transactional one, matching the store's orders.

The position moves forward when a receive holds the first message it found
scanning from it (everything up to that message is then held); back when a
hold ends without removal and puts a message before it again (an abort);
and, for a non-transactional queue, back to the start of a band when a
message of higher priority is appended there (:meth:`Holds.appended`), or
to the front when a message is moved in (:meth:`Holds.moved_in`). A
removal needs no change: the message is gone.

:class:`Holds` reads the store (queue records, message keys) and never
writes it; it is shared by the receives and commits of the engine, the
LookupId ranges, expiry, poison handling and moves, prepared transactions
and queue administration.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

import storage
from storage import AppendMessage, RemoveMessage, Store, Unit, UnitOutcome

from .outcomes import DESTINATION_KINDS

__all__ = ["Holds"]

#: Where a receive starts in a queue no hold has moved yet.
_ORIGIN = (0, 0)


@dataclass(slots=True)
class _QueueHolds:
    #: lookup id -> band of every held message
    held: dict[int, int] = field(default_factory=dict)
    #: every message before this position is held or gone
    start: tuple[int, int] = _ORIGIN


class Holds:
    """Held messages by queue, with each queue's start position (one caller at a time)."""

    __slots__ = ("_queues", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._queues: dict[int, _QueueHolds] = {}

    # ------------------------------------------------------------------ reading

    def held(self, queue_id: int) -> Container[int]:
        """The held lookup ids of a queue (a live view; do not keep it)."""
        holds = self._queues.get(queue_id)
        return () if holds is None else holds.held.keys()

    def held_ids(self, queue_id: int) -> frozenset[int]:
        """A snapshot of the held lookup ids of a queue."""
        holds = self._queues.get(queue_id)
        return frozenset() if holds is None else frozenset(holds.held)

    def count(self, queue_id: int) -> int:
        """How many messages of the queue are held (by open or prepared
        transactions, or by writes on their way)."""
        holds = self._queues.get(queue_id)
        return 0 if holds is None else len(holds.held)

    def counts(self) -> dict[int, int]:
        """How many messages each queue with held messages has held, by queue id."""
        return {queue_id: len(holds.held) for queue_id, holds in self._queues.items() if holds.held}

    def is_held(self, queue_id: int, lookup_id: int) -> bool:
        """True if the message is held."""
        holds = self._queues.get(queue_id)
        return holds is not None and lookup_id in holds.held

    def start(self, queue_id: int) -> tuple[int, int]:
        """Where a receive starts scanning: ``(band, lookup_id)``; band 0 for FIFO queues."""
        holds = self._queues.get(queue_id)
        return _ORIGIN if holds is None else holds.start

    # ------------------------------------------------------------------ holding

    def hold(
        self, queue_id: int, lookup_id: int, band: int = 0, *, scanned_from_start: bool = False
    ) -> None:
        """Hold a message. ``scanned_from_start``: it is the first free message a
        scan from :meth:`start` found, so the start may move past it. ``band``
        (``7 - priority`` in a non-transactional queue) is where a release puts
        the start back; 0, the front, is always safe, if less exact."""
        holds = self._queues.get(queue_id)
        if holds is None:
            holds = self._queues[queue_id] = _QueueHolds()
        holds.held[lookup_id] = band
        if scanned_from_start:
            holds.start = (band, lookup_id + 1)

    def hold_through(self, queue_id: int, *, through: int, limit: int, after: int = 0) -> list[int]:
        """Hold up to ``limit`` free visible messages of a queue with a LookupId
        above ``after`` and up to ``through``; returns their LookupIds (a removal
        or a move follows)."""
        found = self._store.read_through(
            queue_id, through=through, limit=limit, skip=self.held(queue_id), after=after
        )
        for lookup_id in found:
            self.hold(queue_id, lookup_id)
        return found

    # ------------------------------------------------------------------ ending holds

    def release(self, receives: Iterable[tuple[int, int]]) -> set[int]:
        """End the holds of messages that stay in their queue; returns the queues
        to wake. A message purged while held stays invisible; it is erased now
        that nothing holds it."""
        woken: set[int] = set()
        store = self._store
        for queue_id, lookup_id in receives:
            self._release(queue_id, lookup_id)
            queue = store.get_queue_by_id(queue_id)
            if queue is not None and lookup_id >= queue.purged_below:
                woken.add(queue_id)
        return woken

    def _release(self, queue_id: int, lookup_id: int) -> None:
        holds = self._queues.get(queue_id)
        if holds is None:
            return
        band = holds.held.pop(lookup_id, None)
        if band is not None and (band, lookup_id) < holds.start:
            holds.start = (band, lookup_id)
        self._discard_if_idle(queue_id, holds)

    def forget(self, queue_id: int, lookup_id: int) -> None:
        """A hold ends because the message was removed (or moved away)."""
        holds = self._queues.get(queue_id)
        if holds is None:
            return
        holds.held.pop(lookup_id, None)
        self._discard_if_idle(queue_id, holds)

    def removed(self, queue_id: int, lookup_ids: Iterable[int]) -> set[int]:
        """Held messages of a queue were removed (the writes of :meth:`removal`):
        forget their holds; returns the journal queue to wake, if any."""
        for lookup_id in lookup_ids:
            self.forget(queue_id, lookup_id)
        return self.journal_of(queue_id)

    def drop_queue(self, queue_id: int) -> list[int]:
        """Forget a deleted queue's holds; returns the lookup ids that were held."""
        holds = self._queues.pop(queue_id, None)
        return [] if holds is None else list(holds.held)

    def _discard_if_idle(self, queue_id: int, holds: _QueueHolds) -> None:
        # With nothing held, every message before the start is gone, so the
        # start stays valid; but it would also stay valid at the origin, and
        # an empty entry is memory for nothing.
        if not holds.held:
            del self._queues[queue_id]

    # ------------------------------------------------------------------ removals

    def removal(self, queue_id: int, lookup_id: int) -> RemoveMessage:
        """The operation that removes a held message (copied to the journal if
        its queue has one; a subqueue's record names its queue's journal)."""
        return RemoveMessage(queue_id, lookup_id, self.journaled(queue_id))

    def journaled(self, queue_id: int) -> bool:
        """Whether a message received from the queue is copied to a journal."""
        record = self._store.get_queue_by_id(queue_id)
        return bool(record is not None and record.journal and record.kind in DESTINATION_KINDS)

    def journal_of(self, queue_id: int) -> set[int]:
        """The journal queue a removal from ``queue_id`` copied its message to, if any."""
        record = self._store.get_queue_by_id(queue_id)
        if record is None or not record.journal or record.journal_id is None:
            return set()
        return {record.journal_id}

    # ------------------------------------------------------------------ appends

    def appended(self, unit: Unit, outcome: UnitOutcome) -> None:
        """A unit was written: let receives on non-transactional queues see the
        messages it appended ahead of their start positions."""
        queues = self._queues
        if not queues:
            return
        for op, result in zip(unit.ops, outcome.results, strict=True):
            if isinstance(op, AppendMessage) and isinstance(result, storage.Appended):
                holds = queues.get(op.queue_id)
                if holds is None:
                    continue
                queue = self._store.get_queue_by_id(op.queue_id)
                if queue is not None and not queue.transactional:
                    band = 7 - op.priority
                    if (band, 0) < holds.start:
                        holds.start = (band, 0)

    def moved_in(self, queue_id: int) -> None:
        """A message was moved into a queue (``storage.Moved``): in a
        non-transactional queue its priority may put it before where receives
        start, so they start from the front again."""
        holds = self._queues.get(queue_id)
        if holds is None or holds.start == _ORIGIN:
            return
        queue = self._store.get_queue_by_id(queue_id)
        if queue is not None and not queue.transactional:
            holds.start = _ORIGIN
