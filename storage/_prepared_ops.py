"""Write operations of prepared (two-phase) transactions and of their outcomes.

Theory of operation
-------------------
A transaction with a global id (an *xid*) may be *prepared*:
:class:`PrepareTransaction` writes its sends, whole, and the messages it
received into ``prepared`` (records in ``_prepared``), and *reserves*, on
each queue its local sends go to, the quota bytes they will take. From then
on :class:`~storage.AppendMessage` counts those bytes as used, so a commit
of the transaction never fails for quota. Every queue it sends to or
receives from is *pinned*: :class:`~storage.DeleteQueue` refuses it (a
journal queue pins the queue it journals, with which it would be deleted).
The reservations and pins are in the catalog, in memory, rebuilt from the
headers at opening; planning changes them through the
:class:`~storage.PlanContext` (``reservation``/``reserve``), whose
savepoints undo them like every other change.

:class:`ResolvePrepared` ends it. A commit removes the received messages
still there (as :class:`~storage.RemoveMessage` does, journal copy
included; one already gone is passed over) and appends the sends, which get
their lookup ids now, in commit order: a local send without a quota check
(its bytes were reserved), an outgoing one exactly as
:class:`~storage.AppendOutgoing` appends it. Commit or abort, the prepared
records are deleted, the reservations and pins released, and the *outcome*
(committed or aborted, and when) is written to ``outcomes``, with a key in
``outcome_times`` that orders outcomes by age for :class:`PruneOutcomes`.
Resolving an xid again with the same verdict reports ``ALREADY_*`` and
changes nothing; with the other verdict it fails (:class:`~storage.XidResolved`).
A transaction committed in one phase records its outcome with
:class:`RecordOutcome`. An xid is used once: preparing or recording an xid
that is prepared or has a kept outcome fails (:class:`~storage.XidInUse`).

A resolve may take the headroom a full store keeps for removals
(``frees_space``): the sends' bytes were written at prepare and are deleted
as they are appended.

Within one batch, the state of each xid the batch changed is kept in the
plan's scratch state (``PlanContext.scratch``), so a later operation of the
batch sees it although nothing is written yet.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ._errors import (
    InvalidRecord,
    MessageMissing,
    QueueMissing,
    QuotaExceeded,
    StoreCorrupt,
    XidInUse,
    XidResolved,
    XidUnknown,
)
from ._keys import (
    outcome_time_key,
    prepared_key,
    split_outcome_time_key,
    xid_key,
)
from ._ops import Appended, AppendMessage, Done, Operation, RemoveMessage, Result
from ._overlay import MISSING
from ._peering_ops import AppendOutgoing
from ._poison import subqueue_bytes
from ._prepared import (
    OutcomeInfo,
    PreparedHeader,
    Send,
    decode_header,
    decode_outcome,
    decode_send,
    encode_header,
    encode_outcome,
    encode_send,
    milliseconds,
)
from ._records import QueueKind, encode_message_record

if TYPE_CHECKING:
    from ._plan import PlanContext

__all__ = [
    "PrepareTransaction",
    "Prepared",
    "PruneOutcomes",
    "Pruned",
    "RecordOutcome",
    "Resolution",
    "ResolvePrepared",
    "Resolved",
]

#: Scratch keys of the batch's xid states: ``(_XID, xid bytes)``.
_XID: Final = "xid"
#: Queues whose received messages are journaled (a subqueue's go to its parent's journal).
_JOURNALED: Final = (QueueKind.NORMAL, QueueKind.SUBQUEUE)


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
class Pruned(Result):
    """Outcomes were deleted; ``done`` when none older than asked are left."""

    count: int
    done: bool


@dataclass(frozen=True, slots=True)
class _Pending:
    """A prepared transaction as the batch sees it; ``sends`` when the batch prepared it."""

    header: PreparedHeader
    sends: Sequence[Send] | None


#: An xid's state: prepared, resolved (an outcome is kept), or unknown.
_State = _Pending | OutcomeInfo | None


def _state(ctx: PlanContext, xid: str, raw: bytes) -> _State:
    """The state of ``xid`` as the batch sees it.

    Raises:
        StoreCorrupt: its stored records do not decode.
    """
    state = ctx.scratch((_XID, raw))
    if state is not MISSING:
        assert state is None or isinstance(state, _Pending | OutcomeInfo)
        return state
    dbs = ctx.dbs
    header = ctx.txn.get(prepared_key(raw, 0), db=dbs.prepared)
    if header is not None:
        return _Pending(decode_header(header), None)
    outcome = ctx.txn.get(raw, db=dbs.outcomes)
    return None if outcome is None else decode_outcome(xid, outcome)


def _check_unused(ctx: PlanContext, xid: str, raw: bytes) -> None:
    state = _state(ctx, xid, raw)
    if isinstance(state, _Pending):
        raise XidInUse(xid, "prepared")
    if state is not None:
        raise XidInUse(xid, "committed" if state.committed else "aborted")


def _record_outcome(
    ctx: PlanContext, xid: str, raw: bytes, committed: bool, resolved_at: float, owner: str
) -> None:
    dbs = ctx.dbs
    ctx.put(dbs.outcomes, raw, encode_outcome(committed, resolved_at, owner))
    ctx.put(dbs.outcome_times, outcome_time_key(milliseconds(resolved_at), raw), b"")
    ctx.set_scratch((_XID, raw), OutcomeInfo(xid, committed, resolved_at, owner))


@dataclass(frozen=True, slots=True)
class PrepareTransaction(Operation):
    """Prepare a transaction: keep its sends and receives under ``xid``, reserve
    its local sends' quota bytes and pin the queues it uses.

    ``sends`` are the operations its commit will plan (payloads as
    ``AppendMessage`` takes them; parts are joined when written);
    ``receives`` the messages it received, ``(queue_id, lookup_id)``, in
    order; ``created_at`` wall seconds; ``owner`` the principal that
    prepared it (kept with it and with its outcome; "" for none).

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
                quota = queue.record.quota
                used = queue.bytes + subqueue_bytes(ctx, queue.record)
                would_be = used + ctx.reservation(send.queue_id)[0] + total
                if quota is not None and would_be > quota and not send.exempt:
                    raise QuotaExceeded(queue.record.name, quota, would_be)
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
        for queue_id, size in header.reserved:
            ctx.reserve(queue_id, size, 0)
        for queue_id in header.pinned:
            ctx.reserve(queue_id, 0, 1)
        ctx.set_scratch((_XID, raw), _Pending(header, self.sends))
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
        if self.commit:
            sends = state.sends if state.sends is not None else _stored_sends(ctx, raw, header)
            _remove_received(ctx, header.receives)
            appended = tuple(_append(ctx, send) for send in sends)
        db = ctx.dbs.prepared
        for index in range(header.sends + 1):
            ctx.discard(db, prepared_key(raw, index))
        for queue_id, size in header.reserved:
            ctx.reserve(queue_id, -size, 0)
        for queue_id in header.pinned:
            ctx.reserve(queue_id, 0, -1)
        _record_outcome(ctx, self.xid, raw, self.commit, self.resolved_at, header.owner)
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


def _append(ctx: PlanContext, send: Send) -> Appended:
    if isinstance(send, AppendOutgoing):
        result = send.plan(ctx)
        assert isinstance(result, Appended)
        return result
    # Its bytes were reserved at prepare (and are released by the resolve): no quota check.
    record = encode_message_record(
        send.payload,
        priority=send.priority,
        size=send.size,
        arrived_time=ctx.now,
        deadline=send.deadline,
        note=send.note,
    )
    return Appended(send.queue_id, ctx.append(send.queue_id, record, send.priority, send.size))


@dataclass(frozen=True, slots=True)
class RecordOutcome(Operation):
    """Record the outcome of a transaction with an xid that ended without being
    prepared (committed in one phase).

    Raises (when planned):
        XidInUse: the xid is prepared or already has an outcome.
        InvalidRecord: the xid is malformed.
    """

    xid: str
    committed: bool
    resolved_at: float
    owner: str = ""

    def plan(self, ctx: PlanContext) -> Result:
        raw = xid_key(self.xid)
        _check_unused(ctx, self.xid, raw)
        _record_outcome(ctx, self.xid, raw, self.committed, self.resolved_at, self.owner)
        return Done()


@dataclass(frozen=True, slots=True)
class PruneOutcomes(Operation):
    """Delete at most ``limit`` outcomes resolved before ``before`` (wall seconds,
    to the millisecond), oldest first.

    Outcomes this batch changed are left to a later step.
    """

    @property
    def frees_space(self) -> bool:
        """Removing data: yes."""
        return True

    before: float
    limit: int

    def plan(self, ctx: PlanContext) -> Result:
        end = milliseconds(self.before)
        dbs = ctx.dbs
        count = 0
        more = False
        with ctx.txn.cursor(db=dbs.outcome_times) as cursor:
            positioned = cursor.first()
            while positioned:
                key = bytes(cursor.key())
                if len(key) <= 8:
                    msg = f"outcome time key {key.hex()} is corrupt"
                    raise StoreCorrupt(msg)
                resolved, raw = split_outcome_time_key(key)
                if resolved >= end:
                    break
                if ctx.scratch((_XID, raw)) is MISSING:
                    if count >= self.limit:
                        more = True
                        break
                    ctx.discard(dbs.outcome_times, key)
                    ctx.discard(dbs.outcomes, raw)
                    ctx.set_scratch((_XID, raw), None)
                    count += 1
                positioned = cursor.next()
        return Pruned(count, not more)
