"""Peering's state the catalog keeps: outgoing sequence states, sequence stamps, history counters.

Theory of operation
-------------------
Each OUTGOING queue has an :class:`OutgoingState`, the sender's half of
exactly-once delivery (see ``ops.peering``). The catalog keeps every one in
memory, read at opening from ``outgoing``; a batch sees them through its
:class:`PeeringState`, which lays the batch's changes over them, and writes
the ones it changed once, when the batch ends. The same part hands out the
two meta counters of peering: the *sequence stamp* (the timestamp of a new
outgoing queue's TxSequenceID, ``max(int(now), last + 1)``, so no two
outgoing queues share one; a queue created again after one of its name was
removed takes that one's instead, see ``ops.retired``) and the *history counter* (the insertion
counter of a new ``history`` entry). Savepoints undo all of it, like every
other change of the batch.

Outgoing state, format version 1 (in ``outgoing``, keyed by the queue id)::

    off  size  field
      0     1  format version (1)
      1     1  flags                     bit 0 paused
      2     4  sequence_timestamp        u32: names the queue's TxSequenceID, unique among the
                                         outgoing queues there are (``ops.retired``)
      6     4  sequence_ordinal          u32: the TxSequenceID's ordinal, +1 at each roll
     10     8  base                      u64: an entry's sequence number is lookup_id - base
"""

from __future__ import annotations

import struct
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

import lmdb

from .errors import InvalidRecord, StoreCorrupt
from .keys import MAX_U32, META_HISTORY_COUNTER, META_SEQUENCE_STAMP, queue_id_key, u32, u64
from .overlay import DELETE, MISSING, PUT, Changes, Overlay
from .records import pack

__all__ = [
    "OUTGOING_FORMAT_VERSION",
    "OutgoingState",
    "PeeringState",
    "decode_outgoing",
    "encode_outgoing",
]

OUTGOING_FORMAT_VERSION: Final = 1
_OUTGOING = struct.Struct(">BBIIQ")
_O_PAUSED: Final = 0x01


@dataclass(frozen=True, slots=True)
class OutgoingState:
    """The exactly-once sequence of an OUTGOING queue, as stored in ``outgoing``."""

    queue_id: int
    #: u32; unique per outgoing queue and larger than any earlier one of this store.
    sequence_timestamp: int
    #: u32; starts at 1 and grows by one each time the sequence rolls.
    sequence_ordinal: int
    #: u64; a transactional entry's sequence number is ``lookup_id - base``.
    base: int
    #: Sending is paused (kept across restarts).
    paused: bool


def encode_outgoing(state: OutgoingState) -> bytes:
    """Encode an outgoing state (its queue id is the key, not in the value).

    Raises:
        InvalidRecord: a field does not fit its width.
    """
    return pack(
        _OUTGOING,
        "outgoing state field",
        OUTGOING_FORMAT_VERSION,
        _O_PAUSED if state.paused else 0,
        state.sequence_timestamp,
        state.sequence_ordinal,
        state.base,
    )


def decode_outgoing(queue_id: int, data: bytes | memoryview) -> OutgoingState:
    """Decode the outgoing state of queue ``queue_id``.

    Raises:
        StoreCorrupt: the bytes are not an outgoing state.
    """
    if len(data) != _OUTGOING.size or data[0] != OUTGOING_FORMAT_VERSION or data[1] & ~_O_PAUSED:
        msg = f"outgoing state of queue id {queue_id} is corrupt ({len(data)} bytes)"
        raise StoreCorrupt(msg)
    _, flags, timestamp, ordinal, base = _OUTGOING.unpack(data)
    return OutgoingState(queue_id, timestamp, ordinal, base, bool(flags & _O_PAUSED))


@dataclass(slots=True, eq=False)
class PeeringState:
    """The batch's view of the outgoing states and of peering's meta counters.

    Made with the batch's overlay (its savepoints undo what this part changes)
    and the committed outgoing states, by queue id (the catalog's).
    """

    _overlay: Overlay
    _committed: dict[int, OutgoingState]
    _: KW_ONLY
    #: The last sequence stamp given, as committed.
    sequence_stamp: int
    #: The last history counter given, as committed.
    history_counter: int
    #: Queue id -> the OutgoingState the batch gave it, or None: deleted.
    _outgoing: Changes = field(default_factory=dict, init=False, repr=False)
    #: Meta key -> the counter's value in the batch.
    _counters: Changes = field(default_factory=dict, init=False, repr=False)

    def outgoing_state(self, queue_id: int) -> OutgoingState | None:
        """An OUTGOING queue's sequence state as the batch sees it, or ``None``."""
        state = self._outgoing.get(queue_id, MISSING)
        if state is MISSING:
            return self._committed.get(queue_id)
        assert state is None or isinstance(state, OutgoingState)
        return state

    def outgoing_ids(self) -> list[int]:
        """The ids of every OUTGOING queue with a sequence state, as the batch sees
        them, in order."""
        ids = set(self._committed)
        for queue_id, state in self._outgoing.items():
            if state is None:
                ids.discard(queue_id)
            else:
                ids.add(queue_id)
        return sorted(ids)

    def set_outgoing_state(self, state: OutgoingState) -> None:
        """Give an OUTGOING queue its sequence state (written at the end of the batch).

        Raises:
            InvalidRecord: a field does not fit its width.
        """
        encode_outgoing(state)  # refuse it now, not when the batch is written
        self._overlay.change(self._outgoing, state.queue_id, state)

    def forget(self, queue_id: int) -> None:
        """Delete a queue's sequence state (its queue is deleted)."""
        self._overlay.change(self._outgoing, queue_id, None)

    def next_sequence_stamp(self, now: float) -> int:
        """A sequence timestamp for a new outgoing queue: ``max(int(now), last + 1)``.

        Raises:
            InvalidRecord: timestamps (u32) are exhausted.
        """
        stamp = max(int(now), self._counter(META_SEQUENCE_STAMP, self.sequence_stamp) + 1)
        if stamp > MAX_U32:
            msg = "outgoing sequence timestamps are exhausted"
            raise InvalidRecord(msg)
        self._overlay.change(self._counters, META_SEQUENCE_STAMP, stamp)
        return stamp

    def next_history_counter(self) -> int:
        """The insertion counter of a new ``history`` entry (one more than the last)."""
        counter = self._counter(META_HISTORY_COUNTER, self.history_counter) + 1
        self._overlay.change(self._counters, META_HISTORY_COUNTER, counter)
        return counter

    def _counter(self, key: bytes, committed: int) -> int:
        value = self._counters.get(key, committed)
        assert isinstance(value, int)
        return value

    def finish(
        self, meta: lmdb._Database, outgoing: lmdb._Database
    ) -> tuple[dict[int, OutgoingState | None], int | None, int | None]:
        """Write the outgoing states and counters the batch changed.

        Returns:
            The changed states for the catalog (``None``: deleted), the new
            sequence stamp and the new history counter (``None``: unchanged).
        """
        writes = self._overlay.writes
        stamp = self._counters.get(META_SEQUENCE_STAMP)
        if isinstance(stamp, int):
            writes.append((PUT, meta, META_SEQUENCE_STAMP, u32(stamp)))
        history = self._counters.get(META_HISTORY_COUNTER)
        if isinstance(history, int):
            writes.append((PUT, meta, META_HISTORY_COUNTER, u64(history)))
        changed: dict[int, OutgoingState | None] = {}
        for queue_id, state in self._outgoing.items():
            assert isinstance(queue_id, int)
            if isinstance(state, OutgoingState):
                writes.append((PUT, outgoing, queue_id_key(queue_id), encode_outgoing(state)))
                changed[queue_id] = state
            elif queue_id in self._committed:  # deleted (one made in this batch was never written)
                writes.append((DELETE, outgoing, queue_id_key(queue_id), b""))
                changed[queue_id] = None
        return (
            changed,
            stamp if isinstance(stamp, int) else None,
            history if isinstance(history, int) else None,
        )
