"""The ping port: MSMQ pings on UDP answered, when ``peers.ping`` is on.

The daemon binds the UDP sockets at start-up with its other listeners
(``peers.ping_port`` on the peer listener's host) and :func:`serve_pings`
reads their datagrams: each goes to the sans-IO
:class:`~qmgr.protocol.ping.PingResponder`, told whether a session from the
sender's address would be refused now (:meth:`PeerPort.refusal
<qmgr.server.peering.accept.PeerPort.refusal>`, the peer port's own rule), and
its answer, if any, goes back to the sender. A datagram larger than a ping is
read whole and dropped; nothing but the responder's counters is kept per
datagram, and the answers are bounded in rate, so the port costs a bounded
amount whatever arrives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import structlog
import trio

from qmgr.core.routes import socket_address_text
from qmgr.protocol.ping import PingResponder

__all__ = ["serve_pings"]

#: Bytes read of one datagram (a ping is 24: anything larger is not one).
_DATAGRAM: Final = 512


async def serve_pings(
    sockets: Sequence[trio.socket.SocketType],
    responder: PingResponder,
    refusal: Callable[[str], str | None],
    log: structlog.typing.FilteringBoundLogger,
) -> None:
    """Answer the pings that arrive on ``sockets`` until cancelled (``refusal``:
    why a session from an address would be refused now, or None)."""
    async with trio.open_nursery() as nursery:
        for sock in sockets:
            nursery.start_soon(_serve, sock, responder, refusal, log)


async def _serve(
    sock: trio.socket.SocketType,
    responder: PingResponder,
    refusal: Callable[[str], str | None],
    log: structlog.typing.FilteringBoundLogger,
) -> None:
    while True:
        try:
            data, sender = await sock.recvfrom(_DATAGRAM)
        except OSError as exc:  # an ICMP error from an earlier answer: nothing to do
            log.debug("ping_receive_failed", reason=str(exc))
            continue
        host = str(sender[0])
        peer = socket_address_text(sender)
        why = refusal(host)
        answer = responder.answer(
            data, source=host, refuse=why is not None, now=trio.current_time()
        )
        if answer is None:
            log.debug("ping_ignored", peer=peer, size=len(data))
            continue
        try:
            await sock.sendto(answer, sender)
        except OSError as exc:
            log.debug("ping_answer_failed", peer=peer, reason=str(exc))
            continue
        log.debug("ping_answered", peer=peer, refused=why)
