"""The poison worker: writes what aborts decided, and returns messages from ``;retry``.

Theory of operation
-------------------
A :class:`~.worker.Worker` with two things to do in each step:

* the core's poison handling queues a ``RecordAbort`` or a ``MoveMessage``
  for every aborted transactional receive (``qmgr.core.poison``) and wakes
  this worker, which takes them as one non-atomic unit, writes it (as the
  daemon's own work: it shares the clients' batches and never delays a
  reply) and hands the outcome back, which releases the messages whose move
  failed and wakes the readers of the queues that got one;
* at the due time of the first entry of the retry index (``store``'s
  ``retry_due``, read with a seek, so that a restart costs nothing per
  waiting message) it asks the core for bounded steps moving the due
  messages back to their queues, one unit per step, until none is due.

It pauses until the next due time, never longer than :data:`MAX_SLEEP`, so
that a wall clock that jumps forward is noticed; when the messages due are
all held by transactions (received from ``;retry``) it looks again after
:data:`RETRY_SECONDS`.

A message moved to ``;poison`` is logged as a warning
(``message_moved_to_poison``): an operator should look at it.
"""

from __future__ import annotations

import functools
from typing import Final, Unpack

import trio.lowlevel

import storage
from qmgr.core.engine import QueueManagerCore

from .worker import UNTIL_WOKEN, Worker, WorkerParts

__all__ = ["MAX_SLEEP", "RETRY_SECONDS", "PoisonWorker"]

#: The longest pause, whatever the next due time says.
MAX_SLEEP: Final = 60.0
#: How soon to look again at due messages that transactions hold.
RETRY_SECONDS: Final = 1.0
_EVENTS: Final = {
    storage.MoveReason.RETRY: "message_moved_to_retry",
    storage.MoveReason.POISON: "message_moved_to_poison",
    storage.MoveReason.RETURN: "message_returned_from_retry",
}


class PoisonWorker(Worker):
    """Writes the units of poison handling; run :meth:`run` in a nursery."""

    log_name = "qmgr.poison"

    def __init__(self, *, core: QueueManagerCore, **parts: Unpack[WorkerParts]) -> None:
        super().__init__(**parts)
        self._poison = core.poison
        self._store = core.store
        core.poison.wake = self.wake

    async def step(self) -> float:
        poison = self._poison
        while (unit := poison.take_unit()) is not None:
            await self._write(unit)
        blocked = await self._return_due()
        due = poison.next_due()
        if due is None:
            return UNTIL_WOKEN
        wait = due - self.wall()
        if wait <= 0:
            return RETRY_SECONDS if blocked else 0.0
        return min(wait, MAX_SLEEP)

    async def _return_due(self) -> bool:
        """Move back what is due; True if due messages are left that transactions hold."""
        poison = self._poison
        while (unit := poison.retry_step(self.wall())) is not None:
            if not await self._write(unit):
                return True  # try again later
            # The daemon's own loop: let the clients' requests in between steps.
            await trio.lowlevel.checkpoint()
        due = poison.next_due()
        return due is not None and due <= self.wall()

    async def _write(self, unit: storage.Unit) -> bool:
        """Write a unit and give its outcome back to the core; False if it failed whole."""
        written = await self.submit(unit, functools.partial(self._poison.written, unit))
        if written.batch_error is not None:
            self.log.warning(
                "poison_handling_write_failed",
                error=str(written.batch_error),
                operations=len(unit.ops),
            )
            return False
        outcome = written.outcome
        for op, result in zip(unit.ops, outcome.results, strict=True):
            if isinstance(op, storage.MoveMessage):
                self._log_move(op, result, outcome.error)
        return True

    def _log_move(
        self,
        op: storage.MoveMessage,
        result: storage.Result,
        unit_error: storage.StoreError | None,
    ) -> None:
        store = self._store
        source = store.get_queue_by_id(op.queue_id)
        target = store.get_queue_by_id(op.target_id)
        if not isinstance(result, storage.Moved):
            # A move skipped because its unit failed says why the unit did.
            error = getattr(result, "error", None) or unit_error
            self.log.warning(
                "poison_move_failed",
                queue=None if source is None else source.name,
                lookup_id=op.lookup_id,
                error=str(error) if error is not None else type(result).__name__,
            )
            return
        log = self.log.warning if op.reason is storage.MoveReason.POISON else self.log.info
        log(
            _EVENTS.get(op.reason, "message_moved"),
            queue=None if source is None else source.name,
            lookup_id=op.lookup_id,
            to=None if target is None else target.name,
            new_lookup_id=result.target_lookup_id,
            move_count=result.counters.move_count,
            retry_cycles=result.counters.retry_cycles,
        )
