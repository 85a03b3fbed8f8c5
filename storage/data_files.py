"""The store's files before LMDB maps them: a new ``lock.mdb`` given its blocks,
a new ``data.mdb`` made durably, an existing one checked.

LMDB maps ``lock.mdb`` and ``data.mdb`` into memory, and a page of the map
that the file cannot back (a file system that is full when the lock file is
first touched, a ``data.mdb`` shorter than its last transaction says: a
truncated copy) kills the process with SIGBUS, beyond any error handling. So
before LMDB opens them:

* a new lock file gets its blocks with ``posix_fallocate`` (no space:
  :class:`~storage.errors.StoreFull`);
* an existing ``data.mdb`` must be as long as the last page its newest meta
  page names (shorter: :class:`~storage.errors.StoreCorrupt`), and must not be
  empty: LMDB takes an empty ``data.mdb`` for a new environment, so a copy
  cut short before its first byte would silently become a new, empty store;
* so that a first start cut short (a crash, a power cut) never leaves an
  empty ``data.mdb`` of its own, a new one is made in a scratch directory,
  where LMDB writes its meta pages, synced, and then renamed into place: a
  data directory holds no ``data.mdb`` (a new store next time) or a whole one.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import struct
from typing import Final

import lmdb

from .errors import StoreCorrupt, translate_lmdb_error, translate_os_error

__all__ = ["allocate_lock_file", "check_data_file", "create_data_file"]

#: Where a new ``data.mdb`` is made before it is renamed into the data directory.
_SCRATCH: Final = "new-store"


def create_data_file(directory: pathlib.Path, map_size: int) -> None:
    """Make ``directory``'s ``data.mdb``, if it has none, durably (see the module
    docstring); a scratch directory left by a start cut short is removed first.

    Raises:
        StoreError: it cannot be made (a full disk, permissions, ...).
    """
    target = directory / "data.mdb"
    if target.exists():
        return
    action = f"create store {directory}"
    scratch = directory / _SCRATCH
    try:
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(mode=0o700)
        env = lmdb.open(str(scratch), subdir=True, map_size=map_size, lock=False, mode=0o600)
        try:
            env.sync(True)
        finally:
            env.close()
        os.replace(scratch / "data.mdb", target)
        _sync_directory(directory)
    except lmdb.Error as exc:
        raise translate_lmdb_error(exc, action) from exc
    except OSError as exc:
        raise translate_os_error(exc, action) from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sync_directory(directory: pathlib.Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Bytes given to a new ``lock.mdb`` before LMDB maps it: its reader table
#: (the environment's reader slots of 64 bytes and a header) with room to spare.
_LOCK_FILE_BYTES: Final = 64 * 1024
#: LMDB's meta page: the magic number, and where the page size (the free
#: database's ``md_pad``), the last page used and the transaction id lie in a
#: meta page of a 64-bit build (a 16-byte page header, then ``MDB_meta``).
_META_MAGIC: Final = 0xBEEFC0DE
_META = struct.Struct("<I4x8x8xI92xQQ")


def allocate_lock_file(path: pathlib.Path, action: str) -> None:
    """Give a new lock file its blocks before LMDB maps it (see the module docstring).

    Raises:
        StoreFull: the file system has no room for it.
    """
    if path.exists():
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, _LOCK_FILE_BYTES)
        finally:
            os.close(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        raise translate_os_error(exc, action) from exc


def check_data_file(path: pathlib.Path) -> None:
    """Refuse a ``data.mdb`` shorter than its newest transaction reaches (see
    the module docstring), and an empty one, which LMDB would take for a new
    environment; one too short to hold its meta pages, or whose meta pages
    are not LMDB's, is left to LMDB (which refuses it cleanly).

    Raises:
        StoreCorrupt: it is truncated or empty.
    """
    try:
        with path.open("rb") as data:
            size = os.fstat(data.fileno()).st_size
            head = data.read(2 * 65536)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise translate_os_error(exc, f"open store {path.parent}") from exc
    if size == 0:
        msg = (
            f"store {path.parent}: {path} is empty (0 bytes), as a copy or restore cut "
            "short leaves it; it is not taken for a new store: restore a whole copy "
            f"again (mdb_copy makes one of a running store), or remove {path} to start "
            "a new, empty queue manager (a new GUID, no queues, no messages)"
        )
        raise StoreCorrupt(msg)
    if len(head) < _META.size + 16:
        return
    magic, page_size, _, _ = _META.unpack_from(head, 16)
    if magic != _META_MAGIC or page_size < 512 or len(head) < page_size + 16 + _META.size:
        return
    newest = max(
        (_META.unpack_from(head, offset + 16) for offset in (0, page_size)),
        key=lambda meta: meta[3] if meta[0] == _META_MAGIC else -1,
    )
    needed = (newest[2] + 1) * page_size
    if size < needed:
        msg = (
            f"store {path.parent}: data.mdb is {size} bytes, but its last transaction "
            f"uses pages up to {needed} bytes: the file is truncated (an incomplete "
            "copy or restore?); restore a whole copy (mdb_copy makes one of a running store)"
        )
        raise StoreCorrupt(msg)
