"""The records of queues and messages, and their byte encodings.

Theory of operation
-------------------
A record is a value, written whole and read back whole. Every encoding
starts with a fixed part packed with one precompiled :class:`struct.Struct`
(big-endian, no padding, :func:`pack`) whose first byte is the record format
version. Every decoder checks what it reads, so a truncated record, trailing
bytes or random garbage is :class:`StoreCorrupt`, never another exception.
A new field is a new format version that the decoder reads beside the old
ones, so a record written before stays as it is (messages keep version 2
unless they have a deadline or a note; queues keep version 2 unless they
have poison settings). The store reads only its own header of a message:
the payload is the layer above's.

Message record, format version 2 (offsets in bytes)::

    off  size  field
      0     1  format version (2)
      1     1  priority        0..7 (orders a non-transactional queue)
      2     2  reserved        0
      4     4  size            u32, bytes counted against the queue's quota
      8     8  arrived_time    f64 unix seconds, set when the message became visible
     16        payload         the message itself, opaque to the store

The payload is whatever the layer above keeps for a message (``wire``'s
encoded message properties); the store reads only its own 16 bytes, so a
message goes from a socket to LMDB and back without being decoded here.

Queue record, format version 2 (in ``queues``; what does not change), written for a
queue without poison handling::

    off  size  field
      0     1  format version (2)
      1     4  queue_id                  u32
      5     1  kind                      u8 (QueueKind)
      6     1  flags                     bit 0 transactional, bit 1 journal, bit 2 quota set,
                                         bit 3 parent_id set, bit 4 journal_id set
      7     8  quota                     u64 (0 when unset)
     15     4  parent_id                 u32 (0 when unset)
     19     4  journal_id                u32 (0 when unset)
     23     8  created_at                f64 unix seconds
     31     2  name length               u16, UTF-8 bytes
     33     2  display_name length       u16
     35        name, display_name

Queue record, format version 3: a queue with poison handling (its settings, see
:class:`PoisonSettings`). Both versions are read; version 3 is version 2 with
16 bytes between the fixed part and the names::

    off  size  field
      0     1  format version (3)
      1    34  as version 2 (queue_id ... display_name length)
     35     4  retry_count               u32: aborted receives allowed before a move
     39     4  retry_cycles              u32: trips through ``;retry`` before ``;poison``
     43     8  retry_delay               f64 seconds in ``;retry`` before a message comes back
     51        name, display_name

Queue counters, format version 2 (in ``messages``, see ``keys``)::

    off  size  field
      0     1  format version (2)
      1     1  flags                     bit 0 erasing (purged messages remain to be erased)
      2     8  next_lookup_id            u64
     10     8  depth                     u64
     18     8  bytes                     u64
     26     8  purged_below              u64: messages with a lower lookup id were purged

The records of the other concerns sit with them: the outgoing state in
``peering_state``, the prepared header in ``reservations``, the rest in
``ops/<concern>``. Each encoder packs its fixed part with :func:`pack`, so a
field out of range is :class:`InvalidRecord` naming the record.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .errors import InvalidRecord, StoreCorrupt

__all__ = [
    "MAX_NOTE_SIZE",
    "MESSAGE_FORMAT_VERSION",
    "MESSAGE_HEADER_SIZE",
    "POISON_QUEUE_FORMAT_VERSION",
    "QUEUE_FORMAT_VERSION",
    "TIMED_MESSAGE_VERSION",
    "PoisonSettings",
    "QueueKind",
    "QueueRecord",
    "decode_counters",
    "decode_queue",
    "encode_counters",
    "encode_message_record",
    "encode_queue",
    "message_arrived_time",
    "message_deadline",
    "message_header",
    "message_note",
    "message_payload",
    "message_relay_id",
    "pack",
    "stored_text",
]

MESSAGE_FORMAT_VERSION: Final = 2
QUEUE_FORMAT_VERSION: Final = 2
#: The queue record of a queue with poison handling.
POISON_QUEUE_FORMAT_VERSION: Final = 3
#: The queue counters' format (unchanged by the queue record's version 3).
COUNTERS_FORMAT_VERSION: Final = 2


def pack(layout: struct.Struct, what: str, *fields: object) -> bytes:
    """``layout.pack(*fields)``, the fixed part of a record.

    Raises:
        InvalidRecord: a field does not fit its width ("<what> out of range: ...").
    """
    try:
        return layout.pack(*fields)
    except struct.error as exc:
        msg = f"{what} out of range: {exc}"
        raise InvalidRecord(msg) from exc


def stored_text(raw: bytes | memoryview, what: str) -> str:
    """``raw``, text read back from a record or a key, decoded as UTF-8.

    Raises:
        StoreCorrupt: it is not UTF-8 ("<what> is not UTF-8").
    """
    try:
        return bytes(raw).decode()
    except UnicodeDecodeError as exc:
        msg = f"{what} is not UTF-8"
        raise StoreCorrupt(msg) from exc


class QueueKind(enum.IntEnum):
    """What a queue is for."""

    #: An application queue (created with its journal queue).
    NORMAL = 0
    #: ``<name>;journal``: copies of messages removed from its parent queue.
    JOURNAL = 1
    #: ``system$;deadletter``: dead non-transactional messages.
    DEADLETTER = 2
    #: ``system$;deadxact``: dead transactional messages.
    DEADXACT = 3
    #: Messages waiting to go to one remote destination (named by the layer
    #: above, e.g. ``outgoing$;tcp:127.0.0.1:1902\orders``): FIFO by lookup
    #: id, no journal queue, with an :class:`OutgoingState`.
    OUTGOING = 4
    #: ``system$;journal``: copies of confirmed messages this queue manager sent.
    SYSTEM_JOURNAL = 5
    #: ``<name>;retry`` and ``<name>;poison`` of a NORMAL queue (MSMQ 4.0 subqueues):
    #: messages only *move* in (nothing is sent to one); ``parent_id`` is the
    #: queue, and ``journal``/``journal_id`` are the parent's (a message received
    #: from a subqueue is journaled in the parent's journal).
    SUBQUEUE = 6


@dataclass(frozen=True, slots=True)
class PoisonSettings:
    """A queue's poison handling (WCF's netMsmq names): how often a message may
    be received in a transaction that aborts before it moves to ``;retry``, how
    many trips through ``;retry`` it makes before it moves to ``;poison``, and
    how long each trip lasts."""

    #: Aborted receives allowed in the queue before a move (ReceiveRetryCount).
    retry_count: int
    #: Trips through ``;retry`` before a move to ``;poison`` (MaxRetryCycles).
    retry_cycles: int
    #: Seconds a message waits in ``;retry`` (RetryCycleDelay).
    retry_delay: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRecord:
    """A queue and its committed counters, as stored in ``queues``."""

    #: u32, assigned by the store, never reused.
    queue_id: int
    #: Canonical key: lower-case, e.g. ``orders``, ``orders;journal``, ``system$;deadletter``.
    name: str
    #: The name as the user typed it at creation.
    display_name: str
    kind: QueueKind
    transactional: bool
    #: Copy removed messages to the journal queue.
    journal: bool = False
    #: Bytes; ``None`` is unlimited.
    quota: int | None = None
    #: For a JOURNAL queue: the queue it journals (for a SUBQUEUE, its queue); else ``None``.
    parent_id: int | None = None
    #: For a NORMAL queue (and its subqueues): the id of its ``<name>;journal`` queue.
    journal_id: int | None = None
    #: Unix seconds.
    created_at: float
    #: Next lookup id to assign (starts at 1).
    next_lookup_id: int = 1
    #: Messages in the queue (with a lookup id at or above ``purged_below``).
    depth: int = 0
    #: Sum of their sizes (what the quota counts).
    bytes: int = 0
    #: Every message with a lower lookup id was purged: invisible at once, and
    #: erased from the file in bounded steps.
    purged_below: int = 0
    #: Purged messages remain in the file to be erased.
    erasing: bool = False
    #: Poison handling, or ``None`` (off: aborts are counted, nothing moves).
    poison: PoisonSettings | None = None

    def companion(
        self, queue_id: int, suffix: str, kind: QueueKind, created_at: float
    ) -> QueueRecord:
        """A new queue that belongs to this one, named with ``suffix``: its journal
        (``kind`` JOURNAL) or one of its subqueues (SUBQUEUE, journaled as this
        queue is). ``parent_id`` is this queue; the counters are zero."""
        subqueue = kind is QueueKind.SUBQUEUE
        return QueueRecord(
            queue_id=queue_id,
            name=self.name + suffix,
            display_name=self.display_name + suffix,
            kind=kind,
            transactional=self.transactional,
            journal=self.journal and subqueue,
            parent_id=self.queue_id,
            journal_id=self.journal_id if subqueue else None,
            created_at=created_at,
        )

    def with_counters(
        self, *, next_lookup_id: int, depth: int, size: int, purged_below: int, erasing: bool
    ) -> QueueRecord:
        """A copy with new counters (written once per touched queue per batch, and
        read back by :func:`decode_counters`, so it avoids the cost of
        ``dataclasses.replace``)."""
        return QueueRecord(
            queue_id=self.queue_id,
            name=self.name,
            display_name=self.display_name,
            kind=self.kind,
            transactional=self.transactional,
            journal=self.journal,
            quota=self.quota,
            parent_id=self.parent_id,
            journal_id=self.journal_id,
            created_at=self.created_at,
            next_lookup_id=next_lookup_id,
            depth=depth,
            bytes=size,
            purged_below=purged_below,
            erasing=erasing,
            poison=self.poison,
        )


# --------------------------------------------------------------------------- messages

_MESSAGE_HEADER = struct.Struct(">BBHId")
#: Bytes of the store's header before a message's payload (a version 2 record).
MESSAGE_HEADER_SIZE: Final = _MESSAGE_HEADER.size  # 16
#: A version 3 record: version, priority, flags (1: the deadline is set, 2: the
#: note is a relay id, indexed in ``relayed``), note length, size, arrived time,
#: deadline (0: none), then the note and the payload.
_TIMED_HEADER = struct.Struct(">BBBBIdd")
_TIMED_HEADER_SIZE: Final = _TIMED_HEADER.size  # 24
#: Record version of a message with a deadline or a note.
TIMED_MESSAGE_VERSION: Final = 3
#: Longest note a message record keeps.
MAX_NOTE_SIZE: Final = 255
_ARRIVED_TIME = struct.Struct(">d")
_ARRIVED_TIME_OFFSET: Final = 8
_DEADLINE_OFFSET: Final = 16
_HAS_DEADLINE: Final = 0x01
_RELAY_NOTE: Final = 0x02


def encode_message_record(
    payload: Sequence[bytes | bytearray | memoryview] | bytes | bytearray | memoryview,
    *,
    priority: int,
    size: int,
    arrived_time: float,
    deadline: float | None = None,
    note: bytes = b"",
    relay: bool = False,
) -> bytes:
    """A message record: the store's header, then the payload (one part or several).

    A message with a ``deadline`` (unix seconds; the store indexes it in
    ``expiry``) or a ``note`` (up to 255 opaque bytes of the layer above) gets
    a version 3 header; any other a version 2 one. With ``relay`` the note is
    an outgoing entry's relay id (indexed in ``relayed`` while the record is
    there: see ``ops.peering``).

    Raises:
        InvalidRecord: the priority is not 0..7, the size does not fit in 32
            bits, the deadline is not positive, the note is too long, or
            ``relay`` comes without a note.
    """
    if not 0 <= priority <= 7 or not 0 <= size <= 0xFFFFFFFF:
        msg = f"message record with priority {priority} and size {size} is out of range"
        raise InvalidRecord(msg)
    if relay and not note:
        msg = "a message record indexed by its relay id needs the id as its note"
        raise InvalidRecord(msg)
    if deadline is None and not note:
        header = _MESSAGE_HEADER.pack(MESSAGE_FORMAT_VERSION, priority, 0, size, arrived_time)
    else:
        if len(note) > MAX_NOTE_SIZE or (deadline is not None and not 0 < deadline < math.inf):
            msg = f"message record with a {len(note)}-byte note and deadline {deadline} is invalid"
            raise InvalidRecord(msg)
        flags = (0 if deadline is None else _HAS_DEADLINE) | (_RELAY_NOTE if relay else 0)
        header = _TIMED_HEADER.pack(
            TIMED_MESSAGE_VERSION, priority, flags, len(note), size, arrived_time, deadline or 0.0
        )
        if note:
            header += note
    if isinstance(payload, bytes | bytearray | memoryview):
        return b"".join((header, payload))
    return b"".join((header, *payload))


def _header_size(data: bytes | memoryview) -> int:
    if len(data) >= MESSAGE_HEADER_SIZE:
        version = data[0]
        if version == MESSAGE_FORMAT_VERSION:
            return MESSAGE_HEADER_SIZE
        if version == TIMED_MESSAGE_VERSION and len(data) >= _TIMED_HEADER_SIZE + data[3]:
            return _TIMED_HEADER_SIZE + data[3]
    msg = f"message record of {len(data)} bytes is not a version 2 or 3 record"
    raise StoreCorrupt(msg)


def message_header(data: bytes | memoryview) -> tuple[int, int]:
    """``(priority, size)`` from a stored message record.

    Raises:
        StoreCorrupt: the bytes are not a message record of a known version.
    """
    _header_size(data)
    priority = data[1]
    size: int = _SIZE.unpack_from(data, 4)[0]
    if priority > 7:
        msg = f"message record with priority {priority} is corrupt"
        raise StoreCorrupt(msg)
    return priority, size


_SIZE = struct.Struct(">I")


def message_arrived_time(data: bytes | memoryview) -> float:
    """When a stored message became visible (the record was checked by :func:`message_header`)."""
    value: float = _ARRIVED_TIME.unpack_from(data, _ARRIVED_TIME_OFFSET)[0]
    return value


def message_deadline(data: bytes | memoryview) -> float | None:
    """When a stored message expires (unix seconds), or None."""
    if data[0] != TIMED_MESSAGE_VERSION or not data[2] & _HAS_DEADLINE:
        return None
    value: float = _ARRIVED_TIME.unpack_from(data, _DEADLINE_OFFSET)[0]
    return value


def message_note(data: bytes | memoryview) -> bytes:
    """The note the layer above kept with a stored message (empty if none; a
    relay id is not a note: :func:`message_relay_id`)."""
    if data[0] != TIMED_MESSAGE_VERSION or data[2] & _RELAY_NOTE:
        return b""
    return bytes(data[_TIMED_HEADER_SIZE : _TIMED_HEADER_SIZE + data[3]])


def message_relay_id(data: bytes | memoryview) -> bytes:
    """The relay id a stored outgoing entry is indexed by (empty if none)."""
    if data[0] != TIMED_MESSAGE_VERSION or not data[2] & _RELAY_NOTE:
        return b""
    return bytes(data[_TIMED_HEADER_SIZE : _TIMED_HEADER_SIZE + data[3]])


def message_payload(data: bytes | memoryview) -> memoryview:
    """The payload of a stored message record, without copying it."""
    return memoryview(data)[_header_size(data) :]


# --------------------------------------------------------------------------- queues

_QUEUE_FIXED = struct.Struct(">BIBBQIIdHH")
_QUEUE_FIXED_SIZE: Final = _QUEUE_FIXED.size  # 35
_QUEUE_POISON = struct.Struct(">IId")
_QUEUE_VERSIONS: Final = (QUEUE_FORMAT_VERSION, POISON_QUEUE_FORMAT_VERSION)
_Q_TRANSACTIONAL: Final = 0x01
_Q_JOURNAL: Final = 0x02
_Q_QUOTA: Final = 0x04
_Q_PARENT: Final = 0x08
_Q_JOURNAL_ID: Final = 0x10
_QUEUE_FLAGS: Final = _Q_TRANSACTIONAL | _Q_JOURNAL | _Q_QUOTA | _Q_PARENT | _Q_JOURNAL_ID
_QUEUE_KINDS: Final = {int(kind): kind for kind in QueueKind}
_COUNTERS = struct.Struct(">BBQQQQ")
_C_ERASING: Final = 0x01


def encode_queue(record: QueueRecord) -> bytes:
    """Encode what does not change of a queue (its counters are :func:`encode_counters`).

    Raises:
        InvalidRecord: a field is out of range or a name is too long.
    """
    flags = 0
    if record.transactional:
        flags |= _Q_TRANSACTIONAL
    if record.journal:
        flags |= _Q_JOURNAL
    if record.quota is not None:
        flags |= _Q_QUOTA
    if record.parent_id is not None:
        flags |= _Q_PARENT
    if record.journal_id is not None:
        flags |= _Q_JOURNAL_ID
    name_raw = record.name.encode()
    display_raw = record.display_name.encode()
    poison = record.poison
    tail = b"" if poison is None else _encode_poison(poison)
    fixed = pack(
        _QUEUE_FIXED,
        "queue record field",
        QUEUE_FORMAT_VERSION if poison is None else POISON_QUEUE_FORMAT_VERSION,
        record.queue_id,
        record.kind,
        flags,
        record.quota or 0,
        record.parent_id or 0,
        record.journal_id or 0,
        record.created_at,
        len(name_raw),
        len(display_raw),
    )
    return b"".join((fixed, tail, name_raw, display_raw))


def _encode_poison(poison: PoisonSettings) -> bytes:
    delay = poison.retry_delay
    if not 0 <= delay < float("inf"):
        msg = f"retry delay must be a finite number of seconds >= 0, not {delay!r}"
        raise InvalidRecord(msg)
    return pack(_QUEUE_POISON, "queue record field", poison.retry_count, poison.retry_cycles, delay)


def decode_queue(data: bytes | memoryview) -> QueueRecord:
    """Decode a queue record (with zero counters; :func:`decode_counters` adds them).

    Raises:
        StoreCorrupt: the bytes are not a valid queue record.
    """
    try:
        (
            version,
            queue_id,
            kind,
            flags,
            quota,
            parent_id,
            journal_id,
            created_at,
            name_length,
            display_length,
        ) = _QUEUE_FIXED.unpack_from(data)
    except struct.error as exc:
        msg = f"queue record of {len(data)} bytes is shorter than its fixed part"
        raise StoreCorrupt(msg) from exc
    names_start = _QUEUE_FIXED_SIZE
    poison = None
    if version == POISON_QUEUE_FORMAT_VERSION:
        if len(data) < names_start + _QUEUE_POISON.size:
            msg = f"queue record of {len(data)} bytes is shorter than its version 3 fixed part"
            raise StoreCorrupt(msg)
        count, cycles, delay = _QUEUE_POISON.unpack_from(data, names_start)
        names_start += _QUEUE_POISON.size
        if not 0 <= delay < float("inf"):
            msg = f"queue record has a corrupt retry delay {delay!r}"
            raise StoreCorrupt(msg)
        poison = PoisonSettings(count, cycles, delay)
    display_start = names_start + name_length
    if (
        version not in _QUEUE_VERSIONS
        or display_start + display_length != len(data)
        or flags & ~_QUEUE_FLAGS
        or kind not in _QUEUE_KINDS
    ):
        msg = (
            f"queue record is corrupt (version {version}, kind {kind}, flags {flags:#04x}, "
            f"{len(data)} bytes)"
        )
        raise StoreCorrupt(msg)
    try:
        name = bytes(data[names_start:display_start]).decode()
        display_name = bytes(data[display_start:]).decode()
    except UnicodeDecodeError as exc:
        msg = f"queue record has a name that is not UTF-8: {exc}"
        raise StoreCorrupt(msg) from exc
    return QueueRecord(
        queue_id=queue_id,
        name=name,
        display_name=display_name,
        kind=_QUEUE_KINDS[kind],
        transactional=bool(flags & _Q_TRANSACTIONAL),
        journal=bool(flags & _Q_JOURNAL),
        quota=quota if flags & _Q_QUOTA else None,
        parent_id=parent_id if flags & _Q_PARENT else None,
        journal_id=journal_id if flags & _Q_JOURNAL_ID else None,
        created_at=created_at,
        poison=poison,
    )


def encode_counters(record: QueueRecord) -> bytes:
    """Encode a queue's counters.

    Raises:
        InvalidRecord: a counter is out of range.
    """
    return pack(
        _COUNTERS,
        "queue counters",
        COUNTERS_FORMAT_VERSION,
        _C_ERASING if record.erasing else 0,
        record.next_lookup_id,
        record.depth,
        record.bytes,
        record.purged_below,
    )


def decode_counters(record: QueueRecord, data: bytes | memoryview) -> QueueRecord:
    """``record`` with the counters stored in ``data``.

    Raises:
        StoreCorrupt: the bytes are not queue counters.
    """
    if len(data) != _COUNTERS.size or data[0] != COUNTERS_FORMAT_VERSION or data[1] & ~_C_ERASING:
        msg = f"counters of queue {record.name!r} are corrupt ({len(data)} bytes)"
        raise StoreCorrupt(msg)
    _, flags, next_lookup_id, depth, size, purged_below = _COUNTERS.unpack(data)
    return record.with_counters(
        next_lookup_id=next_lookup_id,
        depth=depth,
        size=size,
        purged_below=purged_below,
        erasing=bool(flags & _C_ERASING),
    )
