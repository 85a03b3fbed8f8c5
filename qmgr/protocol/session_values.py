"""The values a :class:`~qmgr.protocol.PeerSession` takes and returns.

Roles, states, settings, the actions the session asks its adapter to carry
out, and the error for misuse. Plain immutable values; the machine itself is
in :mod:`qmgr.protocol.session`.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Final, TypeAlias

import wire

from .session_ledger import U16

#: The largest AckTimeout a ConnectionParameters packet carries (a u32 of ms).
MAX_MILLISECONDS: Final = 0xFFFFFFFF
#: RecoverableAckSendTimeout bounds in seconds (500..120000 ms, reference §9 and §14.1).
_MIN_RECOVERABLE_ACK_TIMEOUT: Final = 0.5
_MAX_RECOVERABLE_ACK_TIMEOUT: Final = 120.0
#: AckTimeout bounds in seconds (20000..120000 ms, reference §9).
_MIN_ACK_TIMEOUT: Final = 20.0
_MAX_ACK_TIMEOUT: Final = 120.0


def recoverable_ack_timeout_within(seconds: float) -> float:
    """A RecoverableAckSendTimeout within the spec's range, 0.5..120 s."""
    return min(_MAX_RECOVERABLE_ACK_TIMEOUT, max(_MIN_RECOVERABLE_ACK_TIMEOUT, seconds))


def ack_timeout_within(seconds: float, own: float) -> float:
    """A peer's AckTimeout within the spec's range, 20..120 s, widened to take in
    this end's own setting (``own``): a peer cannot switch off the close of a
    session whose acknowledgments stop, nor make it hair-trigger, and two queue
    managers with the same setting agree on it."""
    return min(max(_MAX_ACK_TIMEOUT, own), max(min(_MIN_ACK_TIMEOUT, own), seconds))


#: EstablishConnection.OperatingSystem: RE, the byte that MUST be 0x10, and the
#: SE bit ("no ping was sent"), as [MS-MQQB] §2.2.3.1 lays them out (bit 0 the
#: least significant: RE the low byte, SE 0x0100; the §4.1.3 example's ``10 03``)
#: and as peers that number the bits from the most significant one write them
#: (RE the high byte, SE 0x0080; zgrab2's ``80 10``).
_RE: Final = 0x10
_SPEC_SE: Final = int(wire.OperatingSystemFlags.NO_PING)
_MSB_FIRST_RE: Final = _RE << 8
_MSB_FIRST_SE: Final = 0x0080


def answer_operating_system(requested: int) -> int:
    """The OperatingSystem field of the EstablishConnection response to ``requested``.

    RE is 0x10 and the request's SE bit is echoed, in the encoding the request
    used, so that the initiator reads its own bit back whichever way it numbers
    them: the spec's (RE in the low byte) and, when only the high byte is 0x10,
    the most-significant-bit-first one seen in the wild. A request in neither
    form gets the spec's encoding without SE. The other bits (OS, QS) describe
    the initiator and are not echoed.
    """
    if requested & 0xFF == _RE:
        return _RE | (requested & _SPEC_SE)
    if requested >> 8 == _RE:
        return _MSB_FIRST_RE | (requested & _MSB_FIRST_SE)
    return _RE


class SessionError(Exception):
    """The session was used wrongly by the caller (not by the peer).

    Raised by :meth:`PeerSession.send` outside an open window, by
    :meth:`PeerSession.persisted` for a number not awaiting persistence, and by
    :meth:`PeerSession.receive` before :meth:`PeerSession.start`. A peer's
    misbehaviour never raises: it produces a :class:`Close` action.
    """


class Role(enum.Enum):
    """Which end of the TCP connection this session is."""

    #: We connected, and send the first EstablishConnection.
    INITIATOR = "initiator"
    #: We accepted the connection, and answer.
    ACCEPTOR = "acceptor"


class SessionState(enum.Enum):
    """Session states of the [MS-MQQB] handshake (reference §14.1)."""

    #: Initiator: EstablishConnection sent, waiting for the response.
    WAITING_ECR = "waiting for the EstablishConnection response"
    #: Acceptor: waiting for the initiator's EstablishConnection.
    WAITING_EC = "waiting for EstablishConnection"
    #: Acceptor: EstablishConnection answered, waiting for ConnectionParameters.
    WAITING_CP = "waiting for ConnectionParameters"
    #: Initiator: ConnectionParameters sent, waiting for the response.
    WAITING_CPR = "waiting for the ConnectionParameters response"
    #: Handshake done: user packets and SessionAcks flow both ways.
    OPEN = "open"
    #: Final.
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """What this queue manager announces and enforces on its sessions.

    Attributes:
        window_size: our receive window (1..65535), announced in
            ConnectionParameters and every SessionAck.
        ack_timeout: AckWaitTimeout in seconds (ConnectionParameters AckTimeout).
            The acceptor adopts the initiator's value, within 20..120 s or this
            setting (:func:`ack_timeout_within`).
        recoverable_ack_timeout: RecoverableAckSendTimeout in seconds; clamped to
            0.5..120 as the spec requires. The acceptor adopts the initiator's value.
        init_timeout: seconds the handshake may take.
        idle_timeout: seconds without a user packet either way before closing.
    """

    window_size: int = 64
    ack_timeout: float = 20.0
    recoverable_ack_timeout: float = 0.5
    init_timeout: float = 60.0
    idle_timeout: float = 300.0

    def __post_init__(self) -> None:
        if not 1 <= self.window_size < U16:
            msg = f"window_size must be 1..65535, got {self.window_size}"
            raise ValueError(msg)
        for name in ("ack_timeout", "recoverable_ack_timeout", "init_timeout", "idle_timeout"):
            value = getattr(self, name)
            if not value > 0:
                msg = f"{name} must be positive, got {value}"
                raise ValueError(msg)
        if self.ack_timeout * 1000 > MAX_MILLISECONDS:
            msg = f"ack_timeout must fit in a u32 of milliseconds, got {self.ack_timeout}"
            raise ValueError(msg)


# --- actions ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Write these bytes (one whole internal packet) to the connection."""

    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Opened:
    """The handshake is done: user packets may flow.

    Attributes:
        remote_qm: the peer queue manager's GUID.
        peer_window: how many unacknowledged user packets the peer accepts.
    """

    remote_qm: uuid.UUID
    peer_window: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrived:
    """A user packet arrived, for the layer above (the receiver).

    Attributes:
        packet: the packet, as decoded (any piggy-backed SessionHeader was
            already processed by the session).
        recoverable_number: for a recoverable (DM=1) packet, the number to pass
            to :meth:`PeerSession.persisted` once the packet is durable; None
            for an express packet, which needs nothing more.
    """

    packet: wire.UserMessage
    recoverable_number: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Acked:
    """Sent user packets the peer has acknowledged, by the tags given to :meth:`PeerSession.send`.

    An express packet is reported once the peer received it; a recoverable one
    once the peer reported it stored. Each tag is reported once, in send order
    within one action.
    """

    tags: tuple[object, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    """Close the connection; the session is CLOSED. ``reason`` says why."""

    reason: str


#: Everything the session asks its adapter to do.
Action: TypeAlias = Send | Opened | Arrived | Acked | Close
