"""Poison handling's stored state: per-message counters, the retry time index, and their reads.

Theory of operation
-------------------
MSMQ 4.0 counts, for every message, how often a transaction that received it
aborted (``PROPID_M_ABORT_COUNT``, since the message entered its current
queue), how often it was moved between a queue and its subqueues
(``PROPID_M_MOVE_COUNT``) and when it last was (``PROPID_M_LAST_MOVE_TIME``).
An abort must not rewrite the message, so the counters live beside it, in
the database ``message_counters``, keyed by the message's queue id and
lookup id (the message key without its leading zero byte): a message that
was never aborted or moved has no entry at all, and every removal of a
message (a receive, a purge's or a deletion's erase step, a move) deletes
its entry in the same write (``_plan`` discards the key with the message's).
Lookup ids are never reused within a queue, nor queue ids, so an entry can
never be taken for another message's.

A message that poison handling moved to a queue's ``;retry`` subqueue comes
back after the queue's retry delay. The database ``retry_due`` is the time
index of those returns: its key is the due time (u64 milliseconds of unix
time), the queue id and the lookup id, so the first key is the next message
due and the daemon reads a bounded number of keys per step from the start.
Nothing is loaded when a store opens: restarting costs the same whatever
the number of waiting messages. An entry whose message left ``;retry``
another way (received, purged, deleted) is simply dropped when it comes
due; one whose message was moved out explicitly is deleted by that move
(the counters record keeps the due time for that).

Message counters, format version 1 (30 bytes)::

    off  size  field
      0     1  format version (1)
      1     1  flags                     0
      2     4  abort_count               u32: aborts since it entered its current queue
      6     4  move_count                u32: moves in its lifetime
     10     4  retry_cycles              u32: trips poison handling gave it through ``;retry``
     14     8  last_move_time            f64 unix seconds, 0.0 if never moved
     22     8  retry_due                 u64 ms of unix time it leaves ``;retry``, 0 if none

Keys::

    message_counters  queue_id u32 + lookup_id u64 (12 B)
    retry_due         due u64 ms + queue_id u32 + lookup_id u64 (20 B), empty value
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ._errors import InvalidRecord, StoreCorrupt

if TYPE_CHECKING:
    from ._catalog import Catalog
    from ._env import Environment
    from ._overlay import QueueState
    from ._plan import PlanContext
    from ._records import QueueRecord

__all__ = [
    "COUNTERS_RECORD_VERSION",
    "DB_MESSAGE_COUNTERS",
    "DB_RETRY_DUE",
    "NO_COUNTERS",
    "POISON_SUFFIX",
    "RETRY_SUFFIX",
    "SUBQUEUE_SUFFIXES",
    "MessageCounters",
    "counters_key",
    "decode_message_counters",
    "due_milliseconds",
    "encode_message_counters",
    "read_counters",
    "read_retries_due",
    "retry_key",
    "split_retry_key",
    "subqueue_bytes",
    "subqueues_of",
]

#: Names of the two databases.
DB_MESSAGE_COUNTERS: Final = b"message_counters"
DB_RETRY_DUE: Final = b"retry_due"
#: The subqueues every NORMAL queue has, by the suffix of their names.
RETRY_SUFFIX: Final = ";retry"
POISON_SUFFIX: Final = ";poison"
SUBQUEUE_SUFFIXES: Final = (RETRY_SUFFIX, POISON_SUFFIX)
COUNTERS_RECORD_VERSION: Final = 1

_KEY = struct.Struct(">IQ")
_RETRY_KEY = struct.Struct(">QIQ")
_RECORD = struct.Struct(">BBIIIdQ")
_MAX_DUE: Final = 0xFFFFFFFFFFFFFFFF


@dataclass(frozen=True, slots=True)
class MessageCounters:
    """What MSMQ counts of a message (see the module docstring)."""

    #: Aborted receives since the message entered its current queue.
    abort_count: int = 0
    #: Moves between a queue and its subqueues, in the message's lifetime.
    move_count: int = 0
    #: Trips poison handling gave it through ``;retry`` (since it was last
    #: moved into its queue by request).
    retry_cycles: int = 0
    #: Unix seconds of the last move, 0.0 if it never moved.
    last_move_time: float = 0.0
    #: While it waits in ``;retry``: when it comes back (u64 milliseconds of unix time).
    retry_due: int = 0


#: The counters of a message without an entry.
NO_COUNTERS: Final = MessageCounters()


def counters_key(queue_id: int, lookup_id: int) -> bytes:
    """Key of ``message_counters``: the message key without its zero byte."""
    return _KEY.pack(queue_id, lookup_id)


def retry_key(due: int, queue_id: int, lookup_id: int) -> bytes:
    """Key of ``retry_due``: due time (u64 ms), queue id, lookup id."""
    return _RETRY_KEY.pack(due, queue_id, lookup_id)


def split_retry_key(key: bytes | memoryview) -> tuple[int, int, int]:
    """``(due ms, queue_id, lookup_id)`` of a ``retry_due`` key.

    Raises:
        StoreCorrupt: it is not 20 bytes long.
    """
    if len(key) != _RETRY_KEY.size:
        msg = f"retry index key {bytes(key).hex()} is corrupt"
        raise StoreCorrupt(msg)
    due, queue_id, lookup_id = _RETRY_KEY.unpack(key)
    return due, queue_id, lookup_id


def due_milliseconds(wall: float) -> int:
    """Unix seconds as the index's u64 milliseconds (rounded up, clamped)."""
    if wall != wall or wall <= 0:
        return 0
    return min(math.ceil(wall * 1000.0), _MAX_DUE)


def encode_message_counters(counters: MessageCounters) -> bytes:
    """Encode a counters record.

    Raises:
        InvalidRecord: a counter does not fit its width.
    """
    try:
        return _RECORD.pack(
            COUNTERS_RECORD_VERSION,
            0,
            counters.abort_count,
            counters.move_count,
            counters.retry_cycles,
            counters.last_move_time,
            counters.retry_due,
        )
    except struct.error as exc:
        msg = f"message counters out of range: {exc}"
        raise InvalidRecord(msg) from exc


def decode_message_counters(data: bytes | memoryview) -> MessageCounters:
    """Decode a counters record.

    Raises:
        StoreCorrupt: the bytes are not one.
    """
    if len(data) != _RECORD.size or data[0] != COUNTERS_RECORD_VERSION or data[1]:
        msg = f"message counters record of {len(data)} bytes is corrupt"
        raise StoreCorrupt(msg)
    _, _, aborts, moves, cycles, last_move, due = _RECORD.unpack(data)
    return MessageCounters(aborts, moves, cycles, last_move, due)


# --------------------------------------------------------------------------- subqueues


def subqueues_of(ctx: PlanContext, name: str) -> list[QueueState]:
    """The subqueues of the queue called ``name``, as the batch sees them."""
    found = []
    for suffix in SUBQUEUE_SUFFIXES:
        state = ctx.queue_named(name + suffix)
        if state is not None:
            found.append(state)
    return found


def subqueue_bytes(ctx: PlanContext, record: QueueRecord) -> int:
    """Bytes in the subqueues of ``record``'s queue: they count against its quota."""
    return sum(state.bytes for state in subqueues_of(ctx, record.name))


# --------------------------------------------------------------------------- reads


def read_counters(
    env: Environment, catalog: Catalog, queue_id: int, lookup_ids: Iterable[int]
) -> dict[int, MessageCounters]:
    """The counters of the messages that have some, by lookup id (one read transaction).

    Raises:
        StoreCorrupt: a record does not decode.
    """
    found: dict[int, MessageCounters] = {}
    db = catalog.dbs.message_counters
    with env.read("message_counters") as txn:
        for lookup_id in lookup_ids:
            data = txn.get(_KEY.pack(queue_id, lookup_id), db=db)
            if data is not None:
                found[lookup_id] = decode_message_counters(data)
    return found


def read_retries_due(
    env: Environment, catalog: Catalog, *, before: int | None, limit: int
) -> list[tuple[int, int, int]]:
    """The first ``limit`` entries of the retry index, ``(due ms, queue_id, lookup_id)``,
    in due order; with ``before``, only those due before it.

    Raises:
        StoreCorrupt: a key is corrupt.
    """
    found: list[tuple[int, int, int]] = []
    if limit <= 0:
        return found
    with env.read("retry_due") as txn, txn.cursor(db=catalog.dbs.retry_due) as cursor:
        for key in cursor.iternext(keys=True, values=False):
            entry = split_retry_key(key)
            if before is not None and entry[0] >= before:
                break
            found.append(entry)
            if len(found) >= limit:
                break
    return found
