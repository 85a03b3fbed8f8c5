"""The peer port's accepting side: who may connect, and the mutual TLS handshake.

A connection from an address outside ``peers.accept_from`` is closed at once
and logged (``peer_refused``), as is one that would pass
``peers.max_connections`` open sessions (both directions together). Until
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

import trio

from qmgr.config import Config
from qmgr.protocol import Role

from ..admission import Admission, AdmissionLimits, Arrival
from ..tls import TlsFailed
from .connection import ConnectionContext, PeerConnection, secure

__all__ = ["PeerPort", "peer_admission"]


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

    async def serve(self, stream: trio.SocketStream) -> None:
        """Serve one connection accepted on the peer port (the listener's handler)."""
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            await stream.aclose()
            return
        address = ipaddress.ip_address(host)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        peer = f"{host}:{port}"
        config = self.context.parts.config
        refusal = None
        arrival: Arrival | str | None = None
        if not any(address in network for network in config.peer_accept_from):
            refusal = "address not allowed by peers.accept_from"
        elif self._open_sessions() >= config.peer_max_connections:
            refusal = f"peers.max_connections ({config.peer_max_connections}) reached"
        else:
            arrival = self.admission.arrive(str(address), trio.current_time())
            if isinstance(arrival, str):
                refusal = arrival
        if refusal is not None or not isinstance(arrival, Arrival):
            self.context.parts.log.warning("peer_refused", peer=peer, reason=refusal)
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
                self.context, session_stream, role=Role.ACCEPTOR, peer=peer, identity=identity
            )
            connection.on_opened = lambda: self.admission.authenticated(ticket)
            ticket.close = lambda why: self._evict(connection.close_soon, peer, why)
            await connection.run()
        finally:
            self.admission.closed(ticket)

    def _open_sessions(self) -> int:
        """Connections whose session is open, or which this queue manager opened."""
        return sum(
            1
            for connection in self.context.connections
            if connection.role is Role.INITIATOR or connection.opened.is_set()
        )

    def _evict(self, close: Callable[[str], None], peer: str, why: str) -> None:
        self.context.parts.log.warning("peer_evicted", peer=peer, reason=why)
        close(why)
