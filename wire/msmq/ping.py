"""The UDP Ping packet ([MS-MQQB] §2.1.2, §2.2.7).

A ping travels in one UDP datagram to port 3527, without a BaseHeader, and is
not part of the session stream: it has its own parse and build functions and
is not a :data:`~wire.Packet`. Windows Vista and later neither send nor answer
pings unless configured to, so a queue manager can ignore them; they are here
because the spec's example session starts with one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..protocol_errors import LocalProtocolError, RemoteProtocolError
from .constants import PING_SIGNATURE, PING_SIZE
from .fixed import PING


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    """A Ping request or response.

    Attributes:
        flags: Flags, whole (:class:`PingFlags` and 14 bits of garbage).
        cookie: Cookie, chosen by the initiator and echoed by the acceptor.
        qm: QMGuid of the queue manager that made the packet.
    """

    flags: int = 0
    cookie: int
    qm: uuid.UUID


def parse_ping(data: bytes) -> Ping:
    """Parse one ping datagram.

    Raises:
        RemoteProtocolError: not 24 bytes, or a wrong signature.
    """
    if len(data) != PING_SIZE:
        msg = f"a ping is {PING_SIZE} bytes, got {len(data)}"
        raise RemoteProtocolError(msg, field="Ping")
    flags, signature, cookie, qm = PING.unpack_from(bytes(data), 0)
    if signature != PING_SIGNATURE:
        msg = f"expected {PING_SIGNATURE:#06x}, got {signature:#06x}"
        raise RemoteProtocolError(msg, field="Ping.Signature")
    return Ping(flags=flags, cookie=cookie, qm=uuid.UUID(bytes_le=qm))


def build_ping(ping: Ping) -> bytes:
    """Encode a ping datagram.

    Raises:
        LocalProtocolError: a field does not fit.
    """
    qm: object = ping.qm
    if not isinstance(qm, uuid.UUID):
        msg = f"expected a uuid.UUID, got {type(qm).__name__}"
        raise LocalProtocolError(msg, field="Ping.qm")
    return PING.build(ping.flags, PING_SIGNATURE, ping.cookie, qm.bytes_le)
