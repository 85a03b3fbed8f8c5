"""The catalog: the named databases, and the committed state the store keeps in memory.

Theory of operation
-------------------
Opening reads only ``meta``, ``queues``, ``doomed``, ``outgoing``, each
queue's counters (next lookup id, depth, bytes, purge mark; kept in
``messages`` beside the queue's messages and rewritten in the same write
transaction as the messages they count) and the header of each prepared
transaction, so start-up costs O(number of queues + prepared transactions),
never O(number of messages), and the counters are exactly as durable as
the messages. From the headers it rebuilds, per queue, the quota bytes
prepared transactions reserve on it and how many of them pin it
(``reservations``).

Schema versions. Opening creates every named database that is missing, in
the same write transaction that reads ``meta``. A store of schema 2 (before
peering) lacks ``outgoing``, ``incoming``, ``history`` and two meta
counters; one of schema 3 (before prepared transactions) lacks
``prepared``, ``outcomes`` and ``outcome_times``; one of schema 4 (before
the expiry index) lacks ``expiry``, ``confirmations``, ``final_acks`` and
``lists``; one of schema 5 (before poison handling) lacks
``message_counters`` and ``retry_due`` (development builds of 23 November 2026
wrote a schema 5 with them, and with subqueues of kind 5, which opening
retypes: ``_retype_early_subqueues``); one of schema 7 (before the index of
relayed entries) lacks ``relayed``; one of schema 8 (before outgoing queues
were removed when idle) lacks ``retired_sequences``; one of schema 9 (before
the count of copies awaiting confirmation by destination) lacks
``awaited_confirmations``, which opening fills from ``confirmations`` (one
read per copy kept, never per message: ``ops.confirmations.count_awaited``).
Schema 11 adds no database: its stores may hold incoming states of format 3
and confirmation records of version 2, which a release of schema 10 cannot
read, so a schema 10 store is only marked 11 (and its count made again).
That transaction creates what is missing and writes the current version
(:data:`SCHEMA_VERSION`, 11), so the migration is atomic and otherwise costs
nothing per message (the entries a schema 7
store already holds for relaying are not indexed: see ``ops.peering``). Schema 7 keys each
``incoming`` stream state by source GUID, *sequence timestamp* and queue key
(before: source GUID and queue key), so that the outgoing queues of one
source that reach one queue under two names are two streams; opening a
store of schema 3 to 6 rewrites every ``incoming`` key in that same
transaction, with the timestamp of the state's stored sequence id
(``sequence_id >> 32``): bounded by the number of streams. A state whose new
key would be longer than LMDB allows (a queue key of 492 to 495 bytes) is
dropped: no write of that stream could store it any more. Any other version
is refused with ``SchemaMismatch``.

The :class:`Catalog` then serves the committed records from memory. They are
immutable values; a write plans new ones while its transaction is prepared,
and :meth:`Catalog.install` puts them in place only after LMDB has
committed, so an aborted write changes nothing here. Only the owner's thread
touches the catalog.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import lmdb

from .environment import Environment, Txn
from .errors import SchemaMismatch, StoreCorrupt
from .keys import (
    DB_AWAITED,
    DB_BY_PRIORITY,
    DB_CONFIRMATIONS,
    DB_DOOMED,
    DB_EXPIRY,
    DB_FINAL_ACKS,
    DB_HISTORY,
    DB_INCOMING,
    DB_LISTS,
    DB_MESSAGE_COUNTERS,
    DB_MESSAGES,
    DB_META,
    DB_OUTCOME_TIMES,
    DB_OUTCOMES,
    DB_OUTGOING,
    DB_PREPARED,
    DB_PREPARED_COPIES,
    DB_QUEUE_IDS,
    DB_QUEUES,
    DB_RELAYED,
    DB_RETIRED,
    DB_RETRY_DUE,
    MAX_KEY_SIZE,
    META_HISTORY_COUNTER,
    META_NEXT_QUEUE_ID,
    META_ORDINAL_LIMIT,
    META_QM_GUID,
    META_SCHEMA_VERSION,
    META_SEQUENCE_STAMP,
    QM_GUID_SIZE,
    counters_key,
    u32,
    u64,
    unpack_u32,
    unpack_u64,
)
from .peering_state import OutgoingState, decode_outgoing
from .records import QueueKind, QueueRecord, decode_counters, decode_queue, encode_queue
from .reservations import NO_RESERVATION, drop_orphan_copies, load_reservations

__all__ = ["SCHEMA_VERSION", "Catalog", "CountAwaited", "Databases"]

#: Fills ``awaited_confirmations`` from ``confirmations`` (their handles), in the
#: opening write transaction of a store of an older schema (the records are
#: ``ops.confirmations``'s: ``count_awaited``).
CountAwaited = Callable[[Txn, lmdb._Database, lmdb._Database], None]

#: Schema version this code writes and understands.
SCHEMA_VERSION: Final = 11
#: The schema before peering, migrated at opening.
_SCHEMA_BEFORE_PEERING: Final = 2
#: The schema before prepared transactions, migrated at opening.
_SCHEMA_BEFORE_PREPARED: Final = 3
#: The schema before the expiry index, migrated at opening.
_SCHEMA_BEFORE_EXPIRY: Final = 4
#: The schema before poison handling (message counters, the retry index), migrated at opening.
_SCHEMA_BEFORE_POISON: Final = 5
#: The schema before incoming streams were keyed by sequence timestamp, migrated at opening.
_SCHEMA_BEFORE_STREAM_STAMPS: Final = 6
#: The schema before the index of relayed entries, migrated at opening.
_SCHEMA_BEFORE_RELAY_INDEX: Final = 7
#: The schema before the retired sequences of removed outgoing queues, migrated at opening.
_SCHEMA_BEFORE_RETIRED: Final = 8
#: The schema before the count of copies awaiting confirmation by destination, migrated at opening.
_SCHEMA_BEFORE_AWAITED: Final = 9
#: The schema before incoming states could name a router (format 3) and copies
#: awaiting confirmation the queue manager that acknowledged them (version 2):
#: nothing to migrate, but a release of schema 10 cannot read those records.
_SCHEMA_BEFORE_BOUND_ACKS: Final = 10


@dataclass(frozen=True, slots=True)
class Databases:
    """The handles of the named databases (see ``keys``)."""

    meta: lmdb._Database
    queues: lmdb._Database
    queue_ids: lmdb._Database
    doomed: lmdb._Database
    messages: lmdb._Database
    by_priority: lmdb._Database
    outgoing: lmdb._Database
    incoming: lmdb._Database
    history: lmdb._Database
    prepared: lmdb._Database
    outcomes: lmdb._Database
    outcome_times: lmdb._Database
    message_counters: lmdb._Database
    retry_due: lmdb._Database
    expiry: lmdb._Database
    confirmations: lmdb._Database
    awaited: lmdb._Database
    final_acks: lmdb._Database
    lists: lmdb._Database
    relayed: lmdb._Database
    retired: lmdb._Database
    prepared_copies: lmdb._Database


class Catalog:
    """Committed queues, doomed queues, outgoing states and meta values, in memory."""

    def __init__(self, env: Environment, count_awaited: CountAwaited) -> None:
        self._count_awaited = count_awaited
        self.by_name: dict[str, QueueRecord] = {}
        self.by_id: dict[int, QueueRecord] = {}
        #: Deleted queues whose messages are still being erased, by id.
        self.doomed: dict[int, QueueRecord] = {}
        self.next_queue_id = 1
        #: Message-id ordinals below this may have been used.
        self.ordinal_limit = 1
        #: The OutgoingState of every OUTGOING queue, by queue id.
        self.outgoing: dict[int, OutgoingState] = {}
        #: The last sequence timestamp given to an outgoing queue.
        self.sequence_stamp = 0
        #: The last insertion counter given to a ``history`` entry.
        self.history_counter = 0
        #: Queue id -> (quota bytes reserved, pins) held by prepared transactions;
        #: queues they do not use are absent.
        self.reservations: dict[int, tuple[int, int]] = {}
        #: Appends committed since the store opened, by the key they were counted
        #: under (``CountedAppend``); in memory only.
        self.counts: dict[tuple[object, ...], int] = {}
        self.qm_guid = uuid.UUID(int=0)
        self._env = env
        # Privileged: a store already past an ordinary limit lowered since
        # (store.max_map_size) must still open, so that it can be emptied.
        self.dbs = env.write_growing("open store", self._load, privileged=True)

    def _load(self, txn: Txn) -> Databases:
        # The named databases are opened in a write transaction so that a new
        # environment gets them and its meta values in one commit.
        env = self._env
        dbs = Databases(
            meta=env.open_db(txn, DB_META),
            queues=env.open_db(txn, DB_QUEUES),
            queue_ids=env.open_db(txn, DB_QUEUE_IDS),
            doomed=env.open_db(txn, DB_DOOMED),
            messages=env.open_db(txn, DB_MESSAGES),
            by_priority=env.open_db(txn, DB_BY_PRIORITY),
            outgoing=env.open_db(txn, DB_OUTGOING),
            incoming=env.open_db(txn, DB_INCOMING),
            history=env.open_db(txn, DB_HISTORY),
            prepared=env.open_db(txn, DB_PREPARED),
            outcomes=env.open_db(txn, DB_OUTCOMES),
            outcome_times=env.open_db(txn, DB_OUTCOME_TIMES),
            message_counters=env.open_db(txn, DB_MESSAGE_COUNTERS),
            retry_due=env.open_db(txn, DB_RETRY_DUE),
            expiry=env.open_db(txn, DB_EXPIRY),
            confirmations=env.open_db(txn, DB_CONFIRMATIONS),
            awaited=env.open_db(txn, DB_AWAITED),
            final_acks=env.open_db(txn, DB_FINAL_ACKS),
            lists=env.open_db(txn, DB_LISTS),
            relayed=env.open_db(txn, DB_RELAYED),
            retired=env.open_db(txn, DB_RETIRED),
            prepared_copies=env.open_db(txn, DB_PREPARED_COPIES),
        )
        raw_version = txn.get(META_SCHEMA_VERSION, db=dbs.meta)
        if raw_version is None:
            self._create(txn, dbs)
        else:
            version = self._check_version(raw_version)
            if version == _SCHEMA_BEFORE_PEERING:
                self._migrate_to_peering(txn, dbs)
            elif version < _SCHEMA_BEFORE_RELAY_INDEX:
                _migrate_incoming_keys(txn, dbs)
            if version == _SCHEMA_BEFORE_POISON:
                _retype_early_subqueues(txn, dbs)
            if version != SCHEMA_VERSION:
                # The databases added since that schema were just created (empty);
                # the count of copies by destination is made from the copies.
                self._count_awaited(txn, dbs.confirmations, dbs.awaited)
                txn.put(META_SCHEMA_VERSION, u32(SCHEMA_VERSION), db=dbs.meta)
            self._read_meta(txn, dbs)
        self.by_name.clear()
        self.by_id.clear()
        self.doomed.clear()
        self.outgoing.clear()
        for _, data in _items(txn, dbs.queues):
            record = decode_queue(data)
            counters = txn.get(counters_key(record.queue_id), db=dbs.messages)
            if counters is None:
                msg = f"queue {record.name!r} has no counters"
                raise StoreCorrupt(msg)
            record = decode_counters(record, counters)
            self.by_name[record.name] = record
            self.by_id[record.queue_id] = record
        for _, data in _items(txn, dbs.doomed):
            record = decode_queue(data)
            self.doomed[record.queue_id] = record
        self._load_outgoing(txn, dbs)
        self.reservations = load_reservations(txn, dbs.prepared)
        drop_orphan_copies(txn, dbs.prepared, dbs.prepared_copies)
        return dbs

    def _load_outgoing(self, txn: Txn, dbs: Databases) -> None:
        for key, data in _items(txn, dbs.outgoing):
            queue_id = unpack_u32(key) if len(key) == 4 else None
            record = None if queue_id is None else self.by_id.get(queue_id)
            if queue_id is None or record is None or record.kind is not QueueKind.OUTGOING:
                msg = f"outgoing state {bytes(key).hex()} belongs to no outgoing queue"
                raise StoreCorrupt(msg)
            self.outgoing[queue_id] = decode_outgoing(queue_id, data)
        for record in self.by_id.values():
            if record.kind is QueueKind.OUTGOING and record.queue_id not in self.outgoing:
                msg = f"outgoing queue {record.name!r} has no outgoing state"
                raise StoreCorrupt(msg)

    def _create(self, txn: Txn, dbs: Databases) -> None:
        if any(True for _ in _items(txn, dbs.queues)):
            msg = "store has queues but no schema version"
            raise StoreCorrupt(msg)
        self.qm_guid = uuid.uuid4()
        self.next_queue_id = 1
        self.ordinal_limit = 1
        self.sequence_stamp = 0
        self.history_counter = 0
        txn.put(META_SCHEMA_VERSION, u32(SCHEMA_VERSION), db=dbs.meta)
        txn.put(META_QM_GUID, self.qm_guid.bytes, db=dbs.meta)
        txn.put(META_NEXT_QUEUE_ID, u32(1), db=dbs.meta)
        txn.put(META_ORDINAL_LIMIT, u64(1), db=dbs.meta)
        txn.put(META_SEQUENCE_STAMP, u32(0), db=dbs.meta)
        txn.put(META_HISTORY_COUNTER, u64(0), db=dbs.meta)

    @staticmethod
    def _check_version(raw: bytes) -> int:
        """The stored schema version, if this code reads it (perhaps after migrating)."""
        try:
            version = unpack_u32(raw)
        except Exception as exc:
            msg = "schema version in meta is not a u32"
            raise StoreCorrupt(msg) from exc
        if version not in (
            SCHEMA_VERSION,
            _SCHEMA_BEFORE_BOUND_ACKS,
            _SCHEMA_BEFORE_AWAITED,
            _SCHEMA_BEFORE_RETIRED,
            _SCHEMA_BEFORE_RELAY_INDEX,
            _SCHEMA_BEFORE_STREAM_STAMPS,
            _SCHEMA_BEFORE_POISON,
            _SCHEMA_BEFORE_EXPIRY,
            _SCHEMA_BEFORE_PREPARED,
            _SCHEMA_BEFORE_PEERING,
        ):
            raise SchemaMismatch(version, SCHEMA_VERSION)
        return version

    @staticmethod
    def _migrate_to_peering(txn: Txn, dbs: Databases) -> None:
        """Schema 2 -> 3: the peering databases were just created (empty); add the
        meta counters, in the opening write transaction (which then writes the
        new version)."""
        txn.put(META_SEQUENCE_STAMP, u32(0), db=dbs.meta)
        txn.put(META_HISTORY_COUNTER, u64(0), db=dbs.meta)

    def _read_meta(self, txn: Txn, dbs: Databases) -> None:
        guid = txn.get(META_QM_GUID, db=dbs.meta)
        next_id = txn.get(META_NEXT_QUEUE_ID, db=dbs.meta)
        ordinal_limit = txn.get(META_ORDINAL_LIMIT, db=dbs.meta)
        stamp = txn.get(META_SEQUENCE_STAMP, db=dbs.meta)
        history = txn.get(META_HISTORY_COUNTER, db=dbs.meta)
        if (
            guid is None
            or len(guid) != 16
            or next_id is None
            or ordinal_limit is None
            or stamp is None
            or history is None
        ):
            msg = "store meta is incomplete"
            raise StoreCorrupt(msg)
        try:
            self.next_queue_id = unpack_u32(next_id)
            self.ordinal_limit = unpack_u64(ordinal_limit)
            self.sequence_stamp = unpack_u32(stamp)
            self.history_counter = unpack_u64(history)
        except Exception as exc:
            msg = "store meta counters do not decode"
            raise StoreCorrupt(msg) from exc
        self.qm_guid = uuid.UUID(bytes=guid)

    # ------------------------------------------------------------------ committed state

    def install(
        self,
        records: list[QueueRecord],
        removed: list[QueueRecord],
        outgoing: dict[int, OutgoingState | None],
    ) -> None:
        """Put records committed by a write in place, and forget removed ones."""
        for record in removed:
            self.by_id.pop(record.queue_id, None)
            self.by_name.pop(record.name, None)
        for record in records:
            self.by_name[record.name] = record
            self.by_id[record.queue_id] = record
        for queue_id, state in outgoing.items():
            if state is None:
                self.outgoing.pop(queue_id, None)
            else:
                self.outgoing[queue_id] = state

    def install_reservations(self, changed: dict[int, tuple[int, int]]) -> None:
        """Put the reservations committed by a write in place."""
        for queue_id, held in changed.items():
            if held == NO_RESERVATION:
                self.reservations.pop(queue_id, None)
            else:
                self.reservations[queue_id] = held


def _retype_early_subqueues(txn: Txn, dbs: Databases) -> None:
    """Schema 5 as development builds of 23 November 2026 wrote it: their
    subqueues (``;retry``, ``;poison``: a parent, and not ``system$;journal``)
    have kind 5, which is ``system$;journal``'s here; they get the subqueue
    kind, in the opening write transaction (a record per subqueue)."""
    for db in (dbs.queues, dbs.doomed):
        early = []
        for key, data in _items(txn, db):
            record = decode_queue(data)
            if (
                record.kind is QueueKind.SYSTEM_JOURNAL
                and record.parent_id is not None
                and record.name.endswith((";retry", ";poison"))
            ):
                early.append((bytes(key), record))
        for key, record in early:
            retyped = dataclasses.replace(record, kind=QueueKind.SUBQUEUE)
            txn.put(key, encode_queue(retyped), db=db)


def _migrate_incoming_keys(txn: Txn, dbs: Databases) -> None:
    """Schema 3..6 -> 7: rewrite every ``incoming`` key, source GUID + queue key,
    as source GUID + sequence timestamp u32 + queue key, the timestamp taken
    from the state's stored sequence id (the value is unchanged: format 1,
    the sequence id a u64 at offset 1). A state whose new key would be too
    long for LMDB is dropped (see the module docstring).

    Raises:
        StoreCorrupt: a key or value is not an incoming state's.
    """
    old = [(bytes(key), bytes(value)) for key, value in _items(txn, dbs.incoming)]
    for key, _ in old:
        txn.delete(key, db=dbs.incoming)
    for key, value in old:
        if len(key) < QM_GUID_SIZE or len(value) < 9:
            msg = f"incoming state {bytes(key).hex()} is corrupt"
            raise StoreCorrupt(msg)
        stamp = unpack_u64(value[1:9]) >> 32
        new_key = b"".join((key[:QM_GUID_SIZE], u32(stamp), key[QM_GUID_SIZE:]))
        if len(new_key) <= MAX_KEY_SIZE:
            txn.put(new_key, value, db=dbs.incoming)


def _items(txn: Txn, db: lmdb._Database) -> Iterator[tuple[bytes, bytes]]:
    with txn.cursor(db=db) as cursor:
        yield from cursor.iternext(keys=True, values=True)
