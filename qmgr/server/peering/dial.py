"""Reaching a next hop: the TCP connection, and the TLS session over it.

The link (``link``) and the check of ``server.aliases`` (``aliases``) open
connections to other queue managers the same way, and the acceptor
(``accept``) secures the ones it takes: :func:`open_hop` connects within
``peers.connect_timeout`` and says why it could not in the system's words
(``connection refused``, ``no route to host``, ``name or service not known``:
the reason of each address tried, where trio's summary names none);
:func:`secure` runs the mutual TLS handshake when ``tls.peers`` is set.
"""

from __future__ import annotations

import os
import socket

import trio

from qmgr.tcp import tune_tcp

from ..tls import peer_handshake
from .connection import ConnectionContext

__all__ = ["CannotConnect", "open_hop", "secure", "shows_own_certificate"]


class CannotConnect(Exception):
    """No TCP connection to the hop; the message says why."""


async def open_hop(host: str, port: int, *, within: float) -> trio.SocketStream:
    """A TCP connection to ``host:port``, made within ``within`` seconds.

    Raises:
        CannotConnect: why not (``timed out``, or the system's reason).
    """
    try:
        with trio.fail_after(within):
            return await trio.open_tcp_stream(host, port)
    except trio.TooSlowError:
        msg = "timed out"
        raise CannotConnect(msg) from None
    except (OSError, ValueError) as exc:
        # ValueError: a host name the resolver refuses outright ("a..b": UnicodeError).
        raise CannotConnect(connect_reason(exc)) from None


def connect_reason(exc: BaseException) -> str:
    """The reason a connection attempt failed: each address's, in the system's
    words and without repeats (trio's own error says only that all failed)."""
    cause = exc.__cause__
    errors = cause.exceptions if isinstance(cause, BaseExceptionGroup) else (exc,)
    reasons: list[str] = []
    for error in errors:
        text = str(error)
        if isinstance(error, socket.gaierror) and error.strerror:
            text = error.strerror  # the resolver's own words
        elif isinstance(error, OSError) and error.errno and error.errno > 0:
            text = os.strerror(error.errno)  # trio's text also names the address
        text = text[:1].lower() + text[1:]
        if text and text not in reasons:
            reasons.append(text)
    return "; ".join(reasons) or str(exc)


async def secure(
    stream: trio.SocketStream, context: ConnectionContext, *, server_side: bool
) -> tuple[trio.abc.Stream, str | None]:
    """The stream a session runs over, and the peer's identity: ``stream`` itself
    on plain TCP, else what the mutual TLS handshake gives (as the acceptor,
    ``server_side``, or as the initiator).

    Raises:
        TlsFailed: the handshake failed (``qmgr.server.tls``).
    """
    tune_tcp(stream)
    tls = context.tls.peer_server if server_side else context.tls.peer_client
    if tls is None:
        return stream, None
    config = context.parts.config
    return await peer_handshake(stream, tls, server_side=server_side, config=config)


def shows_own_certificate(stream: trio.abc.Stream, context: ConnectionContext) -> bool:
    """Whether the other end of a mutual-TLS ``stream`` showed this queue manager's
    own certificate: it is this queue manager (only it holds the key)."""
    own = context.tls.own_certificate
    return (
        own is not None
        and isinstance(stream, trio.SSLStream)
        and stream.getpeercert(binary_form=True) == own
    )
