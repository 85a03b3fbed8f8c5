"""What prepared transactions hold on queues: their headers, rebuilt at opening, seen by a batch.

Theory of operation
-------------------
A prepared transaction (``ops.prepared``) *reserves*, on each queue its
local sends go to, the quota bytes they will take, and *pins* every queue it
sends to or receives from (a receive from a journal queue pins the queue it
journals, with which the journal would be deleted): ``AppendMessage``
counts the reserved bytes as used and ``DeleteQueue`` refuses a pinned
queue. Both are written in the transaction's *header*, the record at index
0 of its keys in ``prepared`` (see ``keys``), so opening rebuilds them from
the headers alone (:func:`load_reservations`: the cursor jumps from one
header over the transaction's sends to the next, O(prepared transactions)).
The catalog keeps them in memory, as ``(bytes, pins)`` per queue; a batch
sees and changes them through its :class:`Reservations`, whose changes the
batch's savepoints undo and the catalog takes once the batch committed.

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
a version 1 header reads as owned by nobody (administrators only). Like
every record of the store the header starts with its format version, and
the decoder checks what it reads (``StoreCorrupt`` otherwise).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import lmdb

from .environment import Txn
from .errors import InvalidRecord, StoreCorrupt
from .keys import prepared_key, split_prepared_key
from .overlay import MISSING, Changes, Overlay
from .records import pack, stored_text

__all__ = [
    "MAX_OWNER_BYTES",
    "NO_RESERVATION",
    "PreparedHeader",
    "PreparedInfo",
    "Reservations",
    "decode_header",
    "encode_header",
    "header_xid",
    "load_reservations",
    "owner_bytes",
    "owner_text",
]

#: A queue no prepared transaction uses: no bytes reserved, no pins.
NO_RESERVATION: Final = (0, 0)
PREPARED_FORMAT_VERSION: Final = 1
#: A header with its owner after the version 1 fields.
OWNED_HEADER_VERSION: Final = 2
_OWNER_LENGTH = struct.Struct(">H")
#: Longest owner name kept, in UTF-8 bytes.
MAX_OWNER_BYTES: Final = 1024
_HEADER = struct.Struct(">BdIQIII")
_RECEIVE = struct.Struct(">IQ")
_PIN = struct.Struct(">I")
_FIELD: Final = "prepared transaction field"


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

    def holds(self) -> Iterator[tuple[int, int, int]]:
        """``(queue_id, bytes, pins)`` the transaction holds on the queues it uses:
        one entry per reservation, then one per pin."""
        for queue_id, size in self.reserved:
            yield queue_id, size, 0
        for queue_id in self.pinned:
            yield queue_id, 0, 1


def encode_header(header: PreparedHeader) -> bytes:
    """Encode a prepared transaction's header.

    Raises:
        InvalidRecord: a number does not fit its width.
    """
    owner = owner_bytes(header.owner)
    parts = [
        pack(
            _HEADER,
            _FIELD,
            OWNED_HEADER_VERSION if owner else PREPARED_FORMAT_VERSION,
            header.created_at,
            header.sends,
            header.send_bytes,
            len(header.receives),
            len(header.reserved),
            len(header.pinned),
        )
    ]
    parts.extend(pack(_RECEIVE, _FIELD, *pair) for pair in (*header.receives, *header.reserved))
    parts.extend(pack(_PIN, _FIELD, queue_id) for queue_id in header.pinned)
    if owner:
        parts.append(_OWNER_LENGTH.pack(len(owner)) + owner)
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
        owner = owner_text(bytes(data[start : start + length]))
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


def owner_bytes(owner: str) -> bytes:
    """An owner's name as stored (in a header, and after an outcome).

    Raises:
        InvalidRecord: it is longer than :data:`MAX_OWNER_BYTES`.
    """
    encoded = owner.encode("utf-8")
    if len(encoded) > MAX_OWNER_BYTES:
        msg = f"an owner's name is at most {MAX_OWNER_BYTES} bytes of UTF-8, not {len(encoded)}"
        raise InvalidRecord(msg)
    return encoded


def owner_text(raw: bytes) -> str:
    """An owner's name as read back.

    Raises:
        StoreCorrupt: it is not UTF-8.
    """
    return stored_text(raw, "the owner of a prepared transaction")


def header_xid(key: bytes) -> bytes:
    """The xid (as keyed) of a ``prepared`` key that must be a header's.

    Raises:
        StoreCorrupt: the key does not split, or is not a header's (index 0).
    """
    try:
        xid, index = split_prepared_key(key)
    except Exception as exc:
        msg = f"prepared transaction key {key.hex()} is corrupt"
        raise StoreCorrupt(msg) from exc
    if index != 0:
        msg = f"prepared transaction {xid!r} has no header"
        raise StoreCorrupt(msg)
    return xid


def load_reservations(txn: Txn, db: lmdb._Database) -> dict[int, tuple[int, int]]:
    """Sum the reservations and pins of every prepared transaction in ``db``
    (``prepared``), reading only the headers.

    Raises:
        StoreCorrupt: a key or header does not decode.
    """
    reservations: dict[int, tuple[int, int]] = {}
    with txn.cursor(db=db) as cursor:
        positioned = cursor.first()
        while positioned:
            xid = header_xid(bytes(cursor.key()))
            header = decode_header(cursor.value())
            for queue_id, size, pin in header.holds():
                held, pins = reservations.get(queue_id, NO_RESERVATION)
                reservations[queue_id] = (held + size, pins + pin)
            # Past this transaction's records: its xid, then a byte above zero.
            positioned = cursor.set_range(xid + b"\x01")
    return reservations


class Reservations:
    """The batch's view of the reservations: the catalog's, with the batch's changes.

    Args:
        overlay: the batch's overlay (its savepoints undo what this part changes).
        committed: ``(bytes, pins)`` by queue id, as committed (the catalog's).
    """

    __slots__ = ("_changed", "_committed", "_overlay")

    def __init__(self, overlay: Overlay, committed: dict[int, tuple[int, int]]) -> None:
        self._overlay = overlay
        self._committed = committed
        #: Queue id -> (bytes, pins) prepared transactions hold on it, as changed.
        self._changed: Changes = {}

    def of(self, queue_id: int) -> tuple[int, int]:
        """``(bytes, pins)`` of a queue as the batch sees it: the quota bytes that
        prepared transactions reserve on it, and how many of them pin it."""
        held = self._changed.get(queue_id, MISSING)
        if held is MISSING:
            return self._committed.get(queue_id, NO_RESERVATION)
        assert isinstance(held, tuple)
        return held

    def reserve(self, queue_id: int, size: int, pins: int) -> None:
        """Add ``size`` bytes and ``pins`` to a queue's reservation (negative: release)."""
        held, pinned = self.of(queue_id)
        self._overlay.change(self._changed, queue_id, (held + size, pinned + pins))

    def changed(self) -> dict[int, tuple[int, int]]:
        """The reservations the batch changed, by queue id (for the catalog)."""
        return dict(self._changed)


def drop_orphan_copies(txn: Txn, prepared: lmdb._Database, copies: lmdb._Database) -> int:
    """Delete the kept copies (``prepared_copies``, see ``ops.prepared``) of
    transactions no longer prepared, and return how many: a release that keeps
    none resolved the transaction and left them. Runs in the opening's write
    transaction; the database holds only in-doubt transactions' copies.

    Raises:
        StoreCorrupt: a key does not split.
    """
    dropped = 0
    with txn.cursor(db=copies) as cursor:
        positioned = cursor.first()
        while positioned:
            key = bytes(cursor.key())
            try:
                xid, _ = split_prepared_key(key)
            except Exception as exc:
                msg = f"kept copy key {key.hex()} is corrupt"
                raise StoreCorrupt(msg) from exc
            if txn.get(prepared_key(xid, 0), db=prepared) is not None:
                positioned = cursor.set_range(xid + b"\x01")  # past its copies
                continue
            prefix = xid + b"\x00"  # an xid has no NUL: only its own keys start so
            while bytes(cursor.key()).startswith(prefix):
                cursor.delete()
                dropped += 1
            positioned = bool(cursor.key())
    return dropped
