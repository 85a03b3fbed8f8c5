"""Parsing the headers of an MSMQ user message, after its UserHeader's fixed part.

Theory of operation
-------------------
:mod:`wire.msmq.parse` frames a packet and reads its BaseHeader and the
UserHeader's fixed part; the functions here read the rest of a user message,
one header at a time. Each takes the packet's bytes, the position where its
part starts and the limit every header must end before (PacketSize), and
returns the value and the position after it (padding included). The header
readers are called in wire order and only when the presence bits say so.

Every read is bounds-checked through :mod:`wire.msmq.reading`; every count or
size from the wire is compared with the bytes that remain before anything is
sliced or decoded; every code that selects a layout (the queue format, QT,
section ids, MQF header ids) is checked before use. A failure is a
:class:`RemoteProtocolError` naming the field.

Direct queue names and labels are decoded through small memos keyed by their
bytes: a session sees the same few of them over and over, and decoding them is
comparatively slow.
"""

from __future__ import annotations

from .constants import (
    DEBUG_QUEUE_TYPE_MASK,
    MAX_LABEL_LENGTH,
    SOAP_BODY_SECTION_ID,
    SOAP_HEADER_SECTION_ID,
    TRANSACTION_CARRIED_MASK,
    TRANSACTION_ID_MASK,
    TRANSACTION_ID_SHIFT,
    DebugQueueType,
    MqfHeaderId,
    QueueFormatType,
)
from .fixed import (
    DEBUG,
    GUID_U32,
    MQF_ADDRESS,
    MQF_SIGNATURE,
    PROPERTIES,
    SECURITY,
    SOAP_SECTION,
    TRANSACTION,
    U16,
    U32,
)
from .headers import (
    DebugHeader,
    MessagePropertiesHeader,
    MqfAddressHeader,
    MultiQueueFormatHeader,
    SecurityHeader,
    SoapHeader,
    TransactionHeader,
)
from .queues import DirectQueue, QueueAddress
from .reading import carried_padding, decode_guid, fail, fail_past_end, need, read_fixed, read_guid
from .tables import MQF_LISTS, PRIVATE_HOSTS, TRANSACTION_CG, remember
from .text import decode_utf16z
from .trusted import new

__all__ = [
    "read_debug_header",
    "read_multi_queue_header",
    "read_properties_header",
    "read_queue",
    "read_security_header",
    "read_soap_header",
    "read_transaction_header",
]

_SECURITY_FIELDS = tuple(
    f"SecurityHeader.{name}"
    for name in ("SecurityID", "EncryptionKey", "Signature", "SenderCert", "ProviderInfo")
)

# Memos of immutable values decoded from bytes that repeat on a session: direct
# queue names and labels (GUIDs have theirs in :mod:`wire.msmq.reading`). Only
# valid results are stored; direct names longer than _MEMO_KEY_LIMIT are not
# stored, and a memo is cleared when it holds MEMO_LIMIT entries (see
# :mod:`wire.msmq.tables`).
_MEMO_KEY_LIMIT = 512
_DIRECT_MEMO: dict[bytes, DirectQueue] = {}
_LABEL_MEMO: dict[bytes, str] = {}


def read_queue(data: bytes, pos: int, end: int, code: int, field: str) -> tuple[QueueAddress, int]:
    """Read the queue field selected by ``code``; ``pos`` is 4-aligned in its header."""
    if code == QueueFormatType.DIRECT:
        need(pos, 2, end, field)
        (count,) = U16.unpack_from(data, pos)
        padded_end = pos + 2 + count + (-(2 + count) % 4)
        if padded_end > end:
            need(pos, padded_end - pos, end, field)
        raw = data[pos:padded_end]
        queue = _DIRECT_MEMO.get(raw)
        if queue is None:
            if count < 2 or count & 1:
                fail(field, f"Count {count} is not a whole NUL-terminated UTF-16 string")
            name = decode_utf16z(raw[2 : 2 + count], field)
            queue = new.DirectQueue(name=name, padding=carried_padding(raw, 2 + count, len(raw)))
            if len(raw) <= _MEMO_KEY_LIMIT:
                remember(_DIRECT_MEMO, raw, queue)
        return queue, padded_end
    if code == QueueFormatType.PUBLIC:
        return new.PublicQueue(queue_id=read_guid(data, pos, end, field)), pos + 16
    if code == QueueFormatType.PRIVATE:
        need(pos, 20, end, field)
        qm, number = GUID_U32.unpack_from(data, pos)
        return new.PrivateQueue(qm=decode_guid(qm), number=number), pos + 20
    # 2, 3 or 4: the callers have ruled out every other code.
    need(pos, 4, end, field)
    (number,) = U32.unpack_from(data, pos)
    return new.PrivateQueueId(number=number, host=PRIVATE_HOSTS[code]), pos + 4


def read_transaction_header(data: bytes, pos: int, end: int) -> tuple[TransactionHeader, int]:
    flags, ordinal, timestamp, number, previous = read_fixed(TRANSACTION, data, pos, end)
    pos += 20
    connector_qm = None
    if flags & TRANSACTION_CG:
        connector_qm = read_guid(data, pos, end, "TransactionHeader.ConnectorQMGuid")
        pos += 16
    header = new.TransactionHeader(
        flags=flags & TRANSACTION_CARRIED_MASK,
        transaction_id=(flags & TRANSACTION_ID_MASK) >> TRANSACTION_ID_SHIFT,
        sequence_id=new.TxSequenceId(ordinal=ordinal, timestamp=timestamp),
        sequence_number=number,
        previous_sequence_number=previous,
        connector_qm=connector_qm,
    )
    return header, pos


def read_security_header(data: bytes, pos: int, end: int) -> tuple[SecurityHeader, int]:
    flags, *sizes = read_fixed(SECURITY, data, pos, end)
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
    header = new.SecurityHeader(
        flags=flags,
        sender_id=items[0],
        encryption_key=items[1],
        signature=items[2],
        sender_cert=items[3],
        provider_info=items[4],
        padding=padding,
    )
    return header, pos


def read_properties_header(data: bytes, pos: int, end: int) -> tuple[MessagePropertiesHeader, int]:
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
    ) = read_fixed(PROPERTIES, data, pos, end)
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
    header = new.MessagePropertiesHeader(
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


def read_debug_header(data: bytes, pos: int, end: int) -> tuple[DebugHeader, int]:
    flags, reserved = read_fixed(DEBUG, data, pos, end)
    pos += 4
    queue_type = flags & DEBUG_QUEUE_TYPE_MASK
    queue = None
    if queue_type == DebugQueueType.PUBLIC:
        queue = read_guid(data, pos, end, "DebugHeader.QueueIdentifier")
        pos += 16
    elif queue_type != DebugQueueType.NONE:
        fail("DebugHeader.Flags", f"QT={queue_type} is not a queue type")
    header = new.DebugHeader(flags=flags & ~DEBUG_QUEUE_TYPE_MASK, reserved=reserved, queue=queue)
    return header, pos


def read_soap_header(data: bytes, pos: int, end: int) -> tuple[SoapHeader, int]:
    start = pos
    strings: list[str | None] = []
    reserved_fields: list[int] = []
    for section_id, name in ((SOAP_HEADER_SECTION_ID, "Header"), (SOAP_BODY_SECTION_ID, "Body")):
        found_id, reserved, length = read_fixed(
            SOAP_SECTION, data, pos, end, f"SoapHeader.{name}SectionID"
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
    header = new.SoapHeader(
        header=strings[0],
        body=strings[1],
        reserved=reserved_fields[0],
        reserved1=reserved_fields[1],
        padding=carried_padding(data, pos, padded_end),
    )
    return header, padded_end


def read_multi_queue_header(data: bytes, pos: int, end: int) -> tuple[MultiQueueFormatHeader, int]:
    lists: list[MqfAddressHeader] = []
    for header_id, name, _attribute in MQF_LISTS:
        field = f"MultiQueueFormatHeader.{name}"
        size, found_id, reserved, count = read_fixed(MQF_ADDRESS, data, pos, end, field)
        if found_id != header_id:
            fail(f"{field}.HeaderID", f"expected {header_id:#06x}, got {found_id:#06x}")
        if size < 12:
            fail(f"{field}.HeaderSize", f"{size} is smaller than the 12-byte header")
        padded = size + (-size % 4)
        need(pos, padded, end, field)
        lists.append(
            new.MqfAddressHeader(
                element_count=count,
                format_names=data[pos + 12 : pos + size],
                reserved=reserved,
                padding=carried_padding(data, pos + size, pos + padded),
            )
        )
        pos += padded
    field = "MultiQueueFormatHeader.Signature"
    found_id, reserved, size = read_fixed(MQF_SIGNATURE, data, pos, end, field)
    if found_id != MqfHeaderId.SIGNATURE:
        fail(f"{field}.ID", f"expected {MqfHeaderId.SIGNATURE:#06x}, got {found_id:#06x}")
    pos += 8
    padded = size + (-size % 4)
    need(pos, padded, end, field)
    signature = new.MqfSignatureHeader(
        signature=data[pos : pos + size],
        reserved=reserved,
        padding=carried_padding(data, pos + size, pos + padded),
    )
    pos += padded
    header = new.MultiQueueFormatHeader(
        destination=lists[0], admin=lists[1], response=lists[2], signature=signature
    )
    return header, pos
