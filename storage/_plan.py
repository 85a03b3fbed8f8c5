"""Planning a batch of units into writes, applying them, and installing the result.

Theory of operation
-------------------
A batch goes through three steps:

1. :func:`plan_batch` runs on the store's owner thread. It opens one read
   transaction and gives each operation a :class:`PlanContext`: a view of
   the committed state (the catalog) with the batch's own changes laid
   over it. Operations check, then record *writes* (put a new key, put,
   delete an existing key, delete a key if it is there) and change queue
   counters, meta counters and outgoing states in the overlay.
   Savepoints (per atomic unit, per operation of a non-atomic unit, inside
   ``Attempt``) roll back both the writes and the overlay. At the end every
   queue the batch touched gets its record written once, and so does every
   outgoing state it changed and every meta counter. Nothing is written
   to LMDB here and nothing in the catalog changes. (The scratch state and
   the savepoints are in ``_overlay``.)
2. :func:`apply_plan` runs the writes in one write transaction and commits
   it. It touches nothing but LMDB and the plan, so it may run on another
   thread (the daemon's writer thread), as long as only one batch is
   applied at a time and no other batch is planned meanwhile. A write that
   does not match the plan (a "new" key that exists, a key to delete that
   does not) means the file and the catalog disagree: ``StoreCorrupt``, and
   nothing is applied.
3. :meth:`Plan.install` runs on the owner thread after the commit: the
   catalog takes the new records. A batch that failed is simply dropped;
   the catalog never saw it.

Because every result is decided in step 1, the expensive part of a commit
(the sync in step 2) can overlap whatever the owner thread does next, and
the write transaction itself holds no Python logic but a loop of puts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final, TypeAlias, cast

import lmdb

from ._catalog import NO_RESERVATION, Catalog, Databases
from ._env import Environment, Reading, Txn
from ._errors import InvalidRecord, MessageMissing, QueueMissing, StoreCorrupt
from ._keys import (
    MAX_LOOKUP_ID,
    META_HISTORY_COUNTER,
    META_NEXT_QUEUE_ID,
    META_ORDINAL_LIMIT,
    META_SEQUENCE_STAMP,
    counters_key,
    expiry_key,
    lookup_id_of,
    message_key,
    message_range,
    priority_key,
    queue_id_key,
    u32,
    u64,
)
from ._ops import OPERATION_ERRORS, SKIPPED, Failed, Result, Unit, UnitOutcome
from ._overlay import MISSING, QueueState, Savepoint
from ._records import (
    TIMED_MESSAGE_VERSION,
    OutgoingState,
    QueueKind,
    QueueRecord,
    encode_counters,
    encode_outgoing,
    encode_queue,
    message_deadline,
)

__all__ = ["Plan", "PlanContext", "QueueState", "apply_plan", "plan_batch"]

#: Kinds of write.
PUT: Final = 0
PUT_NEW: Final = 1
DELETE: Final = 2
#: Delete a key if it is there (forgetting that may already be done).
DISCARD: Final = 3
_MAX_U32: Final = 0xFFFFFFFF

#: One write: its kind, the database, the key and the value (``b""`` for a delete).
Write: TypeAlias = tuple[int, lmdb._Database, bytes, bytes]


class PlanContext:
    """What an operation sees and changes while a batch is planned.

    Queue state is read through :meth:`queue` / :meth:`live_queue` and
    changed only through the methods below, which keep savepoints able to
    undo them.
    """

    def __init__(self, catalog: Catalog, env: Environment, now: float) -> None:
        self.now = now
        self.dbs: Databases = catalog.dbs
        self._env = env
        self._reading: Reading | None = None
        self._txn: Txn | None = None
        self.writes: list[Write] = []
        self._catalog = catalog
        self._states: dict[object, object] = {}
        self._names: dict[object, object] = {}
        self._doomed: dict[object, object] = {}
        self._removed: dict[object, object] = {}
        self._meta: dict[object, object] = {}
        #: Queue id -> the OutgoingState the batch gave it, or None: deleted.
        self._outgoing: dict[object, object] = {}
        self._stack: list[Savepoint] = []
        self._stack.append(Savepoint(self))
        #: Queue ids whose record (or doomed record) the batch must write.
        self._touched: dict[object, object] = {}
        #: Queue id -> (bytes, pins) prepared transactions hold on it, as changed.
        self._reservations: dict[object, object] = {}
        #: Other modules' state of the batch (prepared transactions), by key.
        self._scratch: dict[object, object] = {}

    @property
    def txn(self) -> Txn:
        """A read transaction over the committed store, open until planning ends.

        Opened on first use (a batch of appends never needs one). Values it
        returns are memoryviews valid until then.
        """
        txn = self._txn
        if txn is None:
            self._reading = self._env.read("plan", buffers=True)
            txn = self._txn = self._reading.__enter__()
        return txn

    def close(self) -> None:
        """End the read transaction, if one was opened."""
        reading = self._reading
        if reading is not None:
            self._reading = None
            self._txn = None
            reading.__exit__(None, None)

    # ------------------------------------------------------------------ savepoints

    def savepoint(self) -> Savepoint:
        """A savepoint for a ``with`` block: changes made in it can be undone with
        ``roll_back()``; an exception from the block undoes them and propagates."""
        return Savepoint(self)

    def _set(self, mapping: dict[object, object], key: object, value: object) -> None:
        self._stack[-1].remember(mapping, key)
        mapping[key] = value

    # ------------------------------------------------------------------ queues

    def queue(self, queue_id: int) -> QueueState | None:
        """The queue as the batch sees it so far, or ``None`` if it does not exist."""
        state = self._states.get(queue_id)
        if state is None:
            record = self._catalog.by_id.get(queue_id)
            if record is None:
                return None
            state = QueueState(record)
            self._states[queue_id] = state  # unchanged, so nothing to undo
        assert isinstance(state, QueueState)
        return None if state.deleted else state

    def live_queue(self, queue_id: int) -> QueueState:
        """The queue, for reading.

        Raises:
            QueueMissing: it does not exist (or was deleted).
        """
        state = self.queue(queue_id)
        if state is None:
            raise QueueMissing(queue_id)
        return state

    def _writable(self, queue_id: int) -> QueueState:
        state = self.live_queue(queue_id)
        if self._stack[-1].remember(self._states, queue_id):
            state = state.copy()
            self._states[queue_id] = state
        self._set(self._touched, queue_id, True)
        return state

    def queue_named(self, name: str) -> QueueState | None:
        """The queue of that canonical name as the batch sees it, or ``None``."""
        queue_id = self._names.get(name, MISSING)
        if queue_id is MISSING:
            record = self._catalog.by_name.get(name)
            return None if record is None else self.queue(record.queue_id)
        return None if queue_id is None else self.queue(queue_id)  # type: ignore[arg-type]

    def allocate_queue_ids(self, count: int) -> int:
        """Reserve ``count`` consecutive new queue ids; returns the first.

        Raises:
            InvalidRecord: queue ids are exhausted.
        """
        first = self._meta.get(META_NEXT_QUEUE_ID, self._catalog.next_queue_id)
        assert isinstance(first, int)
        if first + count - 1 > 0xFFFFFFFF:
            msg = "queue ids are exhausted"
            raise InvalidRecord(msg)
        self._set(self._meta, META_NEXT_QUEUE_ID, first + count)
        return first

    def add_queue(self, record: QueueRecord) -> None:
        """Create a queue (its record is written at the end of the batch)."""
        self._set(self._states, record.queue_id, QueueState(record))
        self._set(self._names, record.name, record.queue_id)
        self._set(self._touched, record.queue_id, True)
        self.writes.append(
            (PUT_NEW, self.dbs.queue_ids, queue_id_key(record.queue_id), record.name.encode())
        )

    def doom(self, queue_id: int) -> None:
        """Delete a queue now; its messages stay to be erased by :meth:`erase`."""
        state = self._writable(queue_id)
        state.deleted = True
        self._set(self._names, state.record.name, None)
        self._set(self._doomed, queue_id, state)
        if state.record.kind is QueueKind.OUTGOING:
            self._set(self._outgoing, queue_id, None)

    def purge(self, queue_id: int) -> int:
        """Make every message of a queue invisible; returns how many there were."""
        state = self._writable(queue_id)
        count = state.depth
        state.purged_below = state.next_lookup_id
        state.erasing = state.erasing or count > 0
        state.depth = 0
        state.bytes = 0
        return count

    # ------------------------------------------------------------------ messages

    def message(self, queue_id: int, lookup_id: int) -> bytes | memoryview:
        """A committed message's record, as the batch sees it.

        Raises:
            MessageMissing: it is not there (or the batch already removed it).
        """
        if not 0 < lookup_id < MAX_LOOKUP_ID:  # MAX_LOOKUP_ID keys the queue's counters
            raise MessageMissing(queue_id, lookup_id)
        key = message_key(queue_id, lookup_id)
        if key in self._removed:
            raise MessageMissing(queue_id, lookup_id)
        data: bytes | None = self.txn.get(key, db=self.dbs.messages)
        if data is None:
            raise MessageMissing(queue_id, lookup_id)
        return data

    def append(self, queue_id: int, record: bytes, priority: int, size: int) -> int:
        """Append a message record; returns its lookup id."""
        state = self._writable(queue_id)
        lookup_id = state.next_lookup_id
        state.next_lookup_id = lookup_id + 1
        state.depth += 1
        state.bytes += size
        writes = self.writes
        writes.append((PUT_NEW, self.dbs.messages, message_key(queue_id, lookup_id), record))
        if not state.record.transactional:
            writes.append(
                (PUT, self.dbs.by_priority, priority_key(queue_id, priority, lookup_id), b"")
            )
        if record[0] == TIMED_MESSAGE_VERSION and (deadline := message_deadline(record)):
            writes.append((PUT, self.dbs.expiry, expiry_key(deadline, queue_id, lookup_id), b""))
        return lookup_id

    def remove(
        self, queue_id: int, lookup_id: int, priority: int, size: int, record: bytes | memoryview
    ) -> None:
        """Remove a committed message (``record``, read with :meth:`message`)."""
        state = self._writable(queue_id)
        if lookup_id >= state.purged_below:
            state.depth -= 1
            state.bytes -= size
        key = message_key(queue_id, lookup_id)
        self._set(self._removed, key, True)
        self.writes.append((DELETE, self.dbs.messages, key, b""))
        self.writes.append((DISCARD, self.dbs.message_counters, key[1:], b""))  # see _poison
        if not state.record.transactional:
            self.writes.append(
                (DELETE, self.dbs.by_priority, priority_key(queue_id, priority, lookup_id), b"")
            )
        self._forget_deadline(queue_id, lookup_id, record)

    def _forget_deadline(self, queue_id: int, lookup_id: int, record: bytes | memoryview) -> None:
        # DISCARD: the expiry step may have dropped the entry already.
        if record[0] == TIMED_MESSAGE_VERSION and (deadline := message_deadline(record)):
            key = expiry_key(deadline, queue_id, lookup_id)
            self.writes.append((DISCARD, self.dbs.expiry, key, b""))

    def erase(
        self, queue_id: int, limit: int, keep: frozenset[int], below: int | None = None
    ) -> tuple[int, bool]:
        """Erase up to ``limit`` messages of a deleted queue, or purged ones of a queue
        (those below ``below`` too, if it is given).

        Returns:
            How many were erased, and whether none are left to erase.
        """
        doomed = self._doomed.get(queue_id, MISSING)
        if doomed is MISSING:
            doomed = self._catalog.doomed.get(queue_id)
            doomed = None if doomed is None else QueueState(doomed)
        if doomed is not None:
            assert isinstance(doomed, QueueState)
            start, end = message_range(queue_id)
            if below is not None:
                end = min(end, message_key(queue_id, below))
            erased, more = self._erase_keys(queue_id, doomed, start, end, limit, frozenset())
            # Bounded by ``below``: whatever lies above it waits for a later step.
            more = (
                more
                or end < message_range(queue_id)[1]
                or doomed.next_lookup_id > self._committed_next_lookup_id(queue_id)
            )
            if not more:
                self._set(self._doomed, queue_id, None)
                self._set(self._touched, queue_id, True)
            return erased, not more
        state = self.queue(queue_id)
        if state is None or not state.erasing:
            return 0, True
        start = message_range(queue_id)[0]
        mark = state.purged_below if below is None else min(below, state.purged_below)
        end = message_key(queue_id, mark)
        erased, more = self._erase_keys(queue_id, state, start, end, limit, keep)
        more = (
            more
            or mark < state.purged_below  # purged since the step was built: a later step
            or state.purged_below > self._committed_next_lookup_id(queue_id)
        )
        if not more:
            self._writable(queue_id).erasing = False
        return erased, not more

    def _committed_next_lookup_id(self, queue_id: int) -> int:
        """The queue's next lookup id as committed: messages at or above it were
        appended by this batch, unseen by the read transaction, and are erased
        by a later step."""
        record = self._catalog.by_id.get(queue_id) or self._catalog.doomed.get(queue_id)
        return 1 if record is None else record.next_lookup_id

    def _erase_keys(
        self,
        queue_id: int,
        state: QueueState,
        start: bytes,
        end: bytes,
        limit: int,
        keep: frozenset[int],
    ) -> tuple[int, bool]:
        """Delete up to ``limit`` message keys in ``[start, end)`` not kept; True if more remain."""
        erased = 0
        more = False
        dbs = self.dbs
        by_priority = not state.record.transactional
        with self.txn.cursor(db=dbs.messages) as cursor:
            positioned = cursor.set_range(start)
            while positioned:
                key = bytes(cursor.key())
                if key >= end:
                    break
                lookup_id = lookup_id_of(key)
                if lookup_id in keep or key in self._removed:
                    more = more or lookup_id in keep
                    positioned = cursor.next()
                    continue
                if erased >= limit:
                    more = True
                    break
                self._set(self._removed, key, True)
                self.writes.append((DELETE, dbs.messages, key, b""))
                self.writes.append((DISCARD, dbs.message_counters, key[1:], b""))
                value = cursor.value()
                if by_priority:
                    priority = value[1]
                    self.writes.append(
                        (DELETE, dbs.by_priority, priority_key(queue_id, priority, lookup_id), b"")
                    )
                self._forget_deadline(queue_id, lookup_id, value)
                erased += 1
                positioned = cursor.next()
        return erased, more

    # ------------------------------------------------------------------ meta

    def reserve_ordinals(self, limit: int) -> None:
        """Raise the stored message-id ordinal limit to ``limit``."""
        current = self._meta.get(META_ORDINAL_LIMIT, self._catalog.ordinal_limit)
        assert isinstance(current, int)
        if limit > current:
            self._set(self._meta, META_ORDINAL_LIMIT, limit)

    def put_meta(self, key: bytes, value: bytes) -> None:
        """Write a key of ``meta`` (a setting)."""
        self.writes.append((PUT, self.dbs.meta, key, value))

    # ------------------------------------------------------------------ peering

    def outgoing_state(self, queue_id: int) -> OutgoingState | None:
        """An OUTGOING queue's sequence state as the batch sees it, or ``None``."""
        state = self._outgoing.get(queue_id, MISSING)
        if state is MISSING:
            return self._catalog.outgoing.get(queue_id)
        assert state is None or isinstance(state, OutgoingState)
        return state

    def set_outgoing_state(self, state: OutgoingState) -> None:
        """Give an OUTGOING queue its sequence state (written at the end of the batch).

        Raises:
            InvalidRecord: a field does not fit its width.
        """
        encode_outgoing(state)  # refuse it now, not when the batch is written
        self._set(self._outgoing, state.queue_id, state)

    def next_sequence_stamp(self) -> int:
        """A sequence timestamp for a new outgoing queue: ``max(int(now), last + 1)``.

        Raises:
            InvalidRecord: timestamps (u32) are exhausted.
        """
        last = self._meta.get(META_SEQUENCE_STAMP, self._catalog.sequence_stamp)
        assert isinstance(last, int)
        stamp = max(int(self.now), last + 1)
        if stamp > _MAX_U32:
            msg = "outgoing sequence timestamps are exhausted"
            raise InvalidRecord(msg)
        self._set(self._meta, META_SEQUENCE_STAMP, stamp)
        return stamp

    def next_history_counter(self) -> int:
        """The insertion counter of a new ``history`` entry (one more than the last)."""
        last = self._meta.get(META_HISTORY_COUNTER, self._catalog.history_counter)
        assert isinstance(last, int)
        self._set(self._meta, META_HISTORY_COUNTER, last + 1)
        return last + 1

    def put(self, db: lmdb._Database, key: bytes, value: bytes) -> None:
        """Write a key, whether it is there or not."""
        self.writes.append((PUT, db, key, value))

    def discard(self, db: lmdb._Database, key: bytes) -> None:
        """Delete a key if it is there."""
        self.writes.append((DISCARD, db, key, b""))

    # ------------------------------------------------------------------ prepared transactions

    def reservation(self, queue_id: int) -> tuple[int, int]:
        """``(bytes, pins)`` of a queue as the batch sees it: the quota bytes that
        prepared transactions reserve on it, and how many of them pin it."""
        held = self._reservations.get(queue_id, MISSING)
        if held is MISSING:
            return self._catalog.reservations.get(queue_id, NO_RESERVATION)
        assert isinstance(held, tuple)
        return held

    def reserve(self, queue_id: int, size: int, pins: int) -> None:
        """Add ``size`` bytes and ``pins`` to a queue's reservation (negative: release)."""
        held, pinned = self.reservation(queue_id)
        self._set(self._reservations, queue_id, (held + size, pinned + pins))

    def scratch(self, key: object) -> object:
        """What :meth:`set_scratch` kept under ``key`` in this batch, or ``MISSING``."""
        return self._scratch.get(key, MISSING)

    def set_scratch(self, key: object, value: object) -> None:
        """Keep ``value`` under ``key`` until the batch ends (savepoints undo it)."""
        self._set(self._scratch, key, value)

    # ------------------------------------------------------------------ the end of the batch

    def finish(self) -> _Install:
        """Write the records of every queue the batch touched, and the meta counters."""
        catalog = self._catalog
        dbs = self.dbs
        writes = self.writes
        records: list[QueueRecord] = []
        removed: list[QueueRecord] = []
        doomed_now: dict[int, QueueRecord | None] = {}
        for queue_id in self._touched:
            assert isinstance(queue_id, int)
            state = self._states.get(queue_id)
            in_doomed = self._doomed.get(queue_id, MISSING)
            committed = queue_id in catalog.by_id
            if isinstance(state, QueueState) and state.deleted:
                record = state.final_record()
                if committed:
                    writes.append((DELETE, dbs.queues, record.name.encode(), b""))
                    writes.append((DELETE, dbs.queue_ids, queue_id_key(queue_id), b""))
                    writes.append((DELETE, dbs.messages, counters_key(queue_id), b""))
                    removed.append(catalog.by_id[queue_id])
                else:  # created and deleted in one batch
                    self._drop_write(dbs.queue_ids, queue_id_key(queue_id))
                if in_doomed is not None:
                    writes.append((PUT, dbs.doomed, queue_id_key(queue_id), encode_queue(record)))
                    doomed_now[queue_id] = record
                elif queue_id in catalog.doomed:
                    writes.append((DELETE, dbs.doomed, queue_id_key(queue_id), b""))
                    doomed_now[queue_id] = None
            elif in_doomed is None and queue_id in catalog.doomed:
                writes.append((DELETE, dbs.doomed, queue_id_key(queue_id), b""))
                doomed_now[queue_id] = None
            elif isinstance(state, QueueState):
                record = state.final_record()
                if not committed:
                    name = record.name.encode()
                    writes.append((PUT_NEW, dbs.queues, name, encode_queue(record)))
                kind = PUT if committed else PUT_NEW
                writes.append((kind, dbs.messages, counters_key(queue_id), encode_counters(record)))
                records.append(record)
        next_queue_id = self._meta.get(META_NEXT_QUEUE_ID)
        if isinstance(next_queue_id, int):
            writes.append((PUT, dbs.meta, META_NEXT_QUEUE_ID, u32(next_queue_id)))
        ordinal_limit = self._meta.get(META_ORDINAL_LIMIT)
        if isinstance(ordinal_limit, int):
            writes.append((PUT, dbs.meta, META_ORDINAL_LIMIT, u64(ordinal_limit)))
        stamp = self._meta.get(META_SEQUENCE_STAMP)
        if isinstance(stamp, int):
            writes.append((PUT, dbs.meta, META_SEQUENCE_STAMP, u32(stamp)))
        history = self._meta.get(META_HISTORY_COUNTER)
        if isinstance(history, int):
            writes.append((PUT, dbs.meta, META_HISTORY_COUNTER, u64(history)))
        return _Install(
            records=records,
            removed=removed,
            doomed=doomed_now,
            outgoing=self._finish_outgoing(),
            next_queue_id=next_queue_id if isinstance(next_queue_id, int) else None,
            ordinal_limit=ordinal_limit if isinstance(ordinal_limit, int) else None,
            sequence_stamp=stamp if isinstance(stamp, int) else None,
            history_counter=history if isinstance(history, int) else None,
            reservations=cast("dict[int, tuple[int, int]]", self._reservations),
        )

    def _finish_outgoing(self) -> dict[int, OutgoingState | None]:
        """Write the outgoing states the batch changed; returns them for the catalog."""
        committed = self._catalog.outgoing
        db = self.dbs.outgoing
        changed: dict[int, OutgoingState | None] = {}
        for queue_id, state in self._outgoing.items():
            assert isinstance(queue_id, int)
            if isinstance(state, OutgoingState):
                self.writes.append((PUT, db, queue_id_key(queue_id), encode_outgoing(state)))
                changed[queue_id] = state
            elif queue_id in committed:  # deleted (one created in this batch was never written)
                self.writes.append((DELETE, db, queue_id_key(queue_id), b""))
                changed[queue_id] = None
        return changed

    def _drop_write(self, db: lmdb._Database, key: bytes) -> None:
        self.writes[:] = [w for w in self.writes if not (w[1] is db and w[2] == key)]


@dataclasses.dataclass(slots=True)
class _Install:
    """What the catalog takes once a plan's writes have committed."""

    records: list[QueueRecord]
    removed: list[QueueRecord]
    doomed: dict[int, QueueRecord | None]
    outgoing: dict[int, OutgoingState | None]
    next_queue_id: int | None
    ordinal_limit: int | None
    sequence_stamp: int | None
    history_counter: int | None
    reservations: dict[int, tuple[int, int]]


@dataclasses.dataclass(slots=True, eq=False)
class Plan:
    """A planned batch: the writes to apply and what each unit's outcome will be."""

    units: Sequence[Unit]
    writes: list[Write]
    outcomes: list[UnitOutcome]
    #: Every unit only frees space: it may use the headroom kept for removals.
    privileged: bool
    _install: _Install

    def install(self, catalog: Catalog) -> list[UnitOutcome]:
        """Put the committed result in the catalog; returns the outcomes."""
        install = self._install
        catalog.install(install.records, install.removed, install.outgoing)
        catalog.install_reservations(install.reservations)
        for queue_id, record in install.doomed.items():
            if record is None:
                catalog.doomed.pop(queue_id, None)
            else:
                catalog.doomed[queue_id] = record
        if install.next_queue_id is not None:
            catalog.next_queue_id = install.next_queue_id
        if install.ordinal_limit is not None:
            catalog.ordinal_limit = install.ordinal_limit
        if install.sequence_stamp is not None:
            catalog.sequence_stamp = install.sequence_stamp
        if install.history_counter is not None:
            catalog.history_counter = install.history_counter
        return self.outcomes


def plan_batch(
    env: Environment, catalog: Catalog, units: Sequence[Unit], *, now: float, privileged: bool
) -> Plan:
    """Plan ``units`` (in order) as one batch; see the module docstring.

    Raises:
        StoreError: a batch-level failure reading the store (nothing planned).
    """
    outcomes: list[UnitOutcome] = []
    context = PlanContext(catalog, env, now)
    try:
        for unit in units:
            outcomes.append(_plan_unit(context, unit))
        install = context.finish()
    finally:
        context.close()
    return Plan(
        units=units,
        writes=context.writes,
        outcomes=outcomes,
        privileged=privileged,
        _install=install,
    )


def _plan_unit(context: PlanContext, unit: Unit) -> UnitOutcome:
    results: list[Result] = []
    if unit.atomic:
        try:
            with context.savepoint():
                for op in unit.ops:
                    results.append(op.plan(context))
        except OPERATION_ERRORS as exc:
            failed = len(results)
            return UnitOutcome(
                (SKIPPED,) * failed + (Failed(exc),) + (SKIPPED,) * (len(unit.ops) - failed - 1)
            )
        return UnitOutcome(tuple(results))
    for op in unit.ops:
        try:
            with context.savepoint():
                results.append(op.plan(context))
        except OPERATION_ERRORS as exc:
            results.append(Failed(exc))
    return UnitOutcome(tuple(results))


def apply_plan(env: Environment, plan: Plan) -> None:
    """Apply a plan's writes in one write transaction and commit it.

    Raises:
        MapFull: it did not fit in the map; grow the map and apply again.
        StoreFull: the disk is full; nothing applied.
        StoreCorrupt: the file does not match the plan; nothing applied.
        StoreError: any other failure; nothing applied.
    """
    writes = plan.writes
    disagree = "the store and its catalog disagree"

    def work(txn: Txn) -> None:
        put = txn.put
        delete = txn.delete
        for kind, db, key, value in writes:
            if kind == PUT_NEW:
                if not put(key, value, db=db, overwrite=False):
                    msg = f"key {key.hex()} is already in the store: {disagree}"
                    raise StoreCorrupt(msg)
            elif kind == PUT:
                put(key, value, db=db)
            elif kind == DISCARD:
                delete(key, db=db)
            elif not delete(key, db=db):
                msg = f"key {key.hex()} to delete is not in the store: {disagree}"
                raise StoreCorrupt(msg)

    env.write("commit", work, privileged=plan.privileged)
