"""The committer: batches units from every connection into one write each.

Theory of operation
-------------------
Every change to stored state is a ``storage.Unit`` handed to
:meth:`Committer.submit` (a transaction's commit, a send or receive outside
a transaction, queue administration, erase steps, message-id
reservations). Units are written in batches: the store plans a batch on the
event loop's thread, the writer applies it (one write transaction, one
sync), and each submitter gets its unit's outcome. Concurrent clients share
syncs (group commit).

* Which connections are expected to send soon: each connection's reads are
  noted (:meth:`Committer.note_read`). A connection is expected at its last
  read plus the time since the read before (at once, after its first),
  unless it has been silent for :data:`QUIET_SECONDS`, waits for a message
  or has closed. A client in a loop of commits is expected about one write
  after its answer; a producer paced at 500 messages a second, 2 ms after
  its last send. When the requests of a read, or of the read before it,
  ended a unit (a commit), the connection is expected no sooner than the
  time between its last two units: a consumer reads twice or more in a
  transaction (receives, then the commit 0.1 ms later) and then waits for
  its next message or, when it is behind, receives again at once, and the
  interval of those reads would have a producer's commit wait for a unit
  that is not coming. Beside a producer at 500/s, this took the p99
  from commit to receive from 2.6 to 1.7 ms with a consumer taking up to
  ten messages a transaction, and from 1.9 to 1.2 ms with one (medians of
  interleaved runs, ``docs/side-by-side.md``).
* A unit a connection submits while nothing else is in flight and no other
  connection is expected before this write would end is written at once by
  its submitter, on its own task: a lone client pays one sync and no
  hand-off to another task or thread. The daemon's own work (erase steps
  above all) never takes this path, so that its loops always let the
  clients' requests in between their steps.
* Otherwise units queue for the committer task. Before writing, it gathers:
  it waits until every connection expected before the gathering's deadline
  has added its unit, or until that deadline: a share of the last write's
  duration (never more than :data:`GATHER_LIMIT`). A client that has just
  been answered is usually sending its next request, and catching it in
  this batch instead of the next halves its wait; on the target machine
  this took the average batch of eight concurrent clients from 3.9 units to
  7.7 and their throughput from about 5,400 to 6,900 commits/s. Waiting
  only for the connections expected in time keeps a producer and a
  consumer at a steady pace from waiting for each other's next request:
  with a producer at 500 messages/s and a consumer taking each message in
  a transaction, the consumer's commit took 0.67 to 1.2 ms (median) when
  every connection heard from in the last ``QUIET_SECONDS`` was waited
  for, and 0.6 ms since.
* The writer applies the batch on the event loop's thread, or on a thread
  of its own (``store.writer_thread``) so that the loop goes on decoding
  and answering other clients while the disk syncs. Measured on two vCPUs,
  the thread loses (see ``docs/performance.md``): it competes with the
  event loop and the clients for a CPU, and each hand-off waits to be
  scheduled.

The store's driver (``Store.committing``) decides what happens when a plan
does not fit: grow the map, reclaim freed pages, or write the units that
only free space on their own in the headroom kept for them and fail the
rest with ``StoreFull``. A batch that fails as a whole (an I/O error) fails
every unit in it, with nothing written.

Each batch's time to plan, write and sync is noted in :attr:`Committer.write_times`
(``timings``: a bisect and two additions per batch, never per unit), beside the
count of batches, for the metrics.

Every submitted unit gets an outcome, whatever happens: an unexpected error
while committing a batch fails that batch's units; units waiting when the
committer stops fail with ``ShuttingDown``. Submitters wait shielded from
cancellation, because a unit handed over may be written, and they must
learn whether it was.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import structlog
import trio

import storage
from qmgr.core.errors import ShuttingDown
from storage import Store, Unit, UnitOutcome

from .timings import Durations
from .writer import Writer

__all__ = ["Committer"]


#: A batch taking longer than this is logged as slow.
SLOW_BATCH_SECONDS = 1.0
#: Units refused for a full store are logged at once, then at most once in this
#: many seconds, with the count refused since (a full store refuses every send).
FULL_LOG_SECONDS = 60.0
#: The longest a batch waits for units from other active connections, as a
#: share of the last batch's write time, and in seconds.
GATHER_SHARE = 0.5
GATHER_LIMIT = 0.0005
#: Other connections silent for this long are not expected to send before a sync ends.
QUIET_SECONDS = 0.002


@dataclass(slots=True, eq=False)
class _Pending:
    unit: Unit
    source: int = 0
    done: trio.Event = field(default_factory=trio.Event)
    outcome: UnitOutcome | None = None
    error: BaseException | None = None


class Committer:
    """Writes submitted units in batches; run :meth:`run` in a nursery first."""

    def __init__(
        self,
        store: Store,
        writer: Writer,
        *,
        log: structlog.typing.FilteringBoundLogger | None = None,
    ) -> None:
        self._store = store
        self._writer = writer
        self._pending: list[_Pending] = []
        self._wake = trio.Event()
        self._running = False
        # A batch is being written (by the committer task, or by a submitter).
        self._busy = False
        # The last two distinct connections to receive bytes: (connection, when).
        self._latest = (0, -math.inf)
        self._earlier = (0, -math.inf)
        # Connections that received bytes lately, and when.
        self._active: dict[int, float] = {}
        # When each of those is expected to send next (see the module docstring).
        self._expected: dict[int, float] = {}
        # Every open connection's last read.
        self._reads: dict[int, float] = {}
        # Every open connection's last unit, and the time since the one before.
        self._units: dict[int, tuple[float, float]] = {}
        self._arrival = trio.Event()
        # Seconds the last batch took to write.
        self._last_write = 0.0
        self._log = log or structlog.get_logger("qmgr.committer")
        #: Batches written (each one write transaction and one sync) and units in them.
        self.batches = 0
        self.units = 0
        #: How long each batch took to plan, write and sync (for the metrics).
        self.write_times = Durations()
        # Units refused for a full store since the last store_full warning, and
        # when that warning was logged (None: none since the start).
        self._full_refused = 0
        self._full_logged: float | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write batches until cancelled; units still waiting then fail with ShuttingDown."""
        self._running = True
        task_status.started()
        try:
            while True:
                if not self._pending:
                    self._wake = trio.Event()
                    await self._wake.wait()
                await self._gather()
                batch, self._pending = self._pending, []
                self._busy = True
                try:
                    await self._write(batch)
                finally:
                    self._busy = False
        finally:
            self._running = False
            stopped = ShuttingDown("the queue manager is shutting down")
            for pending in self._pending:
                pending.error = stopped
                pending.done.set()
            self._pending = []

    def note_read(self, source: int, now: float) -> None:
        """Connection ``source`` received a request at ``now`` (monotonic seconds) and
        may send its next one soon."""
        latest_source, latest = self._latest
        if source != latest_source:
            self._earlier = (latest_source, latest)
        self._latest = (source, now)
        self._active[source] = now
        reads = self._reads
        previous = reads.get(source)
        reads[source] = now
        if previous is None:
            self._expected[source] = now
            return
        interval = now - previous
        unit = self._units.get(source)
        if unit is not None and unit[0] >= previous:
            # Its requests in this read or the one before ended a unit: it
            # commits next at its pace of units, not at that of its reads. A
            # consumer reads twice or more within a transaction (receives, then
            # the commit): neither the commit's read nor the receive after it
            # says when it commits next.
            interval = max(interval, unit[1])
        self._expected[source] = now + interval

    def forget_source(self, source: int) -> None:
        """Connection ``source`` will send nothing soon: it waits for a message."""
        self._active.pop(source, None)
        self._expected.pop(source, None)

    def closed(self, source: int) -> None:
        """Connection ``source`` has closed."""
        self.forget_source(source)
        self._reads.pop(source, None)
        self._units.pop(source, None)

    async def _gather(self) -> None:
        """Let every connection expected before the deadline (a share of the last
        write, at most ``GATHER_LIMIT``) add its unit to the batch (group commit)."""
        now = trio.current_time()
        active = self._active
        expected = self._expected
        quiet_since = now - QUIET_SECONDS
        for source in [s for s, seen in active.items() if seen < quiet_since]:
            del active[source]
            expected.pop(source, None)
        deadline = now + min(GATHER_LIMIT, GATHER_SHARE * self._last_write)
        awaited = {source for source in active if expected[source] <= deadline}
        while awaited - {pending.source for pending in self._pending}:
            self._arrival = trio.Event()
            with trio.move_on_at(deadline) as scope:
                await self._arrival.wait()
            if scope.cancelled_caught:
                return

    def _others_quiet(self, source: int) -> bool:
        """No other connection is expected to send before a write started now would end."""
        now = trio.current_time()
        cutoff = now - QUIET_SECONDS
        horizon = now + self._last_write
        active = self._active
        for other, seen in (self._latest, self._earlier):
            if (
                other != source
                and seen > cutoff
                and active.get(other) == seen
                and self._expected[other] <= horizon
            ):
                return False
        return True

    async def submit(self, unit: Unit, *, source: int = 0) -> UnitOutcome:
        """Write ``unit`` in the next batch and return its outcome once it is synced.

        Args:
            unit: the work.
            source: the connection submitting it (see :meth:`note_read`); 0 for
                the daemon's own work.

        Raises:
            storage.StoreError: the whole batch failed; nothing of it was written.
            ShuttingDown: the committer stopped before writing it.
        """
        if not self._running:
            msg = "the queue manager is shutting down"
            raise ShuttingDown(msg)
        if source:
            now = trio.current_time()
            last = self._units.get(source)
            self._units[source] = (now, math.inf if last is None else now - last[0])
        # The daemon's own work (source 0: erase steps, reservations) always
        # goes through the batches: written inline, a loop of steps would never
        # let the event loop read the clients' requests in between.
        if source and not self._busy and not self._pending and self._others_quiet(source):
            return self._write_now(unit)
        pending = _Pending(unit, source)
        self._pending.append(pending)
        self._wake.set()
        self._arrival.set()
        with trio.CancelScope(shield=True):
            await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.outcome is not None
        return pending.outcome

    def _write_now(self, unit: Unit) -> UnitOutcome:
        """Write one unit on the caller's task and thread (see the module docstring)."""
        self._busy = True
        started = time.perf_counter()
        try:
            outcome = self._store.commit([unit], now=time.time())[0]
            self._note_refusals([outcome])
        except storage.StoreError as exc:
            self._log.error("commit_batch_failed", units=1, error=str(exc))
            raise
        finally:
            self._busy = False
            if self._pending:
                self._wake.set()
        self.batches += 1
        self.units += 1
        elapsed = time.perf_counter() - started
        self.write_times.note(elapsed)
        self._last_write = elapsed
        if elapsed > SLOW_BATCH_SECONDS:
            self._log.warning("commit_batch_slow", units=1, seconds=round(elapsed, 3))
        return outcome

    async def _write(self, batch: list[_Pending]) -> None:
        started = time.perf_counter()
        try:
            outcomes = await self._commit([pending.unit for pending in batch])
        except storage.StoreError as exc:
            self._log.error("commit_batch_failed", units=len(batch), error=str(exc))
            for pending in batch:
                pending.error = exc
        except BaseException as exc:
            failure = storage.StoreError(f"internal error while committing: {exc!r}")
            for pending in batch:
                pending.error = failure
            if not isinstance(exc, trio.Cancelled):
                self._log.exception("commit_batch_crashed", units=len(batch))
            if not isinstance(exc, Exception):
                raise
        else:
            for pending, outcome in zip(batch, outcomes, strict=True):
                pending.outcome = outcome
            self._note_refusals(outcomes)
        finally:
            for pending in batch:
                pending.done.set()
        self.batches += 1
        self.units += len(batch)
        elapsed = time.perf_counter() - started
        self.write_times.note(elapsed)
        self._last_write = elapsed
        if elapsed > SLOW_BATCH_SECONDS:
            self._log.warning("commit_batch_slow", units=len(batch), seconds=round(elapsed, 3))

    def _note_refusals(self, outcomes: list[UnitOutcome]) -> None:
        """Log units the store refused for want of room: each is an error its
        submitter reports to its client alone, and an operator must learn that
        the store is full from the daemon's log too."""
        errors = [o.error for o in outcomes if isinstance(o.error, storage.StoreFull)]
        if not errors:
            return
        self._full_refused += len(errors)
        now = trio.current_time()
        if self._full_logged is not None and now - self._full_logged < FULL_LOG_SECONDS:
            return
        self._log.warning("store_full", refused=self._full_refused, error=str(errors[-1]))
        self._full_refused = 0
        self._full_logged = now

    async def _commit(self, units: list[Unit]) -> list[UnitOutcome]:
        driver = self._store.committing(units, now=time.time())
        plan = next(driver)
        while True:
            error = await self._writer.apply(plan)
            try:
                plan = driver.send(error)
            except StopIteration as stop:
                outcomes: list[UnitOutcome] = stop.value
                return outcomes
