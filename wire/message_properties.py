"""A message's properties: the one definition of its fields, kept encoded.

Theory of operation
-------------------
A message is the same value wherever it is: in the client protocol's
``Send`` frame, in the store, and in the ``Message`` frame a reader gets.
:class:`MessageProperties` is that value, and it is kept *encoded*: an
instance holds the bytes :mod:`wire.message_layout` lays out, plus the few
fields decoded from them, so the daemon can take a message from a socket to
LMDB and back out to another socket without decoding it into a Python object
of twenty fields and encoding it again. Accessors read fields on demand;
:meth:`~MessageProperties.stamp` sets what the queue manager assigns at send
time (identity, time, the transactional rules) by repacking only the fixed
part.

Structure is checked here (lengths, flags, UTF-8); whether values are
acceptable (a priority above 7, a label over 250 characters) is for the
queue manager to judge, which answers with a typed error rather than
dropping the connection.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar, overload

from .message_layout import (
    AT_ACKNOWLEDGE,
    AT_ADMIN_LEN,
    AT_APP_SPECIFIC,
    AT_BODY_LEN,
    AT_CLASS,
    AT_CORRELATION,
    AT_DELIVERY,
    AT_DESTINATION_LEN,
    AT_EXTENSION_LEN,
    AT_FLAGS,
    AT_JOURNAL,
    AT_LABEL_LEN,
    AT_ORDINAL,
    AT_PRIORITY,
    AT_RESPONSE_LEN,
    AT_SENT_TIME,
    AT_SOURCE_QM,
    AT_TTBR,
    AT_TTRQ,
    FIXED_PART,
    FLAG_CORRELATION,
    FLAG_TRANSACTIONAL,
    INFINITE_SECONDS,
    KNOWN_FLAGS,
    MESSAGE_FIXED_SIZE,
    NO_CORRELATION,
    encode_message_parts,
    format_message_id,
    source_uuid,
)
from .protocol_errors import LocalProtocolError, RemoteProtocolError

__all__ = ["MessageProperties"]

_T = TypeVar("_T")


class _Field(Generic[_T]):
    """A read-only attribute of :class:`MessageProperties`, which ``read`` takes
    from what the instance holds.

    It declares the attribute and its type; when the class is made it puts a
    plain ``property`` of ``read`` in its place, whose read costs less than a
    ``__get__`` written in Python (these fields are read for every message)."""

    def __init__(self, read: Callable[[MessageProperties], _T], doc: str) -> None:
        self._read = read
        self.__doc__ = doc

    def __set_name__(self, owner: type[Any], name: str) -> None:
        setattr(owner, name, property(self._read, doc=self.__doc__))

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> _Field[_T]: ...

    @overload
    def __get__(self, instance: MessageProperties, owner: type[Any]) -> _T: ...

    def __get__(self, instance: MessageProperties | None, owner: type[Any]) -> _Field[_T] | _T:
        if instance is None:
            return self
        return self._read(instance)


class _FixedField(_Field[_T]):
    """One field of the fixed part as decoded (``at`` is its index in
    :data:`~wire.message_layout.FIXED_PART`)."""

    def __init__(self, at: int, doc: str) -> None:
        super().__init__(lambda message: message._fixed[at], doc)


class _Text(_Field[str]):
    """One of the strings decoded when the message was made (``at`` is its
    index in ``_texts``: label, admin queue, response queue, destination)."""

    def __init__(self, at: int, doc: str) -> None:
        super().__init__(lambda message: message._texts[at], doc)


#: Bytes a message's view may keep alive beyond twice its own size before
#: :meth:`MessageProperties.own_bytes` copies it.
_SHARED_SLACK: Final = 4096


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

    __slots__ = ("_body_start", "_fixed", "_raw", "_texts")

    # bytes, or a read-only memoryview over immutable bytes (a received frame),
    # so that decoding a frame does not copy the message.
    _raw: bytes | memoryview
    _fixed: tuple[Any, ...]
    # label, admin_queue, response_queue, destination
    _texts: tuple[str, str, str, str]
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
        fixed = FIXED_PART.unpack_from(raw)
        self._set(raw, fixed, (label, admin_queue, response_queue, destination))

    def _set(
        self, raw: bytes | memoryview, fixed: tuple[Any, ...], texts: tuple[str, str, str, str]
    ) -> None:
        # Set once, here; every public attribute is read-only (a property or a _Field).
        self._raw = raw
        self._fixed = fixed
        self._texts = texts
        self._body_start = len(raw) - fixed[AT_BODY_LEN]

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
        fixed = FIXED_PART.unpack_from(raw)
        label_end = MESSAGE_FIXED_SIZE + fixed[AT_LABEL_LEN]
        admin_end = label_end + fixed[AT_ADMIN_LEN]
        response_end = admin_end + fixed[AT_RESPONSE_LEN]
        destination_end = response_end + fixed[AT_DESTINATION_LEN]
        end = destination_end + fixed[AT_EXTENSION_LEN] + fixed[AT_BODY_LEN]
        if end != len(raw):
            msg = f"field lengths add up to {end} bytes, not the {len(raw)} given"
            raise RemoteProtocolError(msg, field="MessageProperties")
        if fixed[AT_FLAGS] & ~KNOWN_FLAGS or raw[29]:
            msg = f"unknown flags {fixed[AT_FLAGS]:#04x} or a non-zero reserved byte"
            raise RemoteProtocolError(msg, field="MessageProperties.flags")
        if not fixed[AT_FLAGS] & FLAG_CORRELATION and fixed[AT_CORRELATION] != NO_CORRELATION:
            msg = "a correlation id without the flag that says there is one"
            raise RemoteProtocolError(msg, field="MessageProperties.correlation_id")
        try:
            label = str(raw[MESSAGE_FIXED_SIZE:label_end], "utf-8")
            admin_queue = str(raw[label_end:admin_end], "utf-8") if fixed[AT_ADMIN_LEN] else ""
            response_queue = (
                str(raw[admin_end:response_end], "utf-8") if fixed[AT_RESPONSE_LEN] else ""
            )
            destination = str(raw[response_end:destination_end], "utf-8")
        except UnicodeDecodeError as exc:
            msg = f"a string is not UTF-8: {exc.reason} at byte {exc.start}"
            raise RemoteProtocolError(msg, field="MessageProperties") from exc
        value = cls.__new__(cls)
        value._set(raw, fixed, (label, admin_queue, response_queue, destination))
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
        fixed = FIXED_PART.unpack_from(data, offset)
        size: int = (
            MESSAGE_FIXED_SIZE
            + fixed[AT_LABEL_LEN]
            + fixed[AT_ADMIN_LEN]
            + fixed[AT_RESPONSE_LEN]
            + fixed[AT_DESTINATION_LEN]
            + fixed[AT_EXTENSION_LEN]
            + fixed[AT_BODY_LEN]
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

    def own_bytes(self) -> MessageProperties:
        """This message, over bytes of its own if it is a view into a much larger
        buffer (a page of messages, as read), so that keeping it keeps alive only
        its own size; else itself."""
        raw = self._raw
        if type(raw) is bytes:
            return self
        assert isinstance(raw, memoryview)
        if len(raw.obj) <= 2 * len(raw) + _SHARED_SLACK:  # type: ignore[arg-type]  # bytes
            return self
        copy = MessageProperties.__new__(MessageProperties)
        copy._set(bytes(raw), self._fixed, self._texts)
        return copy

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        """Pickled (and deep-copied) as its bytes: a message crosses to another process."""
        return (MessageProperties.from_bytes, (self.raw,))

    def __len__(self) -> int:
        return len(self._raw)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageProperties):
            return self._raw == other._raw
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return (
            f"MessageProperties(id={self.message_id!r}, label={self.label!r}, "
            f"destination={self.destination!r}, body={self.body_preview(32)})"
        )

    def body_preview(self, limit: int) -> str:
        """The body for a ``repr``: its first ``limit`` bytes (then ``...``) and its length."""
        body = self.body
        shown = body if len(body) <= limit else body[:limit] + b"..."
        return f"{shown!r} ({len(body)} bytes)"

    # ------------------------------------------------------------------ fields

    @property
    def source_qm(self) -> uuid.UUID:
        """The GUID of the queue manager that created the message."""
        return source_uuid(self._fixed[AT_SOURCE_QM])

    ordinal = _FixedField[int](
        AT_ORDINAL, "The message id's ordinal (unique per source queue manager)."
    )

    @property
    def message_id(self) -> str:
        """The message id as MSMQ writes it: ``{source qm guid}\\ordinal``."""
        return format_message_id(self._fixed[AT_SOURCE_QM], self._fixed[AT_ORDINAL])

    app_specific = _FixedField[int](AT_APP_SPECIFIC, "The application-defined 32-bit value.")

    priority = _FixedField[int](AT_PRIORITY, "0 (lowest) to 7; 0 for transactional messages.")

    delivery = _FixedField[int](AT_DELIVERY, "0 express, 1 recoverable.")

    acknowledge = _FixedField[int](
        AT_ACKNOWLEDGE, "The MQMSG_ACKNOWLEDGMENT_* bits the sender asked for."
    )

    journal = _FixedField[int](AT_JOURNAL, "The sender's MQMSG_JOURNAL level.")

    @property
    def transactional(self) -> bool:
        """True if the message was sent in a transaction."""
        return bool(self._fixed[AT_FLAGS] & FLAG_TRANSACTIONAL)

    message_class = _FixedField[int](AT_CLASS, "MQMSG_CLASS_* (0 for a normal message).")

    time_to_reach_queue = _FixedField[int](
        AT_TTRQ, "Seconds the message had to reach its queue (0xFFFFFFFF: no limit)."
    )

    time_to_be_received = _FixedField[int](
        AT_TTBR, "Seconds the message had to be received (0xFFFFFFFF: no limit)."
    )

    sent_time = _FixedField[float](AT_SENT_TIME, "When it was sent, unix seconds.")

    @property
    def correlation_id(self) -> bytes:
        """The 20-byte correlation id, or ``b""`` when unset."""
        if self._fixed[AT_FLAGS] & FLAG_CORRELATION:
            value: bytes = self._fixed[AT_CORRELATION]
            return value
        return b""

    label = _Text(0, "The label.")

    admin_queue = _Text(1, 'Where acknowledgments go (a format name), or ``""``.')

    response_queue = _Text(2, 'Where the sender wants responses (a format name), or ``""``.')

    destination = _Text(
        3, "The format name the sender addressed (possibly several, comma-separated)."
    )

    @property
    def extension(self) -> bytes:
        """Application-defined bytes carried unchanged."""
        start = self._body_start - self._fixed[AT_EXTENSION_LEN]
        return bytes(self._raw[start : self._body_start])

    @property
    def body(self) -> bytes:
        """The message body."""
        return bytes(self._raw[self._body_start :])

    body_size = _FixedField[int](AT_BODY_LEN, "Length of the body in bytes (without copying it).")

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
        fixed[AT_SOURCE_QM] = source_qm.bytes
        fixed[AT_ORDINAL] = ordinal
        fixed[AT_SENT_TIME] = sent_time
        fixed[AT_CLASS] = 0
        if transactional:
            fixed[AT_FLAGS] |= FLAG_TRANSACTIONAL
            fixed[AT_PRIORITY] = 0
            fixed[AT_DELIVERY] = 1
        else:
            fixed[AT_FLAGS] &= ~FLAG_TRANSACTIONAL
        try:
            head = FIXED_PART.pack(*fixed)
        except struct.error as exc:
            msg = f"cannot encode: {exc}"
            raise LocalProtocolError(msg, field="MessageProperties.ordinal") from exc
        value = MessageProperties.__new__(MessageProperties)
        value._set(
            b"".join((head, memoryview(self._raw)[MESSAGE_FIXED_SIZE:])), tuple(fixed), self._texts
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
