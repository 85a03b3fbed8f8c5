"""Peering: outgoing queues (and the index of relayed entries), incoming streams and the history.

Theory of operation
-------------------
A message for another queue manager waits in an *outgoing queue* (a queue
of :attr:`QueueKind.OUTGOING`, one per destination, named by the layer
above) until that queue manager has it. :class:`AppendOutgoing` appends to
it, creating it on first use, in the same unit (and so the same write
transaction) as the sender's other effects. Outgoing queues are FIFO by
lookup id (they are stored as transactional queues: no priority index) and
have no journal queue.

Each outgoing queue has an :class:`~storage.peering_state.OutgoingState`
(kept in the catalog, see ``peering_state``), the sender's half of
exactly-once delivery: a transactional entry's sequence number is
``lookup_id - base`` under the TxSequenceID ``(sequence_ordinal,
sequence_timestamp)``. The timestamp is given once, when the queue is
created, as ``max(int(now), last + 1)`` from the ``sequence_stamp`` counter
in ``meta``, so no two outgoing queues have one at once: a TxSequenceID names
its queue. (A queue created again after one of its name was removed takes
over that one's timestamp with the next ordinal instead: ``ops.retired``.) When the
receiver has an entry for good, :class:`ForgetOutgoing` removes it; the
forget that finds the queue empty *rolls* the sequence (ordinal + 1, base =
next lookup id - 1) in the same write, so the next entry starts a new
sequence at number 1. Which forget that is depends only on the batch as
planned: appends planned before it in the batch keep the queue non-empty.

The receiver's half is one :class:`IncomingState` per stream (source queue
manager, sequence timestamp, destination queue key), written by :class:`RecordIncoming` in the
unit that stores the accepted messages and read back whole at start-up
(:func:`read_incoming`: bounded by the number of streams, never by the
number of messages). A state may be flagged *resync*
(:attr:`IncomingState.resync`, record format 2): the store it is in was
restored from a backup (``ops.restore``), so the stream's next message is
taken whatever it says came before it. A state whose last message came
through a router names that router (:attr:`IncomingState.via`, format 3), so
that after a restart the FinalAcks owed to the source still know their way
back; states are otherwise written in format 1. The sequence timestamp (the high 32 bits of the
state's ``sequence_id``, :attr:`IncomingState.sequence_timestamp`) is part of
the key because a source keeps one sequence per outgoing queue, and two of
its outgoing queues may reach the same queue here under two names: each is
a stream of its own (schema 7; before it, the key was source + queue key, and
opening a store of schema 6 rewrites each key with the timestamp of its
state). :class:`RememberMessageIds` keeps
the ids of non-transactional messages received lately (``history``), each
with an insertion counter from ``meta``, so that they read back in the
order they came and a resent duplicate can be dropped after a restart
(:func:`read_history`).

An entry appended for a message this queue manager *relays* may carry a
*relay id* (:attr:`AppendOutgoing.relay`: :data:`~storage.keys.RELAY_ID_SIZE`
bytes that name the message to the layer above; opaque here). The id is
kept as the record's note, flagged as such, and ``relayed`` holds a key per
such entry: queue id + relay id + lookup id, written in the write that
appends the entry. Every removal of a
message record (``PlanContext`` removals and erase steps: a forget, the
erasure after a purge or a queue's deletion) deletes the key of a flagged
record in the same write, so the index holds exactly the entries still
stored, never outgrows them, and needs nothing in memory or at start-up:
:func:`read_relayed` answers with one seek whether an entry with that id
is still there (purged ones are not). Entries appended before schema 8 have
no id and are not indexed.

Like every operation, these check first and raise one of the per-operation
errors, and record their writes through the
:class:`~storage.context.PlanContext`, whose overlay makes them see the
earlier operations of their batch.

Incoming state, format version 1 (in ``incoming``, keyed by source GUID +
sequence timestamp u32 + queue key; the value is unchanged by schema 7)::

    off  size  field
      0     1  format version (1)
      1     8  sequence_id               u64: the stream's TxSequenceID
      9     4  last_number               u32: the last sequence number accepted
     13     4  reject_count              u32
     17     8  last_access               f64 unix seconds

Format 2 adds a flags byte at 25 (0x01: resync); format 3 adds to it the
16-byte GUID of the queue manager the last message came through (``via``).

A ``history`` value is the entry's insertion counter, a bare u64.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment
from ..errors import (
    IncomingStreamMoved,
    InvalidOperation,
    InvalidRecord,
    MessageMissing,
    StoreCorrupt,
)
from ..keys import (
    MAX_KEY_SIZE,
    QM_GUID_SIZE,
    history_key,
    incoming_key,
    relayed_key,
    split_incoming_key,
    u64,
    unpack_u64,
)
from ..overlay import QueueState
from ..peering_state import OutgoingState
from ..records import QueueKind, QueueRecord, encode_message_record, message_header, pack
from ..units import Done, Operation, Removal, Result
from .messages import Appended
from .retired import take_retired

__all__ = [
    "INCOMING_FORMAT_VERSION",
    "INCOMING_RESYNC_VERSION",
    "INCOMING_VIA_VERSION",
    "AppendOutgoing",
    "ForgetOutgoing",
    "Forgotten",
    "IncomingState",
    "RecordIncoming",
    "RememberMessageIds",
    "SetOutgoingPaused",
    "decode_incoming",
    "decode_incoming_entry",
    "encode_incoming",
    "read_history",
    "read_incoming",
    "read_relayed",
]

INCOMING_FORMAT_VERSION: Final = 1
#: The format of a state flagged for a resync (format 1 and a flags byte).
INCOMING_RESYNC_VERSION: Final = 2
#: The format of a state whose last message came through another queue
#: manager (format 2 and that queue manager's GUID).
INCOMING_VIA_VERSION: Final = 3
_INCOMING = struct.Struct(">BQIId")
_INCOMING_FLAGGED = struct.Struct(">BQIIdB")
_INCOMING_VIA = struct.Struct(">BQIIdB16s")
_I_RESYNC: Final = 0x01
#: A queue record keeps the display name's length in a u16.
_MAX_DISPLAY_NAME: Final = 0xFFFF


@dataclass(frozen=True, slots=True)
class IncomingState:
    """The receiver's state of one exactly-once stream, as stored in ``incoming``."""

    #: The sending queue manager's GUID (16 bytes).
    source_qm: bytes
    #: The destination queue key as the sender wrote it.
    queue_key: str
    #: u64: the TxSequenceID of the last accepted message.
    sequence_id: int
    #: u32: the sequence number of the last accepted message.
    last_number: int
    #: u32: messages of the stream rejected so far.
    reject_count: int
    #: Unix seconds.
    last_access: float
    #: The store was restored from a backup since the stream's last message: the
    #: next one is taken whatever number it says came before it.
    resync: bool = False
    #: The GUID (16 bytes) of the queue manager the stream's last message came
    #: from when that was not its source (a router), else None.
    via: bytes | None = None

    @property
    def sequence_timestamp(self) -> int:
        """The stream's sequence timestamp: the high 32 bits of ``sequence_id``
        (part of the key: one stream per source outgoing queue)."""
        return self.sequence_id >> 32


#: Batch scratch key prefix: where each stream stands after the writes planned so far.
_INCOMING_SCRATCH: Final = "incoming"


def encode_incoming(
    sequence_id: int,
    last_number: int,
    reject_count: int,
    last_access: float,
    *,
    resync: bool = False,
    via: bytes | None = None,
) -> bytes:
    """Encode an incoming state's value (its source and queue key are the key):
    format 1, 2 when flagged for a resync, 3 when it names a ``via``.

    Raises:
        InvalidRecord: a field does not fit its width, or ``via`` is not 16 bytes.
    """
    fields = (sequence_id, last_number, reject_count, last_access)
    flags = _I_RESYNC if resync else 0
    if via is not None:
        if len(via) != QM_GUID_SIZE:
            msg = f"an incoming state's via is a 16-byte GUID, not {len(via)} bytes"
            raise InvalidRecord(msg)
        return pack(
            _INCOMING_VIA, "incoming state field", INCOMING_VIA_VERSION, *fields, flags, via
        )
    if resync:
        return pack(
            _INCOMING_FLAGGED, "incoming state field", INCOMING_RESYNC_VERSION, *fields, _I_RESYNC
        )
    return pack(_INCOMING, "incoming state field", INCOMING_FORMAT_VERSION, *fields)


def decode_incoming(source_qm: bytes, queue_key: str, data: bytes | memoryview) -> IncomingState:
    """Decode the incoming state of stream ``(queue_key, source_qm)`` (its
    timestamp is the decoded ``sequence_id``'s).

    Raises:
        StoreCorrupt: the bytes are not an incoming state.
    """
    via: bytes | None = None
    if len(data) == _INCOMING.size and data[0] == INCOMING_FORMAT_VERSION:
        _, sequence_id, last_number, reject_count, last_access = _INCOMING.unpack(data)
        flags = 0
    elif len(data) == _INCOMING_FLAGGED.size and data[0] == INCOMING_RESYNC_VERSION:
        _, sequence_id, last_number, reject_count, last_access, flags = _INCOMING_FLAGGED.unpack(
            data
        )
    elif len(data) == _INCOMING_VIA.size and data[0] == INCOMING_VIA_VERSION:
        _, sequence_id, last_number, reject_count, last_access, flags, via = _INCOMING_VIA.unpack(
            data
        )
    else:
        msg = f"incoming state of {queue_key!r} is corrupt ({len(data)} bytes)"
        raise StoreCorrupt(msg)
    return IncomingState(
        source_qm,
        queue_key,
        sequence_id,
        last_number,
        reject_count,
        last_access,
        resync=bool(flags & _I_RESYNC),
        via=via,
    )


def read_incoming(env: Environment, catalog: Catalog) -> list[IncomingState]:
    """Every stored incoming stream state, ordered by source GUID, then sequence
    timestamp, then queue key.

    Raises:
        StoreCorrupt: a key or value does not decode, or a state's sequence is
            not of its key's timestamp.
    """
    with env.read("incoming_states") as txn, txn.cursor(db=catalog.dbs.incoming) as cursor:
        return [
            decode_incoming_entry(key, value)
            for key, value in cursor.iternext(keys=True, values=True)
        ]


def decode_incoming_entry(key: bytes | memoryview, value: bytes | memoryview) -> IncomingState:
    """The incoming state stored under ``key`` (see :func:`read_incoming`).

    Raises:
        StoreCorrupt: the key or the value does not decode, or the state's
            sequence is not of its key's timestamp.
    """
    try:
        source_qm, stamp, queue_key = split_incoming_key(bytes(key))
    except ValueError as exc:
        msg = f"incoming state key {bytes(key).hex()} is corrupt"
        raise StoreCorrupt(msg) from exc
    state = decode_incoming(source_qm, queue_key, value)
    if state.sequence_timestamp != stamp:
        msg = (
            f"incoming state of {queue_key!r} holds sequence {state.sequence_id:#x}, "
            f"not one of its key's timestamp {stamp}"
        )
        raise StoreCorrupt(msg)
    return state


def read_history(env: Environment, catalog: Catalog) -> list[bytes]:
    """Every message history key, in the order they were added.

    Raises:
        StoreCorrupt: a value is not a u64 counter.
    """
    entries: list[tuple[int, bytes]] = []
    with env.read("message_history") as txn, txn.cursor(db=catalog.dbs.history) as cursor:
        for key, value in cursor.iternext(keys=True, values=True):
            try:
                counter = unpack_u64(value)
            except Exception as exc:
                msg = f"message history entry {bytes(key).hex()} is corrupt"
                raise StoreCorrupt(msg) from exc
            entries.append((counter, bytes(key)))
    entries.sort()
    return [key for _, key in entries]


def read_relayed(env: Environment, catalog: Catalog, queue_id: int, relay_id: bytes) -> int | None:
    """The lowest lookup id of an entry of the outgoing queue ``queue_id`` appended
    with ``relay_id`` and still there (not purged), or None: one seek in
    ``relayed``, and none at all for a queue that is gone or empty.

    Raises:
        InvalidRecord: ``relay_id`` is not ``RELAY_ID_SIZE`` bytes.
    """
    start = relayed_key(queue_id, relay_id)
    queue = catalog.by_id.get(queue_id)
    if queue is None or not queue.depth:
        return None
    prefix = start[:-8]
    first = max(queue.purged_below, 1)
    with env.read("read_relayed") as txn, txn.cursor(db=catalog.dbs.relayed) as cursor:
        if not cursor.set_range(relayed_key(queue_id, relay_id, first)):
            return None
        key = bytes(cursor.key())
    if not key.startswith(prefix):
        return None
    return unpack_u64(key[len(prefix) :])


@dataclass(frozen=True, slots=True)
class Forgotten(Result):
    """Entries of an outgoing queue were forgotten; ``removed`` were still there.

    ``state`` is the queue's sequence state after the operation (rolled if
    the queue was left empty).
    """

    queue_id: int
    removed: int
    state: OutgoingState


def _outgoing(ctx: PlanContext, queue_id: int) -> OutgoingState:
    """The sequence state of an outgoing queue, as the batch sees it.

    Raises:
        QueueMissing: the queue does not exist.
        InvalidOperation: it is not an outgoing queue.
    """
    queue = ctx.live_queue(queue_id)
    state = ctx.peering.outgoing_state(queue_id)
    if queue.record.kind is not QueueKind.OUTGOING or state is None:
        msg = f"queue {queue.record.name!r} is not an outgoing queue"
        raise InvalidOperation(msg)
    return state


@dataclass(frozen=True, slots=True)
class AppendOutgoing(Operation):
    """Append an entry to the outgoing queue ``name``, creating the queue if needed.

    A new queue is created as the batch sees it (so two units of one batch
    may both name a queue that does not exist yet: the first creates it),
    transactional (FIFO), without journal or quota, with ``created_at`` the
    batch's time and an :class:`OutgoingState` of ordinal 1, base 0, not
    paused and a new sequence timestamp. ``payload`` and ``size`` are as in
    :class:`~storage.AppendMessage`; the priority is 0.

    With a ``relay`` id, the entry's key in ``relayed`` is written with it;
    whatever removes the entry later (a forget, a purge's erasure, the
    queue's deletion) deletes that key in the same write, so
    :func:`read_relayed` finds exactly the entries still there.

    Raises (when planned):
        InvalidOperation: a queue of that name exists and is not an outgoing queue.
        InvalidRecord: the name is empty or too long, the size is out of
            range, or the relay id is not ``RELAY_ID_SIZE`` bytes.
    """

    name: str
    display_name: str
    payload: Sequence[bytes | bytearray | memoryview] | bytes | memoryview
    size: int
    #: When it expires (unix seconds; indexed in ``expiry``), or None.
    deadline: float | None = None
    #: The relay id of the message it relays (:data:`~storage.keys.RELAY_ID_SIZE`
    #: bytes, kept as the record's note and indexed in ``relayed`` while the
    #: entry is there), or empty.
    relay: bytes = b""

    def plan(self, ctx: PlanContext) -> Result:
        return self.append(ctx)

    def append(self, ctx: PlanContext) -> Appended:
        """Append the entry (what :meth:`plan` does; a prepared send is appended so)."""
        relay = self.relay
        if relay:
            relayed_key(0, relay)  # checks its size before anything is planned
        record = encode_message_record(
            self.payload,
            priority=0,
            size=self.size,
            arrived_time=ctx.now,
            deadline=self.deadline,
            note=relay,
            relay=bool(relay),
        )
        queue = self._existing(ctx)
        queue_id = self._create(ctx) if queue is None else queue.record.queue_id
        lookup_id = ctx.append(queue_id, record, 0, self.size)
        if relay:
            ctx.put(ctx.dbs.relayed, relayed_key(queue_id, relay, lookup_id), b"")
        return Appended(queue_id, lookup_id)

    def check(self, ctx: PlanContext) -> None:
        """Raise what :meth:`plan` would raise now, changing nothing (a prepared
        transaction's sends are checked when it is prepared, planned when it
        commits)."""
        encode_message_record(b"", priority=0, size=self.size, arrived_time=0.0)
        if self.relay:  # a prepared send's record keeps no relay id
            msg = "a relayed entry is not a send of a prepared transaction"
            raise InvalidOperation(msg)
        if self._existing(ctx) is None:
            self._check_names()

    def _existing(self, ctx: PlanContext) -> QueueState | None:
        """The outgoing queue as the batch sees it, or ``None`` if there is none yet."""
        queue = ctx.queue_named(self.name)
        if queue is not None and queue.record.kind is not QueueKind.OUTGOING:
            msg = f"queue {self.name!r} exists and is not an outgoing queue"
            raise InvalidOperation(msg)
        return queue

    def _check_names(self) -> None:
        if not self.name or len(self.name.encode()) > MAX_KEY_SIZE:
            msg = f"queue name must be 1..{MAX_KEY_SIZE} bytes of UTF-8: {self.name!r}"
            raise InvalidRecord(msg)
        if len(self.display_name.encode()) > _MAX_DISPLAY_NAME:
            msg = f"display name must be at most {_MAX_DISPLAY_NAME} bytes of UTF-8"
            raise InvalidRecord(msg)

    def _create(self, ctx: PlanContext) -> int:
        self._check_names()
        queue_id = ctx.allocate_queue_ids(1)
        record = QueueRecord(
            queue_id=queue_id,
            name=self.name,
            display_name=self.display_name,
            kind=QueueKind.OUTGOING,
            transactional=True,
            created_at=ctx.now,
        )
        retired = take_retired(ctx, self.name)
        stamp, ordinal = retired or (ctx.peering.next_sequence_stamp(ctx.now), 1)
        ctx.add_queue(record)
        ctx.peering.set_outgoing_state(OutgoingState(queue_id, stamp, ordinal, 0, paused=False))
        return queue_id


@dataclass(frozen=True, slots=True)
class ForgetOutgoing(Removal):
    """Remove entries of an outgoing queue; roll its sequence if it is left empty.

    Entries that are not there (any more) are passed over, so forgetting is
    idempotent; entries appended earlier in the same batch are not seen
    (they are not committed yet) and stay. If the queue's depth is then 0,
    the sequence rolls: ordinal + 1, base = next lookup id - 1, written in
    the same transaction. A forget that finds the queue empty rolls it
    again (harmless: nothing waits to be sent).

    Raises (when planned):
        QueueMissing: the queue does not exist.
        InvalidOperation: it is not an outgoing queue.
    """

    queue_id: int
    lookup_ids: tuple[int, ...]

    def plan(self, ctx: PlanContext) -> Result:
        state = _outgoing(ctx, self.queue_id)
        removed = 0
        for lookup_id in self.lookup_ids:
            try:
                data = ctx.message(self.queue_id, lookup_id)
            except MessageMissing:
                continue
            priority, size = message_header(data)
            ctx.remove(self.queue_id, lookup_id, priority, size, data)
            removed += 1
        queue = ctx.live_queue(self.queue_id)
        if queue.depth == 0:
            state = dataclasses.replace(
                state,
                sequence_ordinal=state.sequence_ordinal + 1,
                base=queue.next_lookup_id - 1,
            )
            ctx.peering.set_outgoing_state(state)
        return Forgotten(self.queue_id, removed, state)


@dataclass(frozen=True, slots=True)
class SetOutgoingPaused(Operation):
    """Pause or resume sending from an outgoing queue (kept in its state).

    Raises (when planned):
        QueueMissing: the queue does not exist.
        InvalidOperation: it is not an outgoing queue.
    """

    queue_id: int
    paused: bool

    def plan(self, ctx: PlanContext) -> Result:
        state = _outgoing(ctx, self.queue_id)
        ctx.peering.set_outgoing_state(dataclasses.replace(state, paused=self.paused))
        return Done()


@dataclass(frozen=True, slots=True)
class RecordIncoming(IncomingState, Operation):
    """Store this state as the receiver's state of the stream ``(queue_key,
    source_qm, sequence_timestamp)`` (the timestamp: ``sequence_id >> 32``).

    ``queue_key`` need not name a queue of this store. A later operation on
    the same stream (in this batch or another) replaces it. With ``follows``
    (the ``(sequence_id, last_number)`` the stream stood at before the
    messages this write stores; ``(0, 0)`` for a stream not stored yet) the
    store checks that it still stands there, so that a write cannot pass over
    messages another write of the same stream failed to store.

    Raises (when planned):
        InvalidRecord: ``source_qm`` is not 16 bytes, the key is longer than
            LMDB allows, or a number does not fit its width.
        IncomingStreamMoved: the stream does not stand at ``follows``.
    """

    follows: tuple[int, int] | None = None

    def plan(self, ctx: PlanContext) -> Result:
        key = incoming_key(self.source_qm, self.sequence_timestamp, self.queue_key)
        value = encode_incoming(
            self.sequence_id,
            self.last_number,
            self.reject_count,
            self.last_access,
            resync=self.resync,
            via=self.via,
        )
        if self.follows is not None:
            seen = ctx.scratch((_INCOMING_SCRATCH, key))
            if not isinstance(seen, tuple):
                stored = ctx.txn.get(key, db=ctx.dbs.incoming)
                seen = (0, 0)
                if stored is not None:
                    state = decode_incoming(self.source_qm, self.queue_key, stored)
                    seen = (state.sequence_id, state.last_number)
            if seen != self.follows:
                msg = (
                    f"stream {self.queue_key!r} stands at {seen}, not at {self.follows} "
                    "where this write follows"
                )
                raise IncomingStreamMoved(msg)
        ctx.put(ctx.dbs.incoming, key, value)
        ctx.set_scratch((_INCOMING_SCRATCH, key), (self.sequence_id, self.last_number))
        return Done()


@dataclass(frozen=True, slots=True)
class RememberMessageIds(Operation):
    """Add message ids to the history and forget others.

    Keys are 20 bytes: the source queue manager's GUID and the message's
    ordinal (u32 big-endian). ``forget`` is applied first and passes over
    keys that are not there; each key of ``add`` then gets the next
    insertion counter (adding a key again moves it to the end).

    Raises (when planned):
        InvalidRecord: a key is not 20 bytes long.
    """

    add: tuple[bytes, ...]
    forget: tuple[bytes, ...] = ()

    @property
    def frees_space(self) -> bool:
        """Only forgetting: yes."""
        return not self.add

    def plan(self, ctx: PlanContext) -> Result:
        added = [history_key(key) for key in self.add]
        forgotten = [history_key(key) for key in self.forget]
        db = ctx.dbs.history
        for key in forgotten:
            ctx.discard(db, key)
        for key in added:
            ctx.put(db, key, u64(ctx.peering.next_history_counter()))
        return Done()
