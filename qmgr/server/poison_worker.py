"""The daemon's poison-handling task: writing what aborts decided, and returns from ``;retry``.

Theory of operation
-------------------
One task, a loop that sleeps until there is something to do:

* the core's poison handling queues a ``RecordAbort`` or a ``MoveMessage``
  for every aborted transactional receive (``qmgr.core.poison``) and wakes
  this task, which takes them as one non-atomic unit, writes it through the
  committer (as the daemon's own work: it shares the clients' batches and
  never delays a reply) and hands the outcome back, which releases the
  messages whose move failed and wakes the readers of the queues that got
  one;
* at the due time of the first entry of the retry index (``store``'s
  ``retry_due``, read with a seek, so that a restart costs nothing per
  waiting message) it asks the core for bounded steps moving the due
  messages back to their queues, one unit per step, until none is due.
  It never sleeps longer than ``MAX_SLEEP``, so a wall clock that jumps
  forward is noticed; when the messages due are all held by transactions
  (received from ``;retry``) it looks again after ``RETRY_SECONDS``.

A message moved to ``;poison`` is logged as a warning
(``message_moved_to_poison``): an operator should look at it.
"""

from __future__ import annotations

import math
import time
from typing import Final

import structlog
import trio

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import ShuttingDown

from .committer import Committer
from .signals import QueueSignals, Wakeup

__all__ = ["PoisonWorker"]

#: The longest the task sleeps, whatever the next due time says.
MAX_SLEEP: Final = 60.0
#: How soon to look again at due messages that transactions hold.
RETRY_SECONDS: Final = 1.0
_EVENTS: Final = {
    storage.MoveReason.RETRY: "message_moved_to_retry",
    storage.MoveReason.POISON: "message_moved_to_poison",
    storage.MoveReason.RETURN: "message_returned_from_retry",
}


class PoisonWorker:
    """Writes the units of poison handling; run :meth:`run` in a nursery."""

    def __init__(
        self,
        *,
        core: QueueManagerCore,
        committer: Committer,
        signals: QueueSignals,
        log: structlog.typing.FilteringBoundLogger | None = None,
    ) -> None:
        self._core = core
        self._committer = committer
        self._signals = signals
        self._log = log or structlog.get_logger("qmgr.poison")
        self._wakeup = Wakeup()
        core.poison.wake = self._wakeup.set

    def wake(self) -> None:
        """Look again now (the retry settings or the index may have changed)."""
        self._wakeup.set()

    async def run(self) -> None:
        """Work until cancelled (or until the committer stops)."""
        blocked = False
        while True:
            try:
                await self._write_aborts()
                blocked = await self._return_due()
            except ShuttingDown:
                return
            await self._wakeup.wait(self._sleep(blocked))

    def _sleep(self, blocked: bool) -> float:
        """Seconds until the next due message (``RETRY_SECONDS`` if those due are held)."""
        due = self._core.poison.next_due()
        if due is None:
            return math.inf
        wait = due - time.time()
        if wait <= 0:
            return RETRY_SECONDS if blocked else 0.0
        return min(wait, MAX_SLEEP)

    async def _write(self, unit: storage.Unit) -> storage.UnitOutcome | None:
        """Write a unit and give its outcome back to the core; None if it failed whole."""
        poison = self._core.poison
        try:
            outcome = await self._committer.submit(unit)
        except (storage.StoreError, ShuttingDown) as exc:
            self._signals.notify(poison.written(unit, exc))
            if isinstance(exc, ShuttingDown):
                raise
            self._log.warning(
                "poison_handling_write_failed", error=str(exc), operations=len(unit.ops)
            )
            return None
        self._signals.notify(poison.written(unit, outcome))
        for op, result in zip(unit.ops, outcome.results, strict=True):
            if isinstance(op, storage.MoveMessage):
                self._log_move(op, result)
        return outcome

    def _log_move(self, op: storage.MoveMessage, result: storage.Result) -> None:
        store = self._core.store
        source = store.get_queue_by_id(op.queue_id)
        target = store.get_queue_by_id(op.target_id)
        if not isinstance(result, storage.Moved):
            self._log.warning(
                "poison_move_failed",
                queue=None if source is None else source.name,
                lookup_id=op.lookup_id,
                error=str(getattr(result, "error", result)),
            )
            return
        log = self._log.warning if op.reason is storage.MoveReason.POISON else self._log.info
        log(
            _EVENTS.get(op.reason, "message_moved"),
            queue=None if source is None else source.name,
            lookup_id=op.lookup_id,
            to=None if target is None else target.name,
            new_lookup_id=result.target_lookup_id,
            move_count=result.counters.move_count,
            retry_cycles=result.counters.retry_cycles,
        )

    async def _write_aborts(self) -> None:
        poison = self._core.poison
        while (unit := poison.take_unit()) is not None:
            await self._write(unit)

    async def _return_due(self) -> bool:
        """Move back what is due; True if due messages are left that transactions hold."""
        poison = self._core.poison
        while (unit := poison.retry_step(time.time())) is not None:
            outcome = await self._write(unit)
            if outcome is None:
                return True  # try again later
            # The daemon's own loop: let the clients' requests in between steps.
            await trio.lowlevel.checkpoint()
        due = poison.next_due()
        return due is not None and due <= time.time()
