"""construct definitions of the MSMQ session packets: the declarative layouts.

These Structs are the written-down form of [MS-MQMQ] §2.2.19-§2.2.20 and
[MS-MQQB] §2.2. Field names match the attributes of the typed values.

How they are used: every fixed-size layout (the ``*_FIXED`` ones and the
wholly fixed headers) is compiled once, at import, to a ``struct.Struct`` by
:mod:`wire.msmq.fixed`; the codec reads and writes fixed parts only through
those compiled forms, so these definitions *are* the offsets and sizes the
codec uses. The variable-length parts (queue names, Label, body, security
items, SOAP strings, multi-queue lists) are read by hand-written, bounds-checked
code in :mod:`wire.msmq.parse_headers`, because their lengths come from other fields
and their padding is relative to the start of the enclosing header. The full
layouts below (``USER_MESSAGE`` and friends) describe those parts too; they are
not used to parse untrusted bytes, only as an executable specification the
tests compare the codec against.

Alignment: every header starts on a 4-byte boundary, so "padded to 4 relative
to the header start" can be written as padding over the header's own length.
Padding is kept as bytes (``Bytes``), never discarded, because peers fill it
with arbitrary data and the codec carries it.
"""

from __future__ import annotations

from typing import Any

from construct import (
    Bytes,
    Const,
    If,
    Int8ul,
    Int16ul,
    Int32ul,
    Pass,
    Struct,
    Switch,
    Tell,
    this,
)

from .constants import (
    SOAP_BODY_SECTION_ID,
    SOAP_HEADER_SECTION_ID,
    USER_AQ_SHIFT,
    USER_DQ_SHIFT,
    USER_QUEUE_TYPE_MASK,
    USER_RQ_SHIFT,
    BaseFlags,
    UserFlags,
)

#: A GUID in the [MS-DTYP] §2.3.4.2 packet form: read with ``uuid.UUID(bytes_le=...)``.
Guid = Bytes(16)


def _pad4(length: int) -> int:
    return -length % 4


# --- fixed-size layouts, compiled to struct.Struct -------------------------------------------

#: BaseHeader, 16 bytes ([MS-MQMQ] §2.2.19.1).
BASE_HEADER = Struct(
    "version" / Int8ul,
    "reserved" / Int8ul,
    "flags" / Int16ul,
    "signature" / Bytes(4),
    "packet_size" / Int32ul,
    "time_to_reach_queue" / Int32ul,
)

#: InternalHeader, 4 bytes ([MS-MQQB] §2.2.1).
INTERNAL_HEADER = Struct(
    "reserved" / Int16ul,
    "flags" / Int16ul,
)

#: TxSequenceID, 8 bytes ([MS-MQMQ] §2.2.18.1.2).
TX_SEQUENCE_ID = Struct(
    "ordinal" / Int32ul,
    "timestamp" / Int32ul,
)

# The position of a message in its sequence, as the TransactionHeader, the
# OrderAck body and the FinalAck body all start it: TxSequenceID,
# TxSequenceNumber, TxPreviousSequenceNumber.
_SEQUENCE_FIELDS = (
    "sequence_id" / TX_SEQUENCE_ID,
    "sequence_number" / Int32ul,
    "previous_sequence_number" / Int32ul,
)

#: The fixed 48 bytes of the UserHeader ([MS-MQMQ] §2.2.19.2).
USER_HEADER_FIXED = Struct(
    "source_qm" / Guid,
    "destination_qm" / Guid,
    "time_to_be_received" / Int32ul,
    "sent_time" / Int32ul,
    "message_id" / Int32ul,
    "flags" / Int32ul,
)

#: The fixed 20 bytes of the TransactionHeader ([MS-MQMQ] §2.2.20.5).
TRANSACTION_HEADER_FIXED = Struct("flags" / Int32ul, *_SEQUENCE_FIELDS)

#: The fixed 16 bytes of the SecurityHeader ([MS-MQMQ] §2.2.20.6).
SECURITY_HEADER_FIXED = Struct(
    "flags" / Int16ul,
    "sender_id_size" / Int16ul,
    "encryption_key_size" / Int16ul,
    "signature_size" / Int16ul,
    "sender_cert_size" / Int32ul,
    "provider_info_size" / Int32ul,
)

#: The fixed 56 bytes of the MessagePropertiesHeader ([MS-MQMQ] §2.2.19.3).
MESSAGE_PROPERTIES_FIXED = Struct(
    "flags" / Int8ul,
    "label_length" / Int8ul,
    "message_class" / Int16ul,
    "correlation_id" / Bytes(20),
    "body_type" / Int32ul,
    "application_tag" / Int32ul,
    "message_size" / Int32ul,
    "allocation_body_size" / Int32ul,
    "privacy_level" / Int32ul,
    "hash_algorithm" / Int32ul,
    "encryption_algorithm" / Int32ul,
    "extension_size" / Int32ul,
)

#: SessionHeader, 16 bytes ([MS-MQMQ] §2.2.20.4).
SESSION_HEADER = Struct(
    "ack_sequence_number" / Int16ul,
    "recoverable_ack_sequence_number" / Int16ul,
    "recoverable_ack_flags" / Int32ul,
    "user_message_sequence_number" / Int16ul,
    "recoverable_message_sequence_number" / Int16ul,
    "window_size" / Int16ul,
    "reserved" / Int16ul,
)

#: The fixed 4 bytes of the DebugHeader ([MS-MQMQ] §2.2.20.8).
DEBUG_HEADER_FIXED = Struct(
    "flags" / Int16ul,
    "reserved" / Int16ul,
)

#: One section prefix of the SoapHeader ([MS-MQMQ] §2.2.20.7): id, reserved, WCHAR count.
SOAP_SECTION_FIXED = Struct(
    "section_id" / Int16ul,
    "reserved" / Int16ul,
    "length" / Int32ul,
)

#: The fixed 12 bytes of an MQFAddressHeader ([MS-MQMQ] §2.2.20.2).
MQF_ADDRESS_HEADER_FIXED = Struct(
    "header_size" / Int32ul,
    "header_id" / Int16ul,
    "reserved" / Int16ul,
    "element_count" / Int32ul,
)

#: The fixed 8 bytes of the MQFSignatureHeader ([MS-MQMQ] §2.2.20.3).
MQF_SIGNATURE_HEADER_FIXED = Struct(
    "header_id" / Int16ul,
    "reserved" / Int16ul,
    "size" / Int32ul,
)

#: EstablishConnectionHeader, 552 bytes ([MS-MQQB] §2.2.3.1).
ESTABLISH_CONNECTION_HEADER = Struct(
    "client_qm" / Guid,
    "server_qm" / Guid,
    "timestamp" / Int32ul,
    "operating_system" / Int16ul,
    "reserved" / Int16ul,
    "padding" / Bytes(512),
)

#: ConnectionParametersHeader, 12 bytes ([MS-MQQB] §2.2.2.1).
CONNECTION_PARAMETERS_HEADER = Struct(
    "recoverable_ack_timeout" / Int32ul,
    "ack_timeout" / Int32ul,
    "reserved" / Int16ul,
    "window_size" / Int16ul,
)

#: OrderAck body, 36 bytes ([MS-MQQB] §2.2.4.1).
ORDER_ACK_BODY = Struct(*_SEQUENCE_FIELDS, "reserved" / Bytes(20))

#: FinalAck body, 36 bytes ([MS-MQQB] §2.2.5.1).
FINAL_ACK_BODY = Struct(
    *_SEQUENCE_FIELDS,
    "acked_source_qm" / Guid,
    "acked_message_id" / Int32ul,
)

#: Ping packet, 24 bytes, sent over UDP port 3527 with no BaseHeader ([MS-MQQB] §2.2.7).
PING = Struct(
    "flags" / Int16ul,
    "signature" / Int16ul,
    "cookie" / Int32ul,
    "qm" / Guid,
)

# --- whole headers and packets: the executable specification ---------------------------------

#: DirectQueueFormatName ([MS-MQMQ] §2.2.18.1.5.2): Count is bytes including the NUL; the
#: end is padded to 4 relative to the header start, and every queue field starts aligned.
DIRECT_QUEUE_FORMAT_NAME = Struct(
    "count" / Int16ul,
    "name" / Bytes(this.count),
    "padding" / Bytes(lambda ctx: _pad4(2 + ctx.count)),
)

#: PrivateQueueFormatName ([MS-MQMQ] §2.2.18.1.7.2).
PRIVATE_QUEUE_FORMAT_NAME = Struct(
    "qm" / Guid,
    "number" / Int32ul,
)


def _queue_field(shift: int) -> Any:
    """The queue field selected by the 3-bit code at ``shift`` in UserHeader.Flags."""
    return Switch(
        lambda ctx: (ctx.flags >> shift) & USER_QUEUE_TYPE_MASK,
        {
            2: Int32ul,
            3: Int32ul,
            4: Int32ul,
            5: Guid,
            6: PRIVATE_QUEUE_FORMAT_NAME,
            7: DIRECT_QUEUE_FORMAT_NAME,
        },
        default=Pass,
    )


#: UserHeader ([MS-MQMQ] §2.2.19.2).
USER_HEADER = Struct(
    *USER_HEADER_FIXED.subcons,
    "destination" / _queue_field(USER_DQ_SHIFT),
    "admin" / _queue_field(USER_AQ_SHIFT),
    "response" / _queue_field(USER_RQ_SHIFT),
    "connector_type" / If(lambda ctx: ctx.flags & UserFlags.CONNECTOR, Guid),
)

#: TransactionHeader ([MS-MQMQ] §2.2.20.5).
TRANSACTION_HEADER = Struct(
    *TRANSACTION_HEADER_FIXED.subcons,
    "connector_qm" / If(lambda ctx: ctx.flags & 1, Guid),
)

#: The five SecurityHeader items, in wire order; each has a ``<item>_size`` field.
SECURITY_ITEMS = ("sender_id", "encryption_key", "signature", "sender_cert", "provider_info")


def _padded_item(name: str) -> tuple[Any, Any]:
    """The item ``name`` of ``<name>_size`` bytes, then ``<name>_padding`` up to a multiple of 4."""
    size = f"{name}_size"
    return name / Bytes(this[size]), f"{name}_padding" / Bytes(lambda ctx: _pad4(ctx[size]))


#: SecurityHeader ([MS-MQMQ] §2.2.20.6): five items, each padded to 4.
SECURITY_HEADER = Struct(
    *SECURITY_HEADER_FIXED.subcons,
    *(field for item in SECURITY_ITEMS for field in _padded_item(item)),
)

#: MessagePropertiesHeader ([MS-MQMQ] §2.2.19.3): Label, then ExtensionData and body
#: unaligned, then padding of the whole header to a multiple of 4.
MESSAGE_PROPERTIES_HEADER = Struct(
    *MESSAGE_PROPERTIES_FIXED.subcons,
    "label" / Bytes(this.label_length * 2),
    "extension" / Bytes(this.extension_size),
    "body" / Bytes(this.message_size),
    "padding"
    / Bytes(lambda ctx: _pad4(2 * ctx.label_length + ctx.extension_size + ctx.message_size)),
)

#: DebugHeader ([MS-MQMQ] §2.2.20.8).
DEBUG_HEADER = Struct(
    *DEBUG_HEADER_FIXED.subcons,
    "queue" / If(lambda ctx: ctx.flags & 3 == 1, Guid),
)


def _soap_section(name: str, section_id: int, reserved: str) -> tuple[Any, ...]:
    """One SoapHeader section: its id, a reserved u16, the WCHAR count, the string."""
    length = f"{name}_length"
    return (
        f"{name}_section_id" / Const(section_id, Int16ul),
        reserved / Int16ul,
        length / Int32ul,
        name / Bytes(this[length] * 2),
    )


#: SoapHeader ([MS-MQMQ] §2.2.20.7); lengths count WCHARs including the NUL.
SOAP_HEADER = Struct(
    *_soap_section("header", SOAP_HEADER_SECTION_ID, "reserved"),
    *_soap_section("body", SOAP_BODY_SECTION_ID, "reserved1"),
    "padding" / Bytes(lambda ctx: _pad4(2 * ctx.header_length + 2 * ctx.body_length)),
)

#: MQFAddressHeader ([MS-MQMQ] §2.2.20.2); HeaderSize counts the fixed part and the list.
MQF_ADDRESS_HEADER = Struct(
    *MQF_ADDRESS_HEADER_FIXED.subcons,
    "format_names" / Bytes(this.header_size - 12),
    "padding" / Bytes(lambda ctx: _pad4(ctx.header_size)),
)

#: MQFSignatureHeader ([MS-MQMQ] §2.2.20.3).
MQF_SIGNATURE_HEADER = Struct(
    *MQF_SIGNATURE_HEADER_FIXED.subcons,
    "signature" / Bytes(this.size),
    "padding" / Bytes(lambda ctx: _pad4(ctx.size)),
)

#: MultiQueueFormatHeader ([MS-MQMQ] §2.2.20.1).
MULTI_QUEUE_FORMAT_HEADER = Struct(
    "destination" / MQF_ADDRESS_HEADER,
    "admin" / MQF_ADDRESS_HEADER,
    "response" / MQF_ADDRESS_HEADER,
    "signature" / MQF_SIGNATURE_HEADER,
)


def _present_if(header: str, flag: int, layout: Any) -> Any:
    """``layout`` where the ``flag`` bit of the already-read ``header``'s flags is set."""
    return If(lambda ctx: ctx[header].flags & flag, layout)


#: UserMessage packet ([MS-MQMQ] §2.2.20). PacketSize excludes a piggy-backed SessionHeader.
USER_MESSAGE = Struct(
    "base" / BASE_HEADER,
    "user" / USER_HEADER,
    "transaction" / _present_if("user", UserFlags.TRANSACTION, TRANSACTION_HEADER),
    "security" / _present_if("user", UserFlags.SECURITY, SECURITY_HEADER),
    "properties" / MESSAGE_PROPERTIES_HEADER,
    "debug" / _present_if("base", BaseFlags.DEBUG, DEBUG_HEADER),
    "soap" / _present_if("user", UserFlags.SOAP, SOAP_HEADER),
    "multi_queue" / _present_if("user", UserFlags.MULTI_QUEUE, MULTI_QUEUE_FORMAT_HEADER),
    "end_of_headers" / Tell,
    "trailer" / Bytes(lambda ctx: ctx.base.packet_size - ctx.end_of_headers),
    "session" / _present_if("base", BaseFlags.SESSION, SESSION_HEADER),
)


def _internal_packet(name: str, header: Any) -> Any:
    """An internal packet: BaseHeader, InternalHeader, then its own ``header`` as ``name``."""
    return Struct("base" / BASE_HEADER, "internal" / INTERNAL_HEADER, name / header)


#: EstablishConnection packet ([MS-MQQB] §2.2.3).
ESTABLISH_CONNECTION = _internal_packet("header", ESTABLISH_CONNECTION_HEADER)

#: ConnectionParameters packet ([MS-MQQB] §2.2.2).
CONNECTION_PARAMETERS = _internal_packet("header", CONNECTION_PARAMETERS_HEADER)

#: SessionAck packet ([MS-MQQB] §2.2.6); here PacketSize counts the SessionHeader.
SESSION_ACK = _internal_packet("session", SESSION_HEADER)
