"""The receiver's half of exactly-once in-order delivery (EOD), for all streams.

Theory of operation
-------------------
:class:`IncomingSequences` keeps, for every *stream* (destination queue key,
source QM GUID, sequence timestamp), the receiver state of [MS-MQQB]
§3.1.5.8.6 (reference §15.3, §15.4): the IncomingTxSequenceID /
IncomingTxSequenceNumber pair, the reject count and the last access time.
It decides whether an arriving transactional message is accepted, and when
an OrderAck is due for which stream. It never reads a clock, touches the
store or sends: ``now`` comes in, decisions and :class:`OrderAckDue` values
go out.

Why the timestamp is part of the key. A sender keeps one sequence per
outgoing queue, that is per destination *as written*; one source may reach
the same queue here under two names (a direct TCP address and a direct OS
name, a port map, a changed address), through two outgoing queues. Keyed by
queue and source alone, both would share one stream, which follows the
newer sequence and rejects every message of the older one for good. The
timestamp (the high 32 bits of the TxSequenceID) tells them apart: each of
our outgoing queues has its own, and only its ordinal (the low 32 bits)
rolls. So each outgoing queue of a source gets its own stream here, with the
rule below applied within it; the OrderAcks of each name the sequence, and
the sender finds the outgoing queue by its timestamp. A sender that uses one
timestamp for all its outgoing queues (Windows: the install time) has, as
before, one stream per (queue, source). Streams of one source to one queue
under different timestamps have no order between them.

Two marks per stream. The *accepted* mark is the last message :meth:`accept`
accepted, whether or not it is durable yet; the acceptance rule compares
against it, so a run of messages can be accepted back to back before the
store has synced any. The *persisted* mark is the last accepted message the
caller reported durable (:meth:`persisted`), the state that survives a crash
and the only one an OrderAck may announce ("fsync before the OrderAck",
reference §18). ``accepted >= persisted`` always; :meth:`rolled_back` (the
write failed) sets ``accepted = persisted``. Marks are compared as
``(sequence_id.value, number)``.

The acceptance rule (reference §15.3), against the accepted mark ``last``::

    accept iff number >= 1 and
        (seq == last.seq and number > last.number and previous <= last.number)
     or (seq >  last.seq and previous == 0)

A stream whose state says *resync* (its store was restored from a backup:
``storage.RenewAfterRestore``) takes its next message if only it is after
the accepted mark, ``(seq, number) > last``, whatever its ``previous``: the
messages the original took after the backup are gone with it, and their
sender forgot them when it had their OrderAck, so nothing else could ever
follow. Once that message is persisted the rule is the one above again; if
its write fails, the resync is given back.

An accept sets the accepted mark to the header's values and the reject count
to 0. A reject changes neither mark (the spec's text updates the state on
every arrival; that is the errata hazard the reference warns about): it
counts in the reject count and re-arms the OrderAck timer, so the receiver
re-announces its persisted mark and the sender prunes what it already has.
The second branch starts a new sequence, which must start from nothing
(``previous == 0``): a sender only rolls when everything before is
acknowledged. A stream the machine does not know starts from ``(0, 0)``, so
its first message needs ``previous == 0``.

OrderAcks. Each persist and each reject arms the stream's OrderAck; it is due
``order_ack_delay`` after the last arming, but never later than
``max_order_ack_delay`` after the first arming since the last announcement
(500 ms / 10 s by default: batching without starving the sender), or at
once when ``max_unannounced`` messages were persisted since the last one (a
sender streaming without a pause then forgets as it goes). A reject arms a
timer that is not armed yet, due at once (but not sooner than
``order_ack_delay`` after the last announcement), and never moves an armed
one later: a sender replaying thousands of messages the receiver holds
hears of it at its first duplicate, not only once the replay ends (a path
that cuts every session within a second would otherwise stall the stream). :meth:`due`
reports each due stream once per arming, with the persisted mark at that
moment: acks only in order, for the highest contiguous durable message.

Memory. A rejected message of an unknown stream creates no state (a peer
cannot fill memory with junk source GUIDs); ``max_streams``, if set, caps the
streams kept, and a message that would start one more is rejected. Streams
with durable state are never evicted (the store holds them all; they came in
through the constructor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TypeAlias, TypedDict

import wire

from .sequence_values import MAX_SEQUENCE_NUMBER, SequenceError

__all__ = [
    "IncomingSequences",
    "OrderAckDue",
    "SequenceLimits",
    "StreamKey",
    "StreamState",
    "stream_key",
]

#: A stream: (destination queue key text, source QM GUID as 16 bytes, sequence
#: timestamp: the high 32 bits of its TxSequenceID, ``TxSequenceId.timestamp``).
StreamKey: TypeAlias = tuple[str, bytes, int]

_MAX_STAMP: Final = 0xFFFFFFFF

_MAX_SEQUENCE_ID: Final = 0xFFFFFFFFFFFFFFFF
_NO_STREAMS: Final[Mapping[StreamKey, StreamState]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StreamState:
    """One stream's receiver state, as ``storage.RecordIncoming`` writes it.

    Attributes:
        sequence_id: the TxSequenceID as its 64-bit value (``TxSequenceId.value``).
        last_number: the last accepted TxSequenceNumber of that sequence.
        reject_count: messages rejected since the last accepted one.
        last_access: ``now`` of the last message of this stream.
    """

    sequence_id: int
    last_number: int
    reject_count: int
    last_access: float
    #: The store was restored from a backup: the stream's next message is taken
    #: whatever it says came before it (see the module docstring).
    resync: bool = False


@dataclass(frozen=True, slots=True)
class OrderAckDue:
    """An OrderAck to send now: ``key``'s persisted mark.

    Attributes:
        key: the stream; the OrderAck goes to its source QM's order queue.
        sequence_id: the TxSequenceID the ack names.
        number: the highest number persisted in order (TxSequenceNumber; the
            ack's previous number is ``number - 1``).
    """

    key: StreamKey
    sequence_id: wire.TxSequenceId
    number: int


@dataclass(slots=True)
class _Stream:
    persisted: tuple[int, int]
    accepted: tuple[int, int]
    reject_count: int
    last_access: float
    # The OrderAck timer: first and last arming since the last announcement.
    armed_first: float | None = None
    armed_last: float | None = None
    # Messages persisted since the last announcement.
    unannounced: int = 0
    # When the last announcement went, and whether a reject armed the next one.
    announced_at: float = -math.inf
    reject_armed: bool = False
    # Restored from a backup: the next message is taken whatever its previous
    # number says (once it is persisted; a rollback gives the resync back).
    resync: bool = False
    resync_taken: bool = False


class SequenceLimits(TypedDict, total=False):
    """The keyword arguments of :class:`IncomingSequences` after its streams (those
    given by whoever builds one for them, such as the ``Receiver``)."""

    order_ack_delay: float
    max_order_ack_delay: float
    max_streams: int | None
    max_unannounced: int


def stream_key(queue_key: str, source_qm: bytes, sequence_id: wire.TxSequenceId) -> StreamKey:
    """The key of the stream a message of ``sequence_id`` from ``source_qm`` to
    ``queue_key`` belongs to."""
    return (queue_key, source_qm, sequence_id.timestamp)


def _check_key(key: StreamKey) -> None:
    if not (
        isinstance(key, tuple)
        and len(key) == 3
        and isinstance(key[0], str)
        and isinstance(key[1], bytes)
        and len(key[1]) == 16
        and type(key[2]) is int
        and 0 <= key[2] <= _MAX_STAMP
    ):
        msg = (
            "a stream key is (queue key text, 16-byte QM GUID, u32 sequence timestamp), "
            f"not {key!r}"
        )
        raise SequenceError(msg)


class IncomingSequences:
    """The EOD receiver state of every stream (see the module docstring).

    Args:
        persisted: the streams' durable states, as the store has them (each
            state's sequence id of its key's timestamp).
        order_ack_delay: seconds from the last persist or reject to its OrderAck.
        max_order_ack_delay: at most this many seconds from the first persist
            or reject not yet announced to its OrderAck.
        max_streams: the most streams kept, or None for no limit.
        max_unannounced: an OrderAck is due at once when this many messages of
            a stream were persisted since its last one, so that a sender
            streaming without a pause need not keep ``max_order_ack_delay``
            seconds of messages waiting for it.

    Raises:
        SequenceError: a malformed key or state (or a state of another
            timestamp than its key's), or inconsistent delays.
    """

    def __init__(
        self,
        persisted: Mapping[StreamKey, StreamState] = _NO_STREAMS,
        *,
        order_ack_delay: float = 0.5,
        max_order_ack_delay: float = 10.0,
        max_streams: int | None = None,
        max_unannounced: int = 1024,
    ) -> None:
        if not 0 <= order_ack_delay <= max_order_ack_delay:
            msg = (
                f"need 0 <= order_ack_delay ({order_ack_delay}) "
                f"<= max_order_ack_delay ({max_order_ack_delay})"
            )
            raise SequenceError(msg)
        if max_streams is not None and max_streams < 0:
            msg = f"max_streams must be >= 0 or None, not {max_streams}"
            raise SequenceError(msg)
        self._delay = order_ack_delay
        self._max_delay = max_order_ack_delay
        self._max_streams = max_streams
        self._max_unannounced = max(1, max_unannounced)
        self._streams: dict[StreamKey, _Stream] = {}
        # Streams whose OrderAck is armed, in arming order.
        self._armed: dict[StreamKey, None] = {}
        for key, state in persisted.items():
            _check_key(key)
            if not (
                0 <= state.sequence_id <= _MAX_SEQUENCE_ID
                and 0 <= state.last_number <= MAX_SEQUENCE_NUMBER
                and state.sequence_id >> 32 == key[2]
            ):
                msg = f"stream {key!r}: invalid state {state!r}"
                raise SequenceError(msg)
            mark = (state.sequence_id, state.last_number)
            self._streams[key] = _Stream(
                mark, mark, state.reject_count, state.last_access, resync=state.resync
            )

    # ------------------------------------------------------------------ arrivals

    def accept(self, key: StreamKey, header: wire.TransactionHeader, now: float) -> bool:
        """A transactional message of ``key`` arrived: accept it, or reject it.

        Returns:
            True: the caller stores it, with :meth:`accepted_state` in the same
            write, and then calls :meth:`persisted` (or :meth:`rolled_back`).
            False: a duplicate or out of order: drop it (it still counts in the
            session); the stream's OrderAck is re-armed to re-announce.

        Raises:
            SequenceError: ``key`` is malformed, or its timestamp is not the
                header's (see :func:`stream_key`).
        """
        _check_key(key)
        if key[2] != header.sequence_id.timestamp:
            msg = f"stream {key!r} does not hold sequence {header.sequence_id}"
            raise SequenceError(msg)
        stream = self._streams.get(key)
        last_seq, last_number = (0, 0) if stream is None else stream.accepted
        seq = header.sequence_id.value
        number = header.sequence_number
        previous = header.previous_sequence_number
        accept = number >= 1 and (
            (seq == last_seq and number > last_number and previous <= last_number)
            or (seq > last_seq and previous == 0)
        )
        if stream is not None and stream.resync:
            # Restored: what the original took after the backup is gone with it,
            # and its sender has forgotten it. Take the next message, once.
            accept = accept or (number >= 1 and (seq, number) > (last_seq, last_number))
            if accept:
                stream.resync, stream.resync_taken = False, True
        if stream is None:
            if not accept or (
                self._max_streams is not None and len(self._streams) >= self._max_streams
            ):
                return False
            stream = self._streams[key] = _Stream((0, 0), (0, 0), 0, now)
        stream.last_access = now
        if not accept:
            stream.reject_count += 1
            if stream.persisted[0] and stream.armed_first is None:
                # A sender replaying what is held: the re-announcement is due
                # at once (at most one per ``order_ack_delay``), and the rest of
                # the run does not put it off, so that even a session a path
                # cuts short of the replay's end lets the sender prune.
                self._arm(key, stream, now)
                stream.reject_armed = True
            return False
        stream.accepted = (seq, number)
        stream.reject_count = 0
        return True

    def persisted(
        self, key: StreamKey, sequence_id: wire.TxSequenceId, number: int, now: float
    ) -> None:
        """The message accepted with these values is durable: arm its OrderAck.

        Persists are reported in the order of the writes. A persist reported
        after :meth:`rolled_back` still counts (the store is the truth): the
        accepted mark moves up to it if it was below.

        Raises:
            SequenceError: an unknown stream, or a mark not after the persisted one.
        """
        stream = self._streams.get(key)
        mark = (sequence_id.value, number)
        if stream is None or number < 1 or mark <= stream.persisted:
            held = None if stream is None else stream.persisted
            msg = f"stream {key!r}: persisted {mark} does not follow {held}"
            raise SequenceError(msg)
        stream.persisted = mark
        stream.accepted = max(stream.accepted, mark)
        # Something of it is stored since: the store's state has no resync flag.
        stream.resync = stream.resync_taken = False
        stream.last_access = now
        stream.unannounced += 1
        self._arm(key, stream, now)

    def rolled_back(self, key: StreamKey) -> None:
        """The write of accepted messages of ``key`` failed: forget them.

        The accepted mark goes back to the persisted one, so the sender's
        resends are accepted again. Unknown streams are ignored.
        """
        stream = self._streams.get(key)
        if stream is None:
            return
        stream.accepted = stream.persisted
        if stream.resync_taken:
            stream.resync, stream.resync_taken = True, False
        if stream.persisted == (0, 0):
            del self._streams[key]  # nothing durable: as if never seen

    # ------------------------------------------------------------------ state

    def state(self, key: StreamKey) -> StreamState | None:
        """The stream's persisted state, or None if nothing of it is durable."""
        stream = self._streams.get(key)
        if stream is None or stream.persisted == (0, 0):
            return None
        return StreamState(
            *stream.persisted, stream.reject_count, stream.last_access, resync=stream.resync
        )

    def accepted_mark(self, key: StreamKey) -> tuple[int, int]:
        """``(sequence_id, number)`` of the stream's last accepted message ((0, 0): none)."""
        stream = self._streams.get(key)
        return (0, 0) if stream is None else stream.accepted

    def accepted_state(self, key: StreamKey) -> StreamState | None:
        """The state to write with the message just accepted, or None if none was."""
        stream = self._streams.get(key)
        if stream is None or stream.accepted == (0, 0):
            return None
        return StreamState(*stream.accepted, stream.reject_count, stream.last_access)

    def streams(self) -> list[tuple[StreamKey, StreamState]]:
        """Every stream with durable state, by key (for status)."""
        out = []
        for key in sorted(self._streams):
            state = self.state(key)
            if state is not None:
                out.append((key, state))
        return out

    # ------------------------------------------------------------------ OrderAcks

    def due(self, now: float) -> list[OrderAckDue]:
        """The OrderAcks to send now, each reported once per arming.

        Each carries the stream's persisted mark at this moment.
        """
        out = []
        for key in list(self._armed):
            stream = self._streams[key]
            if now >= self._deadline(stream):
                del self._armed[key]
                stream.armed_first = stream.armed_last = None
                stream.unannounced = 0
                stream.announced_at, stream.reject_armed = now, False
                seq, number = stream.persisted
                out.append(OrderAckDue(key, wire.TxSequenceId.from_value(seq), number))
        return out

    def next_deadline(self) -> float | None:
        """When the next OrderAck is due, or None if none is armed."""
        streams = self._streams
        return min((self._deadline(streams[key]) for key in self._armed), default=None)

    def _arm(self, key: StreamKey, stream: _Stream, now: float) -> None:
        if stream.armed_first is None:
            stream.armed_first = now
            self._armed[key] = None
        stream.armed_last = now

    def _deadline(self, stream: _Stream) -> float:
        assert stream.armed_first is not None
        assert stream.armed_last is not None
        if stream.unannounced >= self._max_unannounced:
            return stream.armed_first
        if stream.reject_armed:
            return max(stream.armed_first, stream.announced_at + self._delay)
        return min(stream.armed_last + self._delay, stream.armed_first + self._max_delay)
