"""The records the store keeps, and their byte encodings.

Both encodings are a fixed part packed with one precompiled
:class:`struct.Struct` (big-endian, no padding), followed by the variable
fields in a fixed order. The first byte is the record format version. Every
variable field's length is in the fixed part, and the decoder checks that the
lengths add up to exactly the length of the value, so a truncated record, a
record with trailing bytes, or random garbage is reported as
:class:`StoreCorrupt` and never as any other exception.

Message record, format version 1 (offsets in bytes)::

    off  size  field
      0     1  format version (1)
      1    16  message_id_qm (UUID bytes)
     17     4  message_id_ordinal        u32
     21     4  app_specific              u32
     25     1  priority                  u8, 0..7
     26     1  delivery                  u8, 0 express / 1 recoverable
     27     1  acknowledge               u8
     28     1  journal_level             u8
     29     1  flags                     bit 0 transactional, bit 1 correlation id present
     30     2  message_class             u16
     32     4  time_to_reach_queue       u32 seconds
     36     4  time_to_be_received       u32 seconds
     40     8  sent_time                 f64 unix seconds
     48     8  arrived_time              f64 unix seconds
     56    16  source_qm (UUID bytes)
     72    20  correlation_id            zeros when absent
     92     2  label length              u16, UTF-8 bytes
     94     2  admin_queue length        u16
     96     2  response_queue length     u16
     98     2  destination length        u16
    100     4  extension length          u32
    104     4  body length               u32
    108        label, admin_queue, response_queue, destination, extension, body

Queue record, format version 1::

    off  size  field
      0     1  format version (1)
      1     4  queue_id                  u32
      5     1  kind                      u8 (QueueKind)
      6     1  flags                     bit 0 transactional, bit 1 journal, bit 2 quota set,
                                         bit 3 parent_id set, bit 4 journal_id set
      7     8  quota                     u64 (0 when unset)
     15     4  parent_id                 u32 (0 when unset)
     19     4  journal_id                u32 (0 when unset)
     23     8  created_at                f64 unix seconds
     31     8  next_lookup_id            u64
     39     8  depth                     u64
     47     8  bytes                     u64
     55     2  name length               u16, UTF-8 bytes
     57     2  display_name length       u16
     59        name, display_name
"""

from __future__ import annotations

import enum
import struct
import uuid
from dataclasses import dataclass
from typing import Final

from ._errors import InvalidRecord, StoreCorrupt

__all__ = [
    "MAX_BODY_SIZE",
    "MAX_LABEL_LENGTH",
    "MESSAGE_FORMAT_VERSION",
    "QUEUE_FORMAT_VERSION",
    "MessageRecord",
    "QueueKind",
    "QueueRecord",
    "decode_message",
    "decode_queue",
    "encode_message",
    "encode_message_as",
    "encode_queue",
    "finish_message",
    "format_message_id",
    "message_accounting",
]

MESSAGE_FORMAT_VERSION: Final = 1
QUEUE_FORMAT_VERSION: Final = 1
#: Largest message body the store accepts, in bytes.
MAX_BODY_SIZE: Final = 4 << 20
#: Longest label, in characters.
MAX_LABEL_LENGTH: Final = 250
#: Length of a correlation id when present.
CORRELATION_ID_SIZE: Final = 20


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
    journal: bool
    #: Bytes; ``None`` is unlimited.
    quota: int | None
    #: For a JOURNAL queue: the queue it journals; else ``None``.
    parent_id: int | None
    #: For a NORMAL queue: the id of its ``<name>;journal`` queue; else ``None``.
    journal_id: int | None
    #: Unix seconds.
    created_at: float
    #: Next lookup id to assign (starts at 1).
    next_lookup_id: int
    #: Committed messages in the queue.
    depth: int
    #: Sum of the body sizes of the committed messages (what the quota counts).
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRecord:
    """A message as stored in ``messages``: its properties and its body."""

    #: QM GUID part of the MSMQ message id.
    message_id_qm: uuid.UUID
    #: u32 ordinal part; see :func:`format_message_id`.
    message_id_ordinal: int
    #: Up to 250 characters.
    label: str
    #: Up to 4 MiB.
    body: bytes
    #: ``b""`` or exactly 20 bytes.
    correlation_id: bytes
    #: u32.
    app_specific: int
    #: 0..7.
    priority: int
    #: 0 express, 1 recoverable.
    delivery: int
    #: u8 acknowledgement level bits.
    acknowledge: int
    #: u8: 0 none, 1 deadletter, 2 journal, 3 both.
    journal_level: int
    #: Format name text or ``""``.
    admin_queue: str
    #: Format name text or ``""``.
    response_queue: str
    #: Seconds, u32; 0xFFFFFFFF is infinite.
    time_to_reach_queue: int
    #: Seconds, u32; 0xFFFFFFFF is infinite.
    time_to_be_received: int
    #: u16.
    message_class: int
    #: Unix seconds.
    sent_time: float
    #: Unix seconds; filled in by the store at commit.
    arrived_time: float
    source_qm: uuid.UUID
    #: Sent inside a transaction.
    transactional: bool
    #: The destination format name as sent.
    destination: str
    #: Opaque bytes, stored and returned unchanged.
    extension: bytes = b""


class _MessageRecordSlots:
    """Builds :class:`MessageRecord` instances fast.

    A frozen dataclass's ``__init__`` stores each field with
    ``object.__setattr__`` and takes keyword arguments only; for 21 fields that
    costs about 3 µs, more than encoding the whole record. This class has the
    very same ``__slots__`` (same names, same order, so the same memory layout),
    stores the fields with plain attribute stores, and the result is then
    re-classed as a ``MessageRecord`` (Python allows ``__class__`` assignment
    between classes of identical layout). The result is an ordinary, frozen
    ``MessageRecord`` in every respect; construction is about six times faster.
    """

    __slots__ = MessageRecord.__slots__

    def __init__(
        self,
        message_id_qm: uuid.UUID,
        message_id_ordinal: int,
        label: str,
        body: bytes,
        correlation_id: bytes,
        app_specific: int,
        priority: int,
        delivery: int,
        acknowledge: int,
        journal_level: int,
        admin_queue: str,
        response_queue: str,
        time_to_reach_queue: int,
        time_to_be_received: int,
        message_class: int,
        sent_time: float,
        arrived_time: float,
        source_qm: uuid.UUID,
        transactional: bool,
        destination: str,
        extension: bytes,
    ) -> None:
        self.message_id_qm = message_id_qm
        self.message_id_ordinal = message_id_ordinal
        self.label = label
        self.body = body
        self.correlation_id = correlation_id
        self.app_specific = app_specific
        self.priority = priority
        self.delivery = delivery
        self.acknowledge = acknowledge
        self.journal_level = journal_level
        self.admin_queue = admin_queue
        self.response_queue = response_queue
        self.time_to_reach_queue = time_to_reach_queue
        self.time_to_be_received = time_to_be_received
        self.message_class = message_class
        self.sent_time = sent_time
        self.arrived_time = arrived_time
        self.source_qm = source_qm
        self.transactional = transactional
        self.destination = destination
        self.extension = extension
        self.__class__ = MessageRecord  # type: ignore[assignment]


def format_message_id(qm: uuid.UUID, ordinal: int) -> str:
    """The MSMQ text form of a message id: ``{guid}\\ordinal``.

    The GUID is lower-case and in braces, e.g. ``{6f1c...-...}\\42``.
    """
    prefix = _GUID_PREFIXES.get(qm)
    if prefix is None:
        if len(_GUID_PREFIXES) >= _CACHE_LIMIT:
            _GUID_PREFIXES.clear()
        prefix = _GUID_PREFIXES[qm] = f"{{{qm}}}\\"
    return f"{prefix}{ordinal}"


# Decoded UUIDs are nearly always the same few queue-manager GUIDs, and both
# uuid.UUID(bytes=...) and str(uuid) are slow next to a dict lookup, so keep
# two small caches (cleared when full; the store runs on one thread, and the
# worst a race could do elsewhere is a redundant insert).
_CACHE_LIMIT: Final = 256
_UUIDS: dict[bytes, uuid.UUID] = {}
_GUID_PREFIXES: dict[uuid.UUID, str] = {}
_LAST_UUID: tuple[uuid.UUID, bytes] = (uuid.UUID(int=0), bytes(16))


# --------------------------------------------------------------------------- messages

_MESSAGE_FIXED = struct.Struct(">B16sIIBBBBBHIIdd16s20sHHHHII")
_MESSAGE_FIXED_SIZE: Final = _MESSAGE_FIXED.size  # 108
# priority (offset 25) and body length (offset 104), read without a full decode.
_MESSAGE_PRIORITY_OFFSET: Final = 25
_MESSAGE_BODY_LENGTH = struct.Struct(">I")
_MESSAGE_BODY_LENGTH_OFFSET: Final = 104
_NO_CORRELATION: Final = bytes(CORRELATION_ID_SIZE)
_FLAG_TRANSACTIONAL: Final = 0x01
_FLAG_CORRELATION: Final = 0x02
_MESSAGE_FLAGS: Final = _FLAG_TRANSACTIONAL | _FLAG_CORRELATION


def _uuid_bytes(value: uuid.UUID) -> bytes:
    # UUID.bytes is computed on every access; a message's two GUIDs are almost
    # always the very same object (this queue manager's GUID), so remember the
    # last one by identity. The pair is swapped in as one tuple.
    global _LAST_UUID
    last = _LAST_UUID
    if value is last[0]:
        return last[1]
    raw = value.bytes
    _LAST_UUID = (value, raw)
    return raw


def _uuid(raw: bytes) -> uuid.UUID:
    value = _UUIDS.get(raw)
    if value is None:
        if len(_UUIDS) >= _CACHE_LIMIT:
            _UUIDS.clear()
        value = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return value


def encode_message(record: MessageRecord) -> bytes:
    """Encode a message record.

    Raises:
        InvalidRecord: a field is out of range or too long.
    """
    return encode_message_as(
        record, ordinal=record.message_id_ordinal, arrived_time=record.arrived_time
    )


def encode_message_as(record: MessageRecord, *, ordinal: int, arrived_time: float) -> bytes:
    """Encode ``record`` as if its ordinal and arrival time were the given ones.

    The store uses this at commit, where it assigns both.

    Raises:
        InvalidRecord: a field is out of range or too long.
    """
    label = record.label
    body = record.body
    correlation = record.correlation_id
    if (
        record.priority > 7
        or len(label) > MAX_LABEL_LENGTH
        or len(body) > MAX_BODY_SIZE
        or (correlation and len(correlation) != CORRELATION_ID_SIZE)
    ):
        raise InvalidRecord(_invalid_reason(record))
    flags = _FLAG_TRANSACTIONAL if record.transactional else 0
    if correlation:
        flags |= _FLAG_CORRELATION
    else:
        correlation = _NO_CORRELATION
    label_raw = label.encode()
    admin_raw = record.admin_queue.encode()
    response_raw = record.response_queue.encode()
    destination_raw = record.destination.encode()
    extension = record.extension
    try:
        fixed = _MESSAGE_FIXED.pack(
            MESSAGE_FORMAT_VERSION,
            _uuid_bytes(record.message_id_qm),
            ordinal,
            record.app_specific,
            record.priority,
            record.delivery,
            record.acknowledge,
            record.journal_level,
            flags,
            record.message_class,
            record.time_to_reach_queue,
            record.time_to_be_received,
            record.sent_time,
            arrived_time,
            _uuid_bytes(record.source_qm),
            correlation,
            len(label_raw),
            len(admin_raw),
            len(response_raw),
            len(destination_raw),
            len(extension),
            len(body),
        )
    except struct.error as exc:
        msg = f"message record field out of range: {exc}"
        raise InvalidRecord(msg) from exc
    return b"".join((fixed, label_raw, admin_raw, response_raw, destination_raw, extension, body))


def _invalid_reason(record: MessageRecord) -> str:
    if record.priority > 7:
        return f"priority {record.priority} is above 7"
    if len(record.label) > MAX_LABEL_LENGTH:
        return f"label of {len(record.label)} characters is above {MAX_LABEL_LENGTH}"
    if len(record.body) > MAX_BODY_SIZE:
        return f"body of {len(record.body)} bytes is above {MAX_BODY_SIZE}"
    return f"correlation id of {len(record.correlation_id)} bytes (must be 0 or 20)"


def decode_message(data: bytes) -> MessageRecord:
    """Decode a message record.

    Raises:
        StoreCorrupt: the bytes are not a valid message record.
    """
    try:
        (
            version,
            qm_raw,
            ordinal,
            app_specific,
            priority,
            delivery,
            acknowledge,
            journal_level,
            flags,
            message_class,
            time_to_reach_queue,
            time_to_be_received,
            sent_time,
            arrived_time,
            source_raw,
            correlation,
            label_length,
            admin_length,
            response_length,
            destination_length,
            extension_length,
            body_length,
        ) = _MESSAGE_FIXED.unpack_from(data)
    except struct.error as exc:
        msg = f"message record of {len(data)} bytes is shorter than its fixed part"
        raise StoreCorrupt(msg) from exc
    admin_start = _MESSAGE_FIXED_SIZE + label_length
    response_start = admin_start + admin_length
    destination_start = response_start + response_length
    extension_start = destination_start + destination_length
    body_start = extension_start + extension_length
    if (
        version != MESSAGE_FORMAT_VERSION
        or body_start + body_length != len(data)
        or priority > 7
        or flags & ~_MESSAGE_FLAGS
    ):
        raise StoreCorrupt(_corrupt_message_reason(data, version, priority, flags))
    try:
        label = data[_MESSAGE_FIXED_SIZE:admin_start].decode()
        admin_queue = data[admin_start:response_start].decode()
        response_queue = data[response_start:destination_start].decode()
        destination = data[destination_start:extension_start].decode()
    except UnicodeDecodeError as exc:
        msg = f"message record has a string that is not UTF-8: {exc}"
        raise StoreCorrupt(msg) from exc
    record: MessageRecord = _MessageRecordSlots(  # type: ignore[assignment]
        _uuid(qm_raw),
        ordinal,
        label,
        data[body_start:],
        correlation if flags & _FLAG_CORRELATION else b"",
        app_specific,
        priority,
        delivery,
        acknowledge,
        journal_level,
        admin_queue,
        response_queue,
        time_to_reach_queue,
        time_to_be_received,
        message_class,
        sent_time,
        arrived_time,
        _uuid(source_raw),
        bool(flags & _FLAG_TRANSACTIONAL),
        destination,
        data[extension_start:body_start],
    )
    return record


def _corrupt_message_reason(data: bytes, version: int, priority: int, flags: int) -> str:
    if version != MESSAGE_FORMAT_VERSION:
        return f"message record format version {version} is not {MESSAGE_FORMAT_VERSION}"
    if priority > 7:
        return f"message record priority {priority} is above 7"
    if flags & ~_MESSAGE_FLAGS:
        return f"message record has unknown flags {flags:#04x}"
    return f"message record lengths do not add up to its size of {len(data)} bytes"


def message_accounting(data: bytes) -> tuple[int, int]:
    """Read ``(priority, body size)`` from an encoded message record.

    This is what removing a message needs (the priority index key and the
    queue's byte count) without decoding the whole record.

    Raises:
        StoreCorrupt: the bytes are not a message record of a known version.
    """
    if len(data) < _MESSAGE_FIXED_SIZE or data[0] != MESSAGE_FORMAT_VERSION:
        msg = (
            f"message record of {len(data)} bytes is not a version {MESSAGE_FORMAT_VERSION} record"
        )
        raise StoreCorrupt(msg)
    priority = data[_MESSAGE_PRIORITY_OFFSET]
    body_size: int = _MESSAGE_BODY_LENGTH.unpack_from(data, _MESSAGE_BODY_LENGTH_OFFSET)[0]
    if priority > 7 or body_size > len(data) - _MESSAGE_FIXED_SIZE:
        msg = f"message record with priority {priority} and body size {body_size} is corrupt"
        raise StoreCorrupt(msg)
    return priority, body_size


def finish_message(record: MessageRecord, *, ordinal: int, arrived_time: float) -> MessageRecord:
    """A copy of ``record`` with the ordinal and arrival time the store assigned."""
    final: MessageRecord = _MessageRecordSlots(  # type: ignore[assignment]
        record.message_id_qm,
        ordinal,
        record.label,
        record.body,
        record.correlation_id,
        record.app_specific,
        record.priority,
        record.delivery,
        record.acknowledge,
        record.journal_level,
        record.admin_queue,
        record.response_queue,
        record.time_to_reach_queue,
        record.time_to_be_received,
        record.message_class,
        record.sent_time,
        arrived_time,
        record.source_qm,
        record.transactional,
        record.destination,
        record.extension,
    )
    return final


# --------------------------------------------------------------------------- queues

_QUEUE_FIXED = struct.Struct(">BIBBQIIdQQQHH")
_QUEUE_FIXED_SIZE: Final = _QUEUE_FIXED.size  # 59
_Q_TRANSACTIONAL: Final = 0x01
_Q_JOURNAL: Final = 0x02
_Q_QUOTA: Final = 0x04
_Q_PARENT: Final = 0x08
_Q_JOURNAL_ID: Final = 0x10
_QUEUE_FLAGS: Final = _Q_TRANSACTIONAL | _Q_JOURNAL | _Q_QUOTA | _Q_PARENT | _Q_JOURNAL_ID


def encode_queue(record: QueueRecord) -> bytes:
    """Encode a queue record.

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
    try:
        fixed = _QUEUE_FIXED.pack(
            QUEUE_FORMAT_VERSION,
            record.queue_id,
            record.kind,
            flags,
            record.quota or 0,
            record.parent_id or 0,
            record.journal_id or 0,
            record.created_at,
            record.next_lookup_id,
            record.depth,
            record.bytes,
            len(name_raw),
            len(display_raw),
        )
    except struct.error as exc:
        msg = f"queue record field out of range: {exc}"
        raise InvalidRecord(msg) from exc
    return b"".join((fixed, name_raw, display_raw))


def decode_queue(data: bytes) -> QueueRecord:
    """Decode a queue record.

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
            next_lookup_id,
            depth,
            total_bytes,
            name_length,
            display_length,
        ) = _QUEUE_FIXED.unpack_from(data)
    except struct.error as exc:
        msg = f"queue record of {len(data)} bytes is shorter than its fixed part"
        raise StoreCorrupt(msg) from exc
    display_start = _QUEUE_FIXED_SIZE + name_length
    if (
        version != QUEUE_FORMAT_VERSION
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
        name = data[_QUEUE_FIXED_SIZE:display_start].decode()
        display_name = data[display_start:].decode()
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
        next_lookup_id=next_lookup_id,
        depth=depth,
        bytes=total_bytes,
    )


_QUEUE_KINDS: Final = {int(kind): kind for kind in QueueKind}
