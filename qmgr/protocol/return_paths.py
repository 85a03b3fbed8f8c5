"""Return paths: where acknowledgments go back to, and which may be passed on.

Theory of operation
-------------------
:class:`ReturnPaths` is the part of the :class:`~qmgr.protocol.receiver.Receiver`
that knows the way back to each queue manager whose messages arrive here,
and so decides where an acknowledgment goes: the OrderAcks and FinalAcks this
queue manager sends, and, at a router, those of another queue manager that
it passes on. Like the receiver, it never opens a socket, reads a clock,
touches the store or logs; a *path* is the adapter's connection, opaque here.

**What it learns from user messages** (:meth:`ReturnPaths.message_arrived`):
its source queue manager's return path is now the path it came on, and,
transactional, so is the return path of its stream (its source's outgoing
queue, by sequence timestamp): the stream's OrderAcks go back that way
(:meth:`ReturnPaths.order_ack_path`), since one source may reach here by
several next hops (a queue straight here, another through a router), and
takes an OrderAck only from the queue's own hop. A message that came from
another queue manager than its source (the adapter says which: ``hop``) also
names that queue manager its source's *router*, by GUID, not by path: a path
ends with its connection (an idle close, a restart of either end), a
router's GUID does not. While no session with the source and no return path
is open, a session with its router is the way to it
(:meth:`ReturnPaths.routes`): when the router connects again, the FinalAcks
waiting here go that way. (A message that comes straight from its source
does not undo it: a source that sends here both ways keeps a session of its
own open while it waits for FinalAcks of what it sent straight, and that
session comes first.) The routers known at the start come from the streams'
stored states (``vias``). The return paths, the streams' paths and the
routers are each kept for at most :data:`MAX_STREAM_PATHS` queue managers or
streams, the least recently used forgotten first (the sessions are as many
as the open connections).

**What it learns from relaying** (:meth:`ReturnPaths.relayed`): the streams
whose messages were relayed here lately (source, whole TxSequenceID: a
Windows source gives all its outgoing queues one timestamp, each its own
ordinal), each with the outgoing queue it went on in, and the *relayed
sources*, the queue managers whose transactional messages were ever relayed
here, which the adapter keeps in the store (:meth:`ReturnPaths.keep_source`
asks a write to keep one, :meth:`ReturnPaths.source_written` reports it).

**Acknowledgments for another queue manager**, whose messages we relayed:

* an OrderAck (:meth:`ReturnPaths.order_ack`) is passed on only if it is of
  a stream relayed here (since the start, the last :data:`MAX_STREAM_PATHS`),
  and came from the queue manager at the next hop of the outgoing queue the
  stream went on in (:attr:`ArrivalKind.NOT_FROM_HOP` otherwise): the source
  takes an OrderAck from its router, so the router checks for it that the
  stream's own hop sent it, and no other peer of the router can make the
  source forget messages nobody received. It goes the way its stream's
  messages came, as a destination sends its own; with that way gone, closing,
  or the connection it came on, it goes by the route below, as a FinalAck
  does. (After a restart of the
  router, an OrderAck of a stream not relayed again yet is dropped: the
  source's resend, relayed or found held, makes the stream known again, and
  the destination announces an OrderAck again when the source resends.)
* a FinalAck (:meth:`ReturnPaths.final_ack`) goes on a session with that
  queue manager if one is open, else along its return path, else on a
  session with its router. At a router, a FinalAck with no such path open
  (its source is down, and was its own return path) is to be **kept**
  (:class:`FinalAckToKeep`): the adapter stores it before it acknowledges
  it, and sends it as its own FinalAcks go, when its source has a session
  here again; nothing else would send it again, the destination forgets it
  once acknowledged. Only a FinalAck of a stream relayed here lately, or
  about a message of a relayed source (after a restart the streams relayed
  before it are not known, their sources are), is kept: a peer cannot fill
  the router's store with FinalAcks about any other queue manager's
  messages, nor make it send them, for ever, to a queue manager that never
  routed through it.

Otherwise an acknowledgment is dropped (:attr:`ArrivalKind.UNROUTABLE`): an
OrderAck with no open path, or any acknowledgment whose path is the
connection it arrived on, or that is the same acknowledgment (the same
bytes: its sender's id for it and its send time included) as one of the
last :data:`PASSED_ON_REMEMBERED` passed on here. Return paths are where
each source's messages *last* came from, so two routers can each hold the
other as a source's return path (its messages came through one while the
other was down, then the other way round); remembering what was passed on
is what keeps an acknowledgment from going round between them for ever.
The packet is not changed: [MS-MQQB] wants an OrderAck's and a FinalAck's
hop count zero.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Generic, TypeVar

import wire

__all__ = [
    "MAX_STREAM_PATHS",
    "PASSED_ON_REMEMBERED",
    "ArrivalKind",
    "FinalAckToKeep",
    "PassOn",
    "ReturnPaths",
]

#: The adapter's connection: where a packet arrived, and where acknowledgments go back.
P = TypeVar("P")
_K = TypeVar("_K")
_V = TypeVar("_V")

#: Acknowledgments passed on that are remembered, to drop one that comes back.
PASSED_ON_REMEMBERED: Final = 1024
#: Streams whose path is remembered (the least recently used is forgotten first).
MAX_STREAM_PATHS: Final = 65_536
_NO_VIAS: Final[Mapping[bytes, bytes]] = MappingProxyType({})


def _no_hop(name: str) -> uuid.UUID | None:
    return None


class ArrivalKind(enum.Enum):
    """What :meth:`~qmgr.protocol.receiver.Receiver.arrive` found, when the kind says
    all there is to say."""

    #: A user message: ask the core for its destination, then
    #: :meth:`~qmgr.protocol.receiver.Receiver.accept`.
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


class ReturnPaths(Generic[P]):
    """The way back to each queue manager, and the acknowledgments passed on
    (see the module docstring).

    Args:
        router: whether this queue manager relays: a router keeps the FinalAcks
            it cannot pass on (:class:`FinalAckToKeep`); a queue manager that
            relays nothing has none to keep, and drops one.
        closing: whether a path is closing (nothing is passed on along it).
        vias: the router each source's messages last came through, by source
            GUID bytes (sources whose last message came straight have none).
        hop_of: the GUID of the queue manager at the next hop of an outgoing
            queue here, by its name (None: not known yet), for the OrderAcks of
            the streams relayed through it.
        relayed_sources: the GUID bytes of the relayed sources, as the store
            keeps them.
    """

    def __init__(
        self,
        *,
        router: bool = False,
        closing: Callable[[P], bool] = lambda path: False,
        vias: Mapping[bytes, bytes] = _NO_VIAS,
        hop_of: Callable[[str], uuid.UUID | None] = _no_hop,
        relayed_sources: Iterable[bytes] = (),
    ) -> None:
        self.router = router
        #: The path each source queue manager's messages last arrived on (by GUID
        #: bytes); at most :data:`MAX_STREAM_PATHS`, the least recently used
        #: forgotten first.
        self._paths: dict[bytes, P] = {}
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
        #: The streams (source GUID bytes, whole TxSequenceID value) relayed here
        #: lately, with the outgoing queue each went on in (at most
        #: :data:`MAX_STREAM_PATHS`).
        self._relayed_streams: dict[tuple[bytes, int], str | None] = {}
        self._hop_of = hop_of
        #: The relayed sources kept in the store, since it began (at most
        #: :data:`MAX_STREAM_PATHS` are kept).
        self._relayed_sources: set[bytes] = set(relayed_sources)
        #: Relayed sources not kept yet: the writes in flight that ask for each.
        self._pending_sources: dict[bytes, int] = {}
        self._closing = closing
        #: The acknowledgments passed on lately (a hash of each), oldest first.
        self._passed_on: dict[int, None] = {}

    # ------------------------------------------------------------------ learning

    def message_arrived(self, packet: wire.UserMessage, path: P, hop: uuid.UUID | None) -> None:
        """A user message (not an acknowledgment) arrived on ``path``, from the
        queue manager ``hop`` (None: not known)."""
        source = packet.user.source_qm.bytes
        _remember(self._paths, source, path)
        if hop is not None and hop.bytes != source:
            _remember(self._vias, source, hop.bytes)
        if packet.transaction is not None:
            stream = (source, packet.transaction.sequence_id.timestamp)
            _remember(self._stream_paths, stream, path)

    def relayed(self, source: bytes, sequence_id: int, relayed_to: str | None) -> None:
        """A transactional message of ``source``'s stream ``sequence_id`` (the
        whole TxSequenceID value) is relayed here, on the outgoing queue named
        ``relayed_to``: its acknowledgments may be passed on."""
        _remember(self._relayed_streams, (source, sequence_id), relayed_to)

    def keep_source(self, source: bytes) -> bool:
        """Whether the write of a relayed transactional message of ``source`` is
        to keep it among the relayed sources. Until a write that keeps it is
        persisted, every such message asks for it (the write is idempotent: one
        that failed must not leave it out while a later one is stored); each
        ``True`` is ended by :meth:`source_written`."""
        if source in self._relayed_sources:
            return False
        pending = self._pending_sources
        if source not in pending and len(self._relayed_sources) + len(pending) >= (
            MAX_STREAM_PATHS
        ):
            return False
        pending[source] = pending.get(source, 0) + 1
        return True

    def source_written(self, source: bytes, *, kept: bool) -> None:
        """A write that :meth:`keep_source` asked to keep ``source`` ended: it was
        persisted (``kept``), or it failed."""
        if kept:
            self._relayed_sources.add(source)
        pending = self._pending_sources
        left = pending.get(source, 0) - 1
        if left > 0:
            pending[source] = left
        else:
            pending.pop(source, None)

    # ------------------------------------------------------------------ acknowledgments

    def order_ack(
        self, packet: wire.UserMessage, ack: wire.OrderAck, path: P, hop: uuid.UUID | None
    ) -> ArrivalKind | PassOn[P]:
        """An OrderAck for another queue manager arrived on ``path`` from ``hop``:
        pass it on, or not (see the module docstring)."""
        target = packet.user.destination_qm
        relayed = (target.bytes, ack.sequence_id.value)
        if relayed not in self._relayed_streams:
            # Not of a stream relayed here (since the start): no one here can
            # tell who may acknowledge it. The source's resend, relayed, brings
            # the next one.
            return ArrivalKind.UNROUTABLE
        relayed_to = self._relayed_streams[relayed]
        expected = None if relayed_to is None else self._hop_of(relayed_to)
        if expected is not None and hop != expected:
            return ArrivalKind.NOT_FROM_HOP
        stream = (target.bytes, ack.sequence_id.timestamp)
        return self._pass_on(packet, path, target, recoverable=False, stream=stream)

    def final_ack(
        self, packet: wire.UserMessage, ack: wire.FinalAck, path: P
    ) -> ArrivalKind | FinalAckToKeep | PassOn[P]:
        """A FinalAck for another queue manager arrived on ``path``: pass it on,
        keep it, or not (see the module docstring)."""
        target = ack.acked_source_qm
        if self.router and self._route(target.bytes) is None:
            source = target.bytes
            known = (source, ack.sequence_id.value) in self._relayed_streams
            relayed_for = source in self._relayed_sources or source in self._pending_sources
            if not known and not relayed_for:
                # Not of a stream relayed here, nor of a queue manager whose
                # messages were (the streams relayed before a restart are not
                # known; their sources are): nothing of ours to keep.
                return ArrivalKind.UNROUTABLE
            return FinalAckToKeep(ack)
        return self._pass_on(packet, path, target, recoverable=True, final_ack=ack)

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
            return ArrivalKind.UNROUTABLE
        data = wire.build_packet(dataclasses.replace(packet, session=None))
        # The acknowledgment as its sender made it (its id and send time
        # included): one that comes back here has gone round a loop of return
        # paths.
        seen = hash(data)
        if seen in self._passed_on:
            return ArrivalKind.UNROUTABLE
        self._passed_on[seen] = None
        if len(self._passed_on) > PASSED_ON_REMEMBERED:
            del self._passed_on[next(iter(self._passed_on))]
        return PassOn(path, data, recoverable, final_ack)

    def order_ack_path(self, source: bytes, timestamp: int) -> P | None:
        """The path for an OrderAck of our own, of the stream (``source`` GUID
        bytes, sequence ``timestamp``): the way the stream's messages last came
        (one source's outgoing queues may reach here by different next hops, and
        the source takes an OrderAck only from the queue's hop), else the way the
        source's messages last came; None if neither is open."""
        path = self._stream_paths.get((source, timestamp))
        if path is None or self._closing(path):
            path = self._paths.get(source)
        return path

    # ------------------------------------------------------------------ paths

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


def _remember(table: dict[_K, _V], key: _K, value: _V) -> None:
    """Set ``table[key]`` as its most recent entry, forgetting the least recent
    past :data:`MAX_STREAM_PATHS`."""
    table.pop(key, None)
    table[key] = value
    if len(table) > MAX_STREAM_PATHS:
        del table[next(iter(table))]
