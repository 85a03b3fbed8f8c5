"""The context a batch is planned in: its queues and messages, laid over the catalog.

Theory of operation
-------------------
``plan.plan_batch`` gives every operation of a batch one :class:`PlanContext`:
a view of the committed state (the catalog, and a read transaction over
the file opened on first use) with the batch's own changes laid over it.
An operation reads what it needs through it, checks, then changes the
batch's state only through it, so that savepoints (per atomic unit, per
operation of a non-atomic unit, inside ``Attempt``) can undo the change.
The context is the core's bookkeeping of queues and messages:

* queues: a :class:`~storage.overlay.QueueState` per queue the batch looked
  at, copied on its first change under a savepoint; names, deletions
  (*doomed* queues, whose messages are erased in steps) and new queue ids;
* messages: appends give the next lookup id and write the message, its
  priority key (non-transactional queues) and its expiry key (a message
  with a deadline); removals and erase steps delete all three, the
  message's poison counters (``ops.poison``) and, for an outgoing entry
  appended with a relay id, its ``relayed`` key (``ops.peering``), and count
  the queue down;
* meta counters: the next queue id and the message-id ordinal limit;
* counts: appends the layer above asked to count (``CountedAppend``), kept in
  memory since the store opened and added only when the batch commits.

What the other concerns keep is in parts the context holds and shares its
savepoints with: :attr:`PlanContext.reservations` (what prepared
transactions hold on queues, ``reservations``), :attr:`PlanContext.peering`
(outgoing states and peering's counters, ``peering_state``), and the
scratch state of the operation modules (``overlay``); a record of a named
database the batch wrote is seen by the rest of the batch through
:meth:`PlanContext.record` / :meth:`PlanContext.write_record`.

:meth:`PlanContext.finish` ends the batch: every queue it touched gets its
record (or its deletion) written once, and so does every meta counter and
outgoing state it changed; it returns the :class:`Install` the catalog takes
once the writes have committed. Nothing here writes to LMDB or changes the
catalog. The context never imports an operation: operations import it.
"""

from __future__ import annotations

import dataclasses
from typing import Final

import lmdb

from .catalog import Catalog, Databases
from .environment import Environment, Reading, Txn, keys_between
from .errors import InvalidRecord, MessageMissing, QueueMissing
from .keys import (
    MAX_LOOKUP_ID,
    MAX_QUEUE_ID,
    META_NEXT_QUEUE_ID,
    META_ORDINAL_LIMIT,
    counters_key,
    expiry_key,
    lookup_id_of,
    message_key,
    message_range,
    priority_key,
    queue_id_key,
    relayed_key,
    u32,
    u64,
)
from .overlay import DELETE, DISCARD, MISSING, PUT, PUT_NEW, Changes, Overlay, QueueState
from .peering_state import OutgoingState, PeeringState
from .records import (
    TIMED_MESSAGE_VERSION,
    QueueKind,
    QueueRecord,
    encode_counters,
    encode_queue,
    message_deadline,
    message_relay_id,
)
from .reservations import Reservations

__all__ = ["Install", "PlanContext"]

#: The scratch tag of the records :meth:`PlanContext.write_record` wrote.
_RECORD: Final = "record"


class PlanContext(Overlay):
    """What an operation sees and changes while a batch is planned.

    Queue state is read through :meth:`queue` / :meth:`live_queue` and
    changed only through the methods below, which keep savepoints able to
    undo them.
    """

    def __init__(self, catalog: Catalog, env: Environment, now: float) -> None:
        super().__init__()
        self.now = now
        self.dbs: Databases = catalog.dbs
        self._env = env
        self._reading: Reading | None = None
        self._txn: Txn | None = None
        self._catalog = catalog
        self._states: Changes = {}
        self._names: Changes = {}
        self._doomed: Changes = {}
        self._removed: Changes = {}
        self._meta: Changes = {}
        #: Queue ids whose record (or doomed record) the batch must write.
        self._touched: Changes = {}
        #: Counted appends of the batch, by key (``CountedAppend``).
        self._counts: Changes = {}
        #: What prepared transactions hold on queues, as the batch sees it.
        self.reservations = Reservations(self, catalog.reservations)
        #: The outgoing states and peering's counters, as the batch sees them.
        self.peering = PeeringState(
            self,
            catalog.outgoing,
            sequence_stamp=catalog.sequence_stamp,
            history_counter=catalog.history_counter,
        )

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
        """End the planning: the read transaction, if one was opened, and the
        references back to the context from its root savepoint and its parts.
        Unlinked, a batch's scratch state is freed with the context's last
        reference instead of by the garbage collector (a pass every few
        batches, most of a pass's work)."""
        reading = self._reading
        if reading is not None:
            self._reading = None
            self._txn = None
            reading.__exit__(None, None)
        self._stack.clear()
        parts = vars(self)
        parts.pop("reservations", None)
        parts.pop("peering", None)

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

    def queue_ids(self) -> list[int]:
        """The ids of every queue of the committed catalog (not deleted by the batch)."""
        return [queue_id for queue_id in self._catalog.by_id if self.queue(queue_id) is not None]

    def live_queue(self, queue_id: int) -> QueueState:
        """The queue, for reading.

        Raises:
            QueueMissing: it does not exist (or was deleted).
        """
        state = self.queue(queue_id)
        if state is None:
            raise QueueMissing(queue_id)
        return state

    def writable(self, queue_id: int) -> QueueState:
        """The queue, to change in place (copied first under the current savepoint).

        Raises:
            QueueMissing: it does not exist (or was deleted).
        """
        state = self.live_queue(queue_id)
        if self.remember(self._states, queue_id):
            state = state.copy()
            self._states[queue_id] = state
        self.change(self._touched, queue_id, True)
        return state

    def queue_named(self, name: str) -> QueueState | None:
        """The queue of that canonical name as the batch sees it, or ``None``."""
        queue_id = self._names.get(name, MISSING)
        if queue_id is MISSING:
            record = self._catalog.by_name.get(name)
            return None if record is None else self.queue(record.queue_id)
        return None if queue_id is None else self.queue(queue_id)

    def allocate_queue_ids(self, count: int) -> int:
        """Reserve ``count`` consecutive new queue ids; returns the first.

        Raises:
            InvalidRecord: queue ids are exhausted.
        """
        first = self._meta.get(META_NEXT_QUEUE_ID, self._catalog.next_queue_id)
        assert isinstance(first, int)
        if first + count - 1 > MAX_QUEUE_ID:
            msg = "queue ids are exhausted"
            raise InvalidRecord(msg)
        self.change(self._meta, META_NEXT_QUEUE_ID, first + count)
        return first

    def add_queue(self, record: QueueRecord) -> None:
        """Create a queue (its record is written at the end of the batch)."""
        self.change(self._states, record.queue_id, QueueState(record))
        self.change(self._names, record.name, record.queue_id)
        self.change(self._touched, record.queue_id, True)
        self.writes.append(
            (PUT_NEW, self.dbs.queue_ids, queue_id_key(record.queue_id), record.name.encode())
        )

    def doom(self, queue_id: int) -> None:
        """Delete a queue now; its messages stay to be erased by :meth:`erase`."""
        state = self.writable(queue_id)
        state.deleted = True
        self.change(self._names, state.record.name, None)
        self.change(self._doomed, queue_id, state)
        if state.record.kind is QueueKind.OUTGOING:
            self.peering.forget(queue_id)

    def purge(self, queue_id: int) -> int:
        """Make every message of a queue invisible; returns how many there were."""
        state = self.writable(queue_id)
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
        state = self.writable(queue_id)
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

    def pass_lookup_id(self, queue_id: int) -> int:
        """The queue's next lookup id, for a message handed to a receive without
        being stored (``ops.messages.HandedMessage``): the next append gets the one after."""
        state = self.writable(queue_id)
        lookup_id = state.next_lookup_id
        state.next_lookup_id = lookup_id + 1
        return lookup_id

    def remove(
        self, queue_id: int, lookup_id: int, priority: int, size: int, record: bytes | memoryview
    ) -> None:
        """Remove a committed message (``record``, read with :meth:`message`)."""
        state = self.writable(queue_id)
        if lookup_id >= state.purged_below:
            state.depth -= 1
            state.bytes -= size
        self._delete(state, message_key(queue_id, lookup_id), lookup_id, priority, record)

    def _delete(
        self,
        state: QueueState,
        key: bytes,
        lookup_id: int,
        priority: int,
        record: bytes | memoryview,
    ) -> None:
        """Write the deletion of a stored message: its record, its counters (see
        ``ops.poison``), its priority key, its expiry key and its ``relayed`` key."""
        queue_id = state.record.queue_id
        dbs = self.dbs
        writes = self.writes
        self.change(self._removed, key, True)
        writes.append((DELETE, dbs.messages, key, b""))
        writes.append((DISCARD, dbs.message_counters, key[1:], b""))
        if not state.record.transactional:
            writes.append(
                (DELETE, dbs.by_priority, priority_key(queue_id, priority, lookup_id), b"")
            )
        # DISCARD: the expiry step may have dropped the entry already.
        if record[0] == TIMED_MESSAGE_VERSION and (deadline := message_deadline(record)):
            writes.append((DISCARD, dbs.expiry, expiry_key(deadline, queue_id, lookup_id), b""))
        if relay_id := message_relay_id(record):
            writes.append((DISCARD, dbs.relayed, relayed_key(queue_id, relay_id, lookup_id), b""))

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
                self.change(self._doomed, queue_id, None)
                self.change(self._touched, queue_id, True)
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
            self.writable(queue_id).erasing = False
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
        with self.txn.cursor(db=self.dbs.messages) as cursor:
            for key in keys_between(cursor, start, end):
                lookup_id = lookup_id_of(key)
                if lookup_id in keep or key in self._removed:
                    more = more or lookup_id in keep
                    continue
                if erased >= limit:
                    more = True
                    break
                value = cursor.value()
                self._delete(state, key, lookup_id, value[1], value)
                erased += 1
        return erased, more

    def count(self, key: tuple[object, ...]) -> None:
        """Count one append under ``key``: added to the store's counts if the batch
        commits (``Store.counts``), undone with the savepoint it was made under."""
        self.change(self._counts, key, self._counts.get(key, 0) + 1)

    # ------------------------------------------------------------------ meta

    def ordinal_limit(self) -> int:
        """The stored message-id ordinal limit, as the batch sees it."""
        current = self._meta.get(META_ORDINAL_LIMIT, self._catalog.ordinal_limit)
        assert isinstance(current, int)
        return current

    def reserve_ordinals(self, limit: int) -> None:
        """Raise the stored message-id ordinal limit to ``limit``."""
        if limit > self.ordinal_limit():
            self.change(self._meta, META_ORDINAL_LIMIT, limit)

    def return_ordinals(self, limit: int) -> None:
        """Lower the stored message-id ordinal limit to ``limit``."""
        if limit < self.ordinal_limit():
            self.change(self._meta, META_ORDINAL_LIMIT, limit)

    def record(self, db: lmdb._Database, key: bytes) -> bytes | None:
        """A record of a named database as the batch sees it: as the batch wrote
        it with :meth:`write_record` (None: deleted), else the committed one."""
        seen = self.scratch((_RECORD, db, key))
        if isinstance(seen, bytes) or seen is None:
            return seen
        value: bytes | None = self.txn.get(key, db=db)
        return value

    def write_record(self, db: lmdb._Database, key: bytes, value: bytes | None) -> None:
        """Write (None: delete) a record of a named database; the batch sees it
        from now on (:meth:`record`)."""
        if value is None:
            self.discard(db, key)
        else:
            self.put(db, key, value)
        self.set_scratch((_RECORD, db, key), value)

    def put_meta(self, key: bytes, value: bytes) -> None:
        """Write a key of ``meta`` (a setting)."""
        self.writes.append((PUT, self.dbs.meta, key, value))

    # ------------------------------------------------------------------ the end of the batch

    def finish(self) -> Install:
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
                    self.drop_write(dbs.queue_ids, queue_id_key(queue_id))
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
        outgoing, stamp, history = self.peering.finish(dbs.meta, dbs.outgoing)
        return Install(
            records=records,
            removed=removed,
            doomed=doomed_now,
            outgoing=outgoing,
            next_queue_id=next_queue_id if isinstance(next_queue_id, int) else None,
            ordinal_limit=ordinal_limit if isinstance(ordinal_limit, int) else None,
            sequence_stamp=stamp,
            history_counter=history,
            reservations=self.reservations.changed(),
            counts=self._counts,
        )


@dataclasses.dataclass(slots=True)
class Install:
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
    counts: dict[tuple[object, ...], int]

    def apply(self, catalog: Catalog) -> None:
        """Put the committed result in the catalog."""
        catalog.install(self.records, self.removed, self.outgoing)
        catalog.install_reservations(self.reservations)
        if self.counts:
            counts = catalog.counts
            for key, added in self.counts.items():
                counts[key] = counts.get(key, 0) + added
        for queue_id, record in self.doomed.items():
            if record is None:
                catalog.doomed.pop(queue_id, None)
            else:
                catalog.doomed[queue_id] = record
        if self.next_queue_id is not None:
            catalog.next_queue_id = self.next_queue_id
        if self.ordinal_limit is not None:
            catalog.ordinal_limit = self.ordinal_limit
        if self.sequence_stamp is not None:
            catalog.sequence_stamp = self.sequence_stamp
        if self.history_counter is not None:
            catalog.history_counter = self.history_counter
