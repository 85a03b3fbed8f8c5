"""The errors of the store.

Every failure that leaves :mod:`storage` is a :class:`StoreError`. LMDB's own
exceptions (and the ``OSError`` of a full disk) are translated in exactly one
place, :func:`translate_lmdb_error`, so callers never see an ``lmdb.Error``.

Two families matter to the caller:

* **Batch-level** errors (:class:`StoreFull`, :class:`StoreCorrupt`, plain
  :class:`StoreError`) mean that the write transaction was aborted and nothing
  of it was applied. The store stays open and usable.
* **Per-unit** errors (:class:`QueueMissing`, :class:`QuotaExceeded`,
  :class:`MessageMissing`, :class:`InvalidRecord`) are raised by the queue
  methods, and inside :meth:`Store.commit_batch` they are *returned* in the
  failed unit's ``CommitOutcome.error`` while the other units commit.
"""

from __future__ import annotations

import errno

import lmdb

__all__ = [
    "InvalidOperation",
    "InvalidRecord",
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
    "translate_lmdb_error",
    "translate_os_error",
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


class StoreCorrupt(StoreError):
    """Bytes in the store are not what the code wrote: a record or schema value
    does not decode, or LMDB reports a corrupted or invalid file."""


class SchemaMismatch(StoreError):
    """The store was written by a newer version of the code.

    Attributes:
        found: schema version recorded in the file.
        supported: newest schema version this code understands.
    """

    def __init__(self, found: int, supported: int) -> None:
        msg = f"store schema version {found} is newer than the supported version {supported}"
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

    def __init__(self, name: str) -> None:
        msg = f"queue {name!r} already exists"
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


class InvalidOperation(StoreError):
    """The operation is not allowed on this queue, for example deleting or
    creating a journal queue on its own (journal queues live and die with the
    queue they journal)."""


class InvalidRecord(StoreError, ValueError):
    """A record handed to the store cannot be encoded: a field is out of range
    (priority above 7, a correlation id that is not 0 or 20 bytes, a string or
    body above its size limit, an integer that does not fit its width)."""


# LMDB return codes that mean "the bytes on disk are not a valid environment".
_CORRUPT = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.VersionMismatchError,
)
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def translate_lmdb_error(exc: lmdb.Error, action: str) -> StoreError:
    """Map one ``lmdb.Error`` to the :class:`StoreError` that says what it means.

    ``MapFullError`` is not expected here (the store grows the map and retries);
    if it arrives anyway it means growth was impossible, hence :class:`StoreFull`.

    Args:
        exc: the LMDB exception.
        action: what the store was doing, for the message ("commit_batch").

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
