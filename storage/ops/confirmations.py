"""Copies awaiting confirmation (source side) and FinalAcks to send (destination side).

Theory of operation
-------------------
Two small databases carry a transactional message's fate back to the queue
manager that sent it, both written by the same units as the events they record:

* ``confirmations`` (at the source): a copy of each transactional message
  sent to another queue manager that asked for the transaction confirmation
  process, kept until its outcome is known. Key: the message's ordinal u32
  and the copy's index u8 (one per remote destination of the send). The
  record holds flags (delivered: an OrderAck covered it), the last class
  reported for it, its deadline and the payload. A copy with a deadline is
  also indexed in ``expiry`` under queue id 0 with the key's five bytes as
  its lookup id, so the expiry step finds due copies with the same seek as
  due messages and restart reads none of them. :class:`AddConfirmation`
  writes one; :class:`SettleConfirmation` deletes one and fails with
  :class:`ConfirmationMissing` if it is not there, so that of two settlements
  (a FinalAck and the deadline) exactly one unit applies;
  :class:`MarkDelivered` sets the flag of those that are there, and the
  GUID of the queue manager whose OrderAck covered them (record version 2).
  ``awaited_confirmations`` counts the copies *with a deadline* of each
  destination (u64 under the destination's name), changed by the same two
  operations, so that the layer above knows, with one short read and
  without reading a copy, from which destinations a FinalAck must come back
  before a deadline (it keeps their sessions up:
  ``qmgr.server.peering.final_acks``). A copy without a deadline can wait
  for the next session: no deadline can report it unconfirmed.
* ``final_acks`` (at the destination): the FinalAcks to send, keyed by the
  source queue manager's GUID and the message's ordinal (a message has one
  final fate in each stream it came in, so a repeated record replaces the
  same key): the key goes on with the stream's sequence timestamp (24 bytes;
  20 without it, as releases before this one wrote them). A router keeps
  there too the FinalAcks of other destinations it could not pass on at
  once, under the same key followed by the sending queue manager's GUID
  (40 bytes). The value is the layer above's (at most 64 bytes).
  :class:`ForgetFinalAcks` deletes them once the source has them.

The layer above decides what the records mean; the store only keeps them.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Final, NamedTuple

import lmdb

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment, Txn, prefixed
from ..errors import ConfirmationMissing, InvalidRecord, StoreCorrupt
from ..keys import MAX_KEY_SIZE, MAX_U32, QM_GUID_SIZE, expiry_key, u32, u64, unpack_u64
from ..records import pack
from ..units import Done, Operation, Removal, Result

__all__ = [
    "CONFIRMATION_QUEUE_ID",
    "MAX_CONFIRMATION_COPIES",
    "AddConfirmation",
    "Confirmation",
    "ForgetFinalAcks",
    "MarkDelivered",
    "PendingFinalAck",
    "RecordFinalAck",
    "SettleConfirmation",
    "awaits_confirmation",
    "confirmation_key",
    "confirmation_of_lookup",
    "count_awaited",
    "decode_kept",
    "encode_kept",
    "final_ack_key",
    "final_ack_sender",
    "read_awaited",
    "read_confirmation",
    "read_confirmations",
    "read_final_acks",
]

#: The queue id under which the ``expiry`` index keeps confirmation deadlines.
CONFIRMATION_QUEUE_ID: Final = 0
#: Most copies one message keeps (one per remote destination of its send).
MAX_CONFIRMATION_COPIES: Final = 256
#: Largest value of a ``final_acks`` record.
MAX_FINAL_ACK_SIZE: Final = 64
_KEY = struct.Struct(">IB")
_RECORD = struct.Struct(">BBHdH")  # version, flags, last class, deadline, name length
_VERSION: Final = 1
#: Version 1, with the GUID of the queue manager whose OrderAck covered the
#: copy after its destination name.
_VERSION_ACKED: Final = 2
_DELIVERED: Final = 0x01
_DEADLINE_SET: Final = 0x02


def confirmation_key(ordinal: int, index: int) -> bytes:
    """The ``confirmations`` key of copy ``index`` of the message ``ordinal``.

    Raises:
        InvalidRecord: the ordinal or the index is out of range (at most
            :data:`MAX_CONFIRMATION_COPIES` copies of one message).
    """
    try:
        return _KEY.pack(ordinal, index)
    except struct.error as exc:
        msg = f"copy {index} of message {ordinal} is out of range: {exc}"
        raise InvalidRecord(msg) from exc


@dataclass(frozen=True, slots=True)
class Confirmation:
    """A copy awaiting confirmation, as stored."""

    ordinal: int
    index: int
    #: True once an OrderAck covered it (it reached its destination queue manager).
    delivered: bool
    #: The last class reported for it (a FinalAck's), 0 if none.
    last_class: int
    deadline: float | None
    #: The destination (the layer above's name for it).
    destination: str
    payload: bytes
    #: The GUID (16 bytes) of the queue manager whose OrderAck covered it, when
    #: known (record version 2): its FinalAck is the one that counts.
    acknowledged_by: bytes | None = None


def _encode(confirmation: Confirmation) -> bytes:
    name = confirmation.destination.encode()
    flags = (_DELIVERED if confirmation.delivered else 0) | (
        _DEADLINE_SET if confirmation.deadline is not None else 0
    )
    by = confirmation.acknowledged_by
    if by is not None and len(by) != QM_GUID_SIZE:
        msg = f"a copy's acknowledging queue manager is a 16-byte GUID, not {len(by)} bytes"
        raise InvalidRecord(msg)
    head = pack(
        _RECORD,
        "confirmation field",
        _VERSION if by is None else _VERSION_ACKED,
        flags,
        confirmation.last_class,
        confirmation.deadline or 0.0,
        len(name),
    )
    return b"".join((head, name, by or b"", confirmation.payload))


class _Head(NamedTuple):
    """A confirmation record but its payload, which starts at ``end``."""

    flags: int
    last_class: int
    deadline: float | None
    destination: str
    acknowledged_by: bytes | None
    end: int


def _decode_head(key: bytes, data: bytes | memoryview) -> _Head:
    if (
        len(data) < _RECORD.size
        or data[0] not in (_VERSION, _VERSION_ACKED)
        or len(key) != _KEY.size
    ):
        msg = f"confirmation record of {len(data)} bytes is corrupt"
        raise StoreCorrupt(msg)
    version, flags, last_class, deadline, length = _RECORD.unpack_from(data)
    start = _RECORD.size
    end = start + length + (QM_GUID_SIZE if version == _VERSION_ACKED else 0)
    if end > len(data):
        msg = f"confirmation record of {len(data)} bytes is cut short in its destination"
        raise StoreCorrupt(msg)
    try:
        name = bytes(data[start : start + length]).decode()
    except UnicodeDecodeError as exc:
        msg = "confirmation record has a garbled destination"
        raise StoreCorrupt(msg) from exc
    by = bytes(data[start + length : end]) if version == _VERSION_ACKED else None
    dated = deadline if flags & _DEADLINE_SET else None
    return _Head(flags, last_class, dated, name, by, end)


def _decode(key: bytes, data: bytes | memoryview) -> Confirmation:
    head = _decode_head(key, data)
    ordinal, index = _KEY.unpack(key)
    return Confirmation(
        ordinal=ordinal,
        index=index,
        delivered=bool(head.flags & _DELIVERED),
        last_class=head.last_class,
        deadline=head.deadline,
        destination=head.destination,
        payload=bytes(data[head.end :]),
        acknowledged_by=head.acknowledged_by,
    )


def encode_kept(confirmation: Confirmation) -> bytes:
    """A copy as a record kept elsewhere until it is added (a prepared
    transaction's): its key, then its record."""
    return confirmation_key(confirmation.ordinal, confirmation.index) + _encode(confirmation)


def decode_kept(data: bytes | memoryview) -> Confirmation:
    """A copy :func:`encode_kept` encoded.

    Raises:
        StoreCorrupt: the bytes are not one.
    """
    return _decode(bytes(data[: _KEY.size]), data[_KEY.size :])


def _index_key(key: bytes, deadline: float) -> bytes:
    """The ``expiry`` key of a confirmation key with a deadline: its five bytes
    stand as the lookup id under :data:`CONFIRMATION_QUEUE_ID`."""
    return expiry_key(deadline, CONFIRMATION_QUEUE_ID, int.from_bytes(key, "big"))


def _awaited_key(destination: str) -> bytes:
    key = destination.encode()
    if not 0 < len(key) <= MAX_KEY_SIZE:
        msg = f"a copy's destination is 1 to {MAX_KEY_SIZE} bytes of UTF-8, not {len(key)}"
        raise InvalidRecord(msg)
    return key


def _count(ctx: PlanContext, destination: str, change: int) -> None:
    """Change the count of ``destination``'s copies with a deadline by ``change``
    (deleted at 0)."""
    key = _awaited_key(destination)
    data = ctx.record(ctx.dbs.awaited, key)
    try:
        count = (0 if data is None else unpack_u64(data)) + change
    except struct.error as exc:
        msg = f"count of copies awaiting confirmation from {destination!r} is corrupt"
        raise StoreCorrupt(msg) from exc
    ctx.write_record(ctx.dbs.awaited, key, u64(count) if count > 0 else None)


def _drop(ctx: PlanContext, key: bytes, confirmation: Confirmation) -> None:
    """Undo what keeping ``confirmation`` under ``key`` wrote besides its record:
    its deadline's index entry and its count."""
    if confirmation.deadline is not None:
        ctx.discard(ctx.dbs.expiry, _index_key(key, confirmation.deadline))
        _count(ctx, confirmation.destination, -1)


def awaits_confirmation(ctx: PlanContext, destination: str) -> bool:
    """Whether copies with a deadline await confirmation from ``destination``, as
    the batch sees it."""
    return ctx.record(ctx.dbs.awaited, _awaited_key(destination)) is not None


@dataclass(frozen=True, slots=True)
class AddConfirmation(Operation):
    """Keep a copy of a sent message until its outcome is known."""

    confirmation: Confirmation

    def plan(self, ctx: PlanContext) -> Result:
        confirmation = self.confirmation
        key = confirmation_key(confirmation.ordinal, confirmation.index)
        value = _encode(confirmation)
        deadline = confirmation.deadline
        if deadline is not None and not 0 < deadline < float("inf"):
            msg = f"confirmation deadline {deadline} is invalid"
            raise InvalidRecord(msg)
        old = ctx.record(ctx.dbs.confirmations, key)
        if old is not None:
            # A copy kept under the same message id (ids wrap after 2**32
            # messages): this one replaces it, its deadline and count with it.
            _drop(ctx, key, _decode(key, old))
        if deadline is not None:
            ctx.put(ctx.dbs.expiry, _index_key(key, deadline), b"")
            _count(ctx, confirmation.destination, 1)
        ctx.write_record(ctx.dbs.confirmations, key, value)
        return Done()


@dataclass(frozen=True, slots=True)
class SettleConfirmation(Removal):
    """Delete a copy whose outcome is known.

    Raises (when planned):
        ConfirmationMissing: it is not there.
    """

    ordinal: int
    index: int

    def plan(self, ctx: PlanContext) -> Result:
        key = confirmation_key(self.ordinal, self.index)
        data = ctx.record(ctx.dbs.confirmations, key)
        if data is None:
            msg = f"no copy {self.index} of message {self.ordinal} awaits confirmation"
            raise ConfirmationMissing(msg)
        _drop(ctx, key, _decode(key, data))
        ctx.write_record(ctx.dbs.confirmations, key, None)
        return Done()


@dataclass(frozen=True, slots=True)
class MarkDelivered(Operation):
    """Note that the copies of these ``(ordinal, destination)`` reached their
    destination queue manager (copies no longer there are passed over), the
    one of GUID ``by`` (16 bytes) when given: its OrderAck covered them."""

    copies: tuple[tuple[int, str], ...]
    by: bytes | None = None
    #: True when it goes with the forget of the outgoing entries delivered
    #: (``ForgetOutgoing``, in the same unit), which frees far more than its
    #: records grow (16 bytes each at the most).
    with_forget: bool = False

    @property
    def frees_space(self) -> bool:
        """With the forget it goes with (:attr:`with_forget`): so that forget is
        written on a full store too."""
        return self.with_forget

    def plan(self, ctx: PlanContext) -> Result:
        for ordinal, destination in self.copies:
            prefix = ordinal.to_bytes(4, "big")
            with ctx.txn.cursor(db=ctx.dbs.confirmations) as cursor:
                keys = list(prefixed(cursor, prefix))
            for key in keys:
                data = ctx.record(ctx.dbs.confirmations, key)
                if data is None:
                    continue
                old = _decode(key, data)
                if old.destination != destination or old.delivered:
                    continue
                by = old.acknowledged_by if self.by is None else self.by
                value = _encode(dataclasses.replace(old, delivered=True, acknowledged_by=by))
                ctx.write_record(ctx.dbs.confirmations, key, value)
        return Done()


def read_confirmation(
    env: Environment, catalog: Catalog, ordinal: int, index: int
) -> Confirmation | None:
    """One copy awaiting confirmation, or None."""
    key = confirmation_key(ordinal, index)
    with env.read("read_confirmation") as txn:
        data = txn.get(key, db=catalog.dbs.confirmations)
    return None if data is None else _decode(key, data)


def read_confirmations(env: Environment, catalog: Catalog, ordinal: int) -> list[Confirmation]:
    """Every copy of the message ``ordinal`` awaiting confirmation."""
    prefix = ordinal.to_bytes(4, "big")
    with env.read("read_confirmations") as txn, txn.cursor(db=catalog.dbs.confirmations) as cursor:
        return [_decode(key, cursor.value()) for key in prefixed(cursor, prefix)]


def read_awaited(env: Environment, catalog: Catalog) -> dict[str, int]:
    """How many copies with a deadline await confirmation from each destination
    that has any.

    Raises:
        StoreCorrupt: a count does not decode.
    """
    with env.read("read_awaited") as txn, txn.cursor(db=catalog.dbs.awaited) as cursor:
        try:
            return {
                bytes(key).decode(): unpack_u64(value)
                for key, value in cursor.iternext(keys=True, values=True)
            }
        except (UnicodeDecodeError, struct.error) as exc:
            msg = "a count of copies awaiting confirmation is corrupt"
            raise StoreCorrupt(msg) from exc


def count_awaited(txn: Txn, confirmations: lmdb._Database, awaited: lmdb._Database) -> None:
    """Rebuild ``awaited_confirmations`` from the copies in ``confirmations``
    (the opening of a store of schema 9 or older: one read of each copy's head).

    Raises:
        StoreCorrupt: a copy's record does not decode.
    """
    counts: dict[str, int] = {}
    with txn.cursor(db=confirmations) as cursor:
        for key in cursor.iternext(keys=True, values=False):
            head = _decode_head(bytes(key), cursor.value())
            if head.deadline is not None:
                counts[head.destination] = counts.get(head.destination, 0) + 1
    txn.drop(awaited, delete=False)
    for destination, count in counts.items():
        txn.put(_awaited_key(destination), u64(count), db=awaited)


def confirmation_of_lookup(lookup_id: int) -> tuple[int, int]:
    """``(ordinal, index)`` of the confirmation an ``expiry`` entry under
    :data:`CONFIRMATION_QUEUE_ID` stands for."""
    return _KEY.unpack(lookup_id.to_bytes(_KEY.size, "big"))


# --------------------------------------------------------------------------- FinalAcks


def final_ack_key(
    source_qm: bytes, ordinal: int, stamp: int | None = None, sender: bytes | None = None
) -> bytes:
    """The ``final_acks`` key of the message ``ordinal`` of ``source_qm``, as it
    came through the source's outgoing queue of sequence timestamp ``stamp``: this
    queue manager's FinalAck, or (``sender``) one another queue manager sent that
    is kept here to be passed on. Without ``stamp``: the prefix of them all (and
    the whole key of one written before the timestamp was part of it).

    Raises:
        InvalidRecord: a GUID is not 16 bytes, the timestamp not a u32, or a
            sender is given without a timestamp.
    """
    for guid in (source_qm, sender or source_qm):
        if len(guid) != QM_GUID_SIZE:
            msg = f"a queue manager GUID is {QM_GUID_SIZE} bytes, not {len(guid)}"
            raise InvalidRecord(msg)
    if stamp is None:
        if sender is not None:
            msg = "a FinalAck kept for another queue manager is keyed by its stream too"
            raise InvalidRecord(msg)
        return source_qm + ordinal.to_bytes(4, "big")
    if not 0 <= stamp <= MAX_U32:
        msg = f"a sequence timestamp is a u32, not {stamp}"
        raise InvalidRecord(msg)
    return b"".join((source_qm, ordinal.to_bytes(4, "big"), u32(stamp), sender or b""))


def final_ack_sender(key: bytes) -> bytes | None:
    """The GUID of the queue manager that sent a FinalAck kept here to be passed
    on, from its key, or None for this queue manager's own."""
    return key[24:] if len(key) > 24 else None


@dataclass(frozen=True, slots=True)
class RecordFinalAck(Operation):
    """Keep a FinalAck to send to ``source_qm`` (replacing one for the same
    message, stream and sender): this queue manager's, or ``sender``'s, kept to
    be passed on. ``stamp`` is the sequence timestamp of the stream the message
    came in (one per outgoing queue of the source): one message sent to two
    queues here, as a distribution list does, comes in two streams and has two
    FinalAcks."""

    source_qm: bytes
    ordinal: int
    value: bytes
    stamp: int | None = None
    sender: bytes | None = None

    @property
    def key(self) -> bytes:
        """The record's key (:func:`final_ack_key`): what ``ForgetFinalAcks`` takes."""
        return final_ack_key(self.source_qm, self.ordinal, self.stamp, self.sender)

    def plan(self, ctx: PlanContext) -> Result:
        if len(self.value) > MAX_FINAL_ACK_SIZE:
            msg = f"a FinalAck record is at most {MAX_FINAL_ACK_SIZE} bytes"
            raise InvalidRecord(msg)
        ctx.put(ctx.dbs.final_acks, self.key, self.value)
        return Done()


@dataclass(frozen=True, slots=True)
class ForgetFinalAcks(Removal):
    """Delete FinalAcks the source has (keys that are gone are passed over)."""

    keys: tuple[bytes, ...]

    def plan(self, ctx: PlanContext) -> Result:
        for key in self.keys:
            ctx.discard(ctx.dbs.final_acks, key)
        return Done()


class PendingFinalAck(NamedTuple):
    """A FinalAck waiting to be sent: its key (source GUID + ordinal, and the
    stream's timestamp and the sender's GUID: :func:`final_ack_key`) and value."""

    key: bytes
    value: bytes


def read_final_acks(
    env: Environment,
    catalog: Catalog,
    *,
    source_qm: bytes | None,
    after: bytes,
    limit: int,
    ordinal: int | None = None,
) -> list[PendingFinalAck]:
    """At most ``limit`` FinalAcks with a key past ``after`` (for ``source_qm``
    only, if given, and its message ``ordinal`` only, if given too), in key order."""
    found: list[PendingFinalAck] = []
    prefix = source_qm or b""
    if source_qm is not None and ordinal is not None:
        prefix = final_ack_key(source_qm, ordinal)
    with env.read("read_final_acks") as txn, txn.cursor(db=catalog.dbs.final_acks) as cursor:
        for key in prefixed(cursor, prefix, after + b"\x00" if after else prefix):
            if len(found) >= limit:
                break
            found.append(PendingFinalAck(key, bytes(cursor.value())))
    return found
