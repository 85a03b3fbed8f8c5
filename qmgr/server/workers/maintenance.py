"""Maintenance: idle transactions, erasing (with message ids and the ballast), outcomes.

Theory of operation
-------------------
Three :class:`~.worker.Worker` s, run together by :class:`Maintenance`:

* the :class:`IdleSweeper` aborts transactions idle for longer than the
  configured timeout, by the event loop's monotonic clock (a jump of the
  wall clock neither aborts everything nor nothing), looking at most every
  :data:`SWEEP_INTERVAL`;
* the :class:`Eraser` steps when a session wakes it
  (``Services.wake_maintenance``), and once at start-up, and does, in
  order: raise the store's message-id limit when the core runs low; erase
  deleted queues and purged messages in bounded steps, one unit per batch
  so that other clients' commits share the batches and keep flowing; and
  put the ballast file back once a full disk has room again. A write that
  gives up the ballast wakes it (``Store.on_ballast_released``), and while
  the ballast is short it looks again every :data:`RETRY_SECONDS`: the
  store takes whatever room there is at once and grows the ballast as more
  appears, before new messages can take that room. An erase step that
  could not be written is tried again after a pause that doubles with each
  failure in a row, up to :data:`ERASE_RETRY_MAX_SECONDS` (a store at the
  process's file size limit gains nothing from the ballast, and the ballast
  an erase step's own write gives up does not wake the worker);
* the :class:`OutcomePruner` deletes, every :data:`PRUNE_INTERVAL` and in
  bounded steps, the outcomes of global transaction ids older than
  ``transactions.outcome_retention``;
* :class:`StaleReaders` frees, every :data:`READER_CHECK_INTERVAL`, the
  store's reader slots of processes that died in a read transaction (a hot
  copy killed half-way), which would otherwise keep LMDB from reusing any
  page freed since, so that the store grew without bound.

Erasing resumes on its own after a restart: the store says which queues
still have messages to erase. A step that can erase nothing because open
transactions hold the remaining purged messages looks again after
:data:`RETRY_SECONDS` (the messages leave when those transactions end).
When only prepared transactions hold them, it waits for their resolution
instead, which wakes it: a transaction may stay in doubt for days.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final, Unpack

import structlog
import trio

import storage
from qmgr.core.engine import QueueManagerCore
from storage import Store

from ..committer import Committer
from ..signals import QueueSignals, Wakeup, touched_queues
from .worker import UNTIL_WOKEN, Worker, WorkerParts

__all__ = [
    "ERASE_RETRY_MAX_SECONDS",
    "PRUNE_INTERVAL",
    "READER_CHECK_INTERVAL",
    "RETRY_SECONDS",
    "SWEEP_INTERVAL",
    "Eraser",
    "IdleSweeper",
    "Maintenance",
    "OutcomePruner",
    "StaleReaders",
]

#: How often to look again at erasing blocked by held messages, or at the ballast.
RETRY_SECONDS: Final = 1.0
#: The longest pause after erase steps that failed in a row (the pause doubles
#: from :data:`RETRY_SECONDS` with each failure).
ERASE_RETRY_MAX_SECONDS: Final = 60.0
#: How often idle transactions are looked for, at most.
SWEEP_INTERVAL: Final = 1.0
#: How often outcomes past their retention are deleted.
PRUNE_INTERVAL: Final = 60.0
#: How often the store's reader slots are looked at for dead processes'.
READER_CHECK_INTERVAL: Final = 1.0


class Maintenance:
    """The four maintenance workers; run :meth:`run` in a nursery.

    Args:
        store: the store the core reads, for what only the daemon may do to
            it (the ballast file).
        wakeup: what sessions set when there may be something to erase.
        erase_step: most messages erased per unit.
        idle_timeout: seconds of inactivity after which a transaction is aborted.
    """

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
        wall: Callable[[], float] = time.time,
    ) -> None:
        parts = WorkerParts(
            committer=committer,
            signals=signals,
            log=log or structlog.get_logger("qmgr.maintenance"),
            wall=wall,
        )
        self.sweeper = IdleSweeper(core, idle_timeout, **parts)
        self.eraser = Eraser(store, core, erase_step, wakeup, **parts)
        self.pruner = OutcomePruner(core, **parts)
        self.readers = StaleReaders(store, **parts)

    async def run(self) -> None:
        """Run the four workers until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.sweeper.run)
            nursery.start_soon(self.eraser.run)
            nursery.start_soon(self.pruner.run)
            nursery.start_soon(self.readers.run)


class IdleSweeper(Worker):
    """Aborts the transactions idle for longer than ``idle_timeout`` seconds."""

    def __init__(
        self, core: QueueManagerCore, idle_timeout: float, **parts: Unpack[WorkerParts]
    ) -> None:
        super().__init__(**parts)
        self._core = core
        self._timeout = idle_timeout
        self._interval = min(SWEEP_INTERVAL, max(idle_timeout / 4, 0.05))

    async def step(self) -> float:
        timeout = self._timeout
        reason = f"idle timeout: no activity for more than {timeout:g} s"
        for tx in self._core.transactions.idle(trio.current_time(), timeout):
            end = getattr(tx.owner, "end_transaction", None)
            if end is not None:
                end(tx, reason)
            else:
                self.notify(self._core.abort(tx, reason))
        return self._interval


class Eraser(Worker):
    """Erases deleted queues and purged messages, reserving message ids first, and
    puts the ballast back (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        core: QueueManagerCore,
        erase_step: int,
        wakeup: Wakeup,
        **parts: Unpack[WorkerParts],
    ) -> None:
        super().__init__(wakeup=wakeup, **parts)
        self._store = store
        self._core = core
        self._erase_step = erase_step
        self._retry = False
        #: Erase steps failed in a row, and when (trio's clock) the next may be tried.
        self._erase_failures = 0
        self._erase_after = -math.inf
        #: True while an erase step is being written (see :meth:`_ballast_released`).
        self._erasing = False
        store.on_ballast_released = self._ballast_released

    def _ballast_released(self) -> None:
        # An erase step's own write gives the ballast up (a removal gets its
        # room); if it fails all the same, that wake-up would start it again at
        # once. Another writer's does wake this worker, to put the ballast back.
        if not self._erasing:
            self.wake()

    async def step(self) -> float:
        self._retry = False
        await self._reserve_ordinals()
        if trio.current_time() >= self._erase_after:
            await self._erase()
        if not self._store.has_ballast and not self._store.restore_ballast():
            self._retry = True
        pauses = [RETRY_SECONDS] if self._retry else []
        if self._erase_failures and self._store.queues_to_erase():
            pauses.append(max(0.0, self._erase_after - trio.current_time()))
        return min(pauses, default=UNTIL_WOKEN)

    def _erase_failed(self, queue_id: int, error: object) -> None:
        """An erase step could not be written: the next waits a pause that doubles
        with each failure in a row."""
        self._erase_failures += 1
        doublings = self._erase_failures - 1
        pause = min(RETRY_SECONDS * 2.0**doublings, ERASE_RETRY_MAX_SECONDS)
        self._erase_after = trio.current_time() + pause
        self.log.warning(
            "erase_failed",
            queue_id=queue_id,
            error=str(error),
            failures=self._erase_failures,
            retry_in=pause,
        )

    async def _reserve_ordinals(self) -> None:
        core = self._core
        unit = core.ordinal_reservation()
        if unit is None:
            return
        was_failing = core.ordinals.failing  # at start-up too: the daemon said so
        written = await self.submit(unit)
        failure = core.ordinals_reserved(unit, written.outcome, written.batch_error)
        if failure is not None:
            if not was_failing:  # once, not at every retry
                self.log.warning("message_id_reservation_failed", error=failure.message)
            self._retry = True

    async def _erase(self) -> None:
        for queue_id in self._store.queues_to_erase():
            while True:
                await self._reserve_ordinals()
                unit = self._core.queues.erase_unit(queue_id, self._erase_step, wall=self.wall())
                self._erasing = True
                try:
                    written = await self.submit(unit)
                finally:
                    self._erasing = False
                if written.batch_error is not None:
                    self._erase_failed(queue_id, written.batch_error)
                    return
                if not self._erased(queue_id, unit, written.outcome):
                    if self._erase_after > trio.current_time():
                        return  # it failed: the pause holds for every queue
                    break

    def _erased(self, queue_id: int, unit: storage.Unit, outcome: storage.UnitOutcome) -> bool:
        """Take in the outcome of an erase step; True if the queue has more to erase now."""
        if len(unit.ops) > 1 and outcome.error is None:
            # The step's reports (NACK_Q_PURGED, NACK_Q_DELETED) went to admin,
            # dead-letter or outgoing queues: wake their readers.
            self.notify(touched_queues(self._store, unit.ops[1:]))
        result = outcome.results[0]
        if not isinstance(result, storage.Erased):
            # Its reports found no room (a full store), say.
            self._erase_failed(queue_id, outcome.error)
            return False
        self._erase_failures = 0
        self._erase_after = -math.inf
        if result.done:
            self.log.debug("erase_done", queue_id=queue_id)
            return False
        if result.messages == 0:
            # Held: by open transactions, look again later; by prepared ones
            # only, their resolution wakes this worker.
            core = self._core
            if core.holds.count(queue_id) > core.two_phase.held(queue_id):
                self._retry = True
            return False
        return True


class StaleReaders(Worker):
    """Frees, every :data:`READER_CHECK_INTERVAL`, the store's reader slots that
    processes which died left taken (a hot copy killed half-way)."""

    def __init__(self, store: Store, **parts: Unpack[WorkerParts]) -> None:
        super().__init__(**parts)
        self._store = store
        self._failing = False

    async def step(self) -> float:
        failure: storage.StoreError | None = None
        try:
            freed = self._store.clear_stale_readers()
        except storage.StoreError as exc:
            failure, freed = exc, 0
        if failure is not None:
            if not self._failing:  # once, not every second
                self.log.error("store_reader_check_failed", error=str(failure))
            self._failing = True
            return READER_CHECK_INTERVAL
        self._failing = False
        if freed:
            self.log.warning("stale_store_readers_freed", count=freed)
        return READER_CHECK_INTERVAL


class OutcomePruner(Worker):
    """Deletes the outcomes of global transactions past their retention."""

    def __init__(self, core: QueueManagerCore, **parts: Unpack[WorkerParts]) -> None:
        super().__init__(**parts)
        self._two_phase = core.two_phase

    async def step(self) -> float:
        await self.prune(self.wall())
        return PRUNE_INTERVAL

    async def prune(self, wall: float) -> int:
        """Delete every outcome older than the retention at ``wall``, step by step;
        returns how many."""
        total = 0
        while True:
            written = await self.submit(self._two_phase.prune_unit(wall))
            result = written.outcome.results[0]
            if not isinstance(result, storage.Pruned):
                self.log.warning("outcome_pruning_failed", error=str(written.error))
                return total
            total += result.count
            if result.done:
                if total:
                    self.log.info("outcomes_pruned", count=total)
                return total
