"""Parsing MSMQ session packets: exactly one packet's bytes to a value.

Theory of operation
-------------------
A packet is framed by its 16-byte BaseHeader: :func:`frame_length` checks the
version, the signature and PacketSize, and says how many bytes the whole
packet occupies. It is shared with the :class:`~wire.FrameDecoder`, so the
decoder and :func:`parse_packet` agree on framing by construction.

The SessionHeader length rule ([MS-MQMQ] §2.2.19.1 against the [MS-MQQB]
§4.1.8 example): an internal packet (IN=1) is PacketSize bytes long, its
SessionHeader included; a user packet with SH=1 is PacketSize + 16 bytes,
the SessionHeader following the PacketSize bytes.

Inside a packet, the parser keeps one position and one limit (PacketSize for
the headers of a user message) and reads with the bounds-checked primitives of
:mod:`wire.msmq.reading`. Every fixed part is read with a ``struct.Struct``
compiled from the construct layouts, and only after checking that the part
fits before the limit; every count or size taken from the wire is compared
with the bytes that remain before anything is sliced or decoded; every code
that selects a layout (DQ, AQ, RQ, PT, QT, section ids) is checked before use.
So a failure is always a :class:`RemoteProtocolError` naming the field and the
reason; struct, codec and index errors cannot happen. There is deliberately no
catch-all: anything else escaping is a bug, and the property tests and the
fuzz harness look for exactly that.

This module reads what every packet has (the BaseHeader, the internal
packets, a SessionHeader, the UserHeader's fixed part and queue codes) and
hands the headers of a user message to :mod:`wire.msmq.parse_headers`, in
wire order. Values are built from checked fields without further validation,
through the trusted constructors of :mod:`wire.msmq.trusted`. GUIDs are
decoded through a memo keyed by their bytes (:mod:`wire.msmq.reading`).
"""

from __future__ import annotations

from .constants import (
    ADMIN_QUEUE_TYPES,
    BASE_CARRIED_MASK,
    BASE_HEADER_SIZE,
    BASE_PRIORITY_MASK,
    CONNECTION_PARAMETERS_SIZE,
    DESTINATION_QUEUE_TYPES,
    ESTABLISH_CONNECTION_SIZE,
    INTERNAL_PACKET_TYPE_MASK,
    MAX_PACKET_SIZE,
    MIN_USER_MESSAGE_SIZE,
    SESSION_ACK_SIZE,
    SESSION_HEADER_SIZE,
    SIGNATURE,
    USER_AQ_SHIFT,
    USER_CARRIED_MASK,
    USER_DELIVERY_MASK,
    USER_DELIVERY_SHIFT,
    USER_DQ_SHIFT,
    USER_HOP_COUNT_MASK,
    USER_QUEUE_TYPE_MASK,
    USER_RQ_SHIFT,
    VERSION,
    PacketType,
    QueueFormatType,
)
from .fixed import BASE, CONNECTION_PARAMETERS, ESTABLISH_CONNECTION, INTERNAL, SESSION, USER
from .headers import BaseHeader, SessionHeader
from .packets import Packet, UserMessage
from .parse_headers import (
    read_debug_header,
    read_multi_queue_header,
    read_properties_header,
    read_queue,
    read_security_header,
    read_soap_header,
    read_transaction_header,
)
from .queues import SAME_AS_ADMIN, QueueAddress, ResponseQueue
from .reading import decode_guid, fail, read_guid
from .tables import (
    BASE_DH,
    BASE_IN,
    BASE_SH,
    INTERNAL_CS,
    USER_CQ,
    USER_HH,
    USER_MP,
    USER_MQ,
    USER_SH,
    USER_TH,
)
from .trusted import new

__all__ = ["frame_length", "parse_packet"]

_INTERNAL_PACKET_SIZES = {
    PacketType.SESSION_ACK: ("SessionAck", SESSION_ACK_SIZE),
    PacketType.ESTABLISH_CONNECTION: ("EstablishConnection", ESTABLISH_CONNECTION_SIZE),
    PacketType.CONNECTION_PARAMETERS: ("ConnectionParameters", CONNECTION_PARAMETERS_SIZE),
}
_INTERNAL_SIZES = frozenset(size for _name, size in _INTERNAL_PACKET_SIZES.values())


def frame_length(header: bytes, max_packet_size: int = MAX_PACKET_SIZE) -> int:
    """Check the 16-byte BaseHeader at the start of ``header``; return the packet's length.

    Args:
        header: at least the first 16 bytes of a packet.
        max_packet_size: the largest PacketSize accepted.

    Returns:
        How many bytes the whole packet occupies on the stream.

    Raises:
        RemoteProtocolError: wrong version or signature, or a PacketSize that is
            impossible for the packet's kind or over the limit.
    """
    return _frame_length(BASE.unpack_from(header, 0), max_packet_size)


def _frame_length(fields: tuple[int, int, int, bytes, int, int], max_packet_size: int) -> int:
    version, _reserved, flags, signature, size, _ttrq = fields
    if version != VERSION:
        fail("BaseHeader.VersionNumber", f"expected {VERSION:#04x}, got {version:#04x}")
    if signature != SIGNATURE:
        fail("BaseHeader.Signature", f"expected {SIGNATURE!r}, got {signature!r}")
    if size > max_packet_size:
        fail("BaseHeader.PacketSize", f"{size} is over the limit of {max_packet_size}")
    if flags & BASE_IN:
        if size not in _INTERNAL_SIZES:
            fail("BaseHeader.PacketSize", f"{size} is not the size of any internal packet")
        return size
    if size < MIN_USER_MESSAGE_SIZE:
        fail("BaseHeader.PacketSize", f"{size} is too small for a user message")
    if flags & BASE_SH:
        return size + SESSION_HEADER_SIZE
    return size


def parse_packet(data: bytes) -> Packet:
    """Parse exactly one whole session packet.

    Args:
        data: the packet's bytes, nothing more and nothing less.

    Returns:
        The packet as an :class:`EstablishConnection`, :class:`ConnectionParameters`,
        :class:`SessionAck` or :class:`UserMessage` (OrderAck and FinalAck
        packets are user messages; see :func:`wire.classify_packet`).

    Raises:
        RemoteProtocolError: the bytes are not exactly one well-formed packet.
            This is the only exception it raises, for any input.
    """
    if type(data) is not bytes:
        data = bytes(data)
    if len(data) < BASE_HEADER_SIZE:
        fail("BaseHeader", f"needs 16 bytes, got {len(data)}")
    fields = BASE.unpack_from(data, 0)
    length = _frame_length(fields, MAX_PACKET_SIZE)
    if len(data) != length:
        if len(data) < length:
            fail("BaseHeader.PacketSize", f"packet is {length} bytes, only {len(data)} given")
        fail("BaseHeader.PacketSize", f"packet is {length} bytes, {len(data) - length} follow it")
    _version, reserved, flags, _signature, size, ttrq = fields
    base = new.BaseHeader(
        priority=flags & BASE_PRIORITY_MASK,
        flags=flags & BASE_CARRIED_MASK,
        reserved=reserved,
        time_to_reach_queue=ttrq,
    )
    if flags & BASE_IN:
        return _internal_packet(data, base, flags, size)
    return _user_message(data, base, flags, size)


# --- internal packets ---------------------------------------------------------------------------


def _internal_packet(data: bytes, base: BaseHeader, flags: int, size: int) -> Packet:
    reserved, internal_flags = INTERNAL.unpack_from(data, 16)
    packet_type = internal_flags & INTERNAL_PACKET_TYPE_MASK
    internal = new.InternalHeader(
        flags=internal_flags & ~INTERNAL_PACKET_TYPE_MASK, reserved=reserved
    )
    if packet_type not in _INTERNAL_PACKET_SIZES:
        fail("InternalHeader.Flags", f"unknown packet type PT={packet_type}")
    name, expected_size = _INTERNAL_PACKET_SIZES[packet_type]
    if size != expected_size:
        fail("BaseHeader.PacketSize", f"a {name} is {expected_size} bytes, PacketSize says {size}")
    if flags & BASE_DH:
        fail("BaseHeader.Flags", f"DH is set on a {name}")
    if packet_type == PacketType.SESSION_ACK:
        if not flags & BASE_SH:
            fail("BaseHeader.Flags", "SH is clear on a SessionAck")
        if internal_flags & INTERNAL_CS:
            fail("InternalHeader.Flags", "CS is set on a SessionAck")
        return new.SessionAck(base=base, internal=internal, session=_session_header(data, 20))
    if flags & BASE_SH:
        fail("BaseHeader.Flags", f"SH is set on a {name}")
    if packet_type == PacketType.ESTABLISH_CONNECTION:
        client, server, timestamp, operating_system, ec_reserved, padding = (
            ESTABLISH_CONNECTION.unpack_from(data, 20)
        )
        return new.EstablishConnection(
            base=base,
            internal=internal,
            client_qm=decode_guid(client),
            server_qm=decode_guid(server),
            timestamp=timestamp,
            operating_system=operating_system,
            reserved=ec_reserved,
            padding=padding,
        )
    return new.ConnectionParameters(
        base=base, internal=internal, **CONNECTION_PARAMETERS.read(data, 20)
    )


def _session_header(data: bytes, pos: int) -> SessionHeader:
    # Named one by one rather than through SESSION.read: this runs for every
    # SessionAck and every user message that carries the header.
    ack, recoverable_ack, ack_flags, sent, recoverable_sent, window, reserved = SESSION.unpack_from(
        data, pos
    )
    return new.SessionHeader(
        ack_sequence_number=ack,
        recoverable_ack_sequence_number=recoverable_ack,
        recoverable_ack_flags=ack_flags,
        user_message_sequence_number=sent,
        recoverable_message_sequence_number=recoverable_sent,
        window_size=window,
        reserved=reserved,
    )


# --- user messages ------------------------------------------------------------------------------


def _user_message(data: bytes, base: BaseHeader, flags: int, end: int) -> UserMessage:
    # ``end`` is PacketSize: every header lies before it; a SessionHeader follows it.
    source, destination_qm, ttbr, sent_time, message_id, user_flags = USER.unpack_from(data, 16)
    if not user_flags & USER_MP:
        fail("UserHeader.Flags", "MP is clear: a user message must carry its properties")
    dq = (user_flags >> USER_DQ_SHIFT) & USER_QUEUE_TYPE_MASK
    aq = (user_flags >> USER_AQ_SHIFT) & USER_QUEUE_TYPE_MASK
    rq = (user_flags >> USER_RQ_SHIFT) & USER_QUEUE_TYPE_MASK
    if dq not in DESTINATION_QUEUE_TYPES:
        fail("UserHeader.Flags", f"DQ={dq} is not a destination queue format")
    if aq not in ADMIN_QUEUE_TYPES:
        fail("UserHeader.Flags", f"AQ={aq} is not an admin queue format")
    pos = 64
    destination: QueueAddress | None = None
    admin: QueueAddress | None = None
    response: ResponseQueue | None = None
    if dq:
        destination, pos = read_queue(data, pos, end, dq, "UserHeader.DestinationQueue")
    if aq:
        admin, pos = read_queue(data, pos, end, aq, "UserHeader.AdminQueue")
    if rq == QueueFormatType.SAME_AS_ADMIN:
        response = SAME_AS_ADMIN
    elif rq:
        response, pos = read_queue(data, pos, end, rq, "UserHeader.ResponseQueue")
    connector_type = None
    if user_flags & USER_CQ:
        connector_type = read_guid(data, pos, end, "UserHeader.ConnectorType")
        pos += 16
    user = new.UserHeader(
        source_qm=decode_guid(source),
        destination_qm=decode_guid(destination_qm),
        time_to_be_received=ttbr,
        sent_time=sent_time,
        message_id=message_id,
        hop_count=user_flags & USER_HOP_COUNT_MASK,
        delivery=(user_flags & USER_DELIVERY_MASK) >> USER_DELIVERY_SHIFT,
        flags=user_flags & USER_CARRIED_MASK,
        destination=destination,
        admin=admin,
        response=response,
        connector_type=connector_type,
    )

    transaction = None
    if user_flags & USER_TH:
        transaction, pos = read_transaction_header(data, pos, end)
    security = None
    if user_flags & USER_SH:
        security, pos = read_security_header(data, pos, end)
    properties, pos = read_properties_header(data, pos, end)
    debug = None
    if flags & BASE_DH:
        debug, pos = read_debug_header(data, pos, end)
    soap = None
    if user_flags & USER_HH:
        soap, pos = read_soap_header(data, pos, end)
    multi_queue = None
    if user_flags & USER_MQ:
        multi_queue, pos = read_multi_queue_header(data, pos, end)
    session = _session_header(data, end) if flags & BASE_SH else None
    return new.UserMessage(
        base=base,
        user=user,
        transaction=transaction,
        security=security,
        properties=properties,
        debug=debug,
        soap=soap,
        multi_queue=multi_queue,
        trailer=data[pos:end],
        session=session,
    )
