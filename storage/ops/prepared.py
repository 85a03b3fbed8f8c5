"""Prepared (two-phase) transactions: preparing, resolving, their send records and reads.

Theory of operation
-------------------
A transaction with a global id (an *xid*) may be *prepared*:
:class:`PrepareTransaction` writes its sends, whole, and the messages it
received into ``prepared`` (its header in ``reservations``, its sends
below), and *reserves*, on
each queue its local sends go to, the quota bytes they will take. From then
on :class:`~storage.AppendMessage` counts those bytes as used, so a commit
of the transaction never fails for quota. Every queue it sends to or
receives from is *pinned*: :class:`~storage.DeleteQueue` refuses it (a
journal queue pins the queue it journals, with which it would be deleted).
The reservations and pins are in the catalog, in memory, rebuilt from the
headers at opening; planning changes them through the context's
``reservations`` (``reservations.Reservations``), whose savepoints undo
them like every other change.

:class:`ResolvePrepared` ends it. A commit removes the received messages
still there (as :class:`~storage.RemoveMessage` does, journal copy
included; one already gone is passed over) and appends the sends, which get
their lookup ids now, in commit order: a local send without a quota check
(its bytes were reserved), an outgoing one exactly as
:class:`~storage.AppendOutgoing` appends it. Commit or abort, the prepared
records are deleted, the reservations and pins released, and the *outcome*
(committed or aborted, and when) is written to ``outcomes`` (``ops.outcomes``).
Resolving an xid again with the same verdict reports ``ALREADY_*`` and
changes nothing; with the other verdict it fails (:class:`~storage.XidResolved`).
A transaction committed in one phase records its outcome with
:class:`RecordOutcome`. An xid is used once: preparing or recording an xid
that is prepared or has a kept outcome fails (:class:`~storage.XidInUse`).

A resolve may take the headroom a full store keeps for removals
(``frees_space``): the sends' bytes were written at prepare and are deleted
as they are appended.

Within one batch, each transaction the batch prepared or resolved is kept
in the batch's scratch state (``overlay``), and so is each outcome it wrote,
so a later operation of the batch sees them although nothing is written yet.

Prepared transactions are listed from their headers only: the cursor jumps
from one header over the transaction's sends to the next, so a listing
costs O(transactions listed), whatever they send; listings are in xid order
(by UTF-8 bytes) and start at a prefix with a seek.

A send record, format version 1, a local send (``AppendMessage``)::

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
Send records are kept at index 1..n of the transaction's keys, in the order
it sent them.

The copies its sends to other queue managers keep until confirmed
(``ops.confirmations``; ``copies``) are kept in ``prepared_copies``, under
the same keys (index 0..n-1), each as its confirmation key and record
(``encode_kept``), and added as :class:`~storage.AddConfirmation` adds one
when the transaction commits: a prepared send is confirmed like any other.
A database of their own leaves ``prepared`` as a release without them reads
it; the copies such a release leaves behind when it resolves the transaction
are dropped at the next opening (``reservations.drop_orphan_copies``).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment
from ..errors import (
    InvalidRecord,
    MessageMissing,
    QueueMissing,
    StoreCorrupt,
    XidInUse,
    XidResolved,
    XidUnknown,
)
from ..keys import prepared_key, xid_key
from ..overlay import MISSING
from ..records import QueueKind, encode_message_record, pack
from ..reservations import (
    PreparedHeader,
    PreparedInfo,
    decode_header,
    encode_header,
    header_xid,
)
from ..units import Done, Operation, Result
from .confirmations import AddConfirmation, decode_kept, encode_kept
from .messages import Appended, AppendMessage, RemoveMessage, check_quota
from .outcomes import OutcomeInfo, known_xid, outcome_of, record_outcome, xid_prefix, xid_text
from .peering import AppendOutgoing

__all__ = [
    "PrepareTransaction",
    "Prepared",
    "RecordOutcome",
    "Resolution",
    "ResolvePrepared",
    "Resolved",
    "Send",
    "decode_send",
    "encode_send",
    "read_prepared",
    "read_prepared_one",
]

#: A send of a prepared transaction.
Send = AppendMessage | AppendOutgoing

#: Scratch keys of the transactions the batch prepared or resolved: ``(_SCRATCH, xid bytes)``.
_SCRATCH: Final = "prepared"
#: Queues whose received messages are journaled (a subqueue's go to its parent's journal).
_JOURNALED: Final = (QueueKind.NORMAL, QueueKind.SUBQUEUE)
PREPARED_FORMAT_VERSION: Final = 1
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
_SEND_FIELD: Final = "prepared send field"


class Resolution(enum.IntEnum):
    """What resolving a prepared transaction did."""

    #: Committed now.
    COMMITTED = 1
    #: It had been committed before; nothing changed.
    ALREADY_COMMITTED = 2
    #: Aborted now.
    ABORTED = 3
    #: It had been aborted before; nothing changed.
    ALREADY_ABORTED = 4


@dataclass(frozen=True, slots=True)
class Prepared(Result):
    """A transaction was prepared."""

    xid: str


@dataclass(frozen=True, slots=True)
class Resolved(Result):
    """A prepared transaction was resolved (or had been).

    ``receives`` are the messages it had received (on COMMITTED the ones
    still there were removed; on ABORTED they stay in their queues), and
    ``appended`` what its sends became on COMMITTED, in order. Both are
    empty for ALREADY_COMMITTED and ALREADY_ABORTED.
    """

    xid: str
    resolution: Resolution
    receives: tuple[tuple[int, int], ...]
    appended: tuple[Appended, ...]


@dataclass(frozen=True, slots=True)
class _Pending:
    """A prepared transaction as the batch sees it; ``sends`` and ``copies``
    when the batch prepared it."""

    header: PreparedHeader
    sends: Sequence[Send] | None
    copies: Sequence[AddConfirmation] = ()


def _pending(ctx: PlanContext, raw: bytes) -> _Pending | None:
    """The prepared transaction keyed ``raw`` as the batch sees it, or None.

    Raises:
        StoreCorrupt: its header does not decode.
    """
    seen = ctx.scratch((_SCRATCH, raw))
    if seen is not MISSING:
        assert seen is None or isinstance(seen, _Pending)
        return seen
    header = ctx.txn.get(prepared_key(raw, 0), db=ctx.dbs.prepared)
    return None if header is None else _Pending(decode_header(header), None)


def _state(ctx: PlanContext, xid: str, raw: bytes) -> _Pending | OutcomeInfo | None:
    """The state of ``xid`` as the batch sees it: prepared, resolved (an outcome
    is kept), or unknown.

    Raises:
        StoreCorrupt: its stored records do not decode.
    """
    pending = _pending(ctx, raw)
    return pending if pending is not None else outcome_of(ctx, xid, raw)


def _check_unused(ctx: PlanContext, xid: str, raw: bytes) -> None:
    state = _state(ctx, xid, raw)
    if isinstance(state, _Pending):
        raise XidInUse(xid, "prepared")
    if state is not None:
        raise XidInUse(xid, "committed" if state.committed else "aborted")


@dataclass(frozen=True, slots=True)
class PrepareTransaction(Operation):
    """Prepare a transaction: keep its sends and receives under ``xid``, reserve
    its local sends' quota bytes and pin the queues it uses.

    ``sends`` are the operations its commit will plan (payloads as
    ``AppendMessage`` takes them; parts are joined when written);
    ``receives`` the messages it received, ``(queue_id, lookup_id)``, in
    order; ``created_at`` wall seconds; ``owner`` the principal that
    prepared it (kept with it and with its outcome; "" for none); ``copies``
    the copies its commit adds, awaiting confirmation.

    Raises (when planned):
        InvalidRecord: the xid is empty, longer than 200 bytes or has a NUL;
            a send is of another kind or out of range, or names a bad queue.
        XidInUse: the xid is prepared or has a kept outcome.
        QueueMissing: a local send's queue or a received message's queue is gone.
        MessageMissing: a received message is gone.
        QuotaExceeded: a local send does not fit its queue's quota (bytes
            used, bytes reserved, and this transaction's earlier sends there).
        InvalidOperation: an outgoing send names a queue that is not outgoing.
    """

    xid: str
    sends: tuple[Send, ...]
    receives: tuple[tuple[int, int], ...]
    created_at: float
    owner: str = ""
    copies: tuple[AddConfirmation, ...] = ()

    def plan(self, ctx: PlanContext) -> Result:
        raw = xid_key(self.xid)
        _check_unused(ctx, self.xid, raw)
        if not all(isinstance(send, AppendMessage | AppendOutgoing) for send in self.sends):
            msg = "a prepared transaction sends with AppendMessage or AppendOutgoing only"
            raise InvalidRecord(msg)
        # Ordered sets of the queues it pins and of the bytes it reserves per queue.
        pinned: dict[int, None] = {}
        for queue_id, lookup_id in self.receives:
            record = ctx.live_queue(queue_id).record
            ctx.message(queue_id, lookup_id)
            parent = record.parent_id if record.kind is QueueKind.JOURNAL else None
            pinned[queue_id if parent is None else parent] = None
        reserved: dict[int, int] = {}
        for send in self.sends:
            if isinstance(send, AppendMessage):
                queue = ctx.live_queue(send.queue_id)
                encode_message_record(
                    b"",
                    priority=send.priority,
                    size=send.size,
                    arrived_time=0,
                    deadline=send.deadline,
                    note=send.note,
                )
                total = reserved.get(send.queue_id, 0) + send.size
                if not send.exempt:
                    check_quota(ctx, queue, total)
                reserved[send.queue_id] = total
                pinned[send.queue_id] = None
            elif isinstance(send, AppendOutgoing):
                send.check(ctx)
        header = PreparedHeader(
            created_at=self.created_at,
            sends=len(self.sends),
            send_bytes=sum(send.size for send in self.sends),
            receives=tuple(self.receives),
            reserved=tuple(reserved.items()),
            pinned=tuple(pinned),
            owner=self.owner,
        )
        values = [encode_header(header), *(encode_send(send) for send in self.sends)]
        db = ctx.dbs.prepared
        for index, value in enumerate(values):
            ctx.put(db, prepared_key(raw, index), value)
        for index, copy in enumerate(self.copies):
            ctx.put(
                ctx.dbs.prepared_copies, prepared_key(raw, index), encode_kept(copy.confirmation)
            )
        for queue_id, size, pins in header.holds():
            ctx.reservations.reserve(queue_id, size, pins)
        ctx.set_scratch((_SCRATCH, raw), _Pending(header, self.sends, self.copies))
        return Prepared(self.xid)


@dataclass(frozen=True, slots=True)
class ResolvePrepared(Operation):
    """Commit or abort the prepared transaction ``xid``; record its outcome.

    ``resolved_at`` (wall seconds) is kept with the outcome. A received
    message is removed with a copy to the journal queue when its queue's
    record asks for one (a NORMAL queue with ``journal``).

    Raises (when planned):
        XidUnknown: the xid is neither prepared nor has a kept outcome.
        XidResolved: it was already resolved the other way.
        InvalidRecord: the xid is malformed.
    """

    @property
    def frees_space(self) -> bool:
        """It may use the headroom: what it appends was written at prepare."""
        return True

    xid: str
    commit: bool
    resolved_at: float

    def plan(self, ctx: PlanContext) -> Result:
        raw = xid_key(self.xid)
        state = _state(ctx, self.xid, raw)
        if state is None:
            raise XidUnknown(self.xid)
        if isinstance(state, OutcomeInfo):
            if state.committed != self.commit:
                raise XidResolved(self.xid, state.committed, state.resolved_at)
            again = Resolution.ALREADY_COMMITTED if self.commit else Resolution.ALREADY_ABORTED
            return Resolved(self.xid, again, (), ())
        header = state.header
        appended: tuple[Appended, ...] = ()
        copies = state.copies if state.sends is not None else _stored_copies(ctx, raw)
        if self.commit:
            sends = state.sends if state.sends is not None else _stored_sends(ctx, raw, header)
            _remove_received(ctx, header.receives)
            appended = tuple(send.append(ctx) for send in sends)
            for copy in copies:
                copy.plan(ctx)
        db = ctx.dbs.prepared
        for index in range(header.sends + 1):
            ctx.discard(db, prepared_key(raw, index))
        for index in range(len(copies)):
            ctx.discard(ctx.dbs.prepared_copies, prepared_key(raw, index))
        for queue_id, size, pins in header.holds():
            ctx.reservations.reserve(queue_id, -size, -pins)
        ctx.set_scratch((_SCRATCH, raw), None)
        record_outcome(ctx, self.xid, raw, self.commit, self.resolved_at, header.owner)
        resolution = Resolution.COMMITTED if self.commit else Resolution.ABORTED
        return Resolved(self.xid, resolution, header.receives, appended)


def _stored_sends(ctx: PlanContext, raw: bytes, header: PreparedHeader) -> list[Send]:
    """A prepared transaction's sends, read back (payloads are views into the map)."""
    db = ctx.dbs.prepared
    sends: list[Send] = []
    for index in range(1, header.sends + 1):
        data = ctx.txn.get(prepared_key(raw, index), db=db)
        if data is None:
            msg = f"prepared transaction {raw!r} lacks its send {index} of {header.sends}"
            raise StoreCorrupt(msg)
        sends.append(decode_send(data))
    return sends


def _stored_copies(ctx: PlanContext, raw: bytes) -> list[AddConfirmation]:
    """A prepared transaction's kept copies, read back in index order.

    Raises:
        StoreCorrupt: one does not decode.
    """
    start = prepared_key(raw, 0)
    end = raw + b"\x01"  # past every key of the transaction
    copies: list[AddConfirmation] = []
    with ctx.txn.cursor(db=ctx.dbs.prepared_copies) as cursor:
        if cursor.set_range(start):
            for key, data in cursor:
                if bytes(key) >= end:
                    break
                copies.append(AddConfirmation(decode_kept(data)))
    return copies


def _remove_received(ctx: PlanContext, receives: tuple[tuple[int, int], ...]) -> None:
    """Remove the received messages still there, as ``RemoveMessage`` does."""
    for queue_id, lookup_id in receives:
        queue = ctx.queue(queue_id)
        if queue is None:
            continue
        record = queue.record
        journal = record.journal and record.kind in _JOURNALED
        try:
            RemoveMessage(queue_id, lookup_id, journal).plan(ctx)
        except (MessageMissing, QueueMissing):
            continue  # gone already (it raised before changing anything)


@dataclass(frozen=True, slots=True)
class RecordOutcome(OutcomeInfo, Operation):
    """Keep this outcome of a transaction with an xid that ended without being
    prepared (committed in one phase).

    Raises (when planned):
        XidInUse: the xid is prepared or already has an outcome.
        InvalidRecord: the xid is malformed.
    """

    def plan(self, ctx: PlanContext) -> Result:
        raw = xid_key(self.xid)
        _check_unused(ctx, self.xid, raw)
        record_outcome(ctx, self.xid, raw, self.committed, self.resolved_at, self.owner)
        return Done()


def _parts(
    payload: Sequence[bytes | bytearray | memoryview] | bytes | memoryview,
) -> Sequence[bytes | bytearray | memoryview]:
    return (payload,) if isinstance(payload, bytes | bytearray | memoryview) else payload


def encode_send(send: object) -> bytes:
    """Encode one send of a prepared transaction, its payload parts joined.

    Raises:
        InvalidRecord: it is neither kind of send, or a field is out of range.
    """
    if isinstance(send, AppendMessage):
        timed = send.deadline is not None or bool(send.note)
        kind = _KIND_LOCAL_TIMED if timed else _KIND_LOCAL
        head = pack(
            _LOCAL,
            _SEND_FIELD,
            PREPARED_FORMAT_VERSION,
            kind,
            send.priority,
            _EXEMPT if send.exempt else 0,
            send.queue_id,
            send.size,
        )
        if timed:
            head += pack(_TIMED, _SEND_FIELD, send.deadline or 0.0, len(send.note)) + send.note
        return b"".join((head, *_parts(send.payload)))
    if isinstance(send, AppendOutgoing):
        name = send.name.encode()
        display = send.display_name.encode()
        kind = _KIND_OUTGOING if send.deadline is None else _KIND_OUTGOING_TIMED
        head = pack(
            _OUTGOING,
            _SEND_FIELD,
            PREPARED_FORMAT_VERSION,
            kind,
            len(name),
            len(display),
            send.size,
        )
        if send.deadline is not None:
            head += pack(_DEADLINE, _SEND_FIELD, send.deadline)
        return b"".join((head, name, display, *_parts(send.payload)))
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


def read_prepared(
    env: Environment, catalog: Catalog, prefix: str, limit: int | None, owner: str | None = None
) -> list[PreparedInfo]:
    """Prepared transactions whose xid starts with ``prefix``, in xid order; at
    most ``limit`` (``None``: all); only those of ``owner`` unless it is None.

    Raises:
        StoreCorrupt: a key or header does not decode.
    """
    start = xid_prefix(prefix)
    if start is None or (limit is not None and limit <= 0):
        return []
    found: list[PreparedInfo] = []
    with env.read("prepared_transactions") as txn, txn.cursor(db=catalog.dbs.prepared) as cursor:
        positioned = cursor.set_range(start)
        while positioned:
            key = bytes(cursor.key())
            if not key.startswith(start):
                break
            raw = header_xid(key)
            info = decode_header(cursor.value()).info(xid_text(raw))
            if owner is None or info.owner == owner:
                found.append(info)
            if limit is not None and len(found) >= limit:
                break
            positioned = cursor.set_range(raw + b"\x01")  # past its sends
    return found


def read_prepared_one(env: Environment, catalog: Catalog, xid: str) -> PreparedInfo | None:
    """The prepared transaction ``xid``, or ``None`` (also for a malformed xid).

    Raises:
        StoreCorrupt: its header does not decode.
    """
    raw = known_xid(xid)
    if raw is None:
        return None
    with env.read("prepared") as txn:
        data = txn.get(prepared_key(raw, 0), db=catalog.dbs.prepared)
        return None if data is None else decode_header(data).info(xid)
