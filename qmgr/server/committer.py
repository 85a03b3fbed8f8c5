"""The committer: the one place where the daemon writes to LMDB.

Theory of operation
-------------------
Every change to stored state — a committed transaction, a non-transacted
send or receive — is a ``storage.CommitUnit`` handed to :meth:`Committer.submit`.
One committer task owns all writes. It sleeps until work arrives, takes
*every* unit waiting, and applies them with one ``Store.commit_batch`` call:
one LMDB write transaction and one sync for the whole batch. Units that
arrive while a batch is being written wait for the next one, so concurrent
clients share syncs (group commit) and a single client pays one sync per
commit.

The batch runs on the trio thread and blocks the event loop for the length
of one write transaction and its sync. That is deliberate: measured on the
target machine, handing the write transaction to a worker thread cost more
in GIL hand-offs and scheduler hops than it saved (see docs/performance.md),
and keeping LMDB on one thread means no write transaction can span an
``await`` and the map can grow safely. Requests that arrive during the sync
wait in the kernel's socket buffers and form the next batch.

A submitter's wait is shielded from cancellation: once a unit is handed over
it will be applied or fail as a whole, and the submitter always learns which,
so that it can release locks and answer (or log) correctly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog
import trio

import storage
from storage import CommitOutcome, CommitUnit, Store


@dataclass(slots=True, eq=False)
class _Pending:
    unit: CommitUnit
    done: trio.Event = field(default_factory=trio.Event)
    outcome: CommitOutcome | None = None
    error: storage.StoreError | None = None


@dataclass(slots=True)
class CommitterStats:
    """Counters for status and benchmarks."""

    batches: int = 0
    units: int = 0
    largest_batch: int = 0
    failed_batches: int = 0


class Committer:
    """Applies commit units in batches, one write transaction and one sync each."""

    def __init__(
        self, store: Store, *, log: structlog.typing.FilteringBoundLogger | None = None
    ) -> None:
        self._store = store
        self._pending: list[_Pending] = []
        self._wakeup = trio.Event()
        self._log = log or structlog.get_logger("qmgr.committer")
        self.stats = CommitterStats()
        self._running = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Apply batches until cancelled. Start it with ``nursery.start``."""
        self._running = True
        task_status.started()
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                batch, self._pending = self._pending, []
                if batch:
                    self._apply(batch)
        finally:
            self._running = False
            # Nothing may be left waiting forever: apply what is still pending.
            if self._pending:
                batch, self._pending = self._pending, []
                self._apply(batch)

    async def submit(self, unit: CommitUnit) -> CommitOutcome:
        """Apply ``unit`` in the next batch and return its outcome once synced.

        Raises:
            storage.StoreError: the whole batch failed (for example, the disk
                is full); nothing of the unit was applied.
        """
        pending = _Pending(unit)
        self._pending.append(pending)
        self._wakeup.set()
        with trio.CancelScope(shield=True):
            await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.outcome is not None
        return pending.outcome

    def _apply(self, batch: Sequence[_Pending]) -> None:
        started = time.perf_counter()
        try:
            outcomes = self._store.commit_batch([p.unit for p in batch], now=time.time())
        except storage.StoreError as exc:
            self.stats.failed_batches += 1
            self._log.error("commit_batch_failed", units=len(batch), error=str(exc))
            for pending in batch:
                pending.error = exc
                pending.done.set()
            return
        for pending, outcome in zip(batch, outcomes, strict=True):
            pending.outcome = outcome
            pending.done.set()
        self.stats.batches += 1
        self.stats.units += len(batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        elapsed = time.perf_counter() - started
        if elapsed > 1.0:
            self._log.warning("commit_batch_slow", units=len(batch), seconds=round(elapsed, 3))
