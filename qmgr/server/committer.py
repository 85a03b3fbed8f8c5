"""The committer: the one place where the daemon writes to LMDB.

Theory of operation
-------------------
Every change to stored state — a committed transaction, a non-transacted
send or receive — is a ``storage.CommitUnit`` handed to :meth:`Committer.submit`.
Units are written in batches, one ``Store.commit_batch`` call each: one LMDB
write transaction and one sync for the whole batch (group commit).

Leader and followers. The first task to submit while no batch is forming
becomes the *leader*. It yields once, so that every other task that is ready
to run in the same scheduling round (typically sessions whose requests
arrived while the previous batch was syncing) adds its unit as a *follower*
(the yield is skipped when no other client is connected);
then the leader takes every pending unit, writes and syncs them, hands each
follower its outcome, and carries on with its own reply at once. A single
client therefore pays one scheduler pass and one sync per commit, and N
concurrent clients share one sync.

The batch runs on the trio thread and blocks the event loop for the length
of one write transaction and its sync. That is deliberate: handing the write
transaction to a worker thread costs GIL hand-offs and scheduler hops on every
commit (see docs/performance.md), and keeping LMDB on one thread means no
write transaction can span an ``await`` and the map can grow safely. Requests
that arrive during the sync wait in the kernel's socket buffers and form the
next batch.

Waits are shielded from cancellation: once a unit is handed over it will be
applied or fail as a whole, and the submitter always learns which, so that it
can release locks and answer (or log) correctly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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


class Committer:
    """Applies commit units in batches, one write transaction and one sync each."""

    def __init__(
        self,
        store: Store,
        *,
        others_may_join: Callable[[], bool] = lambda: True,
        log: structlog.typing.FilteringBoundLogger | None = None,
    ) -> None:
        """``others_may_join`` says whether another task could submit in the same
        scheduling round (the daemon answers: more than one client connection).
        When it cannot, the leader writes at once instead of yielding first."""
        self._store = store
        self._others_may_join = others_may_join
        self._pending: list[_Pending] = []
        self._leading = False
        self._log = log or structlog.get_logger("qmgr.committer")

    async def submit(self, unit: CommitUnit) -> CommitOutcome:
        """Apply ``unit`` in the next batch and return its outcome once synced.

        Raises:
            storage.StoreError: the whole batch failed (for example, the disk
                is full); nothing of the unit was applied.
        """
        pending = _Pending(unit)
        self._pending.append(pending)
        if self._leading:
            with trio.CancelScope(shield=True):
                await pending.done.wait()
        else:
            self._leading = True
            try:
                # Let every task that is ready this round join the batch. With
                # no one else to join, write at once.
                if self._others_may_join():
                    await trio.lowlevel.cancel_shielded_checkpoint()
                batch, self._pending = self._pending, []
                self._apply(batch)
            finally:
                self._leading = False
        if pending.error is not None:
            raise pending.error
        assert pending.outcome is not None
        return pending.outcome

    def _apply(self, batch: Sequence[_Pending]) -> None:
        started = time.perf_counter()
        try:
            outcomes = self._store.commit_batch([p.unit for p in batch], now=time.time())
        except storage.StoreError as exc:
            self._log.error("commit_batch_failed", units=len(batch), error=str(exc))
            for pending in batch:
                pending.error = exc
                pending.done.set()
            return
        for pending, outcome in zip(batch, outcomes, strict=True):
            pending.outcome = outcome
            pending.done.set()
        elapsed = time.perf_counter() - started
        if elapsed > 1.0:
            self._log.warning("commit_batch_slow", units=len(batch), seconds=round(elapsed, 3))
