"""The errors of the store.

Theory of operation
-------------------
Every failure that leaves :mod:`storage` is a :class:`StoreError`. LMDB's own
exceptions (and the ``OSError`` of a full disk) are translated in exactly one
place, :func:`translate_lmdb_error`, so callers never see an ``lmdb.Error``.

Two families matter to the caller:

* **Batch-level** errors (:class:`StoreFull`, :class:`StoreCorrupt`, plain
  :class:`StoreError`) mean that the write transaction was aborted and nothing
  of it was applied. The store stays open and usable.
* **Per-operation** errors (:class:`QueueMissing`, :class:`QueueExists`,
  :class:`QuotaExceeded`, :class:`MessageMissing`, :class:`InvalidRecord`,
  :class:`InvalidOperation`, and for prepared transactions :class:`XidInUse`,
  :class:`XidResolved`, :class:`XidUnknown`) fail one operation when a batch is planned;
  they are *returned* in the outcome of its unit (failing the whole unit
  when it is atomic) while the other units commit.

:class:`MapFull` is not an error a caller sees: it tells the writer that a
planned batch did not fit in the map, so that the store can grow it and the
same plan be applied again.
"""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

import lmdb

__all__ = [
    "IncomingStreamMoved",
    "InvalidOperation",
    "InvalidRecord",
    "MapFull",
    "MessageMissing",
    "QueueExists",
    "QueueMissing",
    "QuotaExceeded",
    "SchemaMismatch",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "XidInUse",
    "XidResolved",
    "XidUnknown",
    "translate_lmdb_error",
    "translate_os_error",
    "translate_write_error",
]


class StoreError(Exception):
    """Base class of every error raised by the store.

    Raised as itself for LMDB failures that have no more specific meaning; the
    message then carries LMDB's own text.
    """


class StoreFull(StoreError):
    """No room for the write: the map reached ``max_map_size``, or the disk is
    full (``ENOSPC``/``EDQUOT`` while growing or committing).

    Nothing of the failed transaction was applied. Reads and smaller writes
    still work; free space (purge or delete queues, or free the disk) to go on.
    """


class MapFull(StoreError):
    """A planned batch did not fit in the LMDB map; nothing of it was applied.

    The store grows the map (within its limits) and the same plan is applied
    again; only when it cannot grow do the batch's units fail with
    :class:`StoreFull`.
    """


class StoreCorrupt(StoreError):
    """Bytes in the store are not what the code wrote: a record or schema value
    does not decode, or LMDB reports a corrupted or invalid file."""


class SchemaMismatch(StoreError):
    """The store was written with a schema version this code does not read.

    Attributes:
        found: schema version recorded in the file.
        supported: the schema version this code reads and writes.
    """

    def __init__(self, found: int, supported: int) -> None:
        relation = "newer" if found > supported else "older"
        msg = (
            f"store schema version {found} is {relation} than version {supported}, "
            "the one this version of qmgr reads"
        )
        super().__init__(msg)
        self.found = found
        self.supported = supported


class StoreClosed(StoreError):
    """The :class:`Store` was used after :meth:`Store.close`."""


class StoreLocked(StoreError):
    """Another :class:`Store` (in this or another process) has the directory
    open. One store directory has exactly one owner at a time."""


class QueueExists(StoreError):
    """A queue of that canonical name (or its journal queue) already exists.

    Attributes:
        name: the canonical name that is taken.
    """

    def __init__(self, name: str, *, display_name: str | None = None) -> None:
        # The queue that exists, as its creator wrote it (the canonical name
        # folds case: 'Ω' is taken as 'ω').
        msg = f"queue {display_name or name!r} already exists"
        super().__init__(msg)
        self.name = name


class QueueMissing(StoreError):
    """No queue of that name or id exists (for example it was deleted while a
    transaction that uses it was open).

    Attributes:
        queue: the canonical name or the queue id that was looked up.
    """

    def __init__(self, queue: str | int) -> None:
        msg = f"queue {queue!r} does not exist"
        super().__init__(msg)
        self.queue = queue


class QuotaExceeded(StoreError):
    """A unit's sends would take a queue's ``bytes`` above its quota.

    Attributes:
        queue_name: canonical name of the queue.
        quota: the queue's quota in bytes.
        would_be: the queue's ``bytes`` had the send been applied.
    """

    def __init__(self, queue_name: str, quota: int, would_be: int) -> None:
        msg = f"queue {queue_name!r} quota of {quota} bytes exceeded (would be {would_be})"
        super().__init__(msg)
        self.queue_name = queue_name
        self.quota = quota
        self.would_be = would_be


class MessageMissing(StoreError):
    """The message to remove is not in the queue (a purge or another
    transaction removed it first).

    Attributes:
        queue_id: the queue that was searched.
        lookup_id: the missing message's lookup id.
    """

    def __init__(self, queue_id: int, lookup_id: int) -> None:
        msg = f"message {lookup_id} is not in queue id {queue_id}"
        super().__init__(msg)
        self.queue_id = queue_id
        self.lookup_id = lookup_id


class ListExists(StoreError):
    """A distribution list of that name already exists."""

    def __init__(self, name: str) -> None:
        super().__init__(f"distribution list {name!r} already exists")
        self.name = name


class ListMissing(StoreError):
    """There is no distribution list of that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"distribution list {name!r} does not exist")
        self.name = name


class ConfirmationMissing(StoreError):
    """The copy awaiting confirmation to settle is not there (its outcome was
    settled already)."""


class IncomingStreamMoved(StoreError):
    """The exactly-once stream a write advances is not where that write follows
    (another write of the same stream failed, or was written after it): storing
    it would leave a hole in the stream."""


class InvalidOperation(StoreError):
    """The operation is not allowed on this queue, for example deleting or
    creating a journal queue on its own (journal queues live and die with the
    queue they journal)."""


class InvalidRecord(StoreError, ValueError):
    """A record handed to the store cannot be encoded: a field is out of range
    (priority above 7, a correlation id that is not 0 or 20 bytes, a string or
    body above its size limit, an integer that does not fit its width)."""


class XidInUse(StoreError):
    """A transaction id is already prepared, or has a kept outcome.

    Attributes:
        xid: the transaction id.
        state: ``"prepared"``, ``"committed"`` or ``"aborted"``.
    """

    def __init__(self, xid: str, state: str) -> None:
        msg = f"transaction id {xid!r} is already in use ({state})"
        super().__init__(msg)
        self.xid = xid
        self.state = state


class XidResolved(StoreError):
    """A prepared transaction was asked to end the other way than it already did
    (a commit of an aborted one, an abort of a committed one).

    Attributes:
        xid: the transaction id.
        committed: True if it was committed, False if it was aborted.
        resolved_at: when it was, in wall seconds.
    """

    def __init__(self, xid: str, committed: bool, resolved_at: float) -> None:
        done, asked = ("committed", "aborted") if committed else ("aborted", "committed")
        msg = f"transaction {xid!r} was already {done}; it cannot be {asked}"
        super().__init__(msg)
        self.xid = xid
        self.committed = committed
        self.resolved_at = resolved_at


class XidUnknown(StoreError):
    """No prepared transaction has that id, and no outcome of it is kept.

    Attributes:
        xid: the transaction id.
    """

    def __init__(self, xid: str) -> None:
        msg = f"transaction {xid!r} is not prepared and has no kept outcome"
        super().__init__(msg)
        self.xid = xid


# LMDB return codes that mean "the bytes on disk are not a valid environment".
_CORRUPT = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.VersionMismatchError,
)
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# Errors a failed write may report when the real cause is space: LMDB turns
# a short write (what a full tmpfs gives) into EIO.
_WRITE_SPACE_ERRNOS = _DISK_FULL_ERRNOS | {errno.EIO}
#: Free bytes below which a failed write is blamed on a full disk.
DISK_NEARLY_FULL: int = 4 << 20


def translate_lmdb_error(exc: lmdb.Error, action: str) -> StoreError:
    """Map one ``lmdb.Error`` to the :class:`StoreError` that says what it means.

    ``MapFullError`` is not expected here (the store grows the map and retries);
    if it arrives anyway it means growth was impossible, hence :class:`StoreFull`.

    Args:
        exc: the LMDB exception.
        action: what the store was doing, for the message ("commit").

    Returns:
        The error to raise ``from exc``.
    """
    text = f"{action}: {exc}"
    # Errors raised by LMDB carry the return code; hand-made ones may not.
    code: int = getattr(exc, "code", 0)
    if isinstance(exc, lmdb.DiskError | lmdb.MapFullError) or code in _DISK_FULL_ERRNOS:
        return StoreFull(text)
    if isinstance(exc, _CORRUPT):
        return StoreCorrupt(text)
    return StoreError(text)


def translate_os_error(exc: OSError, action: str) -> StoreError:
    """Map an ``OSError`` met while opening or growing the store.

    Args:
        exc: the OS error.
        action: what the store was doing.

    Returns:
        :class:`StoreFull` for ``ENOSPC``/``EDQUOT``, else :class:`StoreError`.
    """
    text = f"{action}: {exc}"
    if exc.errno in _DISK_FULL_ERRNOS:
        return StoreFull(text)
    return StoreError(text)


def translate_write_error(exc: lmdb.Error, action: str, data_file: Path) -> StoreError:
    """Map the ``lmdb.Error`` of a write transaction, telling a full disk from a broken one.

    A write that fails for lack of space does not always say so: LMDB
    reports a short write as EIO. When the error is one a lack of space can
    cause, the file system's free space and the process's file size limit
    (``RLIMIT_FSIZE``) decide: with little room left it is
    :class:`StoreFull`, otherwise the I/O error it claims to be.

    Args:
        exc: the LMDB exception.
        action: what the store was doing.
        data_file: the environment's ``data.mdb``.
    """
    code: int = getattr(exc, "code", 0)
    if isinstance(exc, lmdb.MapFullError):
        return StoreFull(f"{action}: {exc}")
    if code in _WRITE_SPACE_ERRNOS or isinstance(exc, lmdb.DiskError):
        reason = _space_shortage(data_file)
        if reason is not None:
            return StoreFull(f"{action}: {reason} ({exc})")
    return translate_lmdb_error(exc, action)


def _space_shortage(data_file: Path) -> str | None:
    """Why a write to ``data_file`` may have found no room, or None if there is room."""
    try:
        stats = os.statvfs(data_file.parent)
        size = data_file.stat().st_size
    except OSError:
        return None
    free = stats.f_bavail * stats.f_frsize
    if free < DISK_NEARLY_FULL:
        return f"the file system holding the store has {free} bytes free"
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY and size + DISK_NEARLY_FULL > limit:
        return f"the store file reached the process's file size limit of {limit} bytes"
    return None
