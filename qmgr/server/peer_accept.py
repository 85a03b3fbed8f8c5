"""The peer port's accepting side: who may connect, and the mutual TLS handshake.

A connection from an address outside ``peers.accept_from``, or past
``peers.max_connections``, is closed at once and logged (``peer_refused``);
with mutual TLS on (``tls.peer_server``) the handshake comes next, within
``peers.connect_timeout``, and gives the peer's identity; then the
connection runs a :class:`~qmgr.server.peer_connection.PeerConnection` as
acceptor until it ends.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import trio

from qmgr.protocol import Role

from .peer_connection import PeerConnection, set_no_delay
from .tls import TlsFailed, peer_handshake

if TYPE_CHECKING:
    from .peering import Peering

__all__ = ["serve_peer"]


async def serve_peer(peering: Peering, stream: trio.SocketStream) -> None:
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
    if not any(address in network for network in peering.config.peer_accept_from):
        peering.log.warning(
            "peer_refused", peer=peer, reason="address not allowed by peers.accept_from"
        )
        await stream.aclose()
        return
    if len(peering.connections) >= peering.config.peer_max_connections:
        peering.log.warning(
            "peer_refused",
            peer=peer,
            reason=f"peers.max_connections ({peering.config.peer_max_connections}) reached",
        )
        await stream.aclose()
        return
    set_no_delay(stream)
    secure: trio.abc.Stream = stream
    identity = None
    if peering.tls.peer_server is not None:
        try:
            secure, identity = await peer_handshake(
                stream, peering.tls.peer_server, server_side=True, config=peering.config
            )
        except TlsFailed as exc:
            peering.log.warning("peer_refused", peer=peer, reason=str(exc))
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return
    connection = PeerConnection(
        peering, secure, role=Role.ACCEPTOR, peer=peer, settings=peering.settings, identity=identity
    )
    peering.connections.add(connection)
    await connection.run()
