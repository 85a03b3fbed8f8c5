"""Building MSMQ session packets: values to bytes.

Theory of operation
-------------------
The builder is the parser's mirror. For a user message it encodes the headers
after the BaseHeader in wire order, computing as it goes every size, count and
presence bit the values leave out (LabelLength, the DQ/AQ/RQ codes, SH, TH,
...), then prepends the BaseHeader once PacketSize is known; a SessionHeader,
if any, goes after the PacketSize bytes. Fixed parts are packed with the
``struct.Struct`` forms of the construct layouts.

Validation happens here rather than in the value constructors: a value that
cannot be encoded raises :class:`LocalProtocolError` naming the field. Checks
that ``struct`` would not make (it silently pads or truncates ``Ns`` fields,
and knows nothing of bit fields or carried-flag masks) are explicit; integer
ranges are left to ``struct`` and its error is translated, with the field
named, in one place: ``FixedLayout.build`` in :mod:`wire.msmq.fixed`.
Anything the parser accepts, the builder accepts and reproduces byte for byte.
"""

from __future__ import annotations

import uuid
from typing import NoReturn

from ..protocol_errors import LocalProtocolError
from .acks import FinalAck, OrderAck
from .constants import (
    ADMIN_QUEUE_TYPES,
    BASE_CARRIED_MASK,
    BASE_PRIORITY_MASK,
    CONNECTION_PARAMETERS_SIZE,
    DEBUG_QUEUE_TYPE_MASK,
    DESTINATION_QUEUE_TYPES,
    ESTABLISH_CONNECTION_PADDING_SIZE,
    ESTABLISH_CONNECTION_SIZE,
    INTERNAL_PACKET_TYPE_MASK,
    MAX_LABEL_LENGTH,
    MAX_PACKET_SIZE,
    RESPONSE_QUEUE_TYPES,
    SESSION_ACK_SIZE,
    SIGNATURE,
    SOAP_BODY_SECTION_ID,
    SOAP_HEADER_SECTION_ID,
    TRANSACTION_CARRIED_MASK,
    TRANSACTION_ID_SHIFT,
    USER_AQ_SHIFT,
    USER_CARRIED_MASK,
    USER_DELIVERY_SHIFT,
    USER_DQ_SHIFT,
    USER_HOP_COUNT_MASK,
    USER_RQ_SHIFT,
    VERSION,
    DebugQueueType,
    MqfHeaderId,
    PacketType,
    QueueFormatType,
)
from .fixed import (
    BASE,
    CONNECTION_PARAMETERS,
    DEBUG,
    ESTABLISH_CONNECTION,
    GUID_U32,
    INTERNAL,
    MQF_ADDRESS,
    MQF_SIGNATURE,
    PROPERTIES,
    SECURITY,
    SESSION,
    SOAP_SECTION,
    TRANSACTION,
    U16,
    U32,
    USER,
)
from .headers import (
    BaseHeader,
    DebugHeader,
    InternalHeader,
    MessagePropertiesHeader,
    MqfAddressHeader,
    MultiQueueFormatHeader,
    SecurityHeader,
    SessionHeader,
    SoapHeader,
    TransactionHeader,
)
from .packets import (
    ConnectionParameters,
    EstablishConnection,
    Packet,
    SessionAck,
    UserMessage,
)
from .queues import (
    DirectQueue,
    PrivateQueue,
    PrivateQueueId,
    PublicQueue,
    SameAsAdminQueue,
)
from .tables import (
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
from .text import encode_utf16z


def _fail(field: str, message: str) -> NoReturn:
    raise LocalProtocolError(message, field=field)


# Memos of encodings that repeat on a session: GUIDs (keyed by their 128-bit
# int, which hashes in C, unlike a UUID) and direct queue names. Only valid
# encodings of short names are stored; the memos are cleared when full.
_MEMO_NAME_LIMIT = 256
_GUID_MEMO: dict[int, bytes] = {}
_DIRECT_MEMO: dict[tuple[str, bytes], bytes] = {}


def _guid(value: uuid.UUID, field: str) -> bytes:
    if not isinstance(value, uuid.UUID):
        _fail(field, f"expected a uuid.UUID, got {type(value).__name__}")
    number = value.int
    encoded = _GUID_MEMO.get(number)
    if encoded is None:
        encoded = remember(_GUID_MEMO, number, value.bytes_le)
    return encoded


def _carried(value: int, mask: int, field: str) -> int:
    """``value`` as a plain int, checked to hold only the bits a value may carry."""
    if not isinstance(value, int) or value & ~mask:
        _fail(field, f"{value!r} has bits outside {mask:#x} (derived or belonging to other fields)")
    return int(value)  # IntFlag arithmetic is slow; the rest of the build uses plain ints


def _check_range(value: int, high: int, field: str) -> None:
    if not isinstance(value, int) or not 0 <= value <= high:
        _fail(field, f"must be an integer in 0..{high:#x}, got {value!r:.40}")


def _check_bytes(value: bytes, field: str) -> None:
    if not isinstance(value, bytes | bytearray | memoryview):
        _fail(field, f"expected bytes, got {type(value).__name__}")


def _padding(padding: bytes, size: int, field: str) -> bytes:
    """The padding to write: zeros when ``padding`` is empty, else exactly ``padding``."""
    if not padding:
        return bytes(size)
    _check_bytes(padding, field)
    if len(padding) != size:
        _fail(field, f"padding must be empty (zeros) or exactly {size} bytes, got {len(padding)}")
    return bytes(padding)


def build_packet(packet: Packet | OrderAck | FinalAck) -> bytes:
    """Encode a packet value.

    Args:
        packet: an :class:`EstablishConnection`, :class:`ConnectionParameters`,
            :class:`SessionAck` or :class:`UserMessage`, or an :class:`OrderAck`
            or :class:`FinalAck`, which are built as the user messages they stand for.

    Returns:
        The packet's bytes, ready to send (including a piggy-backed SessionHeader).

    Raises:
        LocalProtocolError: the value cannot be encoded; the error names the field.
    """
    kind = type(packet)
    if kind is UserMessage:
        return _user_message(packet)  # type: ignore[arg-type]
    if kind is SessionAck:
        return _session_ack(packet)  # type: ignore[arg-type]
    if kind is ConnectionParameters:
        return _connection_parameters(packet)  # type: ignore[arg-type]
    if kind is EstablishConnection:
        return _establish_connection(packet)  # type: ignore[arg-type]
    if isinstance(packet, OrderAck | FinalAck):
        return _user_message(packet.to_message())
    _fail("packet", f"not a packet value: {kind.__name__}")


# --- internal packets ---------------------------------------------------------------------------


def _base(base: BaseHeader, structural: int, size: int) -> bytes:
    _check_range(base.priority, BASE_PRIORITY_MASK, "BaseHeader.priority")
    flags = base.priority | _carried(base.flags, BASE_CARRIED_MASK, "BaseHeader.flags")
    flags |= structural
    return BASE.build(VERSION, base.reserved, flags, SIGNATURE, size, base.time_to_reach_queue)


def _internal(internal: InternalHeader, packet_type: PacketType) -> bytes:
    flags = _carried(internal.flags, 0xFFFF & ~INTERNAL_PACKET_TYPE_MASK, "InternalHeader.flags")
    if packet_type == PacketType.SESSION_ACK and flags & INTERNAL_CS:
        _fail(
            "InternalHeader.flags",
            "CS is only allowed on EstablishConnection and ConnectionParameters",
        )
    return INTERNAL.build(internal.reserved, flags | packet_type)


def _session_header(session: SessionHeader) -> bytes:
    return SESSION.build_from(session)


def _session_ack(packet: SessionAck) -> bytes:
    return b"".join(
        (
            _base(packet.base, BASE_IN | BASE_SH, SESSION_ACK_SIZE),
            _internal(packet.internal, PacketType.SESSION_ACK),
            _session_header(packet.session),
        )
    )


def _connection_parameters(packet: ConnectionParameters) -> bytes:
    return b"".join(
        (
            _base(packet.base, BASE_IN, CONNECTION_PARAMETERS_SIZE),
            _internal(packet.internal, PacketType.CONNECTION_PARAMETERS),
            CONNECTION_PARAMETERS.build_from(packet),
        )
    )


def _establish_connection(packet: EstablishConnection) -> bytes:
    _check_bytes(packet.padding, "EstablishConnection.padding")
    if len(packet.padding) != ESTABLISH_CONNECTION_PADDING_SIZE:
        _fail("EstablishConnection.padding", f"must be 512 bytes, got {len(packet.padding)}")
    return b"".join(
        (
            _base(packet.base, BASE_IN, ESTABLISH_CONNECTION_SIZE),
            _internal(packet.internal, PacketType.ESTABLISH_CONNECTION),
            ESTABLISH_CONNECTION.build(
                _guid(packet.client_qm, "EstablishConnection.client_qm"),
                _guid(packet.server_qm, "EstablishConnection.server_qm"),
                packet.timestamp,
                packet.operating_system,
                packet.reserved,
                bytes(packet.padding),
            ),
        )
    )


# --- user messages ------------------------------------------------------------------------------


def _user_message(message: UserMessage) -> bytes:
    parts: list[bytes] = [b""]  # the BaseHeader goes first, once PacketSize is known
    _user_header(message, parts)
    if message.transaction is not None:
        _transaction_header(message.transaction, parts)
    if message.security is not None:
        _security_header(message.security, parts)
    _properties_header(message.properties, parts)
    base_structural = 0
    if message.debug is not None:
        base_structural |= BASE_DH
        _debug_header(message.debug, parts)
    if message.soap is not None:
        _soap_header(message.soap, parts)
    if message.multi_queue is not None:
        _multi_queue_header(message.multi_queue, parts)
    if message.trailer:
        _check_bytes(message.trailer, "UserMessage.trailer")
        parts.append(bytes(message.trailer))
    size = sum(map(len, parts)) + 16
    if size > MAX_PACKET_SIZE:
        _fail("UserMessage", f"PacketSize {size} is over the limit of {MAX_PACKET_SIZE}")
    if message.session is not None:
        base_structural |= BASE_SH
        parts.append(_session_header(message.session))
    parts[0] = _base(message.base, base_structural, size)
    return b"".join(parts)


def _user_header(message: UserMessage, parts: list[bytes]) -> None:
    user = message.user
    carried = _carried(user.flags, USER_CARRIED_MASK, "UserHeader.flags")
    _check_range(user.hop_count, USER_HOP_COUNT_MASK, "UserHeader.hop_count")
    _check_range(user.delivery, 3, "UserHeader.delivery")
    queues: list[bytes] = []
    dq = _queue(user.destination, DESTINATION_QUEUE_TYPES, "UserHeader.destination", queues)
    aq = _queue(user.admin, ADMIN_QUEUE_TYPES, "UserHeader.admin", queues)
    rq: int
    if isinstance(user.response, SameAsAdminQueue):
        rq = QueueFormatType.SAME_AS_ADMIN
    else:
        rq = _queue(user.response, RESPONSE_QUEUE_TYPES, "UserHeader.response", queues)
    flags = (
        carried
        | user.hop_count
        | (user.delivery << USER_DELIVERY_SHIFT)
        | (dq << USER_DQ_SHIFT)
        | (aq << USER_AQ_SHIFT)
        | (rq << USER_RQ_SHIFT)
        | USER_MP
    )
    if user.connector_type is not None:
        flags |= USER_CQ
        queues.append(_guid(user.connector_type, "UserHeader.connector_type"))
    if message.transaction is not None:
        flags |= USER_TH
    if message.security is not None:
        flags |= USER_SH
    if message.soap is not None:
        flags |= USER_HH
    if message.multi_queue is not None:
        flags |= USER_MQ
    parts.append(
        USER.build(
            _guid(user.source_qm, "UserHeader.source_qm"),
            _guid(user.destination_qm, "UserHeader.destination_qm"),
            user.time_to_be_received,
            user.sent_time,
            user.message_id,
            flags,
        )
    )
    parts.extend(queues)


def _queue(queue: object, allowed: frozenset[int], field: str, out: list[bytes]) -> int:
    """Append the encoding of ``queue`` to ``out``; return its format code.

    Every queue field starts 4-aligned relative to the UserHeader, so a direct
    name's padding depends only on its own length.
    """
    if queue is None:
        return QueueFormatType.NONE
    code: int
    encoded: bytes
    if isinstance(queue, DirectQueue):
        code = QueueFormatType.DIRECT
        key: tuple[str, bytes] | None = (queue.name, queue.padding)
        try:
            memo = _DIRECT_MEMO.get(key)  # type: ignore[arg-type]
        except TypeError:  # an unhashable name or padding: checked below, never memoised
            memo = key = None
        if memo is not None:
            encoded = memo
        else:
            raw = encode_utf16z(queue.name, field)
            if len(raw) > 0xFFFF:
                _fail(field, f"the name is {len(raw)} bytes; Count is 16 bits")
            encoded = (
                U16.pack(len(raw))
                + raw
                + _padding(queue.padding, -(2 + len(raw)) % 4, f"{field}.padding")
            )
            if key is not None and len(encoded) <= _MEMO_NAME_LIMIT:
                remember(_DIRECT_MEMO, key, encoded)
    elif isinstance(queue, PrivateQueueId):
        code = int(queue.host)
        if code not in PRIVATE_HOSTS:
            _fail(field, f"host {queue.host!r} is not a private-queue-number format")
        _check_range(queue.number, 0xFFFFFFFF, f"{field}.number")
        encoded = U32.pack(queue.number)
    elif isinstance(queue, PublicQueue):
        code = QueueFormatType.PUBLIC
        encoded = _guid(queue.queue_id, f"{field}.queue_id")
    elif isinstance(queue, PrivateQueue):
        code = QueueFormatType.PRIVATE
        _check_range(queue.number, 0xFFFFFFFF, f"{field}.number")
        encoded = GUID_U32.pack(_guid(queue.qm, f"{field}.qm"), queue.number)
    else:
        _fail(field, f"not a queue address: {queue!r:.60}")
    if code not in allowed:
        _fail(field, f"{QueueFormatType(code).name} is not allowed here")
    out.append(encoded)
    return code


def _transaction_header(header: TransactionHeader, parts: list[bytes]) -> None:
    flags = _carried(header.flags, TRANSACTION_CARRIED_MASK, "TransactionHeader.flags")
    _check_range(header.transaction_id, 0xFFFFF, "TransactionHeader.transaction_id")
    flags |= header.transaction_id << TRANSACTION_ID_SHIFT
    if header.connector_qm is not None:
        flags |= TRANSACTION_CG
    parts.append(
        TRANSACTION.build(
            flags,
            header.sequence_id.ordinal,
            header.sequence_id.timestamp,
            header.sequence_number,
            header.previous_sequence_number,
        )
    )
    if header.connector_qm is not None:
        parts.append(_guid(header.connector_qm, "TransactionHeader.connector_qm"))


def _security_header(header: SecurityHeader, parts: list[bytes]) -> None:
    items = (
        header.sender_id,
        header.encryption_key,
        header.signature,
        header.sender_cert,
        header.provider_info,
    )
    for item in items:
        _check_bytes(item, "SecurityHeader")
    pad_sizes = [-len(item) % 4 for item in items]
    padding = _padding(header.padding, sum(pad_sizes), "SecurityHeader.padding")
    parts.append(SECURITY.build(header.flags, *map(len, items)))
    offset = 0
    for item, pad in zip(items, pad_sizes, strict=True):
        if item:
            parts.append(item if type(item) is bytes else bytes(item))
        if pad:
            parts.append(padding[offset : offset + pad])
            offset += pad


def _properties_header(header: MessagePropertiesHeader, parts: list[bytes]) -> None:
    label = b""
    if header.label is not None:
        label = encode_utf16z(header.label, "MessagePropertiesHeader.label")
        if len(label) > 2 * MAX_LABEL_LENGTH:
            _fail(
                "MessagePropertiesHeader.label",
                f"{len(label) // 2} WCHARs with the NUL; at most {MAX_LABEL_LENGTH}",
            )
    body = header.body
    extension = header.extension
    _check_bytes(body, "MessagePropertiesHeader.body")
    _check_bytes(extension, "MessagePropertiesHeader.extension")
    correlation_id = header.correlation_id
    if not isinstance(correlation_id, bytes) or len(correlation_id) != 20:
        _fail("MessagePropertiesHeader.correlation_id", f"must be 20 bytes: {correlation_id!r:.60}")
    allocation = header.allocation_body_size
    parts.append(
        PROPERTIES.build(
            header.flags,
            len(label) // 2,
            header.message_class,
            correlation_id,
            header.body_type,
            header.application_tag,
            len(body),
            len(body) if allocation is None else allocation,
            header.privacy_level,
            header.hash_algorithm,
            header.encryption_algorithm,
            len(extension),
        )
    )
    if label:
        parts.append(label)
    if extension:
        parts.append(bytes(extension))
    if body:
        parts.append(body if type(body) is bytes else bytes(body))
    pad = -(len(label) + len(extension) + len(body)) % 4
    if pad or header.padding:
        parts.append(_padding(header.padding, pad, "MessagePropertiesHeader.padding"))


def _debug_header(header: DebugHeader, parts: list[bytes]) -> None:
    flags = _carried(header.flags, 0xFFFF & ~DEBUG_QUEUE_TYPE_MASK, "DebugHeader.flags")
    if header.queue is None:
        parts.append(DEBUG.build(flags | DebugQueueType.NONE, header.reserved))
    else:
        parts.append(DEBUG.build(flags | DebugQueueType.PUBLIC, header.reserved))
        parts.append(_guid(header.queue, "DebugHeader.queue"))


def _soap_header(header: SoapHeader, parts: list[bytes]) -> None:
    length = 0
    sections = (
        (SOAP_HEADER_SECTION_ID, header.reserved, header.header, "SoapHeader.header"),
        (SOAP_BODY_SECTION_ID, header.reserved1, header.body, "SoapHeader.body"),
    )
    for section_id, reserved, text, field in sections:
        raw = b"" if text is None else encode_utf16z(text, field)
        parts.append(SOAP_SECTION.build(section_id, reserved, len(raw) // 2))
        parts.append(raw)
        length += 8 + len(raw)
    pad = -length % 4
    if pad or header.padding:
        parts.append(_padding(header.padding, pad, "SoapHeader.padding"))


def _multi_queue_header(header: MultiQueueFormatHeader, parts: list[bytes]) -> None:
    for header_id, name, attribute in MQF_LISTS:
        address: MqfAddressHeader = getattr(header, attribute)
        field = f"MultiQueueFormatHeader.{name}"
        _check_bytes(address.format_names, f"{field}.format_names")
        size = 12 + len(address.format_names)
        parts.append(MQF_ADDRESS.build(size, header_id, address.reserved, address.element_count))
        parts.append(bytes(address.format_names))
        parts.append(_padding(address.padding, -size % 4, f"{field}.padding"))
    signature = header.signature
    field = "MultiQueueFormatHeader.Signature"
    _check_bytes(signature.signature, f"{field}.signature")
    parts.append(
        MQF_SIGNATURE.build(MqfHeaderId.SIGNATURE, signature.reserved, len(signature.signature))
    )
    parts.append(bytes(signature.signature))
    parts.append(_padding(signature.padding, -len(signature.signature) % 4, f"{field}.padding"))
