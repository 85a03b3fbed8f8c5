"""The store: one LMDB environment holding every queue and message of a queue manager."""

# Theory of operation
# ===================
#
# One Store owns one LMDB environment (a directory holding data.mdb and
# lock.mdb) plus an exclusive flock on ``store.lock`` in the same directory, so
# no second Store, in this process or another, can write behind our back. The
# store is not thread-safe: it is used from one thread at a time (the daemon
# calls it inline from its event-loop thread). Every method opens and closes its
# transactions before it returns, so no transaction ever outlives a call; that
# is also what makes env.set_mapsize() safe, as it must not run while this
# process has a transaction open.
#
# Named databases (layouts in _keys.py, record formats in _records.py):
#   meta         schema version, QM GUID, next queue id, next message-id ordinal,
#                settings
#   queues       canonical name -> QueueRecord (static fields + counters)
#   queue_ids    queue id u32 -> canonical name
#   messages     queue id u32 + lookup id u64 -> MessageRecord
#   by_priority  queue id u32 + (7 - priority) u8 + lookup id u64 -> b""
#                (non-transactional queues only)
# Big-endian fixed-width keys make LMDB's order the delivery order, so "the
# next message" is one cursor seek, and skipping locked messages is a walk over
# keys that never decodes a value.
#
# Start-up reads only meta and queues: every QueueRecord carries its queue's
# counters (next_lookup_id, depth, bytes), and they are rewritten in the same
# write transaction as the messages they count. So opening costs O(number of
# queues), never O(number of messages), and the counters are exactly as
# durable as the messages.
#
# The queue records are cached in memory (by name and by id), immutable. A
# write builds the new records while its transaction is open, and installs them
# in the cache only after LMDB has committed; an aborted transaction simply
# drops them. Nothing is ever re-read from LMDB to commit.
#
# commit_batch() is the group commit: the whole batch is ONE write transaction
# and therefore one sync. Each CommitUnit (one client transaction) runs in a
# nested child transaction: a per-unit failure (QueueMissing, QuotaExceeded,
# MessageMissing, InvalidRecord) aborts just that child, and the unit's
# counters live in a per-unit scratch dict that is dropped with it; a
# successful unit's counters are merged into the batch's. At the end of the
# batch each touched queue's record is written once, and the message-id
# ordinal once. Within a unit: removals first (freeing quota), then sends in
# order; sends take consecutive lookup ids. A removal with journal=True copies
# the stored record bytes unchanged into the journal queue under a new lookup
# id. New messages are put with overwrite=False: a key that already exists
# means the cache and the file disagree, and that is StoreCorrupt, never a
# silent overwrite.
#
# Map growth: the map starts at initial_map_size. When LMDB reports MapFullError
# the transaction is aborted (nothing applied, cache untouched), the map is
# doubled (capped at max_map_size) and the whole transaction is run again. Only
# when the map cannot grow does the caller see StoreFull, again with nothing
# applied. LMDB writes the file only as pages are used, so the map size is an
# upper bound on the file, not an allocation; a full disk shows up as ENOSPC (or
# EDQUOT) at commit, and is StoreFull too.
#
# Sync policy: durable=True keeps LMDB's defaults (sync=True, metasync=True):
# every write transaction is on disk when its method returns. durable=False
# skips the syncs and exists only to measure CPU cost in tests and benchmarks.
#
# Errors: every lmdb.Error and OSError is translated to a StoreError at the
# method boundary (see _errors.py); LMDB exceptions never leave this module.

from __future__ import annotations

import fcntl
import os
import pathlib
import uuid
import weakref
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar

import lmdb

from ._errors import (
    InvalidOperation,
    InvalidRecord,
    MessageMissing,
    QueueExists,
    QueueMissing,
    QuotaExceeded,
    SchemaMismatch,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
    translate_lmdb_error,
    translate_os_error,
)
from ._keys import (
    DB_BY_PRIORITY,
    DB_MESSAGES,
    DB_META,
    DB_QUEUE_IDS,
    DB_QUEUES,
    MAX_KEY_SIZE,
    MAX_LOOKUP_ID,
    MAX_QUEUE_ID,
    META_NEXT_ORDINAL,
    META_NEXT_QUEUE_ID,
    META_QM_GUID,
    META_SCHEMA_VERSION,
    lookup_id_of,
    message_key,
    message_range,
    priority_band_key,
    priority_key,
    priority_range,
    queue_id_key,
    setting_key,
    split_priority_key,
    u32,
    unpack_u32,
)
from ._records import (
    MessageRecord,
    QueueKind,
    QueueRecord,
    decode_message,
    decode_queue,
    encode_message_as,
    encode_queue,
    finish_message,
    format_message_id,
    message_accounting,
)

__all__ = [
    "SCHEMA_VERSION",
    "CommitOutcome",
    "CommitUnit",
    "CommittedSend",
    "NewMessage",
    "Removal",
    "Store",
]

#: Schema version this code writes and understands.
SCHEMA_VERSION: Final = 1
#: Largest message-id ordinal; the next one after it is 1.
MAX_ORDINAL: Final = 0xFFFFFFFF
_LOCK_FILE: Final = "store.lock"
_MAX_READERS: Final = 126
_PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")
_JOURNAL_SUFFIX: Final = ";journal"

_T = TypeVar("_T")
if TYPE_CHECKING:
    _Txn: TypeAlias = lmdb.Transaction[bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMessage:
    """A send inside a :class:`CommitUnit`."""

    queue_id: int
    #: Its ``message_id_ordinal`` and ``arrived_time`` are placeholders: the store fills them in.
    record: MessageRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Removal:
    """A message taken out of a queue inside a :class:`CommitUnit`."""

    queue_id: int
    lookup_id: int
    #: Also copy it into the queue's journal queue (record unchanged; new lookup id there).
    #: Ignored for a queue that has no journal queue.
    journal: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitUnit:
    """One client transaction (or one non-transacted operation): all or nothing."""

    sends: Sequence[NewMessage] = ()
    removals: Sequence[Removal] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedSend:
    """A send as committed."""

    queue_id: int
    lookup_id: int
    #: :func:`format_message_id` of the final record.
    message_id: str
    #: The final record (ordinal and arrival time filled in).
    record: MessageRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitOutcome:
    """What became of one :class:`CommitUnit`."""

    sends: tuple[CommittedSend, ...] = ()
    #: ``(queue_id, lookup_id)`` actually removed.
    removed: tuple[tuple[int, int], ...] = ()
    #: Set if this unit failed; then nothing of it was applied.
    error: StoreError | None = None


class _Counters:
    """A queue's counters while a batch is being applied (mutable scratch)."""

    __slots__ = ("bytes", "depth", "next_lookup_id")

    def __init__(self, next_lookup_id: int, depth: int, size: int) -> None:
        self.next_lookup_id = next_lookup_id
        self.depth = depth
        self.bytes = size


# Errors that fail one unit of a batch, not the batch.
_UNIT_ERRORS: Final = (QueueMissing, QuotaExceeded, MessageMissing, InvalidRecord)


class Store:
    """The queue manager's persistent state in one LMDB environment.

    Not thread-safe: one thread at a time (every call, including the blocking
    sync inside :meth:`commit_batch`, runs on the caller's thread). Use as a
    context manager, or call :meth:`close`.

    Args:
        path: directory of the environment; created (mode 0700) if missing.
        initial_map_size: map size for a new environment, in bytes. An existing
            environment keeps the size it has grown to.
        max_map_size: the map never grows beyond this; ``None`` means no limit
            other than the disk.
        durable: sync every write transaction (LMDB ``sync`` and ``metasync``).
            ``False`` is only for measuring CPU cost.

    Raises:
        StoreLocked: another Store has the directory open.
        SchemaMismatch: the store was written by newer code.
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
    ) -> None:
        if initial_map_size <= 0:
            msg = f"initial_map_size must be positive, not {initial_map_size}"
            raise ValueError(msg)
        if max_map_size is not None and max_map_size < initial_map_size:
            msg = f"max_map_size {max_map_size} is below initial_map_size {initial_map_size}"
            raise ValueError(msg)
        self._path = pathlib.Path(path)
        self._durable = durable
        self._max_map_size = None if max_map_size is None else _round_down(max_map_size)
        self._by_name: dict[str, QueueRecord] = {}
        self._by_id: dict[int, QueueRecord] = {}
        self._next_queue_id = 1
        self._next_ordinal = 1
        self._qm_guid = uuid.UUID(int=0)
        self._env: lmdb.Environment | None = None
        self._release_lock = self._lock_directory()
        try:
            self._env = self._open_environment(_round_up(initial_map_size))
        except BaseException:
            self._release_lock()
            raise

    # ------------------------------------------------------------------ opening

    def _lock_directory(self) -> Callable[[], None]:
        action = f"open store {self._path}"
        try:
            self._path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self._path / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise translate_os_error(exc, action) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            msg = f"store {self._path} is already open (in this or another process)"
            raise StoreLocked(msg) from exc
        except OSError as exc:
            os.close(fd)
            raise translate_os_error(exc, action) from exc
        # Closing the descriptor releases the lock; the finalizer also does it
        # if the Store is dropped without close().
        return weakref.finalize(self, os.close, fd)

    def _open_environment(self, map_size: int) -> lmdb.Environment:
        action = f"open store {self._path}"
        try:
            env = lmdb.open(
                str(self._path),
                subdir=True,
                map_size=map_size,
                max_dbs=16,
                max_readers=_MAX_READERS,
                sync=self._durable,
                metasync=self._durable,
                readahead=False,
                lock=True,
                mode=0o600,
            )
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, action) from exc
        except OSError as exc:
            raise translate_os_error(exc, action) from exc
        try:
            # An existing environment records the map size it last grew to;
            # LMDB would otherwise start from map_size (or the used size).
            env.set_mapsize(0)
            if env.info()["map_size"] < map_size:
                env.set_mapsize(map_size)
            self._load(env, action)
        except lmdb.Error as exc:
            env.close()
            raise translate_lmdb_error(exc, action) from exc
        except BaseException:
            env.close()
            raise
        return env

    def _load(self, env: lmdb.Environment, action: str) -> None:
        # Named databases are opened in a write transaction so that a new
        # environment gets them (and its meta values) in one commit.
        while True:
            try:
                with env.begin(write=True) as txn:
                    self._meta = env.open_db(DB_META, txn=txn)
                    self._queues = env.open_db(DB_QUEUES, txn=txn)
                    self._queue_ids = env.open_db(DB_QUEUE_IDS, txn=txn)
                    self._messages = env.open_db(DB_MESSAGES, txn=txn)
                    self._by_priority = env.open_db(DB_BY_PRIORITY, txn=txn)
                    self._load_meta(txn)
                    queues = self._load_queues(txn)
                break
            except lmdb.MapFullError:
                self._grow(env, action)
            except lmdb.Error as exc:
                raise translate_lmdb_error(exc, action) from exc
            except OSError as exc:
                raise translate_os_error(exc, action) from exc
        for record in queues:
            self._by_name[record.name] = record
            self._by_id[record.queue_id] = record

    def _load_meta(self, txn: _Txn) -> None:
        meta = self._meta
        version_raw = txn.get(META_SCHEMA_VERSION, db=meta)
        if version_raw is None:
            if txn.stat(self._queues)["entries"] or txn.stat(self._messages)["entries"]:
                msg = f"store {self._path} has queues but no schema version"
                raise StoreCorrupt(msg)
            self._qm_guid = uuid.uuid4()
            txn.put(META_SCHEMA_VERSION, u32(SCHEMA_VERSION), db=meta)
            txn.put(META_QM_GUID, self._qm_guid.bytes, db=meta)
            txn.put(META_NEXT_QUEUE_ID, u32(1), db=meta)
            txn.put(META_NEXT_ORDINAL, u32(1), db=meta)
            return
        version = self._meta_u32(version_raw, META_SCHEMA_VERSION)
        if version > SCHEMA_VERSION:
            raise SchemaMismatch(version, SCHEMA_VERSION)
        if version < 1:
            msg = f"store schema version {version} is not valid"
            raise StoreCorrupt(msg)
        guid_raw = txn.get(META_QM_GUID, db=meta)
        if guid_raw is None or len(guid_raw) != 16:
            msg = "store meta value qm_guid is missing or not 16 bytes"
            raise StoreCorrupt(msg)
        self._qm_guid = uuid.UUID(bytes=guid_raw)
        self._next_queue_id = self._meta_u32(
            txn.get(META_NEXT_QUEUE_ID, db=meta), META_NEXT_QUEUE_ID
        )
        self._next_ordinal = self._meta_u32(txn.get(META_NEXT_ORDINAL, db=meta), META_NEXT_ORDINAL)
        if not 1 <= self._next_ordinal <= MAX_ORDINAL or self._next_queue_id < 1:
            msg = "store meta counters are out of range"
            raise StoreCorrupt(msg)

    @staticmethod
    def _meta_u32(raw: bytes | None, key: bytes) -> int:
        if raw is None or len(raw) != 4:
            msg = f"store meta value {key.decode()} is missing or not 4 bytes"
            raise StoreCorrupt(msg)
        return unpack_u32(raw)

    def _load_queues(self, txn: _Txn) -> list[QueueRecord]:
        queues = []
        with txn.cursor(db=self._queues) as cursor:
            for key, value in cursor:
                record = decode_queue(value)
                if record.name.encode() != key:
                    msg = f"queue record {record.name!r} is stored under key {key!r}"
                    raise StoreCorrupt(msg)
                queues.append(record)
        return queues

    # ------------------------------------------------------------------ life cycle

    @property
    def path(self) -> pathlib.Path:
        """The environment's directory."""
        return self._path

    @property
    def qm_guid(self) -> uuid.UUID:
        """This queue manager's GUID, created with the store and never changed."""
        return self._qm_guid

    @property
    def map_size(self) -> int:
        """The current LMDB map size in bytes (grows on demand).

        Raises:
            StoreClosed: after :meth:`close`.
        """
        env = self._require_env()
        return env.info()["map_size"]

    def close(self) -> None:
        """Close the environment and release the directory. Idempotent.

        Every other method raises :class:`StoreClosed` afterwards.
        """
        env = self._env
        if env is None:
            return
        self._env = None
        try:
            env.close()
        finally:
            self._release_lock()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_env(self) -> lmdb.Environment:
        env = self._env
        if env is None:
            msg = f"store {self._path} is closed"
            raise StoreClosed(msg)
        return env

    # ------------------------------------------------------------------ transactions

    def _write(self, action: str, work: Callable[[_Txn], _T]) -> _T:
        """Run ``work`` in one write transaction, growing the map and retrying
        the whole of it on MapFullError. ``work`` must be repeatable: it may
        change nothing but the transaction."""
        env = self._require_env()
        while True:
            try:
                with env.begin(write=True) as txn:
                    return work(txn)
            except lmdb.MapFullError:
                self._grow(env, action)
            except lmdb.Error as exc:
                raise translate_lmdb_error(exc, action) from exc
            except OSError as exc:
                raise translate_os_error(exc, action) from exc

    def _grow(self, env: lmdb.Environment, action: str) -> None:
        # No transaction of this process is open here: the failed one was
        # aborted by its with-block, and every other one is method-local.
        current = env.info()["map_size"]
        limit = self._max_map_size
        if limit is not None and current >= limit:
            msg = f"{action}: store map is at its maximum size of {limit} bytes"
            raise StoreFull(msg)
        new_size = current * 2 if limit is None else min(current * 2, limit)
        try:
            env.set_mapsize(new_size)
        except lmdb.Error as exc:
            msg = f"{action}: cannot grow the store map to {new_size} bytes: {exc}"
            raise StoreFull(msg) from exc

    # ------------------------------------------------------------------ meta

    def get_setting(self, key: str) -> str | None:
        """A setting stored with :meth:`set_setting`, or ``None``.

        Raises:
            InvalidRecord: the key is empty or too long.
            StoreClosed: after :meth:`close`.
        """
        env = self._require_env()
        raw_key = setting_key(key)
        try:
            with env.begin() as txn:
                raw = txn.get(raw_key, db=self._meta)
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, "get_setting") from exc
        if raw is None:
            return None
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            msg = f"setting {key!r} is not UTF-8"
            raise StoreCorrupt(msg) from exc

    def set_setting(self, key: str, value: str) -> None:
        """Store a setting (for example the queue manager's name); synced.

        Raises:
            InvalidRecord: the key is empty or too long.
            StoreFull: no room.
            StoreClosed: after :meth:`close`.
        """
        raw_key = setting_key(key)
        raw_value = value.encode()

        def work(txn: _Txn) -> None:
            txn.put(raw_key, raw_value, db=self._meta)

        self._write("set_setting", work)

    # ------------------------------------------------------------------ queues

    def create_queue(
        self,
        *,
        name: str,
        display_name: str,
        kind: QueueKind = QueueKind.NORMAL,
        transactional: bool = False,
        journal: bool = False,
        quota: int | None = None,
        now: float,
    ) -> QueueRecord:
        """Create a queue; for ``kind=NORMAL`` also its ``<name>;journal`` queue.

        Both are created in one synced write transaction. The journal queue has
        the same ``transactional`` flag, no quota, and ``parent_id`` set; the
        returned record's ``journal_id`` points at it. System queues
        (DEADLETTER, DEADXACT) get no journal queue.

        Args:
            name: canonical (lower-case) name; the caller has validated it.
            display_name: the name as the user typed it.
            kind: NORMAL, DEADLETTER or DEADXACT (journal queues are created
                only together with their queue).
            transactional: the queue accepts only transactional messages.
            journal: copy removed messages to the journal queue.
            quota: limit on the sum of body sizes, in bytes; ``None`` for none.
            now: creation time, unix seconds.

        Returns:
            The new queue's record.

        Raises:
            QueueExists: the name, or its journal queue's name, is taken.
            InvalidOperation: ``kind`` is JOURNAL.
            InvalidRecord: a name is empty or too long, or the quota is negative.
            StoreFull: no room.
        """
        self._require_env()
        if kind is QueueKind.JOURNAL:
            msg = f"journal queue {name!r} cannot be created on its own"
            raise InvalidOperation(msg)
        journal_name = name + _JOURNAL_SUFFIX if kind is QueueKind.NORMAL else None
        for taken in (name, journal_name):
            if taken is not None and taken in self._by_name:
                raise QueueExists(taken)
        longest = journal_name or name
        if not name or len(longest.encode()) > MAX_KEY_SIZE:
            msg = f"queue name must be 1..{MAX_KEY_SIZE} bytes of UTF-8 (with suffixes): {name!r}"
            raise InvalidRecord(msg)
        if quota is not None and quota < 0:
            msg = f"quota must not be negative: {quota}"
            raise InvalidRecord(msg)
        queue_id = self._next_queue_id
        last_id = queue_id if journal_name is None else queue_id + 1
        if last_id > MAX_QUEUE_ID:
            msg = "queue ids are exhausted"
            raise StoreFull(msg)
        records = [
            QueueRecord(
                queue_id=queue_id,
                name=name,
                display_name=display_name,
                kind=kind,
                transactional=transactional,
                journal=journal,
                quota=quota,
                parent_id=None,
                journal_id=None if journal_name is None else queue_id + 1,
                created_at=now,
                next_lookup_id=1,
                depth=0,
                bytes=0,
            )
        ]
        if journal_name is not None:
            records.append(
                QueueRecord(
                    queue_id=queue_id + 1,
                    name=journal_name,
                    display_name=display_name + _JOURNAL_SUFFIX,
                    kind=QueueKind.JOURNAL,
                    transactional=transactional,
                    journal=False,
                    quota=None,
                    parent_id=queue_id,
                    journal_id=None,
                    created_at=now,
                    next_lookup_id=1,
                    depth=0,
                    bytes=0,
                )
            )
        encoded = [(record, encode_queue(record)) for record in records]

        def work(txn: _Txn) -> None:
            for record, data in encoded:
                name_raw = record.name.encode()
                if not txn.put(name_raw, data, overwrite=False, db=self._queues):
                    msg = f"queue {record.name!r} is in the file but not in the cache"
                    raise StoreCorrupt(msg)
                txn.put(queue_id_key(record.queue_id), name_raw, db=self._queue_ids)
            txn.put(META_NEXT_QUEUE_ID, u32(last_id + 1), db=self._meta)

        self._write("create_queue", work)
        self._next_queue_id = last_id + 1
        for record in records:
            self._install(record)
        return records[0]

    def delete_queue(self, name: str) -> int:
        """Delete a queue, its journal queue and all their messages, in one
        synced write transaction.

        Returns:
            The number of messages deleted (both queues).

        Raises:
            QueueMissing: no such queue.
            InvalidOperation: it is a journal queue (delete its parent instead).
            StoreFull: no room (even deleting needs new pages for a moment).
        """
        self._require_env()
        queue = self._by_name.get(name)
        if queue is None:
            raise QueueMissing(name)
        if queue.kind is QueueKind.JOURNAL:
            msg = f"journal queue {name!r} is deleted with its parent queue"
            raise InvalidOperation(msg)
        doomed = [queue]
        if queue.journal_id is not None:
            journal_queue = self._by_id.get(queue.journal_id)
            if journal_queue is not None:
                doomed.append(journal_queue)

        def work(txn: _Txn) -> int:
            count = 0
            for record in doomed:
                count += self._delete_messages(txn, record.queue_id)
                txn.delete(record.name.encode(), db=self._queues)
                txn.delete(queue_id_key(record.queue_id), db=self._queue_ids)
            return count

        count = self._write("delete_queue", work)
        for record in doomed:
            del self._by_name[record.name]
            del self._by_id[record.queue_id]
        return count

    def purge_queue(self, queue_id: int, *, keep: Container[int] = ()) -> int:
        """Delete every message of one queue (not of its journal queue), in one
        synced write transaction; ``next_lookup_id`` is unchanged.

        Args:
            queue_id: the queue to purge.
            keep: lookup ids to leave in the queue (messages that open
                transactions hold; they leave later, through a removal).
                ``depth`` and ``bytes`` then count exactly the kept messages
                (0 and 0 without ``keep``).

        Returns:
            The number of messages deleted.

        Raises:
            QueueMissing: no such queue.
            StoreFull: no room.
        """
        self._require_env()
        queue = self._by_id.get(queue_id)
        if queue is None:
            raise QueueMissing(queue_id)

        def work(txn: _Txn) -> tuple[int, QueueRecord]:
            count = kept = kept_bytes = 0
            start, end = message_range(queue_id)
            with txn.cursor(db=self._messages) as cursor:
                positioned = cursor.set_range(start)
                while positioned:
                    key = cursor.key()
                    if key >= end:
                        break
                    if lookup_id_of(key) in keep:
                        kept += 1
                        kept_bytes += message_accounting(cursor.value())[1]
                        positioned = cursor.next()
                    else:
                        cursor.delete()
                        count += 1
                        positioned = bool(cursor.key())
            start, end = priority_range(queue_id)
            _delete_range(txn, self._by_priority, start, end, keep=keep)
            purged = _with_counters(
                queue, next_lookup_id=queue.next_lookup_id, depth=kept, size=kept_bytes
            )
            txn.put(queue.name.encode(), encode_queue(purged), db=self._queues)
            return count, purged

        count, purged = self._write("purge_queue", work)
        self._install(purged)
        return count

    def _delete_messages(self, txn: _Txn, queue_id: int) -> int:
        count = _delete_range(txn, self._messages, *message_range(queue_id))
        _delete_range(txn, self._by_priority, *priority_range(queue_id))
        return count

    def _install(self, record: QueueRecord) -> None:
        self._by_name[record.name] = record
        self._by_id[record.queue_id] = record

    def get_queue(self, name: str) -> QueueRecord | None:
        """The queue of that canonical name, with its committed counters, or ``None``.

        Raises:
            StoreClosed: after :meth:`close`.
        """
        self._require_env()
        return self._by_name.get(name)

    def get_queue_by_id(self, queue_id: int) -> QueueRecord | None:
        """The queue of that id, with its committed counters, or ``None``.

        Raises:
            StoreClosed: after :meth:`close`.
        """
        self._require_env()
        return self._by_id.get(queue_id)

    def list_queues(self) -> list[QueueRecord]:
        """Every queue (journal and system queues included), ordered by name.

        Raises:
            StoreClosed: after :meth:`close`.
        """
        self._require_env()
        by_name = self._by_name
        return [by_name[name] for name in sorted(by_name)]

    # ------------------------------------------------------------------ message reads

    def read_message(self, queue_id: int, lookup_id: int) -> MessageRecord | None:
        """One committed message, or ``None`` if it is not there.

        Raises:
            StoreCorrupt: the stored record does not decode.
            StoreClosed: after :meth:`close`.
        """
        env = self._require_env()
        try:
            with env.begin() as txn:
                data = txn.get(message_key(queue_id, lookup_id), db=self._messages)
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, "read_message") from exc
        return None if data is None else decode_message(data)

    def read_range(
        self,
        queue_id: int,
        *,
        after: int = 0,
        limit: int = 1000,
        skip: Container[int] = (),
    ) -> list[tuple[int, MessageRecord]]:
        """Committed messages with ``lookup_id > after``, in ascending lookup id
        order, leaving out the ids in ``skip``; at most ``limit`` of them.

        Skipped messages are passed over by key and never decoded.

        Returns:
            ``(lookup_id, record)`` pairs; empty for an unknown queue.

        Raises:
            StoreCorrupt: a stored record does not decode.
            StoreClosed: after :meth:`close`.
        """
        env = self._require_env()
        if limit <= 0 or after >= MAX_LOOKUP_ID:
            return []
        start = message_key(queue_id, max(after, 0) + 1)
        end = message_range(queue_id)[1]
        found: list[tuple[int, bytes]] = []
        try:
            with env.begin() as txn, txn.cursor(db=self._messages) as cursor:
                if cursor.set_range(start):
                    for key in cursor.iternext(keys=True, values=False):
                        if key >= end:
                            break
                        lookup_id = lookup_id_of(key)
                        if lookup_id in skip:
                            continue
                        found.append((lookup_id, cursor.value()))
                        if len(found) >= limit:
                            break
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, "read_range") from exc
        return [(lookup_id, decode_message(data)) for lookup_id, data in found]

    def first_available(
        self,
        queue_id: int,
        *,
        skip: Container[int] = (),
        by_priority: bool = False,
        after: int = 0,
    ) -> tuple[int, MessageRecord] | None:
        """The message a receive would take next.

        Without ``by_priority``: the lowest lookup id above ``after`` that is
        not in ``skip``. With ``by_priority=True`` on a non-transactional
        queue: the highest priority first, then the lowest lookup id (above
        ``after``), not in ``skip``. Transactional queues are always FIFO by
        lookup id. Costs O(skipped + 1) key visits (plus at most one seek per
        priority); only the returned message is decoded.

        Returns:
            ``(lookup_id, record)``, or ``None`` if there is none (or no such queue).

        Raises:
            StoreCorrupt: the record or the priority index is damaged.
            StoreClosed: after :meth:`close`.
        """
        queue = self._by_id.get(queue_id)
        if by_priority and queue is not None and not queue.transactional:
            return self._first_by_priority(queue_id, skip, after)
        found = self.read_range(queue_id, after=after, limit=1, skip=skip)
        return found[0] if found else None

    def _first_by_priority(
        self, queue_id: int, skip: Container[int], after: int
    ) -> tuple[int, MessageRecord] | None:
        env = self._require_env()
        if after >= MAX_LOOKUP_ID:
            return None
        first = max(after, 0) + 1
        end = priority_range(queue_id)[1]
        data = None
        try:
            with env.begin() as txn:
                with txn.cursor(db=self._by_priority) as cursor:
                    positioned = cursor.set_range(priority_band_key(queue_id, 0, first))
                    while positioned:
                        key = cursor.key()
                        if key >= end:
                            break
                        _, band, lookup_id = split_priority_key(key)
                        if lookup_id < first:
                            # Entered a new priority band below `after`: jump past it.
                            positioned = cursor.set_range(priority_band_key(queue_id, band, first))
                            continue
                        if lookup_id not in skip:
                            data = txn.get(message_key(queue_id, lookup_id), db=self._messages)
                            if data is None:
                                msg = (
                                    f"priority index names message {lookup_id} of queue "
                                    f"{queue_id}, which is missing"
                                )
                                raise StoreCorrupt(msg)
                            break
                        positioned = cursor.next()
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, "first_available") from exc
        if data is None:
            return None
        return lookup_id, decode_message(data)

    # ------------------------------------------------------------------ group commit

    def commit_batch(self, units: Sequence[CommitUnit], *, now: float) -> list[CommitOutcome]:
        """Apply a batch of units in ONE write transaction, sync once, return.

        Units are applied in order, each all-or-nothing in a nested
        transaction; within a unit, removals first, then sends in order. Sends
        to one queue get consecutive lookup ids. Each send gets the next
        message-id ordinal (wrapping from 0xFFFFFFFF to 1) and ``arrived_time =
        now``. A unit whose sends would take a queue's ``bytes`` above its
        quota fails with :class:`QuotaExceeded` (its own removals free space
        first; journal copies do not count against the source queue).

        Args:
            units: the client transactions, in commit order.
            now: arrival time for every send, unix seconds.

        Returns:
            One outcome per unit, in order. A failed unit (QueueMissing,
            QuotaExceeded, MessageMissing, InvalidRecord) has ``error`` set and
            nothing of it applied; the other units are committed.

        Raises:
            StoreFull: the map cannot grow or the disk is full; nothing applied.
            StoreCorrupt: the file disagrees with itself; nothing applied.
            StoreClosed: after :meth:`close`.
        """
        env = self._require_env()
        if not units:
            return []

        def work(txn: _Txn) -> tuple[list[CommitOutcome], list[QueueRecord], int]:
            return self._apply_batch(env, txn, units, now)

        outcomes, touched, next_ordinal = self._write("commit_batch", work)
        by_name = self._by_name
        by_id = self._by_id
        for record in touched:
            by_name[record.name] = record
            by_id[record.queue_id] = record
        self._next_ordinal = next_ordinal
        return outcomes

    def _apply_batch(
        self, env: lmdb.Environment, txn: _Txn, units: Sequence[CommitUnit], now: float
    ) -> tuple[list[CommitOutcome], list[QueueRecord], int]:
        # Runs inside the batch's write transaction; may be run again from the
        # start after a map growth, so it changes nothing outside `txn`.
        batch: dict[int, _Counters] = {}
        ordinal = self._next_ordinal
        outcomes: list[CommitOutcome] = []
        for unit in units:
            unit_counters: dict[int, _Counters] = {}
            try:
                with env.begin(write=True, parent=txn) as child:
                    outcome, next_ordinal = self._apply_unit(
                        child, unit, batch, unit_counters, ordinal, now
                    )
            except _UNIT_ERRORS as exc:
                outcomes.append(CommitOutcome(error=exc))
                continue
            ordinal = next_ordinal
            batch.update(unit_counters)
            outcomes.append(outcome)
        touched: list[QueueRecord] = []
        queues_db = self._queues
        for queue_id, counters in batch.items():
            record = _with_counters(
                self._by_id[queue_id],
                next_lookup_id=counters.next_lookup_id,
                depth=counters.depth,
                size=counters.bytes,
            )
            txn.put(record.name.encode(), encode_queue(record), db=queues_db)
            touched.append(record)
        if ordinal != self._next_ordinal:
            txn.put(META_NEXT_ORDINAL, u32(ordinal), db=self._meta)
        return outcomes, touched, ordinal

    def _apply_unit(
        self,
        txn: _Txn,
        unit: CommitUnit,
        batch: dict[int, _Counters],
        unit_counters: dict[int, _Counters],
        ordinal: int,
        now: float,
    ) -> tuple[CommitOutcome, int]:
        by_id = self._by_id
        messages_db = self._messages
        priority_db = self._by_priority

        def counters_of(queue_id: int) -> _Counters:
            counters = unit_counters.get(queue_id)
            if counters is None:
                base = batch.get(queue_id)
                if base is None:
                    record = by_id[queue_id]
                    counters = _Counters(record.next_lookup_id, record.depth, record.bytes)
                else:
                    counters = _Counters(base.next_lookup_id, base.depth, base.bytes)
                unit_counters[queue_id] = counters
            return counters

        removed: list[tuple[int, int]] = []
        for removal in unit.removals:
            queue_id = removal.queue_id
            lookup_id = removal.lookup_id
            queue = by_id.get(queue_id)
            if queue is None:
                raise QueueMissing(queue_id)
            data = txn.pop(message_key(queue_id, lookup_id), db=messages_db)
            if data is None:
                raise MessageMissing(queue_id, lookup_id)
            priority, size = message_accounting(data)
            if not queue.transactional:
                txn.delete(priority_key(queue_id, priority, lookup_id), db=priority_db)
            counters = counters_of(queue_id)
            counters.depth -= 1
            counters.bytes -= size
            if removal.journal and queue.journal_id is not None:
                journal_queue = by_id.get(queue.journal_id)
                if journal_queue is None:
                    raise QueueMissing(queue.journal_id)
                self._put_message(
                    txn, journal_queue, counters_of(queue.journal_id), data, priority, size
                )
            removed.append((queue_id, lookup_id))

        sends: list[CommittedSend] = []
        for send in unit.sends:
            queue_id = send.queue_id
            queue = by_id.get(queue_id)
            if queue is None:
                raise QueueMissing(queue_id)
            record = send.record
            counters = counters_of(queue_id)
            size = len(record.body)
            quota = queue.quota
            if quota is not None and counters.bytes + size > quota:
                raise QuotaExceeded(queue.name, quota, counters.bytes + size)
            data = encode_message_as(record, ordinal=ordinal, arrived_time=now)
            lookup_id = self._put_message(txn, queue, counters, data, record.priority, size)
            final = finish_message(record, ordinal=ordinal, arrived_time=now)
            sends.append(
                CommittedSend(
                    queue_id=queue_id,
                    lookup_id=lookup_id,
                    message_id=format_message_id(final.message_id_qm, ordinal),
                    record=final,
                )
            )
            ordinal = 1 if ordinal >= MAX_ORDINAL else ordinal + 1
        return CommitOutcome(sends=tuple(sends), removed=tuple(removed)), ordinal

    def _put_message(
        self,
        txn: _Txn,
        queue: QueueRecord,
        counters: _Counters,
        data: bytes,
        priority: int,
        size: int,
    ) -> int:
        """Append encoded message ``data`` to ``queue``; returns its lookup id."""
        queue_id = queue.queue_id
        lookup_id = counters.next_lookup_id
        if not txn.put(message_key(queue_id, lookup_id), data, overwrite=False, db=self._messages):
            msg = f"message {lookup_id} of queue {queue.name!r} already exists: lookup id reused"
            raise StoreCorrupt(msg)
        if not queue.transactional:
            txn.put(priority_key(queue_id, priority, lookup_id), b"", db=self._by_priority)
        counters.next_lookup_id = lookup_id + 1
        counters.depth += 1
        counters.bytes += size
        return lookup_id


def _with_counters(
    record: QueueRecord, *, next_lookup_id: int, depth: int, size: int
) -> QueueRecord:
    return QueueRecord(
        queue_id=record.queue_id,
        name=record.name,
        display_name=record.display_name,
        kind=record.kind,
        transactional=record.transactional,
        journal=record.journal,
        quota=record.quota,
        parent_id=record.parent_id,
        journal_id=record.journal_id,
        created_at=record.created_at,
        next_lookup_id=next_lookup_id,
        depth=depth,
        bytes=size,
    )


def _delete_range(
    txn: _Txn, db: lmdb._Database, start: bytes, end: bytes, *, keep: Container[int] = ()
) -> int:
    """Delete every key in ``[start, end)`` (keys of ``messages`` or
    ``by_priority``) except those whose lookup id is in ``keep``; returns how
    many were deleted."""
    count = 0
    with txn.cursor(db=db) as cursor:
        positioned = cursor.set_range(start)
        while positioned:
            key = cursor.key()
            if key >= end:
                break
            if keep and _lookup_id_of_any(key) in keep:
                positioned = cursor.next()
                continue
            cursor.delete()
            count += 1
            # delete() moves to the next key; an empty key means it was the last.
            positioned = bool(cursor.key())
    return count


def _lookup_id_of_any(key: bytes) -> int:
    # Both key layouts end in the u64 lookup id.
    return int.from_bytes(key[-8:], "big")


def _round_up(size: int) -> int:
    return -(-size // _PAGE_SIZE) * _PAGE_SIZE


def _round_down(size: int) -> int:
    return max(size // _PAGE_SIZE, 1) * _PAGE_SIZE
