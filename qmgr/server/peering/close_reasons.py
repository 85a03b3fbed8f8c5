"""Why a connection to another queue manager ended, in words for its log and status.

A connection's tasks end it by raising: :class:`PeerClosed` with the reason
(the peer closed, the session said Close, a refusal), or whatever the network
or a malformed packet raised. :func:`close_reason` turns what they raised into
one line (logging a bug with its traceback: one connection never takes the
daemon down), and :func:`unopened` adds what an abrupt close before the
session opened usually means: the peer refuses this queue manager.
"""

from __future__ import annotations

import errno
import os
import ssl
from typing import Final

import structlog
import trio

import wire

__all__ = [
    "CLAIMS_OUR_GUID",
    "PEER_CLOSED",
    "REACHES_ITSELF",
    "PeerClosed",
    "close_reason",
    "unopened",
]


class PeerClosed(Exception):
    """The connection ends; the message says why."""


#: How a connection ends without a bug: the peer, the network or the protocol.
_EXPECTED = (
    PeerClosed,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    OSError,
    wire.ProtocolError,
)


#: Why a session whose peer turned out to be this queue manager ends.
REACHES_ITSELF: Final = (
    "the session reaches this queue manager itself (the peer's GUID is ours: a hairpin "
    "NAT, a port map or another name of this host); its messages are delivered here"
)


#: Why an accepted session that announced this queue manager's own GUID ends
#: when it carries a message: this queue manager's own sessions to itself close
#: before they carry any (:data:`REACHES_ITSELF`), so it is another peer
#: (a copy of this data directory, or an impostor) whose messages would pass
#: for this queue manager's own.
CLAIMS_OUR_GUID: Final = (
    "the peer announced this queue manager's own GUID and sends messages: another "
    "queue manager with a copy of this one's data directory, or an impostor; refusing them"
)


def close_reason(error: BaseException, log: structlog.typing.FilteringBoundLogger) -> str:
    """Why a connection ended, from what its tasks raised; a bug is logged with
    its traceback (one connection never takes the daemon down).

    What is not an ``Exception`` (``trio.Cancelled`` when the queue manager
    stops, ``KeyboardInterrupt``) is raised again, alone: the connection's own
    errors that came with it (the peer closed at the same moment) end here.
    """
    if isinstance(error, BaseExceptionGroup):
        _, rest = error.split(Exception)
        if rest is not None:
            raise rest
    elif not isinstance(error, Exception):
        raise error
    leaves = _leaves(error)
    for leaf in leaves:
        if not isinstance(leaf, _EXPECTED):
            log.error("peer_connection_crashed", exc_info=leaf)
            return f"internal error: {leaf!r}"
    leaf = leaves[0]
    if isinstance(leaf, PeerClosed):
        return str(leaf)
    if isinstance(leaf, wire.ProtocolError):
        return f"protocol error: {leaf}"
    cause = leaf.__cause__
    if isinstance(cause, ssl.SSLError):  # TLS 1.3: a refused certificate shows up here
        return f"TLS session refused: {cause.reason or cause}"
    return f"connection lost: {_plainly(leaf)}"


def _plainly(error: BaseException) -> str:
    """What broke, in words: the system's for an OS error (``Connection reset by
    peer``), else the error's message, else its kind."""
    for candidate in (error, error.__cause__):
        if isinstance(candidate, OSError) and candidate.strerror:
            return candidate.strerror
    return str(error) or type(error).__name__


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


#: Why a connection ends when the peer closes it between packets.
PEER_CLOSED: Final = "the peer closed the connection"
#: Why it ends when the peer resets it (a refusal closes with unread bytes).
_RESET: Final = f"connection lost: {os.strerror(errno.ECONNRESET)}"


def unopened(reason: str, *, closed: bool = False) -> str:
    """Why a connection this queue manager opened ended before its session
    opened, with what an abrupt close by the peer usually means: the peer
    refuses it, and says why only in its own log. ``closed``: the peer closed
    the connection during the TLS handshake without a word of TLS (as the
    peer port does to an address outside ``peers.accept_from``)."""
    if (
        closed
        or reason in (PEER_CLOSED, _RESET)
        or reason.startswith("TLS session refused: UNEXPECTED_EOF")
    ):
        return (
            f"{reason} before the session opened: the peer may refuse this queue "
            "manager (peers.accept_from; under TLS a certificate of another CA, none, "
            "or not a queue manager's; plain TCP to a port that wants TLS): its log "
            "says why (peer_refused)"
        )
    return reason
