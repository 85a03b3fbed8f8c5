"""The records of prepared transactions and of their outcomes, and their encodings.

A prepared transaction is kept in ``prepared`` (see ``_keys``) as a header
(index 0) and one record per send (index 1..n), in the order it sent them.
Like every record of the store each starts with its format version, and
every decoder checks what it reads (``StoreCorrupt`` otherwise).

Header, format version 1::

    off  size  field
      0     1  format version (1)
      1     8  created_at        f64 wall seconds, when it was prepared
      9     4  sends             u32, how many send records follow the header
     13     8  send_bytes        u64, the sum of their sizes
     21     4  receives          u32: R
     25     4  reserved          u32: Q, queues its local sends reserve bytes on
     29     4  pinned            u32: P, queues it pins (they cannot be deleted)
     33        R x (queue_id u32, lookup_id u64): the received messages, in order
               Q x (queue_id u32, bytes u64): quota bytes reserved per queue
               P x queue_id u32

Format version 2 is version 1 followed by the *owner*, the principal that
prepared it (u16 length, UTF-8), so that only it and administrators may
resolve or list it; a header without an owner is written as version 1, and
a version 1 header reads as owned by nobody (administrators only).

A transaction pins the queues it sends to and receives from; a receive from
a journal queue pins the queue it journals (the journal is deleted with it,
never alone). The reservations and pins are what the catalog rebuilds at
opening, so opening reads the headers only.

Send record, format version 1, a local send (``AppendMessage``)::

      0     1  format version (1)
      1     1  kind (1)
      2     1  priority 0..7
      3     1  flags: 1 exempt from the quota check (AppendMessage.exempt)
      4     4  queue_id          u32
      8     4  size              u32, the bytes counted against the quota
     12        payload

and a send to another queue manager (``AppendOutgoing``)::

      0     1  format version (1)
      1     1  kind (2)
      2     2  name length       u16, UTF-8 bytes of the outgoing queue's name
      4     2  display length    u16
      6     4  size              u32
     10        name, display name, payload

A send with a deadline or a note (see ``AppendMessage``) is kind 3 (local)
or 4 (outgoing): the same fields, then ``deadline`` f64 (0: none) and, for a
local send, the note's length u8 and the note, before the names or payload.

An outcome (in ``outcomes``, keyed by the xid) is 9 bytes: the state u8
(1 committed, 2 aborted) and ``resolved_at`` f64 wall seconds, followed by
the owner's name in UTF-8 when the transaction had one.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ._errors import InvalidRecord, StoreCorrupt
from ._ops import AppendMessage
from ._peering_ops import AppendOutgoing

__all__ = [
    "OutcomeInfo",
    "PreparedHeader",
    "PreparedInfo",
    "Send",
    "decode_header",
    "decode_outcome",
    "decode_send",
    "encode_header",
    "encode_outcome",
    "encode_send",
    "milliseconds",
]

#: A send of a prepared transaction.
Send = AppendMessage | AppendOutgoing

PREPARED_FORMAT_VERSION: Final = 1
#: A header with its owner after the version 1 fields.
OWNED_HEADER_VERSION: Final = 2
_OWNER_LENGTH = struct.Struct(">H")
#: Longest owner name kept, in UTF-8 bytes.
MAX_OWNER_BYTES: Final = 1024
_HEADER = struct.Struct(">BdIQIII")
_RECEIVE = struct.Struct(">IQ")
_PIN = struct.Struct(">I")
_LOCAL = struct.Struct(">BBBBII")
#: Flags of a local send: not refused by the quota (``AppendMessage.exempt``).
_EXEMPT: Final = 1
_OUTGOING = struct.Struct(">BBHHI")
_KIND_LOCAL: Final = 1
_KIND_OUTGOING: Final = 2
_KIND_LOCAL_TIMED: Final = 3
_KIND_OUTGOING_TIMED: Final = 4
_TIMED = struct.Struct(">dB")
_DEADLINE = struct.Struct(">d")
_OUTCOME = struct.Struct(">Bd")
_COMMITTED: Final = 1
_ABORTED: Final = 2
_MAX_U64: Final = 0xFFFFFFFFFFFFFFFF


@dataclass(frozen=True, slots=True)
class PreparedInfo:
    """A prepared transaction, as its header tells it."""

    xid: str
    #: Wall seconds when it was prepared.
    created_at: float
    #: How many messages it sends (local and to other queue managers).
    sends: int
    #: The sum of their sizes.
    send_bytes: int
    #: The messages it received, ``(queue_id, lookup_id)``, in order.
    receives: tuple[tuple[int, int], ...]
    #: The queues its local sends go to.
    queue_ids: frozenset[int]
    #: The principal that prepared it ("": none known, administrators only).
    owner: str = ""


@dataclass(frozen=True, slots=True)
class OutcomeInfo:
    """The kept outcome of a transaction id."""

    xid: str
    #: True: committed; False: aborted.
    committed: bool
    #: Wall seconds when it was resolved.
    resolved_at: float
    #: The principal whose transaction it was ("": none known).
    owner: str = ""


@dataclass(frozen=True, slots=True)
class PreparedHeader:
    """What a prepared transaction's header holds."""

    created_at: float
    sends: int
    send_bytes: int
    receives: tuple[tuple[int, int], ...]
    #: ``(queue_id, bytes)`` reserved on each queue its local sends go to.
    reserved: tuple[tuple[int, int], ...]
    #: The queues it pins.
    pinned: tuple[int, ...]
    #: The principal that prepared it ("": none).
    owner: str = ""

    def info(self, xid: str) -> PreparedInfo:
        """The public view of the header."""
        return PreparedInfo(
            xid=xid,
            created_at=self.created_at,
            sends=self.sends,
            send_bytes=self.send_bytes,
            receives=self.receives,
            queue_ids=frozenset(queue_id for queue_id, _ in self.reserved),
            owner=self.owner,
        )


def encode_header(header: PreparedHeader) -> bytes:
    """Encode a prepared transaction's header.

    Raises:
        InvalidRecord: a number does not fit its width.
    """
    owner = _owner_bytes(header.owner)
    try:
        parts = [
            _HEADER.pack(
                OWNED_HEADER_VERSION if owner else PREPARED_FORMAT_VERSION,
                header.created_at,
                header.sends,
                header.send_bytes,
                len(header.receives),
                len(header.reserved),
                len(header.pinned),
            )
        ]
        parts.extend(_RECEIVE.pack(*receive) for receive in header.receives)
        parts.extend(_RECEIVE.pack(*reserved) for reserved in header.reserved)
        parts.extend(_PIN.pack(queue_id) for queue_id in header.pinned)
        if owner:
            parts.append(_OWNER_LENGTH.pack(len(owner)) + owner)
    except struct.error as exc:
        msg = f"prepared transaction field out of range: {exc}"
        raise InvalidRecord(msg) from exc
    return b"".join(parts)


def decode_header(data: bytes | memoryview) -> PreparedHeader:
    """Decode a prepared transaction's header.

    Raises:
        StoreCorrupt: the bytes are not a header of this version.
    """
    try:
        version, created_at, sends, send_bytes, receives, reserved, pinned = _HEADER.unpack_from(
            data
        )
    except struct.error as exc:
        msg = f"prepared header of {len(data)} bytes is shorter than its fixed part"
        raise StoreCorrupt(msg) from exc
    size = _HEADER.size + (receives + reserved) * _RECEIVE.size + pinned * _PIN.size
    owner = ""
    if version == OWNED_HEADER_VERSION and len(data) >= size + _OWNER_LENGTH.size:
        (length,) = _OWNER_LENGTH.unpack_from(data, size)
        start = size + _OWNER_LENGTH.size
        owner = _owner_text(bytes(data[start : start + length]))
        size = start + length
    elif version != PREPARED_FORMAT_VERSION:
        size = -1
    if size != len(data):
        msg = f"prepared header is corrupt (version {version}, {len(data)} bytes)"
        raise StoreCorrupt(msg)
    offset = _HEADER.size
    pairs = [
        _RECEIVE.unpack_from(data, offset + i * _RECEIVE.size) for i in range(receives + reserved)
    ]
    offset += (receives + reserved) * _RECEIVE.size
    pins = tuple(_PIN.unpack_from(data, offset + i * _PIN.size)[0] for i in range(pinned))
    return PreparedHeader(
        created_at=created_at,
        sends=sends,
        send_bytes=send_bytes,
        receives=tuple(pairs[:receives]),
        reserved=tuple(pairs[receives:]),
        pinned=pins,
        owner=owner,
    )


def _owner_bytes(owner: str) -> bytes:
    """An owner's name as stored.

    Raises:
        InvalidRecord: it is longer than :data:`MAX_OWNER_BYTES`.
    """
    encoded = owner.encode("utf-8")
    if len(encoded) > MAX_OWNER_BYTES:
        msg = f"an owner's name is at most {MAX_OWNER_BYTES} bytes of UTF-8, not {len(encoded)}"
        raise InvalidRecord(msg)
    return encoded


def _owner_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = "the owner of a prepared transaction is not UTF-8"
        raise StoreCorrupt(msg) from exc


def _parts(
    payload: Sequence[bytes | bytearray | memoryview] | bytes | memoryview,
) -> Sequence[bytes | bytearray | memoryview]:
    return (payload,) if isinstance(payload, bytes | bytearray | memoryview) else payload


def encode_send(send: object) -> bytes:
    """Encode one send of a prepared transaction, its payload parts joined.

    Raises:
        InvalidRecord: it is neither kind of send, or a field is out of range.
    """
    try:
        if isinstance(send, AppendMessage):
            timed = send.deadline is not None or bool(send.note)
            kind = _KIND_LOCAL_TIMED if timed else _KIND_LOCAL
            head = _LOCAL.pack(
                PREPARED_FORMAT_VERSION,
                kind,
                send.priority,
                _EXEMPT if send.exempt else 0,
                send.queue_id,
                send.size,
            )
            if timed:
                head += _TIMED.pack(send.deadline or 0.0, len(send.note)) + send.note
            return b"".join((head, *_parts(send.payload)))
        if isinstance(send, AppendOutgoing):
            name = send.name.encode()
            display = send.display_name.encode()
            kind = _KIND_OUTGOING if send.deadline is None else _KIND_OUTGOING_TIMED
            head = _OUTGOING.pack(PREPARED_FORMAT_VERSION, kind, len(name), len(display), send.size)
            if send.deadline is not None:
                head += _DEADLINE.pack(send.deadline)
            return b"".join((head, name, display, *_parts(send.payload)))
    except struct.error as exc:
        msg = f"prepared send field out of range: {exc}"
        raise InvalidRecord(msg) from exc
    msg = f"a prepared transaction sends with AppendMessage or AppendOutgoing, not {send!r}"
    raise InvalidRecord(msg)


def decode_send(data: bytes | memoryview) -> Send:
    """Decode one send of a prepared transaction; its payload is a view of ``data``.

    Raises:
        StoreCorrupt: the bytes are not a send record of this version.
    """
    view = memoryview(data)
    if len(view) >= 2 and view[0] == PREPARED_FORMAT_VERSION:
        kind = view[1]
        if kind in (_KIND_LOCAL, _KIND_LOCAL_TIMED) and len(view) >= _LOCAL.size:
            _, _, priority, flags, queue_id, size = _LOCAL.unpack_from(view)
            start = _LOCAL.size
            deadline: float | None = None
            note = b""
            if kind == _KIND_LOCAL_TIMED and len(view) >= start + _TIMED.size:
                deadline, note_length = _TIMED.unpack_from(view, start)
                start += _TIMED.size
                note = bytes(view[start : start + note_length])
                start += note_length
            if priority <= 7 and start <= len(view):
                return AppendMessage(
                    queue_id,
                    view[start:],
                    priority,
                    size,
                    deadline=deadline or None,
                    note=note,
                    exempt=bool(flags & _EXEMPT),
                )
        elif kind in (_KIND_OUTGOING, _KIND_OUTGOING_TIMED) and len(view) >= _OUTGOING.size:
            _, _, name_length, display_length, size = _OUTGOING.unpack_from(view)
            start = _OUTGOING.size
            outgoing_deadline: float | None = None
            if kind == _KIND_OUTGOING_TIMED and len(view) >= start + _DEADLINE.size:
                outgoing_deadline = _DEADLINE.unpack_from(view, start)[0]
                start += _DEADLINE.size
            middle = start + name_length
            end = middle + display_length
            if end <= len(view):
                try:
                    name = bytes(view[start:middle]).decode()
                    display = bytes(view[middle:end]).decode()
                except UnicodeDecodeError:
                    pass
                else:
                    return AppendOutgoing(
                        name, display, view[end:], size, deadline=outgoing_deadline
                    )
    msg = f"prepared send record of {len(view)} bytes is corrupt"
    raise StoreCorrupt(msg)


def milliseconds(wall: float) -> int:
    """Wall seconds as the u64 milliseconds that order ``outcome_times`` (clamped)."""
    if math.isnan(wall):
        return 0
    if math.isinf(wall):
        return 0 if wall < 0 else _MAX_U64
    return min(max(math.floor(wall * 1000), 0), _MAX_U64)


def encode_outcome(committed: bool, resolved_at: float, owner: str = "") -> bytes:
    """Encode an outcome: its state, when it was resolved, and whose it was.

    Raises:
        InvalidRecord: the owner's name is too long.
    """
    return _OUTCOME.pack(_COMMITTED if committed else _ABORTED, resolved_at) + _owner_bytes(owner)


def decode_outcome(xid: str, data: bytes | memoryview) -> OutcomeInfo:
    """Decode the outcome of ``xid``.

    Raises:
        StoreCorrupt: the bytes are not an outcome.
    """
    if len(data) < _OUTCOME.size or data[0] not in (_COMMITTED, _ABORTED):
        msg = f"outcome of transaction {xid!r} is corrupt ({len(data)} bytes)"
        raise StoreCorrupt(msg)
    state, resolved_at = _OUTCOME.unpack_from(data)
    owner = _owner_text(bytes(data[_OUTCOME.size :]))
    return OutcomeInfo(xid, state == _COMMITTED, resolved_at, owner)
