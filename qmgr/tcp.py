"""The TCP options every connection of qmgr takes, the daemon's and the SDK's.

Standard library only: the blocking SDK imports it without trio.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from typing import Final, Protocol

__all__ = ["KEEPALIVE_IDLE", "KEEPALIVE_INTERVAL", "KEEPALIVE_PROBES", "bytes_acked", "tune_tcp"]

#: TCP keepalive on every connection: a peer whose host died or whose path was
#: cut without a close is found after about two minutes (60 s idle, then six
#: probes 10 s apart), even while nothing is due to be sent (a client waiting in
#: a receive without a timeout keeps its connection busy, so no idle timeout ends it;
#: the client waiting for that receive's reply learns of the cut the same way).
KEEPALIVE_IDLE: Final = 60
KEEPALIVE_INTERVAL: Final = 10
KEEPALIVE_PROBES: Final = 6


#: Where Linux's ``struct tcp_info`` holds ``tcpi_bytes_acked`` (a u64, since 4.1)
#: and ``tcpi_unacked`` (a u32: segments sent and not acknowledged).
_BYTES_ACKED = slice(120, 128)
_UNACKED = slice(24, 28)


class _Socket(Protocol):
    def setsockopt(self, level: int, option: int, value: int) -> None: ...


class _InfoSocket(Protocol):
    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...


def tune_tcp(sock: _Socket) -> None:
    """``TCP_NODELAY`` (small requests, replies and acknowledgments go at once) and
    TCP keepalive on a connection; a Unix-domain one takes neither and is left as it is."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)


def bytes_acked(sock: _InfoSocket) -> tuple[int, int] | None:
    """How many bytes the peer's TCP has acknowledged on this connection, and how
    many segments it has not acknowledged yet (Linux's ``tcp_info``): the first
    grows while what was written reaches the peer, however slowly; the second
    is 0 once the peer's kernel has taken everything. None where the kernel
    does not say (not TCP, another system)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 192)
    except (OSError, AttributeError):
        return None
    if len(info) < _BYTES_ACKED.stop:
        return None
    acked = int.from_bytes(info[_BYTES_ACKED], sys.byteorder)
    return acked, int.from_bytes(info[_UNACKED], sys.byteorder)
