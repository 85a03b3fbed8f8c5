"""Messages held by open transactions, and where a receive starts looking.

Theory of operation
-------------------
A message received inside an open transaction, or by a receive whose
removal is being written, is *held*: every other reader passes over it.
Holds live only in memory, on purpose: a crash aborts every open
transaction simply by forgetting them, and the messages are visible again
after the restart, in their places.

Each queue's holds also keep a *start position* for receives: every message
before it is held (or gone). A receive scans from there, so the held
messages at the head of a busy queue are passed over by one seek, not
walked one by one on every receive: its cost follows what it returns, not
how many transactions hold messages ahead of it. Positions are lookup ids
for a transactional (FIFO) queue and ``(band, lookup id)`` pairs, band
``7 - priority``, for a non-transactional one, matching the store's orders.

The position moves forward when a receive holds the first message it found
scanning from it (everything up to that message is then held); back when a
hold ending without removal puts a message before it again (an abort); and,
for a non-transactional queue, back to the start of a band when a message
of higher priority arrives there. A removal needs no change: the message is
gone.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field

__all__ = ["LockTable"]

#: Where a receive starts in a queue no hold has moved yet.
_ORIGIN = (0, 0)


@dataclass(slots=True)
class _QueueHolds:
    #: lookup id -> band of every held message
    held: dict[int, int] = field(default_factory=dict)
    #: every message before this position is held or gone
    start: tuple[int, int] = _ORIGIN


class LockTable:
    """Held messages by queue, with each queue's start position."""

    __slots__ = ("_queues",)

    def __init__(self) -> None:
        self._queues: dict[int, _QueueHolds] = {}

    def held(self, queue_id: int) -> Container[int]:
        """The held lookup ids of a queue (a live view; do not keep it)."""
        holds = self._queues.get(queue_id)
        return () if holds is None else holds.held.keys()

    def held_ids(self, queue_id: int) -> frozenset[int]:
        """A snapshot of the held lookup ids of a queue."""
        holds = self._queues.get(queue_id)
        return frozenset() if holds is None else frozenset(holds.held)

    def count(self, queue_id: int) -> int:
        """How many messages of the queue are held."""
        holds = self._queues.get(queue_id)
        return 0 if holds is None else len(holds.held)

    def is_held(self, queue_id: int, lookup_id: int) -> bool:
        """True if the message is held."""
        holds = self._queues.get(queue_id)
        return holds is not None and lookup_id in holds.held

    def start(self, queue_id: int) -> tuple[int, int]:
        """Where a receive starts scanning: ``(band, lookup_id)``; band 0 for FIFO queues."""
        holds = self._queues.get(queue_id)
        return _ORIGIN if holds is None else holds.start

    def hold(self, queue_id: int, lookup_id: int, band: int, *, scanned_from_start: bool) -> None:
        """Hold a message. ``scanned_from_start``: it is the first free message a
        scan from :meth:`start` found, so the start may move past it."""
        holds = self._queues.get(queue_id)
        if holds is None:
            holds = self._queues[queue_id] = _QueueHolds()
        holds.held[lookup_id] = band
        if scanned_from_start:
            holds.start = (band, lookup_id + 1)

    def release(self, queue_id: int, lookup_id: int) -> None:
        """A hold ends and the message stays in its queue (an abort)."""
        holds = self._queues.get(queue_id)
        if holds is None:
            return
        band = holds.held.pop(lookup_id, None)
        if band is not None and (band, lookup_id) < holds.start:
            holds.start = (band, lookup_id)
        self._discard_if_idle(queue_id, holds)

    def forget(self, queue_id: int, lookup_id: int) -> None:
        """A hold ends because the message was removed."""
        holds = self._queues.get(queue_id)
        if holds is None:
            return
        holds.held.pop(lookup_id, None)
        self._discard_if_idle(queue_id, holds)

    def arrived(self, queue_id: int, bands: Iterable[int]) -> None:
        """Messages arrived in these bands of a non-transactional queue."""
        holds = self._queues.get(queue_id)
        if holds is None:
            return
        first = min(bands, default=None)
        if first is not None and (first, 0) < holds.start:
            holds.start = (first, 0)

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
