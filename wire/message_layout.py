"""A message's bytes: the layout, its limits, and how its fields are encoded.

:class:`~wire.message_properties.MessageProperties` holds a message in this
form; the client protocol carries it in ``Send`` and ``Message`` frames and
the store keeps it, byte for byte. Layout (little-endian, no padding; the
first 84 bytes are fixed)::

    off  size  field
      0    16  source_qm            GUID of the queue manager that created the message,
                                    RFC 4122 byte order; with ``ordinal`` it is the
                                    message id (MSMQ's SourceQueueManager + MessageID)
     16     4  ordinal              u32, the message id's ordinal
     20     4  app_specific         u32
     24     1  priority             0..7 (0 for transactional messages)
     25     1  delivery             0 express, 1 recoverable
     26     1  acknowledge          MQMSG_ACKNOWLEDGMENT_* bits
     27     1  journal              MQMSG_JOURNAL level
     28     1  flags                bit 0 transactional, bit 1 correlation id present
     29     1  reserved             0
     30     2  message_class        u16, MQMSG_CLASS_* (0 for a normal message)
     32     4  time_to_reach_queue  u32 seconds, 0xFFFFFFFF infinite
     36     4  time_to_be_received  u32 seconds, 0xFFFFFFFF infinite
     40     8  sent_time            f64 unix seconds
     48    20  correlation_id       20 bytes, zeros when absent
     68     2  label length         u16, UTF-8 bytes
     70     2  admin_queue length   u16
     72     2  response_queue len.  u16
     74     2  destination length   u16
     76     4  extension length     u32
     80     4  body length          u32
     84        label, admin_queue, response_queue, destination (UTF-8), extension, body

Every length is in the fixed part, so one ``unpack_from`` finds every field
and a decoder checks that the lengths add up to exactly the bytes given.

Besides the public limits and :func:`encode_message_parts`, this module names
what :mod:`wire.message_properties` reads the bytes with: the fixed part's
``struct`` (:data:`FIXED_PART`), its flag bits, the index of each field in
the tuple ``FIXED_PART.unpack_from`` returns (the ``AT_*`` constants) and the
memoised decoding of the source GUID (:func:`source_uuid`);
:mod:`wire.client.layout_codec` takes the names of the fields it copies from
:data:`FIXED_FIELDS`.
"""

from __future__ import annotations

import re
import struct
import uuid
from typing import Final, TypeVar

from .protocol_errors import LocalProtocolError
from .text_fields import text_error

__all__ = [
    "CORRELATION_ID_SIZE",
    "INFINITE_SECONDS",
    "MAX_LABEL_CHARS",
    "MAX_MESSAGE_BODY",
    "MESSAGE_FIXED_SIZE",
    "encode_message_parts",
    "format_message_id",
    "parse_message_id",
]

#: A time limit that never expires.
INFINITE_SECONDS: Final = 0xFFFFFFFF
#: Largest message body a queue accepts (MSMQ's 4 MB limit).
MAX_MESSAGE_BODY: Final = 4 * 1024 * 1024
#: Longest label, in characters (MQ_MAX_MSG_LABEL_LEN).
MAX_LABEL_CHARS: Final = 250
#: Size of a correlation id when present (MSMQ's PROPID_M_CORRELATIONID_SIZE).
CORRELATION_ID_SIZE: Final = 20

#: The fixed part, every field up to the lengths of the variable ones.
FIXED_PART: Final = struct.Struct("<16sIIBBBBBxHIId20sHHHHII")
#: Bytes before the first variable field.
MESSAGE_FIXED_SIZE: Final = FIXED_PART.size  # 84
#: Byte 28, ``flags``: the message was sent in a transaction.
FLAG_TRANSACTIONAL: Final = 0x01
#: Byte 28, ``flags``: the correlation id is present.
FLAG_CORRELATION: Final = 0x02
#: Every flag bit a message may have.
KNOWN_FLAGS: Final = FLAG_TRANSACTIONAL | FLAG_CORRELATION
#: The correlation id bytes of a message without one.
NO_CORRELATION: Final = bytes(CORRELATION_ID_SIZE)
#: Where the fixed part keeps ``message_class`` (a u16).
CLASS_OFFSET: Final = 30
_NULL_GUID: Final = bytes(16)

# Indexes into the unpacked fixed part.
AT_SOURCE_QM, AT_ORDINAL, AT_APP_SPECIFIC, AT_PRIORITY, AT_DELIVERY, AT_ACKNOWLEDGE = range(6)
AT_JOURNAL, AT_FLAGS, AT_CLASS, AT_TTRQ, AT_TTBR, AT_SENT_TIME, AT_CORRELATION = range(6, 13)
AT_LABEL_LEN, AT_ADMIN_LEN, AT_RESPONSE_LEN, AT_DESTINATION_LEN = range(13, 17)
AT_EXTENSION_LEN, AT_BODY_LEN = range(17, 19)

# A handful of queue-manager GUIDs appear in nearly every message, and both
# uuid.UUID(bytes=...) and str(uuid) are slow next to a dict lookup: what is
# made of a source GUID's bytes is kept in a small memo, emptied when full.
_CACHE_LIMIT: Final = 256
_UUIDS: dict[bytes, uuid.UUID] = {}
_ID_PREFIXES: dict[bytes, str] = {}

_V = TypeVar("_V")


def _remember(memo: dict[bytes, _V], raw: bytes, value: _V) -> _V:
    """Store ``value`` under ``raw`` in ``memo``, emptying it first when it is full."""
    if len(memo) >= _CACHE_LIMIT:
        memo.clear()
    memo[raw] = value
    return value


def source_uuid(raw: bytes) -> uuid.UUID:
    """The GUID whose RFC 4122 bytes are ``raw`` (a message's ``source_qm`` field)."""
    value = _UUIDS.get(raw)
    if value is None:
        value = _remember(_UUIDS, raw, uuid.UUID(bytes=raw))
    return value


def format_message_id(source_qm: uuid.UUID | bytes, ordinal: int) -> str:
    """The MSMQ text form of a message id: ``{guid}\\ordinal`` (lower-case GUID in braces)."""
    raw = source_qm if isinstance(source_qm, bytes) else source_qm.bytes
    prefix = _ID_PREFIXES.get(raw)
    if prefix is None:
        prefix = _remember(_ID_PREFIXES, raw, f"{{{uuid.UUID(bytes=raw)}}}\\")
    return f"{prefix}{ordinal}"


#: A message id's text: ``{source QM GUID}\\ordinal``, the braces optional.
_MESSAGE_ID: Final = re.compile(r"\{?([0-9a-fA-F-]{36})\}?\\(\d+)")


def parse_message_id(text: str) -> tuple[uuid.UUID, int]:
    """``(source GUID, ordinal)`` of a message id in its text form
    (:func:`format_message_id`; the braces may be left out).

    Raises:
        ValueError: it is not a message id (the message says what one is).
    """
    found = _MESSAGE_ID.fullmatch(text.strip())
    if found is not None and int(found.group(2)) <= 0xFFFFFFFF:
        try:
            return uuid.UUID(found.group(1)), int(found.group(2))
        except ValueError:
            pass
    msg = "not a message id ({source QM GUID}\\ordinal)"
    raise ValueError(msg)


def encode_message_parts(
    *,
    body: bytes | bytearray | memoryview,
    label: str,
    destination: str,
    correlation_id: bytes | bytearray | memoryview,
    app_specific: int,
    priority: int,
    delivery: int,
    acknowledge: int,
    journal: int,
    admin_queue: str,
    response_queue: str,
    time_to_reach_queue: int,
    time_to_be_received: int,
    message_class: int = 0,
    sent_time: float = 0.0,
    source_qm: uuid.UUID | None = None,
    ordinal: int = 0,
    transactional: bool = False,
    extension: bytes | bytearray | memoryview = b"",
) -> tuple[bytes | bytearray | memoryview, ...]:
    """Encode a message as the parts whose concatenation is its bytes.

    :class:`MessageProperties` joins them; a frame encoder may append them
    to its own buffer instead, so that the body is copied only once.

    Raises:
        TextFieldError: a text is not valid Unicode or too long for its field (named).
        LocalProtocolError: another field cannot be encoded.
    """
    if type(body) is memoryview and (body.itemsize != 1 or body.ndim != 1 or not body.c_contiguous):
        body = body.tobytes()  # its len() must be its size in bytes
    flags = FLAG_TRANSACTIONAL if transactional else 0
    if correlation_id:
        if len(correlation_id) != CORRELATION_ID_SIZE:
            msg = f"a correlation id is {CORRELATION_ID_SIZE} bytes, not {len(correlation_id)}"
            raise LocalProtocolError(msg, field="MessageProperties.correlation_id")
        flags |= FLAG_CORRELATION
        correlation = bytes(correlation_id)
    else:
        correlation = NO_CORRELATION
    try:
        label_raw = label.encode("utf-8")
        admin_raw = admin_queue.encode("utf-8") if admin_queue else b""
        response_raw = response_queue.encode("utf-8") if response_queue else b""
        destination_raw = destination.encode("utf-8")
        values = (
            _NULL_GUID if source_qm is None else source_qm.bytes,
            ordinal,
            app_specific,
            priority,
            delivery,
            acknowledge,
            journal,
            flags,
            message_class,
            time_to_reach_queue,
            time_to_be_received,
            sent_time,
            correlation,
            len(label_raw),
            len(admin_raw),
            len(response_raw),
            len(destination_raw),
            len(extension),
            len(body),
        )
        fixed = FIXED_PART.pack(*values)
    except (struct.error, UnicodeError, TypeError, AttributeError) as exc:
        texts = (label, admin_queue, response_queue, destination)
        for name, text in zip(_TEXT_FIELDS, texts, strict=True):
            error = text_error(name, text, field=f"MessageProperties.{name}")
            if error is not None:
                raise error from exc
        field = _field_at_fault(locals().get("values"))
        msg = f"cannot encode {field}: {type(exc).__name__}: {exc}"
        raise LocalProtocolError(msg, field=f"MessageProperties.{field}") from exc
    return (fixed, label_raw, admin_raw, response_raw, destination_raw, extension, body)


#: The text fields, in the order of their bytes.
_TEXT_FIELDS: Final = ("label", "admin_queue", "response_queue", "destination")

#: The fields of the fixed part, in order, with their struct codes; a length is
#: named after the variable field it measures, which follows in the same order.
FIXED_FIELDS: Final = (
    ("source_qm", "16s"),
    ("ordinal", "I"),
    ("app_specific", "I"),
    ("priority", "B"),
    ("delivery", "B"),
    ("acknowledge", "B"),
    ("journal", "B"),
    ("flags", "B"),
    ("message_class", "H"),
    ("time_to_reach_queue", "I"),
    ("time_to_be_received", "I"),
    ("sent_time", "d"),
    ("correlation_id", "20s"),
    ("label", "H"),
    ("admin_queue", "H"),
    ("response_queue", "H"),
    ("destination", "H"),
    ("extension", "I"),
    ("body", "I"),
)


def _field_at_fault(values: tuple[object, ...] | None) -> str:
    """Which field of a message could not be encoded (for the error message only)."""
    if values is None:
        return "a text field (label, queue names, destination)"
    for (name, code), value in zip(FIXED_FIELDS, values, strict=True):
        try:
            struct.pack("<" + code, value)
        except struct.error:
            return f"{name} (length)" if code == "H" and name != "message_class" else name
    return "the message"
