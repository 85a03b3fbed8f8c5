"""Wake-ups for readers blocked on empty queues.

A blocked receive takes the queue's current event and waits on it; whoever
makes messages visible in that queue (the committer's callers after a sync,
an abort that unlocks messages, a queue deletion) calls :meth:`notify`, which
sets the event and forgets it, so the next waiter gets a fresh one. There is
no polling, and no wake-up can be lost: trio runs one task at a time, and a
reader takes the event in the same step in which it found the queue empty.
The queues whose readers a written unit may have to wake are :func:`touched_queues`.

The receives that wait in line for any message of a queue (outside a
transaction, not a peek: ``qmgr.server.client.handover``) are not all woken
by a change, which would have thousands of them look for one message: the
:attr:`QueueSignals.line` wakes the first of them, which passes the turn on
once it has taken one. A change that concerns every reader (the queue is
deleted, a permission changed, the daemon stops) wakes them all
(``everyone``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import trio

from storage import AppendMessage, AppendOutgoing, Attempt, Operation, Store, Together

__all__ = ["QueueSignals", "Wakeup", "touched_queues"]


def touched_queues(store: Store, ops: Iterable[Operation]) -> set[int]:
    """The queues that ``ops`` (once written) may have appended to, looking into
    ``Attempt`` and ``Together``: whose readers, or whose outgoing link, to wake.
    A ``Together``'s result is its first operation's, so results alone miss them."""
    found: set[int] = set()
    stack = list(ops)
    while stack:
        op = stack.pop()
        if isinstance(op, AppendMessage):
            found.add(op.queue_id)
        elif isinstance(op, AppendOutgoing):
            record = store.get_queue(op.name)
            if record is not None:
                found.add(record.queue_id)
        elif isinstance(op, Together):
            stack.extend(op.ops)
        elif isinstance(op, Attempt):
            stack.extend((op.first, op.otherwise))
    return found


class QueueSignals:
    """One event per queue that has waiting readers."""

    def __init__(self) -> None:
        self._events: dict[int, trio.Event] = {}
        #: Called with the queue ids of every notification (the peering layer
        #: learns this way that outgoing queues have new messages).
        self.listeners: list[Callable[[Iterable[int]], None]] = []
        #: Wakes the receives waiting in line on these queues (None: on every
        #: queue): the first of each line, or ``everyone``; set by the handover.
        self.line: Callable[[tuple[int, ...] | None, bool], None] | None = None

    def event(self, queue_id: int) -> trio.Event:
        """The event the next change to ``queue_id`` will set."""
        event = self._events.get(queue_id)
        if event is None:
            event = self._events[queue_id] = trio.Event()
        return event

    def notify(self, queue_ids: Iterable[int], *, everyone: bool = False) -> None:
        """Wake the readers waiting on these queues: the first in line of those
        that wait for any message, or ``everyone`` (see the module docstring)."""
        queue_ids = tuple(queue_ids)
        for listener in self.listeners:
            listener(queue_ids)
        for queue_id in queue_ids:
            event = self._events.pop(queue_id, None)
            if event is not None:
                event.set()
        if self.line is not None and queue_ids:
            self.line(queue_ids, everyone)

    def notify_all(self) -> None:
        """Wake every waiting reader (shutdown)."""
        self.notify(list(self._events), everyone=True)
        if self.line is not None:
            self.line(None, True)


class Wakeup:
    """A re-armable wake-up for one background task: ``set()`` wakes its next ``wait()``.

    A ``set()`` while the task is busy is not lost: the next ``wait()``
    returns at once.
    """

    def __init__(self) -> None:
        self._event = trio.Event()

    def set(self) -> None:
        """Wake the waiting task (or let its next wait return at once)."""
        self._event.set()

    async def wait(self, at_most: float = float("inf")) -> None:
        """Wait until :meth:`set` was called since the last wait, or ``at_most`` seconds."""
        with trio.move_on_after(at_most):
            await self._event.wait()
        if self._event.is_set():
            self._event = trio.Event()
