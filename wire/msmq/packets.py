"""The MSMQ session packets as typed, immutable values.

:data:`Packet` is every value :func:`wire.parse_packet` can return: the three
internal packets of [MS-MQQB] §2.2.1-§2.2.3 and §2.2.6, and the UserMessage
of [MS-MQMQ] §2.2.20. OrderAck and FinalAck packets are UserMessages on the
wire; :mod:`wire.msmq.acks` recognises them and gives them typed views.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .constants import (
    ESTABLISH_CONNECTION_PADDING,
    NULL_GUID,
    OPERATING_SYSTEM_RESERVED,
    DeliveryMode,
    InternalFlags,
    OperatingSystemFlags,
)
from .headers import (
    BaseHeader,
    DebugHeader,
    InternalHeader,
    MessagePropertiesHeader,
    MultiQueueFormatHeader,
    SecurityHeader,
    SessionHeader,
    SoapHeader,
    TransactionHeader,
    UserHeader,
)

# Shared defaults: the values are immutable, so one instance serves every packet.
_DEFAULT_BASE = BaseHeader()
_DEFAULT_INTERNAL = InternalHeader()
# RE = 0x10 and SE: no ping was sent before the session.
_DEFAULT_OPERATING_SYSTEM = OPERATING_SYSTEM_RESERVED | int(OperatingSystemFlags.NO_PING)


class _Refusable:
    """The two internal packets whose InternalHeader may say that the connection is refused."""

    __slots__ = ()

    internal: InternalHeader

    @property
    def refused(self) -> bool:
        """Whether the acceptor refuses the connection (InternalHeader CS)."""
        return bool(self.internal.flags & InternalFlags.CONNECTION_REFUSED)


@dataclass(frozen=True, slots=True, kw_only=True)
class EstablishConnection(_Refusable):
    """EstablishConnection packet ([MS-MQQB] §2.2.3): the first packet each way.

    Attributes:
        base: the BaseHeader (IN is set by the builder; TTRQ stays infinite).
        internal: the InternalHeader; CS in its flags means the connection is refused.
        client_qm: ClientGuid, the initiator's QM GUID, echoed in the response.
        server_qm: ServerGuid, the acceptor's GUID, or NULL in a request by direct name.
        timestamp: TimeStamp, the initiator's milliseconds since boot, echoed.
        operating_system: OperatingSystem, carried whole: the low byte RE (0x10)
            and :class:`OperatingSystemFlags`. The default announces "no ping sent".
        reserved: the Reserved u16 after OperatingSystem.
        padding: the 512 padding bytes; a response MUST carry 0x5A, the default.
    """

    base: BaseHeader = _DEFAULT_BASE
    internal: InternalHeader = _DEFAULT_INTERNAL
    client_qm: uuid.UUID
    server_qm: uuid.UUID = NULL_GUID
    timestamp: int
    operating_system: int = _DEFAULT_OPERATING_SYSTEM
    reserved: int = 0
    padding: bytes = ESTABLISH_CONNECTION_PADDING


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionParameters(_Refusable):
    """ConnectionParameters packet ([MS-MQQB] §2.2.2): timeouts and window, each way.

    Attributes:
        base: the BaseHeader.
        internal: the InternalHeader; CS in its flags means the connection is refused.
        recoverable_ack_timeout: RecoverableAckTimeout in ms (500..120000 by the spec).
        ack_timeout: AckTimeout in ms (20000..120000 by the spec).
        reserved: Reserved.
        window_size: WindowSize, the sender's window.
    """

    base: BaseHeader = _DEFAULT_BASE
    internal: InternalHeader = _DEFAULT_INTERNAL
    recoverable_ack_timeout: int
    ack_timeout: int
    reserved: int = 0
    window_size: int = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionAck:
    """SessionAck packet ([MS-MQQB] §2.2.6): a stand-alone session acknowledgement.

    Its PacketSize (36) counts the SessionHeader, unlike a UserMessage's.
    """

    base: BaseHeader = _DEFAULT_BASE
    internal: InternalHeader = _DEFAULT_INTERNAL
    session: SessionHeader


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """UserMessage packet ([MS-MQMQ] §2.2.20): one whole message and its optional headers.

    Headers appear on the wire in attribute order. A header that is None is
    absent, and its presence bit is clear.

    Attributes:
        base: the BaseHeader (IN clear; SH and DH follow ``session`` and ``debug``).
        user: the UserHeader.
        transaction: TransactionHeader (TH), present iff the message is transactional.
        security: SecurityHeader (SH).
        properties: MessagePropertiesHeader (MP, always present).
        debug: DebugHeader (DH).
        soap: SoapHeader (HH).
        multi_queue: MultiQueueFormatHeader (MQ).
        trailer: bytes after the known headers and up to PacketSize, carried
            opaque: stored-form and future headers ([MS-MQRR] §2.2.5).
        session: a piggy-backed SessionHeader (SH), sent after PacketSize.
    """

    base: BaseHeader = _DEFAULT_BASE
    user: UserHeader
    transaction: TransactionHeader | None = None
    security: SecurityHeader | None = None
    properties: MessagePropertiesHeader
    debug: DebugHeader | None = None
    soap: SoapHeader | None = None
    multi_queue: MultiQueueFormatHeader | None = None
    trailer: bytes = b""
    session: SessionHeader | None = None

    @property
    def is_transactional(self) -> bool:
        """Whether the message carries a TransactionHeader."""
        return self.transaction is not None

    @property
    def is_recoverable(self) -> bool:
        """Whether the message is recoverable (DM=1); transactional ones are."""
        return self.user.delivery == DeliveryMode.RECOVERABLE


#: Any packet of the session protocol, as returned by :func:`wire.parse_packet`.
Packet = EstablishConnection | ConnectionParameters | SessionAck | UserMessage
