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
:mod:`wire._msmq_reading`. Every fixed part is read with a ``struct.Struct``
compiled from the construct layouts, and only after checking that the part
fits before the limit; every count or size taken from the wire is compared
with the bytes that remain before anything is sliced or decoded; every code
that selects a layout (DQ, AQ, RQ, PT, QT, section ids) is checked before use.
So a failure is always a :class:`RemoteProtocolError` naming the field and the
reason; struct, codec and index errors cannot happen. There is deliberately no
catch-all: anything else escaping is a bug, and the property tests and the
fuzz harness look for exactly that.

Values are built from checked fields without further validation, through the
trusted constructors of :mod:`wire._msmq_trusted`. GUIDs and direct queue names
and labels are decoded through small memos keyed by their bytes: a session sees
the same few of them over and over, and decoding them is comparatively slow.
"""

from __future__ import annotations

from . import _msmq_fixed as fixed
from ._msmq_constants import (
    ADMIN_QUEUE_TYPES,
    BASE_CARRIED_MASK,
    BASE_HEADER_SIZE,
    BASE_PRIORITY_MASK,
    CONNECTION_PARAMETERS_SIZE,
    DEBUG_QUEUE_TYPE_MASK,
    DESTINATION_QUEUE_TYPES,
    ESTABLISH_CONNECTION_SIZE,
    INTERNAL_PACKET_TYPE_MASK,
    MAX_LABEL_LENGTH,
    MAX_PACKET_SIZE,
    MIN_USER_MESSAGE_SIZE,
    SESSION_ACK_SIZE,
    SESSION_HEADER_SIZE,
    SIGNATURE,
    SOAP_BODY_SECTION_ID,
    SOAP_HEADER_SECTION_ID,
    TRANSACTION_CARRIED_MASK,
    TRANSACTION_ID_MASK,
    TRANSACTION_ID_SHIFT,
    USER_AQ_SHIFT,
    USER_CARRIED_MASK,
    USER_DELIVERY_MASK,
    USER_DELIVERY_SHIFT,
    USER_DQ_SHIFT,
    USER_HOP_COUNT_MASK,
    USER_QUEUE_TYPE_MASK,
    USER_RQ_SHIFT,
    VERSION,
    DebugQueueType,
    MqfHeaderId,
    PacketType,
    QueueFormatType,
)
from ._msmq_headers import (
    BaseHeader,
    DebugHeader,
    InternalHeader,
    MessagePropertiesHeader,
    MqfAddressHeader,
    MqfSignatureHeader,
    MultiQueueFormatHeader,
    SecurityHeader,
    SessionHeader,
    SoapHeader,
    TransactionHeader,
    TxSequenceId,
    UserHeader,
)
from ._msmq_packets import (
    ConnectionParameters,
    EstablishConnection,
    Packet,
    SessionAck,
    UserMessage,
)
from ._msmq_queues import (
    SAME_AS_ADMIN,
    DirectQueue,
    PrivateQueue,
    PrivateQueueId,
    PublicQueue,
    QueueAddress,
    ResponseQueue,
)
from ._msmq_reading import (
    carried_padding,
    decode_guid,
    fail,
    fail_past_end,
    need,
    read_fixed,
    read_guid,
)
from ._msmq_tables import (
    BASE_DH,
    BASE_IN,
    BASE_SH,
    INTERNAL_CS,
    MQF_LISTS,
    PRIVATE_HOSTS,
    TRANSACTION_CG,
    USER_CQ,
    USER_HH,
    USER_MP,
    USER_MQ,
    USER_SH,
    USER_TH,
    remember,
)
from ._msmq_text import decode_utf16z
from ._msmq_trusted import trusted_constructor

_INTERNAL_PACKET_SIZES = {
    PacketType.SESSION_ACK: ("SessionAck", SESSION_ACK_SIZE),
    PacketType.ESTABLISH_CONNECTION: ("EstablishConnection", ESTABLISH_CONNECTION_SIZE),
    PacketType.CONNECTION_PARAMETERS: ("ConnectionParameters", CONNECTION_PARAMETERS_SIZE),
}
_INTERNAL_SIZES = frozenset(size for _name, size in _INTERNAL_PACKET_SIZES.values())
_SECURITY_FIELDS = tuple(
    f"SecurityHeader.{name}"
    for name in ("SecurityID", "EncryptionKey", "Signature", "SenderCert", "ProviderInfo")
)

# Memos of immutable values decoded from bytes that repeat on a session: direct
# queue names and labels (GUIDs have theirs in :mod:`wire._msmq_reading`). Only
# valid results are stored; direct names longer than _MEMO_KEY_LIMIT are not
# stored, and a memo is cleared when it holds MEMO_LIMIT entries (see
# :mod:`wire._msmq_tables`).
_MEMO_KEY_LIMIT = 512
_DIRECT_MEMO: dict[bytes, DirectQueue] = {}
_LABEL_MEMO: dict[bytes, str] = {}


class _new:  # a namespace: ``_new.UserHeader(...)``
    """Trusted constructors of the values the parser makes (see :mod:`wire._msmq_trusted`)."""

    BaseHeader = trusted_constructor(BaseHeader)
    InternalHeader = trusted_constructor(InternalHeader)
    UserHeader = trusted_constructor(UserHeader)
    TransactionHeader = trusted_constructor(TransactionHeader)
    TxSequenceId = trusted_constructor(TxSequenceId)
    SecurityHeader = trusted_constructor(SecurityHeader)
    MessagePropertiesHeader = trusted_constructor(MessagePropertiesHeader)
    DebugHeader = trusted_constructor(DebugHeader)
    SoapHeader = trusted_constructor(SoapHeader)
    MqfAddressHeader = trusted_constructor(MqfAddressHeader)
    MqfSignatureHeader = trusted_constructor(MqfSignatureHeader)
    MultiQueueFormatHeader = trusted_constructor(MultiQueueFormatHeader)
    SessionHeader = trusted_constructor(SessionHeader)
    EstablishConnection = trusted_constructor(EstablishConnection)
    ConnectionParameters = trusted_constructor(ConnectionParameters)
    SessionAck = trusted_constructor(SessionAck)
    UserMessage = trusted_constructor(UserMessage)
    DirectQueue = trusted_constructor(DirectQueue)
    PrivateQueue = trusted_constructor(PrivateQueue)
    PrivateQueueId = trusted_constructor(PrivateQueueId)
    PublicQueue = trusted_constructor(PublicQueue)


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
    return _frame_length(fixed.BASE.unpack_from(header, 0), max_packet_size)


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
    fields = fixed.BASE.unpack_from(data, 0)
    length = _frame_length(fields, MAX_PACKET_SIZE)
    if len(data) != length:
        if len(data) < length:
            fail("BaseHeader.PacketSize", f"packet is {length} bytes, only {len(data)} given")
        fail("BaseHeader.PacketSize", f"packet is {length} bytes, {len(data) - length} follow it")
    _version, reserved, flags, _signature, size, ttrq = fields
    base = _new.BaseHeader(
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
    reserved, internal_flags = fixed.INTERNAL.unpack_from(data, 16)
    packet_type = internal_flags & INTERNAL_PACKET_TYPE_MASK
    internal = _new.InternalHeader(
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
        return _new.SessionAck(base=base, internal=internal, session=_session_header(data, 20))
    if flags & BASE_SH:
        fail("BaseHeader.Flags", f"SH is set on a {name}")
    if packet_type == PacketType.ESTABLISH_CONNECTION:
        client, server, timestamp, operating_system, ec_reserved, padding = (
            fixed.ESTABLISH_CONNECTION.unpack_from(data, 20)
        )
        return _new.EstablishConnection(
            base=base,
            internal=internal,
            client_qm=decode_guid(client),
            server_qm=decode_guid(server),
            timestamp=timestamp,
            operating_system=operating_system,
            reserved=ec_reserved,
            padding=padding,
        )
    recoverable_ack_timeout, ack_timeout, cp_reserved, window_size = (
        fixed.CONNECTION_PARAMETERS.unpack_from(data, 20)
    )
    return _new.ConnectionParameters(
        base=base,
        internal=internal,
        recoverable_ack_timeout=recoverable_ack_timeout,
        ack_timeout=ack_timeout,
        reserved=cp_reserved,
        window_size=window_size,
    )


def _session_header(data: bytes, pos: int) -> SessionHeader:
    ack, recoverable_ack, ack_flags, sent, recoverable_sent, window, reserved = (
        fixed.SESSION.unpack_from(data, pos)
    )
    return _new.SessionHeader(
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
    source, destination_qm, ttbr, sent_time, message_id, user_flags = fixed.USER.unpack_from(
        data, 16
    )
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
        destination, pos = _queue(data, pos, end, dq, "UserHeader.DestinationQueue")
    if aq:
        admin, pos = _queue(data, pos, end, aq, "UserHeader.AdminQueue")
    if rq == QueueFormatType.SAME_AS_ADMIN:
        response = SAME_AS_ADMIN
    elif rq:
        response, pos = _queue(data, pos, end, rq, "UserHeader.ResponseQueue")
    connector_type = None
    if user_flags & USER_CQ:
        connector_type = read_guid(data, pos, end, "UserHeader.ConnectorType")
        pos += 16
    user = _new.UserHeader(
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
        transaction, pos = _transaction_header(data, pos, end)
    security = None
    if user_flags & USER_SH:
        security, pos = _security_header(data, pos, end)
    properties, pos = _properties_header(data, pos, end)
    debug = None
    if flags & BASE_DH:
        debug, pos = _debug_header(data, pos, end)
    soap = None
    if user_flags & USER_HH:
        soap, pos = _soap_header(data, pos, end)
    multi_queue = None
    if user_flags & USER_MQ:
        multi_queue, pos = _multi_queue_header(data, pos, end)
    session = _session_header(data, end) if flags & BASE_SH else None
    return _new.UserMessage(
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


def _queue(data: bytes, pos: int, end: int, code: int, field: str) -> tuple[QueueAddress, int]:
    """Read the queue field selected by ``code``; ``pos`` is 4-aligned in its header."""
    if code == QueueFormatType.DIRECT:
        need(pos, 2, end, field)
        (count,) = fixed.U16.unpack_from(data, pos)
        padded_end = pos + 2 + count + (-(2 + count) % 4)
        if padded_end > end:
            need(pos, padded_end - pos, end, field)
        raw = data[pos:padded_end]
        queue = _DIRECT_MEMO.get(raw)
        if queue is None:
            if count < 2 or count & 1:
                fail(field, f"Count {count} is not a whole NUL-terminated UTF-16 string")
            name = decode_utf16z(raw[2 : 2 + count], field)
            queue = _new.DirectQueue(name=name, padding=carried_padding(raw, 2 + count, len(raw)))
            if len(raw) <= _MEMO_KEY_LIMIT:
                remember(_DIRECT_MEMO, raw, queue)
        return queue, padded_end
    if code == QueueFormatType.PUBLIC:
        return _new.PublicQueue(queue_id=read_guid(data, pos, end, field)), pos + 16
    if code == QueueFormatType.PRIVATE:
        need(pos, 20, end, field)
        qm, number = fixed.GUID_U32.unpack_from(data, pos)
        return _new.PrivateQueue(qm=decode_guid(qm), number=number), pos + 20
    # 2, 3 or 4: the callers have ruled out every other code.
    need(pos, 4, end, field)
    (number,) = fixed.U32.unpack_from(data, pos)
    return _new.PrivateQueueId(number=number, host=PRIVATE_HOSTS[code]), pos + 4


def _transaction_header(data: bytes, pos: int, end: int) -> tuple[TransactionHeader, int]:
    flags, ordinal, timestamp, number, previous = read_fixed(fixed.TRANSACTION, data, pos, end)
    pos += 20
    connector_qm = None
    if flags & TRANSACTION_CG:
        connector_qm = read_guid(data, pos, end, "TransactionHeader.ConnectorQMGuid")
        pos += 16
    header = _new.TransactionHeader(
        flags=flags & TRANSACTION_CARRIED_MASK,
        transaction_id=(flags & TRANSACTION_ID_MASK) >> TRANSACTION_ID_SHIFT,
        sequence_id=_new.TxSequenceId(ordinal=ordinal, timestamp=timestamp),
        sequence_number=number,
        previous_sequence_number=previous,
        connector_qm=connector_qm,
    )
    return header, pos


def _security_header(data: bytes, pos: int, end: int) -> tuple[SecurityHeader, int]:
    flags, *sizes = read_fixed(fixed.SECURITY, data, pos, end)
    pos += 16
    items: list[bytes] = []
    padding = b""
    for field, size in zip(_SECURITY_FIELDS, sizes, strict=True):
        stop = pos + size
        padded = stop + (-size % 4)
        if padded > end:
            need(pos, padded - pos, end, field)
        items.append(data[pos:stop])
        if padded != stop:
            padding += data[stop:padded]
        pos = padded
    if padding.count(0) == len(padding):
        padding = b""
    header = _new.SecurityHeader(
        flags=flags,
        sender_id=items[0],
        encryption_key=items[1],
        signature=items[2],
        sender_cert=items[3],
        provider_info=items[4],
        padding=padding,
    )
    return header, pos


def _properties_header(data: bytes, pos: int, end: int) -> tuple[MessagePropertiesHeader, int]:
    (
        flags,
        label_length,
        message_class,
        correlation_id,
        body_type,
        application_tag,
        message_size,
        allocation_body_size,
        privacy_level,
        hash_algorithm,
        encryption_algorithm,
        extension_size,
    ) = read_fixed(fixed.PROPERTIES, data, pos, end)
    start = pos
    pos += 56
    label = None
    if label_length:
        if label_length > MAX_LABEL_LENGTH:
            fail("MessagePropertiesHeader.LabelLength", f"{label_length} is over 250 WCHARs")
        label_end = pos + 2 * label_length
        if label_end > end:
            need(pos, 2 * label_length, end, "MessagePropertiesHeader.Label")
        raw = data[pos:label_end]
        label = _LABEL_MEMO.get(raw)
        if label is None:
            label = remember(_LABEL_MEMO, raw, decode_utf16z(raw, "MessagePropertiesHeader.Label"))
        pos = label_end
    if extension_size > end - pos:
        fail_past_end("MessagePropertiesHeader.ExtensionSize", extension_size, end - pos)
    extension = data[pos : pos + extension_size]
    pos += extension_size
    if message_size > end - pos:
        fail_past_end("MessagePropertiesHeader.MessageSize", message_size, end - pos)
    body = data[pos : pos + message_size]
    pos += message_size
    padded_end = pos + (-(pos - start) % 4)
    padding = b""
    if padded_end != pos:
        need(pos, padded_end - pos, end, "MessagePropertiesHeader padding")
        padding = carried_padding(data, pos, padded_end)
    header = _new.MessagePropertiesHeader(
        flags=flags,
        message_class=message_class,
        correlation_id=correlation_id,
        body_type=body_type,
        application_tag=application_tag,
        allocation_body_size=(
            None if allocation_body_size == message_size else allocation_body_size
        ),
        privacy_level=privacy_level,
        hash_algorithm=hash_algorithm,
        encryption_algorithm=encryption_algorithm,
        label=label,
        extension=extension,
        body=body,
        padding=padding,
    )
    return header, padded_end


def _debug_header(data: bytes, pos: int, end: int) -> tuple[DebugHeader, int]:
    flags, reserved = read_fixed(fixed.DEBUG, data, pos, end)
    pos += 4
    queue_type = flags & DEBUG_QUEUE_TYPE_MASK
    queue = None
    if queue_type == DebugQueueType.PUBLIC:
        queue = read_guid(data, pos, end, "DebugHeader.QueueIdentifier")
        pos += 16
    elif queue_type != DebugQueueType.NONE:
        fail("DebugHeader.Flags", f"QT={queue_type} is not a queue type")
    header = _new.DebugHeader(flags=flags & ~DEBUG_QUEUE_TYPE_MASK, reserved=reserved, queue=queue)
    return header, pos


def _soap_header(data: bytes, pos: int, end: int) -> tuple[SoapHeader, int]:
    start = pos
    strings: list[str | None] = []
    reserved_fields: list[int] = []
    for section_id, name in ((SOAP_HEADER_SECTION_ID, "Header"), (SOAP_BODY_SECTION_ID, "Body")):
        found_id, reserved, length = read_fixed(
            fixed.SOAP_SECTION, data, pos, end, f"SoapHeader.{name}SectionID"
        )
        if found_id != section_id:
            fail(f"SoapHeader.{name}SectionID", f"expected {section_id:#06x}, got {found_id:#06x}")
        pos += 8
        reserved_fields.append(reserved)
        if length:
            if length > (end - pos) // 2:
                fail(
                    f"SoapHeader.{name}DataLength",
                    f"{length} WCHARs, only {end - pos} bytes remain before PacketSize",
                )
            strings.append(decode_utf16z(data[pos : pos + 2 * length], f"SoapHeader.{name}"))
            pos += 2 * length
        else:
            strings.append(None)
    padded_end = pos + (-(pos - start) % 4)
    need(pos, padded_end - pos, end, "SoapHeader padding")
    header = _new.SoapHeader(
        header=strings[0],
        body=strings[1],
        reserved=reserved_fields[0],
        reserved1=reserved_fields[1],
        padding=carried_padding(data, pos, padded_end),
    )
    return header, padded_end


def _multi_queue_header(data: bytes, pos: int, end: int) -> tuple[MultiQueueFormatHeader, int]:
    lists: list[MqfAddressHeader] = []
    for header_id, name, _attribute in MQF_LISTS:
        field = f"MultiQueueFormatHeader.{name}"
        size, found_id, reserved, count = read_fixed(fixed.MQF_ADDRESS, data, pos, end, field)
        if found_id != header_id:
            fail(f"{field}.HeaderID", f"expected {header_id:#06x}, got {found_id:#06x}")
        if size < 12:
            fail(f"{field}.HeaderSize", f"{size} is smaller than the 12-byte header")
        padded = size + (-size % 4)
        need(pos, padded, end, field)
        lists.append(
            _new.MqfAddressHeader(
                element_count=count,
                format_names=data[pos + 12 : pos + size],
                reserved=reserved,
                padding=carried_padding(data, pos + size, pos + padded),
            )
        )
        pos += padded
    field = "MultiQueueFormatHeader.Signature"
    found_id, reserved, size = read_fixed(fixed.MQF_SIGNATURE, data, pos, end, field)
    if found_id != MqfHeaderId.SIGNATURE:
        fail(f"{field}.ID", f"expected {MqfHeaderId.SIGNATURE:#06x}, got {found_id:#06x}")
    pos += 8
    padded = size + (-size % 4)
    need(pos, padded, end, field)
    signature = _new.MqfSignatureHeader(
        signature=data[pos : pos + size],
        reserved=reserved,
        padding=carried_padding(data, pos + size, pos + padded),
    )
    pos += padded
    header = _new.MultiQueueFormatHeader(
        destination=lists[0], admin=lists[1], response=lists[2], signature=signature
    )
    return header, pos
