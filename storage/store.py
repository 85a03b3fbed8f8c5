"""The store: every queue and message of one queue manager, in one LMDB environment.

Theory of operation
-------------------
:class:`Store` puts together the environment (``environment``: lock, map
growth, headroom, ballast), the catalog of committed queues (``catalog``),
the message reads (``reads``), the reads of each concern (in its module of
``ops``) and the planned writes (``units`` and ``ops``, planned in
``context``, applied by ``plan``).

Writes go through :meth:`Store.committing`, a driver that yields the plans
to apply and takes back how applying went: the caller decides *where* a
plan is applied (on its own thread, as :meth:`Store.commit` does, or on a
writer thread, as the daemon does), the store decides everything else:

* a plan that does not fit in the map grows the map and is applied again;
* when the map cannot grow (``max_map_size``), or the disk is full, two
  tiny writes first let LMDB reuse the pages that earlier writes freed
  (it reuses a page only two write transactions after the one that freed
  it), and the batch is tried again; if it still does not fit, the units
  that only free space (receives, purges, deletions) are planned
  again on their own and may use the headroom kept for them (the map's last
  part, then the ballast file's space, after which, once the batch is
  written, :attr:`Store.on_ballast_released` is called); the other units fail with
  ``StoreFull``; so removing data always works on a full store;
* any other failure fails the batch as a whole, with nothing applied.

Threads: everything but :meth:`Store.apply` runs on the owner's thread;
:meth:`Store.apply` may run on one other thread at a time, while the owner
plans nothing else and resizes nothing (reads are fine).
"""

from __future__ import annotations

import contextlib
import math
import os
import pathlib
import uuid
from collections.abc import Callable, Container, Generator, Iterable, Sequence

from .catalog import SCHEMA_VERSION, Catalog
from .environment import Environment, Usage
from .errors import MapFull, StoreError, StoreFull
from .ops.confirmations import (
    Confirmation,
    PendingFinalAck,
    count_awaited,
    read_awaited,
    read_confirmation,
    read_confirmations,
    read_final_acks,
)
from .ops.expiry import DueMessage, read_due
from .ops.lists import DistributionList, read_list, read_lists
from .ops.meta import ReclaimSpace, read_setting, read_settings
from .ops.outcomes import OutcomeInfo, read_outcome, read_outcomes
from .ops.peering import IncomingState, read_history, read_incoming, read_relayed
from .ops.poison import MessageCounters, read_counters, read_retries_due
from .ops.prepared import read_prepared, read_prepared_one
from .peering_state import OutgoingState
from .plan import Plan, apply_plan, plan_batch
from .reads import MessageReader, read_erasable, scan_messages
from .records import QueueRecord
from .reservations import NO_RESERVATION, PreparedInfo
from .units import Unit, UnitOutcome

__all__ = ["SCHEMA_VERSION", "Store"]


def _nothing() -> None:
    """The default of ``Store.on_ballast_released``."""


class Store:
    """The queue manager's persistent state in one LMDB environment.

    Use as a context manager, or call :meth:`close`.

    Args:
        path: directory of the environment; created (mode 0700) if missing.
        initial_map_size: map size for a new environment, in bytes. An
            existing environment keeps the size it has grown to.
        max_map_size: the map never grows beyond this; ``None`` means no
            limit other than the disk.
        durable: sync every write transaction (LMDB ``sync`` and
            ``metasync``). ``False`` is only for measuring CPU cost.
        reserve_size: bytes kept back so that removals work on a full store
            (see ``environment``); 0 keeps nothing back.

    Raises:
        StoreLocked: another Store has the directory open.
        SchemaMismatch: the store was written with another schema version.
        StoreCorrupt: the files are not a valid store.
        StoreFull: the disk is full.
        StoreError: any other failure to open.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        initial_map_size: int = 64 << 20,
        max_map_size: int | None = None,
        durable: bool = True,
        reserve_size: int = 0,
    ) -> None:
        self._env = Environment(
            path,
            initial_map_size=initial_map_size,
            max_map_size=max_map_size,
            durable=durable,
            reserve_size=reserve_size,
        )
        try:
            self._catalog = Catalog(self._env, count_awaited)
        except BaseException:
            self._env.close()
            raise
        # Only into a store it opened: one it refuses gets nothing written.
        self._env.restore_ballast()
        self._reader = MessageReader(self._env, self._catalog)
        #: Called, on the thread that drives commits, once a batch that gave up
        #: the ballast (a full disk) is written: whoever puts it back may start.
        self.on_ballast_released: Callable[[], None] = _nothing
        # A batch being written gave up the ballast (see ``committing``).
        self._ballast_taken = False

    # ------------------------------------------------------------------ the environment

    @property
    def path(self) -> pathlib.Path:
        """The environment's directory."""
        return self._env.path

    @property
    def qm_guid(self) -> uuid.UUID:
        """This queue manager's GUID, created with the store and never changed."""
        return self._catalog.qm_guid

    @property
    def ordinal_limit(self) -> int:
        """Message-id ordinals below this may have been used (see ``ReserveOrdinals``)."""
        return self._catalog.ordinal_limit

    @property
    def map_size(self) -> int:
        """The current LMDB map size in bytes."""
        return self._env.map_size

    @property
    def has_ballast(self) -> bool:
        """True while the space kept back for removals on a full disk is in place."""
        return self._env.has_ballast

    @property
    def ballast_size(self) -> int:
        """Bytes of that space held now (below ``reserve_size`` while a full disk
        keeps the ballast from growing back)."""
        return self._env.ballast_size

    def usage(self) -> Usage:
        """How much of the store is in use and how far it may grow (for monitoring).

        Raises:
            StoreError: the data file cannot be examined.
        """
        return self._env.usage()

    def counts(self) -> dict[tuple[object, ...], int]:
        """The appends committed since the store opened, by the key each was
        counted under (``CountedAppend``); a copy."""
        return dict(self._catalog.counts)

    def clear_stale_readers(self) -> int:
        """``Environment.clear_stale_readers``: free dead processes' reader slots."""
        return self._env.clear_stale_readers()

    def _free_dead_readers(self) -> None:
        """:meth:`clear_stale_readers` on the way to a full store: a failure to
        look leaves the batch's own error (the maintenance worker reports it)."""
        with contextlib.suppress(StoreError):
            self._env.clear_stale_readers()

    def restore_ballast(self) -> bool:
        """Allocate the ballast again if a full disk used it, as far as the disk has
        room (see ``environment``); True if it holds all of ``reserve_size``.
        Nothing is allocated while a batch that gave up the ballast is being
        written (with a writer thread, other tasks run meanwhile)."""
        if self._ballast_taken:
            return False
        return self._env.restore_ballast()

    def close(self) -> None:
        """Close the environment and release the directory. Idempotent.

        Every other method raises ``StoreClosed`` afterwards.
        """
        self._env.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ queues

    def get_queue(self, name: str) -> QueueRecord | None:
        """The queue of that canonical name, with its committed counters, or ``None``."""
        self._env.lmdb  # noqa: B018 - raises StoreClosed after close()
        return self._catalog.by_name.get(name)

    def get_queue_by_id(self, queue_id: int) -> QueueRecord | None:
        """The queue of that id, with its committed counters, or ``None``."""
        return self._catalog.by_id.get(queue_id)

    def list_queues(self) -> list[QueueRecord]:
        """Every queue (journal and system queues included), ordered by name."""
        self._env.lmdb  # noqa: B018 - raises StoreClosed after close()
        by_name = self._catalog.by_name
        return [by_name[name] for name in sorted(by_name)]

    def queue_records(self) -> list[QueueRecord]:
        """Every queue, in no particular order: :meth:`list_queues` without the
        sort, for who reads them all often (the metrics)."""
        self._env.lmdb  # noqa: B018 - raises StoreClosed after close()
        return list(self._catalog.by_id.values())

    def queues_to_erase(self) -> list[int]:
        """Ids of deleted queues and purged queues whose messages remain to be erased."""
        erasing = [q.queue_id for q in self._catalog.by_id.values() if q.erasing]
        return sorted(self._catalog.doomed) + sorted(erasing)

    def settings(self, prefix: str, limit: int = 100_000) -> list[tuple[str, str]]:
        """The settings whose keys begin with ``prefix`` (at most ``limit``), in key order.

        Raises:
            StoreCorrupt: a stored key or value is not UTF-8.
        """
        return read_settings(self._env, self._catalog, prefix, limit)

    def get_setting(self, key: str) -> str | None:
        """A setting stored with ``SetSetting``, or ``None``.

        Raises:
            InvalidRecord: the key is empty or too long.
            StoreCorrupt: the stored value is not UTF-8.
        """
        return read_setting(self._env, self._catalog, key)

    # ------------------------------------------------------------------ peering

    def outgoing_state(self, queue_id: int) -> OutgoingState | None:
        """The committed sequence state of an OUTGOING queue, or ``None`` (from memory)."""
        self._env.lmdb  # noqa: B018 - raises StoreClosed after close()
        return self._catalog.outgoing.get(queue_id)

    def outgoing_states(self) -> dict[int, OutgoingState]:
        """The committed sequence state of every OUTGOING queue, by queue id (from memory)."""
        self._env.lmdb  # noqa: B018 - raises StoreClosed after close()
        return dict(self._catalog.outgoing)

    def incoming_states(self) -> list[IncomingState]:
        """Every stored incoming stream state (``RecordIncoming``), ordered by key.

        Raises:
            StoreCorrupt: a stored state does not decode.
        """
        return read_incoming(self._env, self._catalog)

    def relayed_entry(self, queue_id: int, relay_id: bytes) -> int | None:
        """The lookup id of an entry of the outgoing queue ``queue_id`` appended with
        this relay id (``AppendOutgoing.relay``) and still there, or None.

        Raises:
            InvalidRecord: ``relay_id`` is not ``RELAY_ID_SIZE`` bytes.
        """
        return read_relayed(self._env, self._catalog, queue_id, relay_id)

    def message_history(self) -> list[bytes]:
        """The message history (``RememberMessageIds``): 20-byte keys, oldest first.

        Raises:
            StoreCorrupt: a stored entry does not decode.
        """
        return read_history(self._env, self._catalog)

    # ------------------------------------------------------------------ prepared transactions

    def prepared_transactions(
        self, prefix: str = "", limit: int | None = None, *, owner: str | None = None
    ) -> list[PreparedInfo]:
        """Prepared transactions whose xid starts with ``prefix``, in xid order
        (by UTF-8 bytes), at most ``limit`` (``None``: all), only those ``owner``
        prepared unless it is None. Reads headers only.

        Raises:
            StoreCorrupt: a stored header does not decode.
        """
        return read_prepared(self._env, self._catalog, prefix, limit, owner)

    def prepared(self, xid: str) -> PreparedInfo | None:
        """The prepared transaction ``xid``, or ``None``.

        Raises:
            StoreCorrupt: its header does not decode.
        """
        return read_prepared_one(self._env, self._catalog, xid)

    def outcome(self, xid: str) -> OutcomeInfo | None:
        """The kept outcome of ``xid`` (committed or aborted, and when), or ``None``.

        Raises:
            StoreCorrupt: it does not decode.
        """
        return read_outcome(self._env, self._catalog, xid)

    def outcomes(
        self, prefix: str = "", limit: int | None = None, *, owner: str | None = None
    ) -> list[OutcomeInfo]:
        """Kept outcomes whose xid starts with ``prefix``, in xid order, at most
        ``limit`` (``None``: all), only ``owner``'s unless it is None.

        Raises:
            StoreCorrupt: one does not decode.
        """
        return read_outcomes(self._env, self._catalog, prefix, limit, owner)

    def reservation(self, queue_id: int) -> tuple[int, int]:
        """``(bytes, pins)`` prepared transactions hold on a queue (from memory): the
        quota bytes their sends reserve, and how many of them use the queue."""
        self._env.lmdb  # noqa: B018 - raises StoreClosed after close()
        return self._catalog.reservations.get(queue_id, NO_RESERVATION)

    # ------------------------------------------------------------------ messages

    def read_message(self, queue_id: int, lookup_id: int, *, purged: bool = False) -> bytes | None:
        """One committed message's record (``message_header``/``message_payload``
        read it), or ``None`` (also if purged, unless ``purged``)."""
        return self._reader.read_message(queue_id, lookup_id, purged=purged)

    def oldest_arrivals(self, queue_ids: Iterable[int]) -> dict[int, float]:
        """When the first visible message of each of ``queue_ids`` became visible
        (unix seconds), by queue id; queues without messages are left out. One
        read transaction and one cursor seek per queue."""
        return self._reader.oldest_arrivals(queue_ids)

    def read_range(
        self,
        queue_id: int,
        *,
        after: int = 0,
        limit: int = 1000,
        skip: Container[int] = (),
        max_bytes: int | None = None,
    ) -> list[tuple[int, bytes]]:
        """Committed messages with ``lookup_id > after`` in lookup id order, not in
        ``skip``: at most ``limit``, and none past the one that reaches ``max_bytes``."""
        return self._reader.read_range(
            queue_id, after=after, limit=limit, skip=skip, max_bytes=max_bytes
        )

    def range_end(
        self, queue_id: int, *, after: int, limit: int, skip: Container[int]
    ) -> tuple[int, int]:
        """``(count, last)``: how many visible messages (not purged, not in ``skip``)
        have ``lookup_id > after``, counting at most ``limit`` (0: all), and the
        lookup id of the last one counted (``after`` if none). Reads keys only;
        without a limit, the last is found by seeking back from the queue's end.

        Raises:
            ValueError: ``limit`` is negative.
        """
        return self._reader.range_end(queue_id, after=after, limit=limit, skip=skip)

    def read_through(
        self, queue_id: int, *, through: int, limit: int, skip: Container[int], after: int = 0
    ) -> list[int]:
        """Lookup ids of the visible messages (not purged, not in ``skip``) with
        ``after < lookup_id <= through``, ascending, at most ``limit``. Reads keys only."""
        return self._reader.read_through(
            queue_id, through=through, limit=limit, skip=skip, after=after
        )

    def first_fifo(
        self, queue_id: int, *, start: int, skip: Container[int]
    ) -> tuple[int, bytes] | None:
        """The first message at or after lookup id ``start`` not in ``skip``."""
        return self._reader.first_fifo(queue_id, start=start, skip=skip)

    def first_by_priority(
        self, queue_id: int, *, start: tuple[int, int], skip: Container[int]
    ) -> tuple[int, int, bytes] | None:
        """The first message in priority order at or after ``start = (band, lookup_id)``."""
        return self._reader.first_by_priority(queue_id, start=start, skip=skip)

    def scan_messages(
        self,
        queues: Sequence[tuple[int, int]],
        *,
        select: Callable[[memoryview], bool],
        limit: int,
        visits: int = 100_000,
    ) -> tuple[list[tuple[int, int, bytes]], list[tuple[int, int]]]:
        """The messages of ``queues`` (``(queue_id, first lookup id)``) that
        ``select`` picks, as ``(queue_id, lookup_id, record)``, at most ``limit``,
        visiting at most ``visits`` records; and what is left to scan (pass it
        back for the next step; empty when done)."""
        return scan_messages(
            self._env, self._catalog, queues, select=select, limit=limit, visits=visits
        )

    def doomed_queue(self, queue_id: int) -> QueueRecord | None:
        """The record of a deleted queue whose messages remain to be erased, or None."""
        return self._catalog.doomed.get(queue_id)

    def erasable(
        self,
        queue_id: int,
        *,
        limit: int,
        keep: Container[int],
        below: int | None,
        select: Callable[[memoryview], bool],
    ) -> tuple[int, int, list[tuple[int, bytes]]]:
        """What ``EraseStep(queue_id, limit, keep, below)`` would erase if planned
        now: ``(count, last lookup id, [(lookup_id, record)])`` with a copy of
        each record ``select`` picks (it sees a view valid only during the call)."""
        return read_erasable(
            self._env, self._catalog, queue_id, limit=limit, keep=keep, below=below, select=select
        )

    def confirmations(self, ordinal: int) -> list[Confirmation]:
        """The copies of this queue manager's message ``ordinal`` awaiting confirmation."""
        return read_confirmations(self._env, self._catalog, ordinal)

    def confirmation(self, ordinal: int, index: int) -> Confirmation | None:
        """One copy awaiting confirmation, or None."""
        return read_confirmation(self._env, self._catalog, ordinal, index)

    def awaited_confirmations(self) -> dict[str, int]:
        """How many copies await confirmation from each destination (an outgoing
        queue's name) that has any: one read of a database with an entry per
        such destination."""
        return read_awaited(self._env, self._catalog)

    def final_acks(
        self,
        *,
        source_qm: bytes | None = None,
        ordinal: int | None = None,
        after: bytes = b"",
        limit: int = 1000,
    ) -> list[PendingFinalAck]:
        """FinalAcks waiting to be sent, in key order past ``after`` (a key),
        for ``source_qm`` only if given, and about its message ``ordinal`` only
        if that is given too (this queue manager's, then those kept to pass on)."""
        return read_final_acks(
            self._env, self._catalog, source_qm=source_qm, ordinal=ordinal, after=after, limit=limit
        )

    def final_ack_count(self) -> int:
        """How many FinalAcks wait to be sent (one read of the database's size)."""
        with self._env.read("final_ack_count") as txn:
            return int(txn.stat(self._catalog.dbs.final_acks)["entries"])

    def get_list(self, name: str) -> DistributionList | None:
        """The distribution list of canonical name ``name``, or None."""
        return read_list(self._env, self._catalog, name)

    def lists(self) -> list[DistributionList]:
        """Every distribution list, by name."""
        return read_lists(self._env, self._catalog)

    def due_messages(
        self, *, before: float, limit: int, after: DueMessage | None = None
    ) -> list[DueMessage]:
        """Stored messages whose deadline is at or before ``before`` (unix seconds),
        in deadline order from past ``after``, at most ``limit`` (see ``ops.expiry``)."""
        return read_due(self._env, self._catalog, before=before, limit=limit, after=after)

    # ------------------------------------------------------------------ poison handling

    def message_counters(
        self, queue_id: int, lookup_ids: Iterable[int]
    ) -> dict[int, MessageCounters]:
        """The abort and move counters of those messages that have any (a message
        never aborted nor moved has none), by lookup id; one read transaction.

        Raises:
            StoreCorrupt: a record does not decode.
        """
        return read_counters(self._env, self._catalog, queue_id, lookup_ids)

    def retries_due(self, before: float | None, limit: int) -> list[tuple[int, int, int]]:
        """The first ``limit`` entries of the retry index, ``(due, queue_id,
        lookup_id)`` with ``due`` in milliseconds of unix time, soonest first;
        with ``before`` (unix seconds), only those due at or before it. Reads
        keys only.

        Raises:
            StoreCorrupt: a key is corrupt.
        """
        end = None if before is None else math.floor(before * 1000.0) + 1
        return read_retries_due(self._env, self._catalog, before=end, limit=limit)

    # ------------------------------------------------------------------ writes

    def committing(
        self, units: Sequence[Unit], *, now: float
    ) -> Generator[Plan, StoreError | None, list[UnitOutcome]]:
        """Drive the commit of a batch: yields plans to apply; returns the outcomes.

        The caller applies each yielded plan with :meth:`apply` and sends back
        ``None`` if that worked or the ``StoreError`` it raised. The
        generator returns one outcome per unit, in order.

        Raises:
            StoreError: the batch failed as a whole (a corrupt store, an I/O
                error); nothing of it was applied.
        """
        try:
            return (yield from self._committing(units, now=now))
        finally:
            if self._ballast_taken:
                # Only now: put back while the batch was being written, the
                # ballast would take the room just given to it.
                self._ballast_taken = False
                self.on_ballast_released()

    def _committing(
        self, units: Sequence[Unit], *, now: float
    ) -> Generator[Plan, StoreError | None, list[UnitOutcome]]:
        env, catalog = self._env, self._catalog
        plan = plan_batch(env, catalog, units, now=now, privileged=False)
        refused: dict[int, UnitOutcome] = {}
        reclaimed = False
        while True:
            failed = yield plan
            if failed is None:
                installed = iter(plan.install(catalog))
                if plan.privileged:
                    env.settle()
                # By position: one Unit object may stand in a batch more than once.
                return [refused.get(i) or next(installed) for i in range(len(units))]
            if not isinstance(failed, MapFull | StoreFull):
                raise failed
            if isinstance(failed, MapFull):
                # A dead process's reader slot would make every growth the last
                # of many: its pages are never reused (see clear_stale_readers).
                self._free_dead_readers()
                if env.grow(privileged=plan.privileged):
                    continue
            if not reclaimed:
                # Pages the last writes freed become reusable only two write
                # transactions later (and only once no reader can see them:
                # a dead process's reader slot is freed first): write those,
                # then try again.
                reclaimed = True
                self._free_dead_readers()
                if (yield from self._reclaim(now, privileged=plan.privileged)):
                    continue
            full = env.full_error("commit") if isinstance(failed, MapFull) else failed
            if plan.privileged:
                # Removals only, and still no room: give them the ballast's space.
                if isinstance(failed, StoreFull) and env.release_ballast():
                    self._ballast_taken = True
                    continue
                raise full
            # Only the first plan (all of ``units``) is not privileged.
            freeing = [unit for unit in units if unit.frees_space]
            for i, unit in enumerate(units):
                if not unit.frees_space:
                    refused[i] = UnitOutcome.failed(unit, full)
            if not freeing:
                return [refused[i] for i in range(len(units))]
            plan = plan_batch(env, catalog, freeing, now=now, privileged=True)

    def _reclaim(self, now: float, *, privileged: bool) -> Generator[Plan, StoreError | None, bool]:
        """Write two small transactions so that freed pages can be used; False if they
        could not be written either. They grow the map only as far as the plan they
        make room for may: pages they take in the headroom would stay taken."""
        for _ in range(2):
            plan = plan_batch(
                self._env, self._catalog, [Unit((ReclaimSpace(),))], now=now, privileged=True
            )
            while True:
                failed = yield plan
                if failed is None:
                    plan.install(self._catalog)
                    break
                if isinstance(failed, MapFull) and self._env.grow(privileged=privileged):
                    continue
                return False
        self._env.settle()
        return True

    def apply(self, plan: Plan) -> None:
        """Apply a plan from :meth:`committing`: one write transaction, synced.

        May run on a thread other than the owner's (one at a time).

        Raises:
            MapFull, StoreFull, StoreCorrupt, StoreError: see ``apply_plan``;
                send the error back into :meth:`committing`.
        """
        apply_plan(self._env, plan)

    def commit(self, units: Sequence[Unit], *, now: float) -> list[UnitOutcome]:
        """Plan, apply (on this thread) and install a batch: one write transaction, one sync.

        Returns:
            One outcome per unit, in order.

        Raises:
            StoreError: the batch failed as a whole; nothing applied.
        """
        driver = self.committing(units, now=now)
        plan = next(driver)
        while True:
            try:
                self.apply(plan)
            except StoreError as exc:
                step: StoreError | None = exc
            else:
                step = None
            try:
                plan = driver.send(step)
            except StopIteration as done:
                outcomes: list[UnitOutcome] = done.value
                return outcomes
