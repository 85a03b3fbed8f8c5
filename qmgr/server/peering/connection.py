"""One TCP connection to another queue manager: bytes in, packets, bytes out.

Theory of operation
-------------------
A :class:`PeerConnection` is the thin trio adapter around one
:class:`qmgr.protocol.PeerSession`. It owns the socket and four tasks:

* the **reader** feeds received bytes to a ``wire.FrameDecoder`` (whose
  packet-size limit bounds every read), hands each packet to the session
  and carries out what the session answers: bytes to send, user packets
  that arrived (to :meth:`ConnectionEvents.arrived`), packets the peer
  acknowledged, or closing;
* the **persister** (:class:`.persister.Persister`) writes what the
  reader's packets stored, in runs, one atomic unit per run; each packet's
  follow-up runs only once its run is synced (the receiver hears it is
  persisted, and the packet counts in a SessionAck and, transactional, in
  an OrderAck). While it writes, the reader goes on decoding, so a
  streaming peer is written in runs, not one message per sync;
* the **writer** sends: control packets first (SessionAcks, OrderAcks),
  then, while the session's window allows, the next transmission of the
  outgoing queues this connection carries, many packets per ``send_all``;
* the **timers** task runs the session's timers when they are due (its
  acknowledgement, idle and handshake timeouts, the SessionAck it owes),
  whatever the others are doing: a peer that stops reading leaves the
  writer blocked in ``send_all`` once the socket's buffers are full, and
  the session's acknowledgement timeout must still close the connection
  (so that the link reconnects, or its destination fails over to another
  route) rather than wait on it for ever. It also looks, at least every
  half acknowledgement timeout, at how many bytes the peer's TCP has
  acknowledged (``qmgr.tcp.bytes_acked``); when the wait falls due and that
  count grew since the last look, a packet is still on its way (a large
  one on a slow link, which the peer cannot acknowledge before it has all
  of it) and the session's wait starts again
  (``PeerSession.transmitting``). A stopped peer's kernel takes what was
  sent at once and then nothing, so its session still closes on time.

Any protocol error, a session that says Close, a timeout or a broken socket
ends all four and closes the connection; what was not acknowledged stays
in the store (sender) or was never acknowledged (receiver), so the next
connection resends it and the sequence numbers make the resend harmless.
What the receiver accepted and the persister never wrote is rolled back
when the connection ends, as a failed write is, so that the resend is
accepted again.

Why a connection ended is put in words by :mod:`.close_reasons`. A
connection knows nothing of the rest of the peering adapter: what it
needs comes in a :class:`ConnectionContext` (the daemon's parts, TLS, the
session settings, the identities' registry, and where its events go: a
:class:`ConnectionEvents`), and the outgoing queues it carries are an
:class:`OutgoingSource` that hands out their packets in turn.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import trio

import wire
from qmgr.protocol import (
    Accepted,
    Acked,
    Action,
    Arrived,
    Close,
    Opened,
    PeerSession,
    Role,
    Send,
    SessionSettings,
)
from qmgr.tcp import bytes_acked

from ..tls import TlsContexts
from .close_reasons import (
    CLAIMS_OUR_GUID,
    PEER_CLOSED,
    REACHES_ITSELF,
    PeerClosed,
    close_reason,
    unopened,
)
from .identity import PeerIdentities
from .parts import PeeringParts
from .persister import Persister

__all__ = [
    "ConnectionContext",
    "ConnectionEvents",
    "OutgoingSource",
    "PacketToSend",
    "PeerConnection",
]

#: Bytes read from the socket at a time.
RECEIVE_SIZE: Final = 65536
#: Seconds to send what a closing session said last (its refusal) before the close.
FAREWELL_SECONDS: Final = 2.0
#: Bytes of packets gathered before one ``send_all``.
SEND_BATCH_BYTES: Final = 256 * 1024


#: A packet to send, built: ``(bytes, recoverable, tag)``; the tag comes back in
#: :meth:`ConnectionEvents.acked` once the peer acknowledged the packet.
PacketToSend = tuple[bytes, bool, object]


class OutgoingSource(Protocol):
    """The outgoing queues a connection carries (its link's), as it sees them."""

    def next_packet(self, now: float) -> PacketToSend | None:
        """The next packet of one of the queues to send now, in turn, or None."""
        ...

    def all_may_send(self) -> None:
        """A session opened: every queue may have something to send through it."""
        ...


class ConnectionEvents(Protocol):
    """Where a connection's events go (the hub)."""

    def arrived(
        self, connection: PeerConnection, packet: wire.UserMessage, recoverable: int | None
    ) -> None:
        """A user packet arrived, with its recoverable number (None: express); the
        callee calls :meth:`PeerConnection.store` or :meth:`PeerConnection.acknowledge`."""
        ...

    def acked(self, connection: PeerConnection, tags: tuple[object, ...]) -> None:
        """The peer acknowledged these tags of packets the connection sent."""
        ...

    def opened(self, connection: PeerConnection) -> None:
        """The session opened."""
        ...

    def connection_ended(self, connection: PeerConnection) -> None:
        """The connection closed (either side, any reason)."""
        ...

    def rolled_back(self, accepted: Sequence[Accepted]) -> None:
        """The write of these accepted messages failed, or will never happen."""
        ...


#: Seconds after which a link no longer asking for a slot loses its place (at
#: least; three of its looks, where it looks less often).
SLOT_PLACE_SECONDS: Final = 5.0


@dataclass(slots=True)
class Dialing:
    """Connections to next hops being opened (TCP and TLS) now, and the links
    waiting, in order, for a session of their own under ``peers.max_connections``
    (first come, first served: a link whose session ended and that wants
    another queues behind those that waited)."""

    count: int = 0
    #: Links waiting for a slot, in the order they came, with when each last asked.
    waiting: dict[object, float] = field(default_factory=dict)

    def may_open(
        self, link: object, *, opened: int, limit: int, now: float, every: float = 1.0
    ) -> bool:
        """Whether ``link`` may open a session now (``opened`` are open or being
        opened): a slot is free and no link that still asks waited before it.
        Otherwise it keeps (or takes) its place in the line; ``every``: how
        often the links ask again."""
        waiting = self.waiting
        patience = max(SLOT_PLACE_SECONDS, 3 * every)
        for first in list(waiting):  # places of links that stopped asking are lost
            if first is link or now - waiting[first] <= patience:
                break
            del waiting[first]
        if opened < limit and (not waiting or next(iter(waiting)) is link):
            waiting.pop(link, None)
            return True
        waiting[link] = now
        return False

    def leave(self, link: object) -> None:
        """``link`` no longer waits (it stopped)."""
        self.waiting.pop(link, None)


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """What every peer connection needs, and where its events go.

    Attributes:
        parts: the daemon's parts (the ``peers`` and ``tls`` settings, the
            committer that writes what arrived, the peering log).
        tls: mutual TLS with peers (``peer_server``/``peer_client`` None: plain TCP).
        identities: which GUID each peer identity speaks for (mutual TLS).
        settings: what the sessions announce and enforce.
        events: where the connections' events go.
        connections: every open connection, both directions; a connection
            joins it when it starts, and the hub takes it out when it ends.
        dialing: connections to next hops being opened now (before they join
            ``connections``), for the bound on sessions this queue manager opens.
    """

    parts: PeeringParts
    tls: TlsContexts
    identities: PeerIdentities
    settings: SessionSettings
    events: ConnectionEvents
    connections: set[PeerConnection] = field(default_factory=set)
    dialing: Dialing = field(default_factory=Dialing)

    def opened_here(self) -> int:
        """Sessions this queue manager opened (or is opening) to its next hops,
        besides those with itself: at most ``peers.max_connections``."""
        here = sum(
            1
            for connection in self.connections
            if connection.role is Role.INITIATOR and not connection.itself
        )
        return here + self.dialing.count


class PeerConnection:
    """One session with another queue manager (either side may have opened it)."""

    def __init__(
        self,
        context: ConnectionContext,
        stream: trio.abc.Stream,
        *,
        role: Role,
        peer: str,
        queues: OutgoingSource | None = None,
        identity: str | None = None,
        itself: bool = False,
        refusing: str | None = None,
    ) -> None:
        self.context = context
        #: A session of this queue manager with itself, in the process (a next
        #: hop that turned out to be this queue manager: ``Link``); trusted as such.
        self.itself = itself
        #: The initiator found that the peer is this queue manager (its GUID is ours).
        self.reached_itself = False
        #: Set by the first acknowledgment of something this connection sent: the
        #: peer does not only open sessions, it takes what comes over them.
        self.acknowledged = trio.Event()
        self.stream = stream
        self.peer = peer
        #: The peer's certificate common name (mutual TLS), or None on plain TCP.
        self.identity = identity
        self.role = role
        now = trio.current_time()
        parts = context.parts
        self.session = PeerSession(
            role, local_qm=parts.store.qm_guid, settings=context.settings, now=now
        )
        # A policy refuses the connection: its EstablishConnection is answered
        # with CS set (and the reason logged), then it closes.
        self.session.refusing = refusing
        self.decoder = wire.FrameDecoder(max_packet_size=parts.config.peer_max_packet_size)
        #: Outgoing queues whose messages this connection carries (initiator
        #: only: its link's, which grow as queues for the hop appear).
        self.queues = queues
        self._control: list[bytes] = []  # built packets to send before any transmission
        self._last_words: list[bytes] = []  # built packets to send as the session closes
        # user packets (OrderAcks, FinalAcks) to count, with their tags
        self._control_user: list[tuple[bytes, bool, object]] = []
        self._wake_writer = trio.Event()
        # The session's next deadline moved earlier (the timers task looks again).
        self._timers_moved = trio.Event()
        # The deadline the timers task waits for.
        self._timer_deadline = math.inf
        #: What the peer's TCP had acknowledged at the last look (``_peer_took_more``).
        self._delivered_seen = 0
        #: Writes what arrived, in runs.
        self.persister = Persister(parts, context.events.rolled_back)
        self._closed = False
        #: The peer's GUID, once its session opened.
        self.remote_qm: uuid.UUID | None = None
        self.opened = trio.Event()
        #: Called once the session is open (the peer said which queue manager it is).
        self.on_opened: Callable[[], None] | None = None
        self.close_reason = ""
        log = parts.log.bind(peer=peer, role=role.name.lower())
        self.log = log if identity is None else log.bind(identity=identity)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Serve the connection until it ends; returns normally in every case."""
        self.context.connections.add(self)
        try:
            async with trio.open_nursery() as nursery:
                self._handle(self.session.start(trio.current_time()))
                nursery.start_soon(self._reader, nursery.cancel_scope)
                nursery.start_soon(self._writer, nursery.cancel_scope)
                nursery.start_soon(self.persister.run)
                nursery.start_soon(self._timers)
        except BaseExceptionGroup as group:
            self.close_reason = close_reason(group, self.log)
        except Exception as exc:
            self.close_reason = close_reason(exc, self.log)
        finally:
            if not self.close_reason:
                self.close_reason = "the queue manager is stopping"  # cancelled
            elif self.role is Role.INITIATOR and not self.opened.is_set():
                self.close_reason = unopened(self.close_reason)
            self._closed = True
            # Accepted, never written (the connection broke before the
            # persister took them): as if they never arrived.
            self.persister.abandon()
            with contextlib.suppress(Exception), trio.CancelScope(shield=True):
                await self._farewell()
                await self.stream.aclose()
            self.session.connection_lost()
            self.context.events.connection_ended(self)

    async def _farewell(self) -> None:
        """Send what the session said before it closed (an EstablishConnection
        response with CS set, a last SessionAck), within :data:`FAREWELL_SECONDS`:
        a refused peer learns why at once instead of waiting out its timer."""
        if not self._last_words:
            return
        data = b"".join(self._last_words)
        self._last_words = []
        with trio.move_on_after(FAREWELL_SECONDS):
            await self.stream.send_all(data)

    @property
    def not_stored(self) -> bool:
        """Closed because what arrived could not be stored (a full store, a disk
        error): the peer resends it on its next session."""
        return self.persister.failed

    @property
    def closing(self) -> bool:
        """True once the connection is ending."""
        return self._closed

    def close_soon(self, reason: str) -> None:
        """End the connection from outside (pause, shutdown)."""
        self.close_reason = reason
        self._closed = True
        self._wake_writer.set()
        self.persister.close()

    async def _reader(self, scope: trio.CancelScope) -> None:
        decoder = self.decoder
        session = self.session
        while not self._closed:
            await self.persister.room()
            data = await self.stream.receive_some(RECEIVE_SIZE)
            if not data:
                if decoder.buffered:
                    msg = (
                        "the peer closed the connection in the middle of a packet "
                        f"({decoder.buffered} bytes)"
                    )
                    raise PeerClosed(msg)
                msg = PEER_CLOSED
                raise PeerClosed(msg)
            decoder.receive_data(bytes(data))
            now = trio.current_time()  # the packets of one read arrived together
            while (packet := decoder.next_packet()) is not None:
                self._handle(session.receive(packet, now))
                if self.closing:
                    break
            self.persister.read(len(data))
            self._wake_writer.set()
            self._poke_timers()
        raise PeerClosed(self.close_reason or "closed")

    def _handle(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._control.append(action.data)
                self._wake_writer.set()
            elif isinstance(action, Arrived):
                if not self.itself and self.remote_qm == self.context.parts.store.qm_guid:
                    self.close_reason = CLAIMS_OUR_GUID
                    self.log.warning("peer_claims_our_guid", reason=CLAIMS_OUR_GUID)
                    raise PeerClosed(CLAIMS_OUR_GUID)
                if self.identity is not None and not self.itself:
                    self._check_source(action.packet)
                self.context.events.arrived(self, action.packet, action.recoverable_number)
            elif isinstance(action, Acked):
                self.acknowledged.set()
                self.context.events.acked(self, action.tags)
                self._wake_writer.set()
            elif isinstance(action, Opened):
                if (
                    self.role is Role.INITIATOR
                    and action.remote_qm == self.context.parts.store.qm_guid
                    and not self.itself
                ):
                    # The initiator decides (its link then delivers here); the
                    # acceptor's end sees the connection close.
                    self.reached_itself = True
                    self.close_reason = REACHES_ITSELF
                    raise PeerClosed(self.close_reason)
                if self.identity is not None and not self.itself:
                    refusal = self.context.identities.opened(self.identity, action.remote_qm)
                    if refusal is not None:
                        self.close_reason = refusal
                        raise PeerClosed(refusal)
                self.remote_qm = action.remote_qm
                self.opened.set()
                if self.queues is not None:
                    self.queues.all_may_send()
                if self.on_opened is not None:
                    self.on_opened()
                self.log = self.log.bind(remote_qm=str(action.remote_qm))
                self.log.info("peer_session_opened", window=action.peer_window)
                self.context.events.opened(self)
                self._wake_writer.set()
            elif isinstance(action, Close):
                self.close_reason = action.reason
                # What the session said last (a refusal) is sent by _farewell,
                # not by the writer, which the close may cancel mid-way.
                self._last_words, self._control = self._control, []
                raise PeerClosed(action.reason)

    def _check_source(self, packet: wire.UserMessage) -> None:
        """A packet over mutual TLS must come from the queue manager the session
        announced, unless the peer is a router (``tls.relays``).

        Raises:
            PeerClosed: it does not; the session ends.
        """
        assert self.identity is not None
        assert self.remote_qm is not None  # packets arrive on open sessions only
        source = packet.user.source_qm
        if not self.context.identities.may_carry(self.identity, self.remote_qm, source):
            self.close_reason = (
                f"peer {self.identity!r} sent a packet of queue manager {{{source}}} on the "
                f"session of {{{self.remote_qm}}}, and is not a router (tls.relays)"
            )
            self.log.warning("peer_relay_refused", reason=self.close_reason)
            raise PeerClosed(self.close_reason)

    # ------------------------------------------------------------------ receiving

    def acknowledge(self, recoverable_number: int | None) -> None:
        """An arrived packet is persisted (or needed no write): a recoverable one
        (its number; None for an express one, which needs nothing) may count in
        a SessionAck."""
        if recoverable_number is not None and not self._closed:
            self._handle(self.session.persisted(recoverable_number, trio.current_time()))
            self._wake_writer.set()
            self._poke_timers()  # the session may have armed an earlier timer

    # ------------------------------------------------------------------ sending

    def send_user_packet(
        self, data: bytes, *, recoverable: bool = False, tag: object = None
    ) -> None:
        """Queue a user packet that is not an outgoing-queue entry (an OrderAck, a
        FinalAck); ``tag`` comes back in :meth:`ConnectionEvents.acked` once the
        peer has it."""
        self._control_user.append((data, recoverable, tag))
        self._wake_writer.set()

    def wake(self) -> None:
        """There may be something to send."""
        self._wake_writer.set()

    async def _writer(self, scope: trio.CancelScope) -> None:
        session = self.session
        while True:
            if self._closed:
                raise PeerClosed(self.close_reason or "closed")
            # A wake-up from here on (even one made while the queues are asked)
            # is kept for the wait below.
            self._wake_writer = trio.Event()
            chunks = self._control
            self._control = []
            size = sum(len(chunk) for chunk in chunks)
            now = trio.current_time()
            while self._control_user and session.can_send():
                data, recoverable, tag = self._control_user.pop(0)
                chunks.append(session.send(data, recoverable=recoverable, tag=tag, now=now))
                size += len(data)
            while size < SEND_BATCH_BYTES and session.can_send():
                built = self._next_transmission(now)
                if built is None:
                    break
                data, recoverable, tag = built
                chunks.append(session.send(data, recoverable=recoverable, tag=tag, now=now))
                size += len(data)
            if chunks:
                # What was just sent arms the session's acknowledgement timer:
                # the timers task must know before this send may block.
                self._poke_timers()
                await self.stream.send_all(b"".join(chunks) if len(chunks) > 1 else chunks[0])
                continue
            await self._wake_writer.wait()

    def _poke_timers(self) -> None:
        """The session's next deadline may have moved: wake the timers task if it
        is now earlier than the one it waits for (one that moved later is found
        when the earlier one passes, without a wake-up per packet)."""
        deadline = self.session.next_deadline()
        if deadline is not None and deadline < self._timer_deadline:
            self._timers_moved.set()

    async def _timers(self) -> None:
        """Run the session's timers when due (see the module docstring)."""
        session = self.session
        while True:
            deadline = session.next_deadline()
            self._timer_deadline = math.inf if deadline is None else deadline
            self._timers_moved = trio.Event()
            # Looks at the peer's TCP at least every half acknowledgement
            # timeout, so that a due wait asks about the last half only: a
            # stopped peer's kernel takes what was sent at once, then nothing.
            look = trio.current_time() + session.ack_timeout / 2
            with trio.move_on_at(min(self._timer_deadline, look)):
                await self._timers_moved.wait()
            now = trio.current_time()
            took_more = self._peer_took_more()
            due = session.next_deadline()
            if due is not None and now >= due:
                if took_more:
                    session.transmitting(now)
                self._handle(session.timer(now))

    def _peer_took_more(self) -> bool:
        """True if the peer's TCP acknowledged more of what was written since the
        last look (at most half an acknowledgement timeout ago): a long packet
        on a slow link is still arriving."""
        stream = self.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        if not isinstance(stream, trio.SocketStream):
            return False
        state = bytes_acked(stream)
        if state is None:
            return False
        delivered, in_flight = state
        more = delivered > self._delivered_seen
        self._delivered_seen = delivered
        # Some of it still unacknowledged: the link is carrying it, not a
        # stopped peer whose kernel took it all at once.
        return more and in_flight > 0

    def _next_transmission(self, now: float) -> PacketToSend | None:
        queues = self.queues
        if queues is None or self.role is not Role.INITIATOR or not self.opened.is_set():
            return None
        return queues.next_packet(now)
