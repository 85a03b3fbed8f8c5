"""The forgetter: writes the removal of acknowledged outgoing entries, with their reports.

Theory of operation
-------------------
An outgoing entry is done when the peer acknowledges it (a SessionAck for a
non-transactional one, an OrderAck covering a transactional one) or when it
can never be sent. Its removal, ``storage.ForgetOutgoing``, is written with
the delivery reports it owes (``OutgoingQueue.forget_reports``) in the
background: whoever finds entries done calls :meth:`Forgetter.forget` and
goes on, and the forgetter's task takes every queue waiting at once, one
write per queue, so that one write covers what came in while the last was
being written. When the write lands, the queue's sequence machine is handed
the store's sequence state (it may have rolled).

* **Purges first.** A purge reports its removals before any later forget
  (the sequence machine needs that order): forgets of a queue being purged
  wait, and the purge writes those waiting first
  (:meth:`Forgetter.forget_waiting`) and calls :meth:`Forgetter.forget` when
  it is done.
* **Entries given up** (their packet cannot be built) leave their sequence at
  once, so that the next transmission's previous number passes over them,
  and are forgotten with the reports of a message given up
  (:meth:`Forgetter.give_up`).
* **A forget that cannot be written** (a full store) hands its entries back
  to the machine as acknowledged entries, and they are written with the
  queue's next forget, or after :data:`FORGET_RETRY_SECONDS`: one pause per
  queue, whatever number of forgets failed meanwhile.
* A queue found missing from the store is dropped by its owner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import trio

import storage
import wire

from ..backlog import Backlog
from ..signals import touched_queues
from .outgoing_queue import OutgoingQueue
from .parts import PeeringParts

__all__ = ["FORGET_RETRY_SECONDS", "Forgetter"]

#: How long the forget of acknowledged entries that could not be written (a
#: full store) waits before it is tried again.
FORGET_RETRY_SECONDS: Final = 5.0


class Forgetter:
    """Writes the forgets of the outgoing entries that are done, in the background.

    Args:
        parts: the daemon's parts.
        holds: whether ``queue`` is still an outgoing queue of its owner.
        drop: forget a queue that is no longer in the store.
    """

    def __init__(
        self,
        parts: PeeringParts,
        holds: Callable[[OutgoingQueue], bool],
        drop: Callable[[OutgoingQueue], None],
    ) -> None:
        self.parts = parts
        self._holds = holds
        self._drop = drop
        #: Queues with acknowledged entries to forget.
        self._forgetting: Backlog[OutgoingQueue] = Backlog()
        #: Queues whose forget that could not be written waits to be tried again.
        self._retries: set[OutgoingQueue] = set()
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write the forgets as they come, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                queues = await self._forgetting.take()
                async with trio.open_nursery() as writes:
                    for queue in queues:
                        if queue.purging or not queue.to_forget:
                            # A purge reports its removals before any later
                            # forget; it calls forget() again when it is done.
                            continue
                        writes.start_soon(self._forget_one, queue, _take_to_forget(queue))

    def forget(self, queue: OutgoingQueue, lookup_ids: Iterable[int]) -> None:
        """Remove acknowledged entries from an outgoing queue (written in the background)."""
        queue.to_forget.extend(lookup_ids)
        if queue in self._forgetting:
            self._forgetting.add()
        else:
            self._forgetting.add(queue)

    def give_up(self, queue: OutgoingQueue, lookup_id: int, reason: wire.MessageClass) -> None:
        """Remove an entry of ``queue`` that can never be sent (its packet cannot
        be built): at once out of its sequence, so that the next transmission's
        previous number passes over it instead of the receiver waiting for it
        until a resend, and forgotten with the reports of a message given up
        for ``reason`` (``OutgoingQueue.forget_reports``)."""
        queue.undeliverable[lookup_id] = reason
        if queue.purging or self._nursery is None:
            self.forget(queue, (lookup_id,))  # after the purge, in order
            return
        ids = (lookup_id,)
        queue.machine.forget_started(ids)
        self._nursery.start_soon(self._forget_one, queue, ids)

    async def forget_waiting(self, queue: OutgoingQueue) -> None:
        """Write now the forget of what ``queue`` has waiting to be forgotten (a
        purge does this first, so that what was delivered keeps its reports)."""
        if ids := _take_to_forget(queue):
            await self._forget_one(queue, ids)

    async def _forget_one(self, queue: OutgoingQueue, ids: tuple[int, ...]) -> None:
        parts = self.parts
        forget = storage.ForgetOutgoing(queue.queue_id, ids)
        unit = storage.Unit((forget, *queue.forget_reports(ids)))
        try:
            outcome = await parts.committer.submit(unit)
        except storage.StoreError as exc:  # the batch failed whole (a full store)
            parts.log.warning(
                "outgoing_forget_failed",
                queue=queue.name,
                error=str(exc),
                retry_in=FORGET_RETRY_SECONDS,
            )
            self._forget_later(queue, ids)
            return
        except Exception as exc:
            parts.log.exception("outgoing_forget_failed", queue=queue.name, error=str(exc))
            self._forget_later(queue, ids)
            return
        result = outcome.results[0]
        if isinstance(result, storage.Forgotten):
            queue.forgotten(ids, result.state)
            if len(unit.ops) > 1:
                parts.signals.notify(touched_queues(parts.store, unit.ops[1:]))
        elif isinstance(result, storage.Failed) and isinstance(result.error, storage.QueueMissing):
            self._drop(queue)
        else:
            # A full store, say: the entries stay, and their forget is tried
            # again until it is written.
            parts.log.warning(
                "outgoing_forget_failed",
                queue=queue.name,
                error=str(outcome.error),
                retry_in=FORGET_RETRY_SECONDS,
            )
            self._forget_later(queue, ids)

    def _forget_later(self, queue: OutgoingQueue, ids: tuple[int, ...]) -> None:
        """A forget of ``ids`` was not written: they are acknowledged entries
        again (a roll that waited for this forget no longer holds entries
        back), forgotten again after :data:`FORGET_RETRY_SECONDS`."""
        queue.machine.forget_failed(ids)
        queue.wake()
        # Waiting with the others now (a purge writes them first), written
        # with the queue's next forget or after the pause.
        queue.to_forget.extend(ids)
        if self._nursery is None:
            self.forget(queue, ())
            return
        if queue in self._retries:
            return  # one pause a queue: it writes everything waiting then

        async def again() -> None:
            try:
                await trio.sleep(FORGET_RETRY_SECONDS)
            finally:
                self._retries.discard(queue)
            if self._holds(queue) and queue.to_forget:
                self.forget(queue, ())

        self._retries.add(queue)
        self._nursery.start_soon(again)


def _take_to_forget(queue: OutgoingQueue) -> tuple[int, ...]:
    """The ids ``queue`` has waiting to be forgotten, now being forgotten (its
    machine is told); empty if there are none."""
    ids = tuple(queue.to_forget)
    if ids:
        queue.to_forget.clear()
        queue.machine.forget_started(ids)
    return ids
