"""The receiver of a peer's messages: where exactly-once is decided, without sockets.

Theory of operation
-------------------
A :class:`Receiver` takes every user packet that arrives on any peer session
of this queue manager and decides what becomes of it; the trio adapter
(``qmgr.server.peering``) carries the decisions out and reports back. Every
input is a call carrying the caller's clocks: ``now`` (monotonic seconds:
the OrderAck timers) and ``wall`` (unix seconds: what the store keeps). It
never opens a socket, reads a clock, touches the store or logs.

A packet goes through these steps (the words are the glossary's, in
docs/design.md):

1. It **arrives** (:meth:`Receiver.arrive`) on a *path*: the adapter's
   connection, opaque here. The receiver says what it is:

   * an OrderAck or a FinalAck for this queue manager
     (:class:`OrderAckArrived`, :class:`FinalAckArrived`): the adapter hands
     the OrderAck to the outgoing queue it names, and settles the copy
     awaiting confirmation that the FinalAck is about;
   * an OrderAck or a FinalAck for another queue manager, whose messages we
     relayed: passed on (:class:`PassOn`), kept to pass on later
     (:class:`FinalAckToKeep`), or dropped (:attr:`ArrivalKind.UNROUTABLE`,
     :attr:`ArrivalKind.NOT_FROM_HOP`), as its :attr:`Receiver.return_paths`
     decide (:mod:`qmgr.protocol.return_paths`: who may acknowledge a stream
     relayed here, and which way each acknowledgment goes);
   * any other user message (:attr:`ArrivalKind.MESSAGE`): the return paths
     learn the way back to its source (and to its stream, and the router it
     came through).

2. The core decides its **destination** (``qmgr.core.arrivals``): a queue
   here, by its key, or another queue manager (relayed). Given that, the
   receiver **accepts** it (:meth:`Receiver.accept` returns
   :class:`Accepted`) or drops it (:class:`Dropped`):

   * relayed: accepted, unless a copy of it is still **held** here for
     relaying (the adapter says so, from the store's index of relayed
     entries: same source, same sequence id and number if transactional,
     same message id if not, same hop count, same outgoing queue): then it
     is dropped as :attr:`Dropped.HELD`. A router does no sequence
     processing, the destination does; but a transactional source resends
     everything its destination has not acknowledged at each OrderAck wait,
     and for as long as the router's next hop is down the router would store
     every resend again (see "Relayed resends" below). One the core refuses
     to relay (too many hops) is accepted once by the history, like a
     non-transactional message, so that the resends of a transactional
     source do not fill a dead-letter queue;
   * transactional, for a queue here: accepted iff it is the next message of
     its *stream* (the queue's key, the source QM GUID and the sequence
     timestamp: one stream per outgoing queue of the source, even when two
     of them reach the same queue under two names), by the exactly-once rule
     of :class:`~qmgr.protocol.incoming.IncomingSequences`; otherwise
     **rejected**;
   * any other, for a queue here: accepted unless its key is in the history
     of messages received lately (:mod:`qmgr.protocol.history`); otherwise a
     **duplicate**.

   :class:`Accepted` says what the write must hold besides the core's
   operations: the stream's new state (:attr:`Accepted.state`, which the
   adapter writes as ``storage.RecordIncoming``), or the history key to
   remember and the keys to forget (``storage.RememberMessageIds``).

3. The adapter **stores** it: in its connection's next write, with every
   message accepted meanwhile. Once that write is synced, the message is
   **persisted** (:meth:`Receiver.persisted`); if the write fails, it is
   **rolled back** (:meth:`Receiver.rolled_back`).

4. It is then **acknowledged**: at session level by a SessionAck marking its
   recoverable number, and, transactional, end to end by an OrderAck that
   announces its stream's persisted mark (:meth:`Receiver.order_acks`,
   batched by the timers of ``IncomingSequences``).

**Exactly once.** A transactional message for a queue here is stored at
most once and in order: it is accepted only if it follows the last message
of its stream that was accepted, and the write that stores it also writes
the stream's new state, so the store and the state a restart begins from
never disagree. A crash between the acceptance and the write loses both
together; a failed write rolls the stream back to its persisted mark; either
way the sender's resend is accepted again. Writes of one stream may be in
flight on several connections (a sender that reconnected): each carries
where the stream stood before its first message (:attr:`Accepted.follows`),
and the store refuses one that no longer follows what it holds, so that a
write cannot pass over messages another write failed to store. A non-transactional message for a
queue here is stored at most once while its key is in the history: the key
is written with the message, in the same write, and is pending (a resend
meanwhile is a duplicate) until that write is persisted or rolled back. A
message is never reordered within its stream, and never lost once the
sender has had its acknowledgment, because of the next rule.

**Durability before acknowledgment.** Nothing counts in an acknowledgment
before the write that stores it is persisted. An accepted message counts in
a SessionAck, and in its stream's OrderAck, only from :meth:`persisted`; an
OrderAck announces the *persisted* mark, never the accepted one. A duplicate
counts in a SessionAck only after the writes that were before it (its first
copy may be in one of them): the sender forgets a non-transactional message
on the SessionAck that marks it. A rejected message counts at once: the
sender forgets a transactional message only on an OrderAck, and a rejection
re-arms the stream's OrderAck, which re-announces the persisted mark so that
the sender stops resending what the receiver has.

**Relayed resends.** A relayed message is dropped only while its first
copy is in the router's outgoing queue: that copy is durable (the store's
index is written in the write that stores it, and deleted in the write that
forgets it), keeps its place in the queue (so nothing is reordered: the
dropped copy would have gone after it) and is sent on until the next hop
acknowledges it. A resend that comes after the first copy was forwarded and
forgotten is stored and forwarded again, on purpose: a transactional
destination announces its OrderAck again only when a copy reaches it, and
if that OrderAck was lost on its way back, dropping the resend here would
leave the source resending for ever; the destination drops the copy. A
resend that arrives while the write of its first copy is still in flight is
not known yet and is stored too (the index then holds two entries: each is
forgotten on its own). A copy that comes back round a loop of routers has
more hops than the one held, so it is not taken for a resend: it goes on to
the hop limit, to be kept in a dead-letter queue once (the history). The
check reads only what is committed, so it holds across restarts of the
router.

When the adapter acknowledges each outcome at session level (the
SessionAck that marks its recoverable number):

* :class:`Accepted`: once its write is persisted;
* :attr:`Dropped.DUPLICATE`, :attr:`Dropped.HELD`: once the writes before it
  are persisted (the copy held is committed; waiting for the writes before
  it also waits for that commit's sync to end);
* :attr:`Dropped.REJECTED`: at once;
* :class:`OrderAckArrived`, :attr:`ArrivalKind.UNROUTABLE`, and :class:`PassOn` of an
  OrderAck: at once;
* :class:`PassOn` of a FinalAck and :class:`FinalAckToKeep`: once it is
  stored (to send again until the next hop has it);
* :class:`FinalAckArrived`: once the write that settles it is persisted.
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Generic, TypeVar, Unpack

import wire

from .history import MessageHistory, message_keys
from .incoming import IncomingSequences, SequenceLimits, StreamKey, StreamState, stream_key
from .return_paths import ArrivalKind, FinalAckToKeep, PassOn, ReturnPaths

__all__ = [
    "Accepted",
    "ArrivalKind",
    "Dropped",
    "FinalAckArrived",
    "FinalAckToKeep",
    "OrderAckArrived",
    "PassOn",
    "Receiver",
]

#: The adapter's connection: where a packet arrived, and where acknowledgments go back.
P = TypeVar("P")

_U32_MAX: Final = 0xFFFFFFFF
_NO_STREAMS: Final[Mapping[StreamKey, StreamState]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class OrderAckArrived:
    """An OrderAck for this queue manager: hand it to the outgoing queue it names."""

    ack: wire.OrderAck


@dataclass(frozen=True, slots=True)
class FinalAckArrived:
    """A FinalAck about one of our messages: settle its copy awaiting confirmation."""

    ack: wire.FinalAck


class Dropped(enum.Enum):
    """A user message the receiver does not store."""

    #: Transactional, and not the next of its stream (already accepted, or
    #: out of order): acknowledge it at once; the stream's OrderAck is re-armed.
    REJECTED = "rejected"
    #: Non-transactional, and its key is in the history: acknowledge it once
    #: the writes before it are persisted.
    DUPLICATE = "duplicate"
    #: Relayed, and a copy of it is held here for relaying already: neither
    #: stored nor forwarded again; acknowledge it once the writes before it
    #: are persisted.
    HELD = "held"


@dataclass(frozen=True, slots=True)
class Accepted:
    """Store the message; report the write back with :meth:`Receiver.persisted`.

    Attributes:
        stream: the transactional stream it advances, or None.
        state: that stream's new state, to write with it (a write holds one
            state per stream: the last).
        header: its TransactionHeader (transactional only).
        follows: where its stream stood before it was accepted (the
            ``(sequence_id, number)`` the write checks the store still holds,
            so that it cannot pass over a message another write failed to
            store).
        remember: its history key, to write with it (b"": none).
        forget: history keys the same write forgets (evicted).
        relayed_source: relayed and transactional, its source's GUID bytes
            while no write that keeps that source among the relayed sources
            is persisted yet: this write keeps it too (b"": none; see
            :meth:`~qmgr.protocol.return_paths.ReturnPaths.keep_source`).
    """

    stream: StreamKey | None = None
    state: StreamState | None = None
    header: wire.TransactionHeader | None = None
    follows: tuple[int, int] | None = None
    remember: bytes = b""
    forget: tuple[bytes, ...] = ()
    relayed_source: bytes = b""


#: A relayed message: stored as it is, nothing to remember.
_RELAYED: Final = Accepted()


class Receiver(Generic[P]):
    """Decides what becomes of every packet a peer sends (see the module docstring).

    Args:
        local_qm: this queue manager's GUID.
        streams: the streams' durable states, as the store has them (their
            ``last_access`` on the ``now`` clock).
        history: the history keys the store holds.
        wall: unix time now (the age of those keys starts here).
        history_size: the most keys the history keeps.
        history_seconds: the longest it keeps a key.
        return_paths: the way back to each queue manager, as the store left it
            (a router's relayed sources, the sources' routers); None: a queue
            manager that relays nothing and knows no way back yet.
        limits: ``order_ack_delay``, ``max_order_ack_delay``, ``max_streams``,
            ``max_unannounced``, as for
            :class:`~qmgr.protocol.incoming.IncomingSequences` (its defaults).

    Raises:
        SequenceError: a malformed stream key or state, or inconsistent delays.
    """

    def __init__(
        self,
        local_qm: uuid.UUID,
        *,
        streams: Mapping[StreamKey, StreamState] = _NO_STREAMS,
        history: Iterable[bytes] = (),
        wall: float,
        history_size: int = 10_000,
        history_seconds: float = 1800.0,
        return_paths: ReturnPaths[P] | None = None,
        message_ids: Callable[[], int] | None = None,
        **limits: Unpack[SequenceLimits],
    ) -> None:
        self.local_qm = local_qm
        self.sequences = IncomingSequences(streams, **limits)
        self.history = MessageHistory(history, size=history_size, seconds=history_seconds, now=wall)
        #: Where acknowledgments go back to, and which are passed on.
        self.return_paths: ReturnPaths[P] = ReturnPaths() if return_paths is None else return_paths
        #: The message ids of the OrderAcks it builds: this queue manager's
        #: message-id ordinals, which no restart gives twice ([MS-MQQB] §3.1.1.3;
        #: a peer drops a repeated id as a duplicate). A count from 1 without.
        self._ack_ids = message_ids if message_ids is not None else itertools.count(1).__next__
        #: User messages arrived; rejected by the exactly-once rule; dropped as
        #: duplicates; relayed ones dropped because a copy is held.
        self.received = 0
        self.rejected = 0
        self.duplicates = 0
        self.relayed_duplicates = 0
        #: Acknowledgments for another queue manager that could not be passed on.
        self.unroutable = 0

    # ------------------------------------------------------------------ arrivals

    def arrive(
        self, packet: wire.UserMessage, path: P, *, hop: uuid.UUID | None = None
    ) -> ArrivalKind | OrderAckArrived | FinalAckArrived | FinalAckToKeep | PassOn[P]:
        """A user packet arrived on ``path``, from the queue manager ``hop`` (the
        one its session named; None: not known): what is it?

        Raises:
            wire.RemoteProtocolError: an OrderAck or FinalAck whose body does
                not decode.
        """
        kind = wire.classify_packet(packet)
        arrival: ArrivalKind | FinalAckToKeep | PassOn[P]
        if kind is wire.PacketKind.ORDER_ACK:
            order_ack = wire.OrderAck.from_message(packet)
            if packet.user.destination_qm in (wire.NULL_GUID, self.local_qm):
                return OrderAckArrived(order_ack)
            arrival = self.return_paths.order_ack(packet, order_ack, path, hop)
        elif kind is wire.PacketKind.FINAL_ACK:
            final_ack = wire.FinalAck.from_message(packet)
            if final_ack.acked_source_qm == self.local_qm:
                return FinalAckArrived(final_ack)
            arrival = self.return_paths.final_ack(packet, final_ack, path)
        else:
            self.received += 1
            if hop != self.local_qm or packet.user.source_qm == self.local_qm:
                # A message of another queue manager that this one sent to itself
                # (a next hop that turned out to be this queue manager) came over
                # no way back to its source: its return paths stay where they are.
                self.return_paths.message_arrived(packet, path, hop)
            return ArrivalKind.MESSAGE
        if arrival is ArrivalKind.UNROUTABLE or arrival is ArrivalKind.NOT_FROM_HOP:
            self.unroutable += 1
        return arrival

    def accept(
        self,
        packet: wire.UserMessage,
        *,
        queue_key: str | None,
        relayed: bool,
        now: float,
        wall: float,
        refused: bool = False,
        held: bool = False,
        relayed_to: str | None = None,
    ) -> Accepted | Dropped:
        """Accept a user message that :meth:`arrive` found, or drop it.

        Args:
            packet: the message.
            queue_key: the key of the queue here it is for, as the core
                resolved it (None: its address names no queue here, the core
                will refuse it; the stream and history use the address).
            relayed: the core relays it to another queue manager.
            now: monotonic seconds.
            wall: unix seconds.
            refused: the core refuses to relay it (too many hops): it is kept
                here in a dead-letter queue once, and its resends (a
                transactional source resends until an OrderAck that only the
                destination can give) are duplicates while the history holds it.
            held: relayed, and the outgoing queue it goes to still holds a copy
                of it (the same source, sequence id and number or message id,
                and hop count), committed: the store's answer
                (``Arrivals.held``). Not looked at for a refused relay.
            relayed_to: relayed, the name of the outgoing queue it goes on in.
        """
        if relayed and not refused:
            header = packet.transaction
            source = packet.user.source_qm.bytes
            if header is not None:
                self.return_paths.relayed(source, header.sequence_id.value, relayed_to)
            if held:
                self.relayed_duplicates += 1
                return Dropped.HELD
            if header is not None and self.return_paths.keep_source(source):
                return Accepted(relayed_source=source)
            return _RELAYED
        user = packet.user
        header = packet.transaction
        destination = queue_key or wire.queue_text(user.destination)
        if header is not None and not relayed:
            stream = stream_key(destination, user.source_qm.bytes, header.sequence_id)
            sequences = self.sequences
            follows = sequences.accepted_mark(stream)
            if not sequences.accept(stream, header, now):
                self.rejected += 1
                return Dropped.REJECTED
            # The accepted mark is now this message's: the state to write with it.
            state = StreamState(header.sequence_id.value, header.sequence_number, 0, wall)
            return Accepted(stream=stream, state=state, header=header, follows=follows)
        history = self.history
        key, bare = message_keys(user.source_qm.bytes, user.message_id, destination)
        if key in history or bare in history:
            self.duplicates += 1
            return Dropped.DUPLICATE
        history.add_pending(key)
        return Accepted(remember=key, forget=history.evictions(wall))

    def persisted(self, accepted: Accepted, *, now: float, wall: float) -> None:
        """The write that stored an accepted message is synced.

        Call it in the order of the writes, and of the messages within one.
        """
        if accepted.stream is not None:
            header = accepted.header
            assert header is not None
            self.sequences.persisted(
                accepted.stream, header.sequence_id, header.sequence_number, now
            )
        if accepted.remember:
            self.history.persisted(accepted.remember, wall)
        if accepted.relayed_source:
            self.return_paths.source_written(accepted.relayed_source, kept=True)

    def rolled_back(self, accepted: Iterable[Accepted]) -> None:
        """The write that was to store these accepted messages failed: as if they
        never arrived (their streams go back to the persisted mark, their keys
        leave the history), so that their resends are accepted."""
        for each in accepted:
            if each.stream is not None:
                self.sequences.rolled_back(each.stream)
            if each.remember:
                self.history.failed(each.remember)
            if each.relayed_source:
                self.return_paths.source_written(each.relayed_source, kept=False)

    # ------------------------------------------------------------------ OrderAcks

    def order_acks(self, now: float, wall: float) -> list[tuple[P, bytes]]:
        """The OrderAcks due now, built, each with the path to send it on.

        A stream's OrderAck goes back the way the stream's messages last came
        (one source's outgoing queues may reach here by different next hops,
        and the source takes an OrderAck only from the queue's hop), else the
        way the source's messages last came. A stream whose source has no
        return path (no connection since the start, or its connection ended)
        announces nothing now: the sender's next resend re-arms it.
        """
        out: list[tuple[P, bytes]] = []
        for due in self.sequences.due(now):
            # key[1] is the stream's source and key[2] its sequence timestamp.
            path = self.return_paths.order_ack_path(due.key[1], due.key[2])
            if path is None:
                continue
            ack = wire.OrderAck(
                source_qm=self.local_qm,
                destination=wire.ORDER_QUEUE,
                destination_qm=uuid.UUID(bytes=due.key[1]),
                message_id=self._ack_ids() & _U32_MAX,
                sent_time=int(wall),
                sequence_id=due.sequence_id,
                sequence_number=due.number,
                previous_sequence_number=max(0, due.number - 1),
            )
            out.append((path, wire.build_packet(ack)))
        return out

    def next_deadline(self) -> float | None:
        """When the next OrderAck is due (``now`` clock), or None."""
        return self.sequences.next_deadline()

    # ------------------------------------------------------------------ status

    def stream_state(self, key: StreamKey) -> StreamState | None:
        """A stream's persisted state, or None if nothing of it is durable."""
        return self.sequences.state(key)

    def streams(self) -> list[tuple[StreamKey, StreamState]]:
        """Every stream with durable state, by key."""
        return self.sequences.streams()
