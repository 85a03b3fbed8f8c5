"""The peer port's accepting side: who may connect, and the mutual TLS handshake.

A connection from an address outside ``peers.accept_from`` is closed at once
and logged (``peer_refused``). One that would pass ``peers.max_connections``
sessions other queue managers opened to this one (those it opens to its next
hops are bounded apart, where they are dialed: ``link``) is answered as
[MS-MQQB] says: its
EstablishConnection gets a response with CS set (connection refused), then
the close, so that the peer learns it at once; so is one refused by the
unauthenticated budgets below (at most :data:`MAX_REFUSALS` answered at
once, each within :data:`REFUSAL_SECONDS`, on plain TCP). Until
its session is open (the TLS handshake, within ``peers.connect_timeout``,
then the peer's EstablishConnection and ConnectionParameters, within
``peers.init_timeout``), a connection is *unauthenticated*: it counts in a
budget of its own (``peers.max_unauthenticated`` in all,
``peers.max_unauthenticated_per_address`` from one address), and a new
connection that finds a budget full closes the oldest such connection
(``peer_evicted``), as the client port does (``admission``). So connections
that never open a session cost a stated bound and never keep a queue
manager that opens one out. Then the connection runs a
:class:`~qmgr.server.peering.connection.PeerConnection` as acceptor until it
ends.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Final

import trio

import wire
from qmgr.config import Config
from qmgr.core.routes import socket_address_text
from qmgr.protocol import PeerSession, Role, Send, SessionState

from ..admission import Admission, AdmissionLimits, Arrival
from ..tls import TlsFailed
from .connection import ConnectionContext, PeerConnection
from .dial import secure

__all__ = ["MAX_REFUSALS", "REFUSAL_SECONDS", "PeerPort", "peer_admission"]

#: Connections refused by a bound that are answered at once (with CS set).
MAX_REFUSALS: Final = 16
#: Seconds a refused connection has to send its EstablishConnection.
REFUSAL_SECONDS: Final = 2.0
#: Bytes of the one packet read from a refused connection (an EstablishConnection is 572).
_REFUSAL_PACKET: Final = 1024


_NOT_ALLOWED: Final = "address not allowed by peers.accept_from"


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address ``host`` (an IPv4-mapped IPv6 address as IPv4)."""
    address = ipaddress.ip_address(host.partition("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def peer_admission(config: Config) -> Admission:
    """The bookkeeping of the peer port's unauthenticated connections."""
    return Admission(
        AdmissionLimits(
            max_connections_per_address=config.peer_max_connections,
            failure_limit=1,
            failure_delay=0.0,
            max_unauthenticated_per_address=config.peer_max_unauthenticated_per_address,
            max_unauthenticated=config.peer_max_unauthenticated,
            section="peers",
        )
    )


class PeerPort:
    """The connections accepted on the peer port (see the module docstring).

    Args:
        context: what its connections need (and the ``peers`` settings: who
            may connect, how many).
    """

    def __init__(self, context: ConnectionContext) -> None:
        self.context = context
        #: Accepted connections whose session is not open yet, and their budgets.
        self.admission = peer_admission(context.parts.config)
        # Connections refused by a bound and being answered so (_answer_refused).
        self._refusals = 0

    async def serve(self, stream: trio.SocketStream) -> None:
        """Serve one connection accepted on the peer port (the listener's handler)."""
        try:
            sockaddr = stream.socket.getpeername()
        except OSError:
            await stream.aclose()
            return
        host = str(sockaddr[0])
        address = _address(host)
        peer = socket_address_text(sockaddr)
        refusal = None
        arrival: Arrival | str | None = None
        # Beyond peers.max_connections the peer is still answered, with a refusal
        # (CS) in its EstablishConnection response, as [MS-MQQB] has it; the
        # connection counts as unauthenticated meanwhile.
        full = self._full()
        if not self._allowed(address):
            refusal = _NOT_ALLOWED
        else:
            arrival = self.admission.arrive(str(address), trio.current_time())
            if isinstance(arrival, str):
                refusal = arrival
        if refusal is not None or not isinstance(arrival, Arrival):
            self.context.parts.log.warning("peer_refused", peer=peer, reason=refusal)
            if isinstance(arrival, str):  # a bound of the port, not who the peer is
                await self._answer_refused(stream, arrival)
            await stream.aclose()
            return
        for victim, why in arrival.evicted:
            victim.close(why)
        ticket = arrival.ticket
        try:
            with trio.CancelScope() as scope:
                ticket.close = lambda why: self._evict(lambda _: scope.cancel(), peer, why)
                try:
                    session_stream, identity = await secure(stream, self.context, server_side=True)
                except TlsFailed as exc:
                    self.context.parts.log.warning("peer_refused", peer=peer, reason=str(exc))
                    scope.cancel()
            if scope.cancel_called:
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                return
            connection = PeerConnection(
                self.context,
                session_stream,
                role=Role.ACCEPTOR,
                peer=peer,
                identity=identity,
                refusing=full,
            )
            connection.on_opened = lambda: self.admission.authenticated(ticket)
            ticket.close = lambda why: self._evict(connection.close_soon, peer, why)
            if full is not None:  # answered with the refusal (CS), then closed
                self.context.parts.log.warning("peer_refused", peer=peer, reason=full)
            await connection.run()
        finally:
            self.admission.closed(ticket)

    async def _answer_refused(self, stream: trio.SocketStream, reason: str) -> None:
        """Answer the peer's EstablishConnection with CS set (refused, ``reason``),
        on plain TCP, within :data:`REFUSAL_SECONDS`, at most
        :data:`MAX_REFUSALS` at once (past that, and under TLS, the connection
        is only closed): the session machine decides the answer."""
        if self._refusals >= MAX_REFUSALS or self.context.tls.peer_server is not None:
            return
        self._refusals += 1
        try:
            session = PeerSession(
                Role.ACCEPTOR,
                local_qm=self.context.parts.store.qm_guid,
                settings=self.context.settings,
                now=trio.current_time(),
            )
            session.refusing = reason
            session.start(trio.current_time())  # an acceptor's start says nothing
            decoder = wire.FrameDecoder(max_packet_size=_REFUSAL_PACKET)
            with trio.move_on_after(REFUSAL_SECONDS):
                while session.state is not SessionState.CLOSED:
                    data = await stream.receive_some(_REFUSAL_PACKET)
                    if not data:
                        break
                    decoder.receive_data(bytes(data))
                    packet = decoder.next_packet()
                    if packet is None:
                        continue
                    for action in session.receive(packet, trio.current_time()):
                        if isinstance(action, Send):
                            await stream.send_all(action.data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, wire.ProtocolError):
            pass  # it went, or sent something else: closed all the same
        finally:
            self._refusals -= 1

    def refusal(self, host: str) -> str | None:
        """Why a session from the address ``host`` would be refused now, or None
        (what a ping's answer says)."""
        if not self._allowed(_address(host)):
            return _NOT_ALLOWED
        return self._full()

    def _allowed(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(address in network for network in self.context.parts.config.peer_accept_from)

    def _full(self) -> str | None:
        """Why a new session would pass ``peers.max_connections``, or None."""
        limit = self.context.parts.config.peer_max_connections
        if self._open_sessions() >= limit:
            return f"peers.max_connections ({limit}) reached"
        return None

    def _open_sessions(self) -> int:
        """Sessions other queue managers opened to this one (the sessions it
        opens have a bound of their own: ``ConnectionContext.opened_here``)."""
        return sum(
            1
            for connection in self.context.connections
            if connection.role is Role.ACCEPTOR
            and connection.opened.is_set()
            and not connection.itself  # its session with itself, through a hairpin
        )

    def _evict(self, close: Callable[[str], None], peer: str, why: str) -> None:
        self.context.parts.log.warning("peer_evicted", peer=peer, reason=why)
        close(why)
