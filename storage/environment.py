"""The LMDB environment: the directory lock, map growth, headroom for removals, errors.

Theory of operation
-------------------
One :class:`Environment` owns one LMDB environment (``data.mdb`` and
``lock.mdb`` in a directory) and an exclusive ``flock`` on ``store.lock`` in
the same directory, so no second store, in this process or another, can
write behind its back.

Threads. Reads may run on any thread; write transactions run one at a time
(the layer above has one writer). Everything that changes the map size runs
on the owner's thread between write transactions and outside any read, as
LMDB requires (``set_mapsize`` with a transaction open in the process is
undefined behaviour): the store's reads open and close their transactions
inside one call, and the writer reports :class:`MapFull` instead of growing
the map itself.

Map growth. The map starts at ``initial_map_size`` (an existing environment
keeps the size it has grown to) and doubles when a write needs more. With a
``max_map_size``, ordinary writes may grow it only to ``max_map_size`` minus
a *headroom*; the headroom is for writes that only remove data (receives,
purges, deletions), which may grow the map up to ``max_map_size`` itself.
After such a write the map goes back down to the ordinary limit; LMDB keeps
it no smaller than its high-water mark, so while the map stays above the
limit an ordinary write is also refused when the pages the databases use
would exceed the limit (ordinary writes would otherwise fill, page by page,
what removals freed below the mark, and push the next removals ever higher
into the headroom). So a store that is full for new messages can always
still be emptied.

A full disk is the same problem one level down: LMDB extends ``data.mdb``
as it needs pages, and on a full file system it cannot. The environment
keeps a *ballast* file next to the data (``storage.ballast``): when a
removal finds no room, :meth:`release_ballast` deletes it and the removal is
tried again in the space it leaves; :meth:`restore_ballast` puts it back.

Opening. Before LMDB maps the store's files, :mod:`storage.data_files`
gives a new lock file its blocks, makes a new ``data.mdb`` durably and
refuses an existing one that is truncated or empty (either would become
SIGBUS or a silently new store).

Errors. Every ``lmdb.Error`` and ``OSError`` becomes a ``StoreError`` here;
a failed write is told apart as a full disk or a real I/O error by
``translate_write_error``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

import lmdb

from .ballast import Ballast
from .data_files import allocate_lock_file, check_data_file, create_data_file
from .errors import (
    MapFull,
    StoreClosed,
    StoreError,
    StoreFull,
    StoreLocked,
    translate_lmdb_error,
    translate_os_error,
    translate_write_error,
)

if TYPE_CHECKING:
    #: A transaction; a read transaction opened with ``buffers`` returns memoryviews.
    Txn: TypeAlias = lmdb.Transaction[Any]
else:
    Txn = lmdb.Transaction

__all__ = ["Environment", "Reading", "Txn", "Usage", "keys_between", "prefixed"]


@dataclass(frozen=True, slots=True)
class Usage:
    """How full a store is (``Store.usage``)."""

    #: Bytes of the pages the databases use (pages freed and not yet reused excluded).
    used_bytes: int
    #: What ordinary writes may use (``max_map_size`` less the headroom kept for
    #: removals), or None: no limit but the disk.
    limit_bytes: int | None
    #: The size of ``data.mdb`` (free pages included).
    file_bytes: int


class Reading:
    """A read transaction as a context manager (a plain class: it runs on every read)."""

    __slots__ = ("_action", "_buffers", "_env", "_txn")

    def __init__(self, env: lmdb.Environment, action: str, buffers: bool) -> None:
        self._env = env
        self._action = action
        self._buffers = buffers

    def __enter__(self) -> Txn:
        try:
            txn: Txn = self._env.begin(buffers=True) if self._buffers else self._env.begin()
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, self._action) from exc
        self._txn = txn
        return txn

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, *_: object
    ) -> None:
        self._txn.abort()
        if isinstance(exc, lmdb.Error):
            raise translate_lmdb_error(exc, self._action) from exc


_LOCK_FILE: Final = "store.lock"
_MAX_READERS: Final = 126
_MAX_DBS: Final = 24
_PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")

_T = TypeVar("_T")

#: How far past what a store holds removals may grow its map when it is
#: opened past ``max_map_size`` (:meth:`Environment._overdrawn`).
_OVERDRAWN_ROOM: Final = 1 << 20


def round_up(size: int) -> int:
    """``size`` rounded up to a whole number of pages."""
    return -(-size // _PAGE_SIZE) * _PAGE_SIZE


def _round_down(size: int) -> int:
    return max(size // _PAGE_SIZE, 1) * _PAGE_SIZE


class Environment:
    """An open LMDB environment with its lock, growth policy and ballast.

    Args:
        path: the directory; created (mode 0700) if missing.
        initial_map_size: map size of a new environment, in bytes.
        max_map_size: the most the map may grow to, or ``None``.
        durable: sync every write transaction (``False`` only to measure CPU cost).
        reserve_size: bytes kept back for writes that only remove data: the
            map headroom below ``max_map_size`` (at most an eighth of it) and
            the size of the ballast file. 0 disables both.

    Raises:
        StoreLocked: another store has the directory open.
        StoreError: the environment cannot be opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        initial_map_size: int,
        max_map_size: int | None,
        durable: bool,
        reserve_size: int,
    ) -> None:
        if initial_map_size <= 0:
            msg = f"initial_map_size must be positive, not {initial_map_size}"
            raise ValueError(msg)
        if max_map_size is not None and max_map_size < initial_map_size:
            msg = f"max_map_size {max_map_size} is below initial_map_size {initial_map_size}"
            raise ValueError(msg)
        if reserve_size < 0:
            msg = f"reserve_size must not be negative, not {reserve_size}"
            raise ValueError(msg)
        self.path = pathlib.Path(path)
        self.data_file = self.path / "data.mdb"
        self._reserve_size = round_up(reserve_size) if reserve_size else 0
        self._ballast = Ballast(self.path, self._reserve_size, _PAGE_SIZE)
        self._durable = durable
        if max_map_size is None:
            self._ordinary_cap: int | None = None
            self._privileged_cap: int | None = None
            self._limit: int | None = None
        else:
            top = _round_down(max_map_size)
            headroom = min(self._reserve_size, _round_down(top // 8)) if reserve_size else 0
            self._privileged_cap = top
            #: ``max_map_size`` as configured, for messages (the privileged cap
            #: may lie past it, see ``_overdrawn``).
            self._limit = top
            self._ordinary_cap = max(top - headroom, _PAGE_SIZE)
        self._env: lmdb.Environment | None = None
        self._dbs: list[lmdb._Database] = []
        #: True while the map is larger than the ordinary limit (see ``write``).
        self._above_ordinary_cap = False
        self._release_lock = self._lock_directory()
        try:
            start = round_up(initial_map_size)
            if self._ordinary_cap is not None:
                start = min(start, self._ordinary_cap)
            self._env = self._open(start)
            self._overdrawn()
            self.settle()
        except BaseException:
            self._release_lock()
            raise

    # ------------------------------------------------------------------ opening

    def _lock_directory(self) -> Callable[[], None]:
        action = f"open store {self.path}"
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise translate_os_error(exc, action) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            msg = f"store {self.path} is already open (in this or another process)"
            raise StoreLocked(msg) from exc
        except OSError as exc:
            os.close(fd)
            raise translate_os_error(exc, action) from exc
        # Closing the descriptor releases the lock; the finalizer also does it
        # if the environment is dropped without close().
        return weakref.finalize(self, os.close, fd)

    def _open(self, map_size: int) -> lmdb.Environment:
        action = f"open store {self.path}"
        check_data_file(self.path / "data.mdb")
        create_data_file(self.path, map_size)
        allocate_lock_file(self.path / "lock.mdb", action)
        try:
            env = lmdb.open(
                str(self.path),
                subdir=True,
                map_size=map_size,
                max_dbs=_MAX_DBS,
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
        except lmdb.Error as exc:
            env.close()
            raise translate_lmdb_error(exc, action) from exc
        return env

    def clear_stale_readers(self) -> int:
        """Free the reader slots of processes that died holding a read transaction
        (a hot copy, ``mdb_copy -c``, killed half-way): until then LMDB keeps
        every page such a reader could see, and the store grows without bound.
        Returns how many slots were freed.

        Raises:
            StoreError: the lock file could not be read.
        """
        try:
            return int(self.lmdb.reader_check())
        except lmdb.Error as exc:
            raise translate_lmdb_error(exc, f"check the readers of {self.path}") from exc

    def _overdrawn(self) -> None:
        """A store opened past ``max_map_size`` (a limit lowered since it grew) lets
        removals grow the map a little past what it holds, so that it can be
        emptied; ordinary writes stay refused until it is back under its limit."""
        cap = self._privileged_cap
        if cap is None:
            return
        info = self.lmdb.info()
        held = round_up((info["last_pgno"] + 1) * _PAGE_SIZE)
        if held > cap:
            self._privileged_cap = held + _OVERDRAWN_ROOM

    def open_db(self, txn: Txn, name: bytes | None) -> lmdb._Database:
        """Open (creating if needed) a named database inside a write transaction;
        ``None`` is the main database."""
        db = self.lmdb.open_db(name, txn=txn)
        self._dbs.append(db)
        return db

    @property
    def lmdb(self) -> lmdb.Environment:
        """The LMDB environment.

        Raises:
            StoreClosed: after :meth:`close`.
        """
        env = self._env
        if env is None:
            msg = f"store {self.path} is closed"
            raise StoreClosed(msg)
        return env

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._env is None

    @property
    def map_size(self) -> int:
        """The current map size in bytes."""
        size: int = self.lmdb.info()["map_size"]
        return size

    def close(self) -> None:
        """Close the environment and release the directory. Idempotent."""
        env = self._env
        if env is None:
            return
        self._env = None
        try:
            env.close()
        finally:
            self._release_lock()

    # ------------------------------------------------------------------ transactions

    def read(self, action: str, *, buffers: bool = False) -> Reading:
        """A read transaction for the duration of a ``with`` block, errors translated.

        With ``buffers`` the values it returns are memoryviews into the map,
        valid only until the block ends.
        """
        return Reading(self.lmdb, action, buffers)

    def write(self, action: str, work: Callable[[Txn], _T], *, privileged: bool = False) -> _T:
        """Run ``work`` in one write transaction and commit it (synced when durable).

        ``privileged`` is for a write that only removes data: it may use the
        headroom (see :meth:`grow`).

        Raises:
            MapFull: the transaction did not fit in the map; nothing applied.
            StoreFull: the disk is full; nothing applied.
            StoreError: any other failure; nothing applied.
        """
        env = self.lmdb
        try:
            with env.begin(write=True) as txn:
                result = work(txn)
                if self._above_ordinary_cap and not privileged:
                    self._check_ordinary_cap(txn)
                return result
        except lmdb.MapFullError as exc:
            msg = f"{action}: the map of {env.info()['map_size']} bytes is full"
            raise MapFull(msg) from exc
        except lmdb.Error as exc:
            raise translate_write_error(exc, action, self.data_file) from exc
        except OSError as exc:
            raise translate_os_error(exc, action) from exc

    def write_growing(
        self, action: str, work: Callable[[Txn], _T], *, privileged: bool = False
    ) -> _T:
        """:meth:`write`, growing the map and running ``work`` again while it does not fit.

        For writes made on the owner's thread with nothing else in flight
        (opening, tools, tests). ``work`` must be repeatable; ``privileged``
        as for :meth:`write`.

        Raises:
            StoreFull: the map cannot grow or the disk is full; nothing applied.
        """
        while True:
            try:
                return self.write(action, work, privileged=privileged)
            except MapFull as exc:
                if not self.grow(privileged=privileged):
                    raise self.full_error(action) from exc

    def _pages_in_use(self, txn: Txn) -> int:
        """Pages the databases use (the meta pages included; free pages not)."""
        pages = 2  # the meta pages
        for db in self._dbs:
            stat = txn.stat(db)
            pages += stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
        return pages

    def _check_ordinary_cap(self, txn: Txn) -> None:
        """Refuse an ordinary write that leaves more pages in use than its limit allows."""
        cap = self._ordinary_cap
        assert cap is not None
        pages = self._pages_in_use(txn)
        if pages * _PAGE_SIZE > cap:
            msg = f"{pages * _PAGE_SIZE} bytes in use would exceed the ordinary limit of {cap}"
            raise MapFull(msg)

    def usage(self) -> Usage:
        """How much of the store is in use and how far it may grow (one read
        transaction and a ``stat`` of each database)."""
        with self.read("usage") as txn:
            used = self._pages_in_use(txn) * _PAGE_SIZE
        try:
            file_bytes = self.data_file.stat().st_size
        except OSError as exc:
            raise translate_os_error(exc, "usage") from exc
        return Usage(used_bytes=used, limit_bytes=self._ordinary_cap, file_bytes=file_bytes)

    # ------------------------------------------------------------------ growth

    def grow(self, *, privileged: bool) -> bool:
        """Make the map larger for the next write; False if it is at its limit.

        ``privileged`` is for a write that only removes data: it may use the
        headroom below ``max_map_size``. Must run with no transaction open in
        this process.
        """
        env = self.lmdb
        current: int = env.info()["map_size"]
        cap = self._privileged_cap if privileged else self._ordinary_cap
        if cap is not None and current >= cap:
            return False
        new_size = current * 2 if cap is None else min(current * 2, cap)
        if privileged and cap is not None:
            new_size = cap
        try:
            env.set_mapsize(new_size)
        except lmdb.Error:
            return False
        grown: int = env.info()["map_size"]
        if self._ordinary_cap is not None and grown > self._ordinary_cap:
            self._above_ordinary_cap = True
        return grown > current

    def settle(self) -> None:
        """After a privileged write, bring the map back to the ordinary limit.

        LMDB keeps it no smaller than the pages in use, so what a removal
        needed beyond the limit stays mapped. Must run with no transaction open.
        """
        cap = self._ordinary_cap
        env = self.lmdb
        info = env.info()
        if cap is not None and info["map_size"] > cap:
            target = cap
            privileged = self._privileged_cap
            if privileged is not None and self._limit is not None and privileged > self._limit:
                # Opened past a limit lowered since: LMDB keeps the map at what
                # the file holds, and a write that frees pages needs a few more
                # before they can be used again: keep that room mapped.
                held = round_up((info["last_pgno"] + 1) * _PAGE_SIZE)
                target = max(cap, min(held + _OVERDRAWN_ROOM, privileged))
            with contextlib.suppress(lmdb.Error):
                env.set_mapsize(target)
            self._above_ordinary_cap = env.info()["map_size"] > cap

    def full_error(self, action: str) -> StoreError:
        """The error for a write that found no room in the map."""
        cap = self._ordinary_cap
        if cap is None:
            return StoreFull(f"{action}: the store map cannot grow any more")
        return StoreFull(
            f"{action}: the store is at its limit of {self._limit} bytes "
            "(store.max_map_size); remove messages or raise the limit"
        )

    # ------------------------------------------------------------------ ballast

    @property
    def has_ballast(self) -> bool:
        """True while the ballast file holds its space (or none is configured)."""
        return self._ballast.whole

    @property
    def ballast_size(self) -> int:
        """Bytes the ballast file holds now (less than ``reserve_size`` while a
        full disk keeps it from growing back)."""
        return self._ballast.size()

    def release_ballast(self) -> bool:
        """Delete the ballast file to give its space to the store; True if it held any."""
        return self._ballast.release()

    def restore_ballast(self) -> bool:
        """Allocate the ballast file, or grow it, as far as the disk has room; True
        if it holds all of ``reserve_size`` afterwards (see ``storage.ballast``)."""
        return self._ballast.restore()


def prefixed(
    cursor: lmdb.Cursor[Any], prefix: bytes, start: bytes | None = None
) -> Iterator[bytes]:
    """The keys that start with ``prefix``, in key order from ``start`` (default:
    ``prefix``), found with one seek. The cursor stays on each key while the
    caller handles it, so ``cursor.value()`` is that key's value.
    """
    positioned = cursor.set_range(prefix if start is None else start)
    while positioned:
        key = bytes(cursor.key())
        if not key.startswith(prefix):
            return
        yield key
        positioned = cursor.next()


def keys_between(cursor: lmdb.Cursor[Any], start: bytes, end: bytes) -> Iterator[bytes]:
    """The keys from ``start`` up to ``end`` (excluded), in key order, found with
    one seek. Like :func:`prefixed`, the cursor stays on each key while the
    caller handles it.
    """
    positioned = cursor.set_range(start)
    while positioned:
        key = bytes(cursor.key())
        if key >= end:
            return
        yield key
        positioned = cursor.next()
