"""Background work of the daemon: idle transactions, erasing, message ids, the ballast,
outcomes of global transactions.

Theory of operation
-------------------
Three tasks, each a loop that sleeps until there is something to do:

* the *sweeper* aborts transactions idle for longer than the configured
  timeout, by the event loop's monotonic clock (a jump of the wall clock
  neither aborts everything nor nothing);
* the *worker* wakes when a session tells it (``Services.wake_maintenance``)
  and does, in order: raise the store's message-id limit when the core runs
  low; erase deleted queues and purged messages in bounded steps, one unit
  per batch so that other clients' commits share the batches and keep
  flowing; and put the ballast file back once a full disk has room again;
* the *pruner* deletes, once a minute and in bounded steps, the outcomes of
  global transaction ids older than ``transactions.outcome_retention``.

Erasing resumes on its own after a restart: the store says which queues
still have messages to erase. A step that can erase nothing because open
transactions hold the remaining purged messages waits a second and looks
again (the messages leave when those transactions end). When only prepared
transactions hold them, it waits for their resolution instead, which wakes
it: a transaction may stay in doubt for days.
"""

from __future__ import annotations

import time

import structlog
import trio

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import ShuttingDown
from qmgr.core.outcomes import touched_queues
from storage import Store

from .committer import Committer
from .signals import QueueSignals, Wakeup

__all__ = ["Maintenance"]

#: How often to look again at erasing blocked by held messages, or at the ballast.
RETRY_SECONDS = 1.0
#: How often idle transactions are looked for, at most.
SWEEP_INTERVAL = 1.0
#: How often outcomes past their retention are deleted.
PRUNE_INTERVAL = 60.0


class Maintenance:
    """The daemon's background tasks; run :meth:`run` in a nursery."""

    def __init__(
        self,
        *,
        store: Store,
        core: QueueManagerCore,
        committer: Committer,
        signals: QueueSignals,
        wakeup: Wakeup,
        erase_step: int,
        idle_timeout: float,
        log: structlog.typing.FilteringBoundLogger | None = None,
    ) -> None:
        self._store = store
        self._core = core
        self._committer = committer
        self._signals = signals
        self._wakeup = wakeup
        self._erase_step = erase_step
        self._idle_timeout = idle_timeout
        self._log = log or structlog.get_logger("qmgr.maintenance")
        self._retry = False

    async def run(self) -> None:
        """Run both loops until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._sweep_idle_transactions)
            nursery.start_soon(self._work)
            nursery.start_soon(self._prune_outcomes)

    async def _sweep_idle_transactions(self) -> None:
        timeout = self._idle_timeout
        interval = min(SWEEP_INTERVAL, max(timeout / 4, 0.05))
        while True:
            await trio.sleep(interval)
            for tx in self._core.transactions.idle(trio.current_time(), timeout):
                end = getattr(tx.owner, "end_transaction", None)
                reason = f"idle timeout: no activity for more than {timeout:g} s"
                if end is not None:
                    end(tx, reason)
                else:
                    self._signals.notify(self._core.abort(tx, reason))

    async def _prune_outcomes(self) -> None:
        while True:
            try:
                await self.prune_outcomes(time.time())
            except ShuttingDown:
                return
            await trio.sleep(PRUNE_INTERVAL)

    async def prune_outcomes(self, wall: float) -> int:
        """Delete every outcome older than the retention at ``wall``, step by step;
        returns how many."""
        total = 0
        while True:
            unit = self._core.two_phase.prune_unit(wall)
            try:
                outcome = await self._committer.submit(unit)
            except storage.StoreError as exc:
                self._log.warning("outcome_pruning_failed", error=str(exc))
                return total
            result = outcome.results[0]
            if not isinstance(result, storage.Pruned):
                self._log.warning("outcome_pruning_failed", error=str(outcome.error))
                return total
            total += result.count
            if result.done:
                if total:
                    self._log.info("outcomes_pruned", count=total)
                return total

    async def _work(self) -> None:
        # Look once at start-up: erasing may have been cut short by a restart.
        self._wakeup.set()
        while True:
            await self._wakeup.wait(RETRY_SECONDS if self._retry else float("inf"))
            self._retry = False
            try:
                await self._reserve_ordinals()
                await self._erase()
            except ShuttingDown:
                return  # what is left resumes at the next start
            if not self._store.has_ballast and not self._store.restore_ballast():
                self._retry = True

    async def _reserve_ordinals(self) -> None:
        core = self._core
        unit = core.ordinal_reservation()
        if unit is None:
            return
        try:
            outcome: storage.UnitOutcome | None = await self._committer.submit(unit)
        except storage.StoreError as exc:
            self._log.warning("message_id_reservation_failed", error=str(exc))
            outcome = None
            self._retry = True
        core.ordinals_reserved(unit, outcome)

    async def _erase(self) -> None:
        for queue_id in self._store.queues_to_erase():
            while True:
                await self._reserve_ordinals()
                unit = self._core.queues.erase_unit(queue_id, self._erase_step, wall=time.time())
                try:
                    outcome = await self._committer.submit(unit)
                except storage.StoreError as exc:
                    self._log.warning("erase_failed", queue_id=queue_id, error=str(exc))
                    self._retry = True
                    return
                if len(unit.ops) > 1 and outcome.error is None:
                    # The step's reports (NACK_Q_PURGED, NACK_Q_DELETED) went to
                    # admin, dead-letter or outgoing queues: wake their readers.
                    self._signals.notify(touched_queues(self._store, unit.ops[1:]))
                result = outcome.results[0]
                if not isinstance(result, storage.Erased):
                    self._log.warning("erase_failed", queue_id=queue_id, error=str(outcome.error))
                    break
                if result.done:
                    self._log.debug("erase_done", queue_id=queue_id)
                    break
                if result.messages == 0:
                    # Held: by open transactions, look again later; by prepared
                    # ones only, their resolution wakes this task.
                    core = self._core
                    if core.holds.count(queue_id) > core.two_phase.held(queue_id):
                        self._retry = True
                    break
