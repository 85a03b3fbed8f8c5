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
     relayed: passed on as it is (:class:`PassOn`); an OrderAck the way its
     stream's messages came (as a destination sends its own), else, and a
     FinalAck, on a session with that queue manager if one is open, else
     along its *return path* (the path its messages last arrived on). At a
     router, a FinalAck with no such path open (its source is down, and was
     its own return path) is to be **kept** (:class:`FinalAckToKeep`): the adapter
     stores it before it acknowledges it, and sends it as its own FinalAcks
     go, when its source has a session here again; nothing else would send
     it again, the destination forgets it once acknowledged. Only a FinalAck
     of a stream whose messages this router relayed lately (the last
     :data:`MAX_STREAM_PATHS` streams, since the start), or about a message of
     a queue manager whose transactional messages it ever relayed (the
     *relayed sources*, which the adapter keeps in the store: after a restart
     the streams relayed before it are not known, their sources are), is
     kept: a peer cannot fill the router's store with FinalAcks about any
     other queue manager's messages, nor make it send them, for ever, to a
     queue manager that never routed through it. Otherwise an
     acknowledgment is dropped (:attr:`ArrivalKind.UNROUTABLE`): an OrderAck
     with no open path, or any acknowledgment whose path is the connection it
     arrived on, or that is the same acknowledgment (the same bytes: its
     sender's id for it and its send time included) as one of the last
     :data:`PASSED_ON_REMEMBERED` passed on here. An OrderAck is passed on
     only if it is of a stream relayed here (since the start, the last
     :data:`MAX_STREAM_PATHS`), and came from the queue manager at the next
     hop of the outgoing queue the stream went on in
     (:attr:`ArrivalKind.NOT_FROM_HOP` otherwise): the source takes an OrderAck
     from its router, so the router checks for it that the stream's own hop
     sent it, and no other peer of the router can make the source forget
     messages nobody received. (After a restart of the router, an OrderAck of
     a stream not relayed again yet is dropped: the source's resend, relayed
     or found held, makes the stream known again.) The destination announces
     an OrderAck again when the source resends. Return paths are where each
     source's messages *last* came from, so two routers can each hold the
     other as a source's return path (its messages came through one while
     the other was down, then the other way round); remembering what was passed on is what keeps an
     acknowledgment from going round between them for ever. The packet is
     not changed: [MS-MQQB] wants an OrderAck's and a FinalAck's hop count
     zero;
   * any other user message (:attr:`ArrivalKind.MESSAGE`): its source queue
     manager's return path is now the path it came on, and, transactional,
     so is the return path of its stream (its source's outgoing queue, by
     sequence timestamp): the stream's OrderAcks go back that way, since one
     source may reach here by several next hops (a queue straight here, another
     through a router), and takes an OrderAck only from the queue's own hop.
     A message that came from another queue manager than its source (the
     adapter says which: ``hop``) also names that queue manager its source's
     *router*, by GUID, not by path: a path ends with its connection (an idle
     close, a restart of either end), a router's GUID does not. While no
     session with the source and no return path is open, a session with its
     router is the way to it (:meth:`Receiver.routes`): when the router
     connects again, the FinalAcks waiting here go that way. (A message that
     comes straight from its source does not undo it: a source that sends
     here both ways keeps a session of its own open while it waits for
     FinalAcks of what it sent straight, and that session comes first.) The routers known
     at the start come from the streams' stored states (``vias``). At most
     :data:`MAX_STREAM_PATHS` sources have one (the least recently used is
     forgotten first).

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

import dataclasses
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

__all__ = [
    "MAX_STREAM_PATHS",
    "PASSED_ON_REMEMBERED",
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
_K = TypeVar("_K")
_V = TypeVar("_V")

_U32_MAX: Final = 0xFFFFFFFF
#: Acknowledgments passed on that are remembered, to drop one that comes back.
PASSED_ON_REMEMBERED: Final = 1024
#: Streams whose path is remembered (the least recently used is forgotten first).
MAX_STREAM_PATHS: Final = 65_536
_NO_STREAMS: Final[Mapping[StreamKey, StreamState]] = MappingProxyType({})
_NO_VIAS: Final[Mapping[bytes, bytes]] = MappingProxyType({})


def _no_hop(name: str) -> uuid.UUID | None:
    return None


class ArrivalKind(enum.Enum):
    """What :meth:`Receiver.arrive` found, when the kind says all there is to say."""

    #: A user message: ask the core for its destination, then :meth:`Receiver.accept`.
    MESSAGE = "message"
    #: An OrderAck or FinalAck for another queue manager that is not passed on
    #: (no open path to it, back where it came from, or come round again):
    #: dropped (acknowledge it at once).
    UNROUTABLE = "unroutable"
    #: An OrderAck of a stream relayed here that came from another queue
    #: manager than the one the stream was relayed to: refused (acknowledge it
    #: at once, and say so: only that hop may acknowledge the stream).
    NOT_FROM_HOP = "not-from-hop"


@dataclass(frozen=True, slots=True)
class OrderAckArrived:
    """An OrderAck for this queue manager: hand it to the outgoing queue it names."""

    ack: wire.OrderAck


@dataclass(frozen=True, slots=True)
class FinalAckArrived:
    """A FinalAck about one of our messages: settle its copy awaiting confirmation."""

    ack: wire.FinalAck


@dataclass(frozen=True, slots=True)
class FinalAckToKeep:
    """A FinalAck for another queue manager with no open path to it: store it,
    acknowledge it once stored, and send it when that queue manager (or the way
    to it) has a session here again."""

    ack: wire.FinalAck


@dataclass(frozen=True, slots=True)
class PassOn(Generic[P]):
    """An acknowledgment for another queue manager: send ``data`` on ``path``.

    Attributes:
        path: the connection that queue manager's messages last arrived on.
        data: the packet, built, without a SessionHeader.
        recoverable: whether it goes as a recoverable packet (a FinalAck does).
        ack: the FinalAck passed on (None for an OrderAck): the adapter stores
            it first, to send again if the path ends before its peer has it.
    """

    path: P
    data: bytes
    recoverable: bool
    ack: wire.FinalAck | None = None


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
        relayed_source: relayed, its source's GUID bytes when this is the
            first message of that source relayed here: the write keeps it
            among the relayed sources (b"": none).
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
        closing: whether a path is closing (nothing is passed on along it).
        vias: the router each source's messages last came through, by source
            GUID bytes (sources whose last message came straight have none).
        hop_of: the GUID of the queue manager at the next hop of an outgoing
            queue here, by its name (None: not known yet), for the OrderAcks of
            the streams relayed through it.
        relayed_sources: the GUID bytes of the queue managers whose
            transactional messages were relayed here, as the store keeps them
            (:attr:`Accepted.relayed_source` adds one).
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
        closing: Callable[[P], bool] = lambda path: False,
        router: bool = False,
        vias: Mapping[bytes, bytes] = _NO_VIAS,
        hop_of: Callable[[str], uuid.UUID | None] = _no_hop,
        relayed_sources: Iterable[bytes] = (),
        **limits: Unpack[SequenceLimits],
    ) -> None:
        self.local_qm = local_qm
        #: A router keeps the FinalAcks it cannot pass on (:class:`FinalAckToKeep`);
        #: a queue manager that relays nothing has none to keep, and drops one.
        self.router = router
        self.sequences = IncomingSequences(streams, **limits)
        self.history = MessageHistory(history, size=history_size, seconds=history_seconds, now=wall)
        #: The path each source queue manager's messages last arrived on (by GUID
        #: bytes); at most :data:`MAX_STREAM_PATHS`, the least recently used
        #: forgotten first.
        self._paths: dict[bytes, P] = {}
        #: The streams (source GUID bytes, TxSequenceID: a Windows source gives
        #: all its outgoing queues one timestamp, each its own ordinal) whose
        #: messages were relayed here lately, with the outgoing queue they went
        #: on in (at most :data:`MAX_STREAM_PATHS`): a router keeps a FinalAck
        #: it cannot pass on only if it is about one of them, and passes on
        #: their OrderAcks only from that queue's next hop.
        self._relayed_streams: dict[tuple[bytes, int], str | None] = {}
        self._hop_of = hop_of
        #: The queue managers whose transactional messages were relayed here,
        #: since this store began (at most :data:`MAX_STREAM_PATHS` are kept):
        #: a router keeps a FinalAck about their messages.
        self._relayed_sources: set[bytes] = set(relayed_sources)
        #: Relayed sources not kept yet: the writes in flight that ask for each.
        self._pending_sources: dict[bytes, int] = {}
        #: The path each source outgoing queue's transactional messages last arrived
        #: on, by (source GUID bytes, sequence timestamp), the latest last: its
        #: OrderAcks go back that way, from where the source expects them (the
        #: queue's next hop), here and at each router on the way. At most
        #: :data:`MAX_STREAM_PATHS`: one forgotten goes the source's way.
        self._stream_paths: dict[tuple[bytes, int], P] = {}
        #: The path of a session with each queue manager itself (by GUID bytes).
        self._sessions: dict[bytes, P] = {}
        #: The router (GUID bytes) each source's messages last came through, by
        #: source GUID bytes, the latest last; at most :data:`MAX_STREAM_PATHS`.
        self._vias: dict[bytes, bytes] = dict(
            itertools.islice(vias.items(), max(0, len(vias) - MAX_STREAM_PATHS), None)
        )
        self._closing = closing
        #: The acknowledgments passed on lately (a hash of each), oldest first.
        self._passed_on: dict[int, None] = {}
        self._ack_ids = itertools.count(1)
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
        if kind is wire.PacketKind.ORDER_ACK:
            order_ack = wire.OrderAck.from_message(packet)
            target = packet.user.destination_qm
            if target in (wire.NULL_GUID, self.local_qm):
                return OrderAckArrived(order_ack)
            relayed = (target.bytes, order_ack.sequence_id.value)
            if relayed not in self._relayed_streams:
                # Not of a stream relayed here (since the start): no one here can
                # tell who may acknowledge it. The source's resend, relayed,
                # brings the next one.
                self.unroutable += 1
                return ArrivalKind.UNROUTABLE
            relayed_to = self._relayed_streams[relayed]
            expected = None if relayed_to is None else self._hop_of(relayed_to)
            if expected is not None and hop != expected:
                self.unroutable += 1
                return ArrivalKind.NOT_FROM_HOP
            stream = (target.bytes, order_ack.sequence_id.timestamp)
            return self._pass_on(packet, path, target, recoverable=False, stream=stream)
        if kind is wire.PacketKind.FINAL_ACK:
            final_ack = wire.FinalAck.from_message(packet)
            target = final_ack.acked_source_qm
            if target == self.local_qm:
                return FinalAckArrived(final_ack)
            if self.router and self._route(target.bytes) is None:
                known = (target.bytes, final_ack.sequence_id.value) in self._relayed_streams
                source = target.bytes
                relayed_for = source in self._relayed_sources or source in self._pending_sources
                if not known and not relayed_for:
                    # Not of a stream relayed here, nor of a queue manager whose
                    # messages were (the streams relayed before a restart are
                    # not known; their sources are): nothing of ours to keep.
                    self.unroutable += 1
                    return ArrivalKind.UNROUTABLE
                return FinalAckToKeep(final_ack)
            return self._pass_on(packet, path, target, recoverable=True, final_ack=final_ack)
        self.received += 1
        source = packet.user.source_qm.bytes
        _remember(self._paths, source, path)
        if hop is not None and hop.bytes != source:
            _remember(self._vias, source, hop.bytes)
        if packet.transaction is not None:
            stream = (source, packet.transaction.sequence_id.timestamp)
            _remember(self._stream_paths, stream, path)
        return ArrivalKind.MESSAGE

    def _pass_on(
        self,
        packet: wire.UserMessage,
        arrived_on: P,
        target: uuid.UUID,
        *,
        recoverable: bool,
        stream: tuple[bytes, int] | None = None,
        final_ack: wire.FinalAck | None = None,
    ) -> ArrivalKind | PassOn[P]:
        # An OrderAck goes back the way its stream came (``stream``), as a
        # destination's own do; anything else, or with that way gone, by _route.
        path = None if stream is None else self._stream_paths.get(stream)
        if path is None or path is arrived_on or self._closing(path):
            path = self._route(target.bytes)
        if path is None or path is arrived_on:
            self.unroutable += 1
            return ArrivalKind.UNROUTABLE
        data = wire.build_packet(dataclasses.replace(packet, session=None))
        # The acknowledgment as its sender made it (its id and send time
        # included): one that comes back here has gone round a loop of return
        # paths.
        seen = hash(data)
        if seen in self._passed_on:
            self.unroutable += 1
            return ArrivalKind.UNROUTABLE
        self._passed_on[seen] = None
        if len(self._passed_on) > PASSED_ON_REMEMBERED:
            del self._passed_on[next(iter(self._passed_on))]
        return PassOn(path, data, recoverable, final_ack)

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
                _remember(self._relayed_streams, (source, header.sequence_id.value), relayed_to)
            if held:
                self.relayed_duplicates += 1
                return Dropped.HELD
            if header is not None and source not in self._relayed_sources:
                # Until a write that keeps it is persisted, every relayed message
                # of the source asks for it (the write is idempotent): one that
                # failed must not leave it out while a later one is stored.
                pending = self._pending_sources
                if source in pending or len(self._relayed_sources) + len(pending) < (
                    MAX_STREAM_PATHS
                ):
                    pending[source] = pending.get(source, 0) + 1
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
        source = accepted.relayed_source
        if source:
            self._relayed_sources.add(source)
            self._settled_source(source)

    def _settled_source(self, source: bytes) -> None:
        """A write that asked to keep the relayed ``source`` ended (either way)."""
        pending = self._pending_sources
        left = pending.get(source, 0) - 1
        if left > 0:
            pending[source] = left
        else:
            pending.pop(source, None)

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
                self._settled_source(each.relayed_source)

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
            path = self._stream_paths.get((due.key[1], due.key[2]))
            if path is None or self._closing(path):
                path = self._paths.get(due.key[1])
            if path is None:
                continue
            ack = wire.OrderAck(
                source_qm=self.local_qm,
                destination=wire.ORDER_QUEUE,
                destination_qm=uuid.UUID(bytes=due.key[1]),
                message_id=next(self._ack_ids) & _U32_MAX,
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

    # ------------------------------------------------------------------ return paths

    def path_to(self, source_qm: uuid.UUID) -> P | None:
        """The path ``source_qm``'s messages last arrived on, or None."""
        return self._paths.get(source_qm.bytes)

    def paths(self) -> Mapping[bytes, P]:
        """Every known return path, by source QM GUID bytes (a read-only view)."""
        return MappingProxyType(self._paths)

    def routes(self) -> dict[bytes, P]:
        """The path that reaches each queue manager now, by GUID bytes: a session
        with it if one is open, else its return path, else a session with the
        router its messages last came through (closing ones left out). The
        FinalAcks this queue manager owes go the same way as those it passes on."""
        return {
            qm: path
            for qm in {*self._paths, *self._sessions, *self._vias}
            if (path := self._route(qm)) is not None
        }

    def _route(self, qm: bytes) -> P | None:
        """The path to the queue manager ``qm`` (see :meth:`routes`), or None."""
        via = self._vias.get(qm)
        router = None if via is None else self._sessions.get(via)
        for path in (self._sessions.get(qm), self._paths.get(qm), router):
            if path is not None and not self._closing(path):
                return path
        return None

    def via(self, source_qm: uuid.UUID) -> bytes | None:
        """The GUID bytes of the router ``source_qm``'s messages last came
        through, or None (none came through a router)."""
        return self._vias.get(source_qm.bytes)

    def session_opened(self, path: P, remote_qm: uuid.UUID) -> None:
        """A session with ``remote_qm`` opened on ``path``: acknowledgments for that
        queue manager go there, whatever path its messages last came on."""
        self._sessions[remote_qm.bytes] = path

    def path_closed(self, path: P) -> None:
        """A connection ended: it is no one's return path any more."""
        for paths in (self._paths, self._sessions):
            for source in [source for source, known in paths.items() if known is path]:
                del paths[source]
        for stream in [stream for stream, known in self._stream_paths.items() if known is path]:
            del self._stream_paths[stream]

    # ------------------------------------------------------------------ status

    def stream_state(self, key: StreamKey) -> StreamState | None:
        """A stream's persisted state, or None if nothing of it is durable."""
        return self.sequences.state(key)

    def streams(self) -> list[tuple[StreamKey, StreamState]]:
        """Every stream with durable state, by key."""
        return self.sequences.streams()


def _remember(table: dict[_K, _V], key: _K, value: _V) -> None:
    """Set ``table[key]`` as its most recent entry, forgetting the least recent
    past :data:`MAX_STREAM_PATHS`."""
    table.pop(key, None)
    table[key] = value
    if len(table) > MAX_STREAM_PATHS:
        del table[next(iter(table))]
