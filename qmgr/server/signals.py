"""Wake-ups for readers blocked on empty queues.

A blocked receive takes the queue's current event and waits on it; whoever
makes messages visible in that queue (the committer's callers after a sync,
an abort that unlocks messages, a queue deletion) calls :meth:`notify`, which
sets the event and forgets it, so the next waiter gets a fresh one. There is
no polling, and no wake-up can be lost: trio runs one task at a time, and a
reader takes the event in the same step in which it found the queue empty.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio


class QueueSignals:
    """One event per queue that has waiting readers."""

    def __init__(self) -> None:
        self._events: dict[int, trio.Event] = {}

    def event(self, queue_id: int) -> trio.Event:
        """The event the next change to ``queue_id`` will set."""
        event = self._events.get(queue_id)
        if event is None:
            event = self._events[queue_id] = trio.Event()
        return event

    def notify(self, queue_ids: Iterable[int]) -> None:
        """Wake every reader waiting on these queues."""
        for queue_id in queue_ids:
            event = self._events.pop(queue_id, None)
            if event is not None:
                event.set()

    def notify_all(self) -> None:
        """Wake every waiting reader (shutdown)."""
        self.notify(list(self._events))
