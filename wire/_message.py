"""A message's properties: the one definition of its fields, and their bytes.

Theory of operation
-------------------
A message is the same value wherever it is: in the client protocol's
``Send`` frame, in the store, and in the ``Message`` frame a reader gets.
:class:`MessageProperties` is that value, and it is kept *encoded*: an
instance holds the bytes below plus the few fields decoded from them, so the
daemon can take a message from a socket to LMDB and back out to another
socket without decoding it into a Python object of twenty fields and
encoding it again. Accessors read fields on demand; :meth:`stamp` sets what
the queue manager assigns at send time (identity, time, the transactional
rules) by repacking only the fixed part.

Layout (little-endian, no padding; the first 84 bytes are fixed)::

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
and the decoder checks that the lengths add up to exactly the bytes given.
Structure is checked here (lengths, flags, UTF-8); whether values are
acceptable (a priority above 7, a label over 250 characters) is for the
queue manager to judge, which answers with a typed error rather than
dropping the connection.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Final

from ._errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "CORRELATION_ID_SIZE",
    "INFINITE_SECONDS",
    "MAX_LABEL_CHARS",
    "MAX_MESSAGE_BODY",
    "MESSAGE_FIXED_SIZE",
    "MessageProperties",
    "encode_message_parts",
    "format_message_id",
]

#: A time limit that never expires.
INFINITE_SECONDS: Final = 0xFFFFFFFF
#: Largest message body a queue accepts (MSMQ's 4 MB limit).
MAX_MESSAGE_BODY: Final = 4 * 1024 * 1024
#: Longest label, in characters (MQ_MAX_MSG_LABEL_LEN).
MAX_LABEL_CHARS: Final = 250
#: Size of a correlation id when present (MSMQ's PROPID_M_CORRELATIONID_SIZE).
CORRELATION_ID_SIZE: Final = 20

_FIXED = struct.Struct("<16sIIBBBBBxHIId20sHHHHII")
#: Bytes before the first variable field.
MESSAGE_FIXED_SIZE: Final = _FIXED.size  # 84
_FLAG_TRANSACTIONAL: Final = 0x01
_FLAG_CORRELATION: Final = 0x02
_KNOWN_FLAGS: Final = _FLAG_TRANSACTIONAL | _FLAG_CORRELATION
_NO_CORRELATION: Final = bytes(CORRELATION_ID_SIZE)
_NULL_GUID: Final = bytes(16)

# Indexes into the unpacked fixed part.
_SOURCE_QM, _ORDINAL, _APP_SPECIFIC, _PRIORITY, _DELIVERY, _ACKNOWLEDGE = range(6)
_JOURNAL, _FLAGS, _CLASS, _TTRQ, _TTBR, _SENT_TIME, _CORRELATION = range(6, 13)
_LABEL_LEN, _ADMIN_LEN, _RESPONSE_LEN, _DESTINATION_LEN, _EXTENSION_LEN, _BODY_LEN = range(13, 19)

# A handful of queue-manager GUIDs appear in nearly every message, and
# uuid.UUID(bytes=...) and str(uuid) are slow next to a dict lookup.
_CACHE_LIMIT: Final = 256
_UUIDS: dict[bytes, uuid.UUID] = {}
_ID_PREFIXES: dict[bytes, str] = {}


def _uuid(raw: bytes) -> uuid.UUID:
    value = _UUIDS.get(raw)
    if value is None:
        if len(_UUIDS) >= _CACHE_LIMIT:
            _UUIDS.clear()
        value = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return value


def format_message_id(source_qm: uuid.UUID | bytes, ordinal: int) -> str:
    """The MSMQ text form of a message id: ``{guid}\\ordinal`` (lower-case GUID in braces)."""
    raw = source_qm if isinstance(source_qm, bytes) else source_qm.bytes
    prefix = _ID_PREFIXES.get(raw)
    if prefix is None:
        if len(_ID_PREFIXES) >= _CACHE_LIMIT:
            _ID_PREFIXES.clear()
        prefix = _ID_PREFIXES[raw] = f"{{{uuid.UUID(bytes=raw)}}}\\"
    return f"{prefix}{ordinal}"


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
        LocalProtocolError: a field cannot be encoded.
    """
    if type(body) is memoryview and (body.itemsize != 1 or body.ndim != 1 or not body.c_contiguous):
        body = body.tobytes()  # its len() must be its size in bytes
    flags = _FLAG_TRANSACTIONAL if transactional else 0
    if correlation_id:
        if len(correlation_id) != CORRELATION_ID_SIZE:
            msg = f"a correlation id is {CORRELATION_ID_SIZE} bytes, not {len(correlation_id)}"
            raise LocalProtocolError(msg, field="MessageProperties.correlation_id")
        flags |= _FLAG_CORRELATION
        correlation = bytes(correlation_id)
    else:
        correlation = _NO_CORRELATION
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
        fixed = _FIXED.pack(*values)
    except (struct.error, UnicodeError, TypeError, AttributeError) as exc:
        field = _field_at_fault(locals().get("values"))
        msg = f"cannot encode {field}: {type(exc).__name__}: {exc}"
        raise LocalProtocolError(msg, field=f"MessageProperties.{field}") from exc
    return (fixed, label_raw, admin_raw, response_raw, destination_raw, extension, body)


#: The fields of the fixed part, in order, with their struct codes.
_FIXED_FIELDS: Final = (
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
    for (name, code), value in zip(_FIXED_FIELDS, values, strict=True):
        try:
            struct.pack("<" + code, value)
        except struct.error:
            return f"{name} (length)" if code == "H" and name != "message_class" else name
    return "the message"


class MessageProperties:
    """A message: its identity, its properties and its body, held encoded.

    Build one from fields (every argument has MSMQ's default), or from bytes
    with :meth:`from_bytes`. Instances are immutable and compare by their
    bytes. The fields are read-only attributes named like the constructor's
    arguments, plus :attr:`message_id` and :attr:`raw`; :meth:`replace` and
    :meth:`stamp` make changed copies.

    Raises (constructor):
        LocalProtocolError: a field cannot be encoded (a number out of its
            width, a correlation id that is not 0 or 20 bytes, a string longer
            than 65535 bytes of UTF-8, a lone surrogate).
    """

    __slots__ = (
        "_admin_queue",
        "_body_start",
        "_destination",
        "_fixed",
        "_label",
        "_raw",
        "_response_queue",
    )

    # bytes, or a read-only memoryview over immutable bytes (a received frame),
    # so that decoding a frame does not copy the message.
    _raw: bytes | memoryview
    _fixed: tuple[Any, ...]
    _label: str
    _admin_queue: str
    _response_queue: str
    _destination: str
    _body_start: int

    def __init__(
        self,
        *,
        body: bytes | bytearray | memoryview = b"",
        label: str = "",
        destination: str = "",
        correlation_id: bytes = b"",
        app_specific: int = 0,
        priority: int = 3,
        delivery: int = 1,
        acknowledge: int = 0,
        journal: int = 0,
        admin_queue: str = "",
        response_queue: str = "",
        time_to_reach_queue: int = INFINITE_SECONDS,
        time_to_be_received: int = INFINITE_SECONDS,
        message_class: int = 0,
        sent_time: float = 0.0,
        source_qm: uuid.UUID | None = None,
        ordinal: int = 0,
        transactional: bool = False,
        extension: bytes = b"",
    ) -> None:
        parts = encode_message_parts(
            body=body,
            label=label,
            destination=destination,
            correlation_id=correlation_id,
            app_specific=app_specific,
            priority=priority,
            delivery=delivery,
            acknowledge=acknowledge,
            journal=journal,
            admin_queue=admin_queue,
            response_queue=response_queue,
            time_to_reach_queue=time_to_reach_queue,
            time_to_be_received=time_to_be_received,
            message_class=message_class,
            sent_time=sent_time,
            source_qm=source_qm,
            ordinal=ordinal,
            transactional=transactional,
            extension=extension,
        )
        raw = b"".join(parts)
        fixed = _FIXED.unpack_from(raw)
        self._set(raw, fixed, label, admin_queue, response_queue, destination)

    def _set(
        self,
        raw: bytes | memoryview,
        fixed: tuple[Any, ...],
        label: str,
        admin_queue: str,
        response_queue: str,
        destination: str,
    ) -> None:
        # Set once, here; every public attribute is a read-only property.
        self._raw = raw
        self._fixed = fixed
        self._label = label
        self._admin_queue = admin_queue
        self._response_queue = response_queue
        self._destination = destination
        self._body_start = len(raw) - fixed[_BODY_LEN]

    # ------------------------------------------------------------------ bytes

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> MessageProperties:
        """Decode a message; ``data`` must be exactly one message.

        A ``memoryview`` of immutable ``bytes`` is kept as it is, without
        copying (a bytearray or a view of one is copied, as it could change).

        Raises:
            RemoteProtocolError: the bytes are not a message (short, lengths
                that do not add up, unknown flags, a string that is not UTF-8).
        """
        raw: bytes | memoryview
        if type(data) is bytes or (
            type(data) is memoryview and data.readonly and isinstance(data.obj, bytes)
        ):
            raw = data
        else:
            raw = bytes(data)
        if len(raw) < MESSAGE_FIXED_SIZE:
            msg = f"{len(raw)} bytes is shorter than a message's fixed part"
            raise RemoteProtocolError(msg, field="MessageProperties")
        fixed = _FIXED.unpack_from(raw)
        label_end = MESSAGE_FIXED_SIZE + fixed[_LABEL_LEN]
        admin_end = label_end + fixed[_ADMIN_LEN]
        response_end = admin_end + fixed[_RESPONSE_LEN]
        destination_end = response_end + fixed[_DESTINATION_LEN]
        end = destination_end + fixed[_EXTENSION_LEN] + fixed[_BODY_LEN]
        if end != len(raw):
            msg = f"field lengths add up to {end} bytes, not the {len(raw)} given"
            raise RemoteProtocolError(msg, field="MessageProperties")
        if fixed[_FLAGS] & ~_KNOWN_FLAGS or raw[29]:
            msg = f"unknown flags {fixed[_FLAGS]:#04x} or a non-zero reserved byte"
            raise RemoteProtocolError(msg, field="MessageProperties.flags")
        if not fixed[_FLAGS] & _FLAG_CORRELATION and fixed[_CORRELATION] != _NO_CORRELATION:
            msg = "a correlation id without the flag that says there is one"
            raise RemoteProtocolError(msg, field="MessageProperties.correlation_id")
        try:
            label = str(raw[MESSAGE_FIXED_SIZE:label_end], "utf-8")
            admin_queue = str(raw[label_end:admin_end], "utf-8") if fixed[_ADMIN_LEN] else ""
            response_queue = (
                str(raw[admin_end:response_end], "utf-8") if fixed[_RESPONSE_LEN] else ""
            )
            destination = str(raw[response_end:destination_end], "utf-8")
        except UnicodeDecodeError as exc:
            msg = f"a string is not UTF-8: {exc.reason} at byte {exc.start}"
            raise RemoteProtocolError(msg, field="MessageProperties") from exc
        value = cls.__new__(cls)
        value._set(raw, fixed, label, admin_queue, response_queue, destination)
        return value

    @staticmethod
    def size_at(data: bytes | bytearray | memoryview, offset: int) -> int:
        """The length of the message that starts at ``offset`` in ``data``.

        Lets a frame carry several messages one after the other.

        Raises:
            RemoteProtocolError: fewer than the fixed part's bytes are there.
        """
        if len(data) - offset < MESSAGE_FIXED_SIZE:
            msg = f"a message at byte {offset} is shorter than its fixed part"
            raise RemoteProtocolError(msg, field="MessageProperties")
        fixed = _FIXED.unpack_from(data, offset)
        size: int = (
            MESSAGE_FIXED_SIZE
            + fixed[_LABEL_LEN]
            + fixed[_ADMIN_LEN]
            + fixed[_RESPONSE_LEN]
            + fixed[_DESTINATION_LEN]
            + fixed[_EXTENSION_LEN]
            + fixed[_BODY_LEN]
        )
        return size

    @property
    def raw(self) -> bytes:
        """The encoded message, exactly as carried and stored."""
        raw = self._raw
        return raw if type(raw) is bytes else bytes(raw)

    @property
    def view(self) -> memoryview:
        """The encoded message as a memoryview, to join into a larger buffer without a copy."""
        return memoryview(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageProperties):
            return self._raw == other._raw
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        body = self.body
        shown = body if len(body) <= 32 else body[:32] + b"..."
        return (
            f"MessageProperties(id={self.message_id!r}, label={self._label!r}, "
            f"destination={self._destination!r}, body={shown!r} ({len(body)} bytes))"
        )

    # ------------------------------------------------------------------ fields

    @property
    def source_qm(self) -> uuid.UUID:
        """The GUID of the queue manager that created the message."""
        return _uuid(self._fixed[_SOURCE_QM])

    @property
    def ordinal(self) -> int:
        """The message id's ordinal (unique per source queue manager)."""
        value: int = self._fixed[_ORDINAL]
        return value

    @property
    def message_id(self) -> str:
        """The message id as MSMQ writes it: ``{source qm guid}\\ordinal``."""
        return format_message_id(self._fixed[_SOURCE_QM], self._fixed[_ORDINAL])

    @property
    def app_specific(self) -> int:
        """The application-defined 32-bit value."""
        value: int = self._fixed[_APP_SPECIFIC]
        return value

    @property
    def priority(self) -> int:
        """0 (lowest) to 7; 0 for transactional messages."""
        value: int = self._fixed[_PRIORITY]
        return value

    @property
    def delivery(self) -> int:
        """0 express, 1 recoverable."""
        value: int = self._fixed[_DELIVERY]
        return value

    @property
    def acknowledge(self) -> int:
        """The MQMSG_ACKNOWLEDGMENT_* bits the sender asked for."""
        value: int = self._fixed[_ACKNOWLEDGE]
        return value

    @property
    def journal(self) -> int:
        """The sender's MQMSG_JOURNAL level."""
        value: int = self._fixed[_JOURNAL]
        return value

    @property
    def transactional(self) -> bool:
        """True if the message was sent in a transaction."""
        return bool(self._fixed[_FLAGS] & _FLAG_TRANSACTIONAL)

    @property
    def message_class(self) -> int:
        """MQMSG_CLASS_* (0 for a normal message)."""
        value: int = self._fixed[_CLASS]
        return value

    @property
    def time_to_reach_queue(self) -> int:
        """Seconds the message had to reach its queue (0xFFFFFFFF: no limit)."""
        value: int = self._fixed[_TTRQ]
        return value

    @property
    def time_to_be_received(self) -> int:
        """Seconds the message had to be received (0xFFFFFFFF: no limit)."""
        value: int = self._fixed[_TTBR]
        return value

    @property
    def sent_time(self) -> float:
        """When it was sent, unix seconds."""
        value: float = self._fixed[_SENT_TIME]
        return value

    @property
    def correlation_id(self) -> bytes:
        """The 20-byte correlation id, or ``b""`` when unset."""
        if self._fixed[_FLAGS] & _FLAG_CORRELATION:
            value: bytes = self._fixed[_CORRELATION]
            return value
        return b""

    @property
    def label(self) -> str:
        """The label."""
        return self._label

    @property
    def admin_queue(self) -> str:
        """Where acknowledgments go (a format name), or ``""``."""
        return self._admin_queue

    @property
    def response_queue(self) -> str:
        """Where the sender wants responses (a format name), or ``""``."""
        return self._response_queue

    @property
    def destination(self) -> str:
        """The format name the sender addressed (possibly several, comma-separated)."""
        return self._destination

    @property
    def extension(self) -> bytes:
        """Application-defined bytes carried unchanged."""
        start = self._body_start - self._fixed[_EXTENSION_LEN]
        return bytes(self._raw[start : self._body_start])

    @property
    def body(self) -> bytes:
        """The message body."""
        return bytes(self._raw[self._body_start :])

    @property
    def body_size(self) -> int:
        """Length of the body in bytes (without copying it)."""
        value: int = self._fixed[_BODY_LEN]
        return value

    # ------------------------------------------------------------------ changes

    def stamp(
        self, *, source_qm: uuid.UUID, ordinal: int, sent_time: float, transactional: bool
    ) -> MessageProperties:
        """A copy with the identity and send time the queue manager assigns.

        A transactional message also gets priority 0 and recoverable
        delivery, as MSMQ sends every transactional message ([MS-MQMQ]
        §2.2.19.1: the priority MUST be 0 in a transactional packet). The
        message class is set to 0 (a normal message).

        Raises:
            LocalProtocolError: the ordinal does not fit in 32 bits.
        """
        fixed = list(self._fixed)
        fixed[_SOURCE_QM] = source_qm.bytes
        fixed[_ORDINAL] = ordinal
        fixed[_SENT_TIME] = sent_time
        fixed[_CLASS] = 0
        if transactional:
            fixed[_FLAGS] |= _FLAG_TRANSACTIONAL
            fixed[_PRIORITY] = 0
            fixed[_DELIVERY] = 1
        else:
            fixed[_FLAGS] &= ~_FLAG_TRANSACTIONAL
        try:
            head = _FIXED.pack(*fixed)
        except struct.error as exc:
            msg = f"cannot encode: {exc}"
            raise LocalProtocolError(msg, field="MessageProperties.ordinal") from exc
        value = MessageProperties.__new__(MessageProperties)
        value._set(
            b"".join((head, memoryview(self._raw)[MESSAGE_FIXED_SIZE:])),
            tuple(fixed),
            self._label,
            self._admin_queue,
            self._response_queue,
            self._destination,
        )
        return value

    def replace(self, **changes: Any) -> MessageProperties:
        """A copy with some fields changed (the constructor's argument names).

        Raises:
            LocalProtocolError: a new value cannot be encoded.
            TypeError: an unknown field name.
        """
        fields = {name: getattr(self, name) for name in _FIELD_NAMES}
        unknown = set(changes) - set(_FIELD_NAMES)
        if unknown:
            msg = f"unknown message field(s): {', '.join(sorted(unknown))}"
            raise TypeError(msg)
        fields.update(changes)
        return MessageProperties(**fields)


#: The constructor's arguments, which are also the attribute names.
_FIELD_NAMES: Final = (
    "body",
    "label",
    "destination",
    "correlation_id",
    "app_specific",
    "priority",
    "delivery",
    "acknowledge",
    "journal",
    "admin_queue",
    "response_queue",
    "time_to_reach_queue",
    "time_to_be_received",
    "message_class",
    "sent_time",
    "source_qm",
    "ordinal",
    "transactional",
    "extension",
)
