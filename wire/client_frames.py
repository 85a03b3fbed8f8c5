"""qmgr's client protocol: the frames spoken between the daemon and the SDK.

Theory of operation
-------------------
A connection is a stream of frames in both directions. Every frame is a
12-byte header followed by a body:

=======  ====  ==============================================================
offset   size  field
=======  ====  ==============================================================
0        4     body length in bytes (u32, little-endian), at most
               ``MAX_FRAME_BODY``; checked before any of the body is buffered
4        2     kind (:class:`FrameKind`)
6        2     flags, must be 0 (reserved for later versions)
8        4     request id: chosen by the client, echoed in the reply, so that
               a client can pipeline many requests on one connection
=======  ====  ==============================================================

The body layout depends on the kind; each layout is a construct ``Struct``
below (``_LAYOUTS``), compiled once and parsed strictly (see ``_construct``).
A connection opens with :class:`Hello` (magic ``b"QMGR"`` and the range of
protocol versions the client speaks); the daemon answers :class:`HelloOk` with
the version chosen, or :class:`ErrorReply` with ``UNSUPPORTED_VERSION``.
Every request gets exactly one reply with the same request id: a typed reply
or an :class:`ErrorReply` with a stable :class:`ErrorCode` and a message that
says what was wrong. Replies may arrive out of request order (a blocked
receive does not hold up the requests behind it).

All integers are little-endian; strings are UTF-8 with a u16 length; GUIDs
are 16 bytes in RFC 4122 order; times are float seconds since the Unix epoch.
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Final, TypeAlias

import construct as c

from ._buffer import ReceiveBuffer
from ._construct import build_with, parse_exactly
from ._errors import LocalProtocolError, RemoteProtocolError

#: Protocol versions this module speaks.
PROTOCOL_VERSION: Final = 1
MIN_PROTOCOL_VERSION: Final = 1
#: First bytes of every Hello body.
HELLO_MAGIC: Final = b"QMGR"
#: Size of the fixed frame header.
HEADER_SIZE: Final = 12
#: Largest message body a queue accepts (the MSMQ 4 MB limit).
MAX_MESSAGE_BODY: Final = 4 * 1024 * 1024
#: Largest frame body: one maximal message plus room for its properties.
MAX_FRAME_BODY: Final = MAX_MESSAGE_BODY + 64 * 1024
#: Largest label, in characters (MQ_MAX_MSG_LABEL_LEN).
MAX_LABEL_CHARS: Final = 250
#: Transaction ids a client may choose lie below this; the daemon's own lie at or above.
CLIENT_TX_ID_LIMIT: Final = 1 << 63
#: Timeout value meaning "wait forever".
INFINITE_TIMEOUT_MS: Final = 0xFFFFFFFF

_HEADER = struct.Struct("<IHHI")


class FrameKind(enum.IntEnum):
    """Frame kinds. Requests are below 0x80, replies at or above."""

    HELLO = 0x01
    CREATE_QUEUE = 0x02
    DELETE_QUEUE = 0x03
    PURGE_QUEUE = 0x04
    LIST_QUEUES = 0x05
    GET_STATUS = 0x06
    BEGIN = 0x07
    COMMIT = 0x08
    ABORT = 0x09
    SEND = 0x0A
    RECEIVE = 0x0B
    PEEK_RANGE = 0x0C

    HELLO_OK = 0x80
    OK = 0x81
    SENT = 0x82
    MESSAGE = 0x83
    NO_MESSAGE = 0x84
    MESSAGE_LIST = 0x85
    QUEUE_LIST = 0x86
    STATUS_INFO = 0x87
    ERROR = 0xFF


class ErrorCode(enum.IntEnum):
    """Stable error codes carried by :class:`ErrorReply`; the SDK maps each to an exception."""

    BAD_REQUEST = 1  #: the frame was malformed or not allowed here; the connection closes
    UNSUPPORTED_VERSION = 2  #: no protocol version in common
    QUEUE_NOT_FOUND = 3  #: no queue has that name
    QUEUE_EXISTS = 4  #: a queue with that name already exists
    INVALID_NAME = 5  #: the queue or format name is not valid
    MESSAGE_TOO_LARGE = 6  #: the body is over 4 MB
    QUOTA_EXCEEDED = 7  #: the queue's byte quota would be exceeded
    TRANSACTION_USAGE = 8  #: transactional and non-transactional use mixed (as MSMQ forbids)
    TRANSACTION_NOT_FOUND = 9  #: the transaction id is unknown or already ended
    TRANSACTION_ABORTED = (
        10  #: the transaction was aborted (timeout, failure); nothing of it applied
    )
    TRANSACTION_TOO_LARGE = 11  #: the transaction holds more than the daemon allows
    STORE_FULL = 12  #: the disk (or the configured store limit) is full
    ACCESS_DENIED = 13  #: the operation is not allowed on this queue (system queues)
    INVALID_ARGUMENT = 14  #: a property value is out of range
    NOT_SUPPORTED = 15  #: valid, but not available on this queue manager
    SHUTTING_DOWN = 16  #: the daemon is stopping
    INTERNAL = 17  #: an unexpected failure inside the daemon; nothing was applied


class Delivery(enum.IntEnum):
    """MQMSG_DELIVERY_* (mq.h)."""

    EXPRESS = 0
    RECOVERABLE = 1


class QueueKind(enum.IntEnum):
    """What a queue is for."""

    NORMAL = 0
    JOURNAL = 1
    DEADLETTER = 2
    DEADXACT = 3


# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    """First frame from a client: the protocol versions it speaks."""

    min_version: int = MIN_PROTOCOL_VERSION
    max_version: int = PROTOCOL_VERSION
    client_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateQueue:
    """Create a local queue (and its journal queue)."""

    name: str
    transactional: bool = False
    journal: bool = False
    quota: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteQueue:
    """Delete a queue, its journal and their messages."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeQueue:
    """Delete every message in a queue."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListQueues:
    """Ask for every queue with its counters."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GetStatus:
    """Ask for the queue manager's identity, queues and open transactions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Begin:
    """Open an internal transaction; the reply is ``Ok(value=transaction id)``.

    ``tx_id`` 0 lets the daemon choose the id. A client may instead choose it
    (1..2**63-1, unused on this connection) and then pipeline the transaction's
    first requests behind the Begin without waiting for its reply.
    """

    tx_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit:
    """Commit a transaction; the reply comes after the store has synced."""

    tx_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Abort:
    """Abort a transaction: discard its sends, return its received messages."""

    tx_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Send one message.

    ``tx_id`` 0 means outside any transaction; ``mode`` then says how
    (0 automatic: a single-message transaction on a transactional queue;
    1 explicitly non-transactional; 2 a single-message transaction).
    """

    tx_id: int = 0
    mode: int = 0
    destination: str
    body: bytes = b""
    label: str = ""
    correlation_id: bytes = b""
    app_specific: int = 0
    priority: int = 3
    delivery: int = Delivery.RECOVERABLE
    acknowledge: int = 0
    journal: int = 0
    admin_queue: str = ""
    response_queue: str = ""
    time_to_reach_queue: int = 0xFFFFFFFF
    time_to_be_received: int = 0xFFFFFFFF


@dataclass(frozen=True, slots=True, kw_only=True)
class Receive:
    """Receive (or with ``peek`` look at) one message, waiting up to ``timeout_ms``.

    ``lookup_id`` 0 means "the next message"; any other value names one message.
    """

    tx_id: int = 0
    queue: str
    timeout_ms: int = 0
    peek: bool = False
    lookup_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PeekRange:
    """Look at up to ``max_count`` visible messages with a LookupId above ``after``."""

    queue: str
    after: int = 0
    max_count: int = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class HelloOk:
    """The daemon's answer to Hello."""

    version: int
    server_version: str
    qm_name: str
    qm_guid: uuid.UUID
    max_frame_body: int = MAX_FRAME_BODY


@dataclass(frozen=True, slots=True, kw_only=True)
class Ok:
    """Success; ``value`` carries a count or a transaction id where the request defines one."""

    value: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """A message sent outside a transaction is stored (and synced if recoverable)."""

    message_id: str
    queue: str
    lookup_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageData:
    """A message as a reader sees it."""

    queue: str
    lookup_id: int
    message_id: str
    label: str
    body: bytes
    correlation_id: bytes
    app_specific: int
    priority: int
    delivery: int
    acknowledge: int
    journal: int
    admin_queue: str
    response_queue: str
    time_to_reach_queue: int
    time_to_be_received: int
    message_class: int
    sent_time: float
    arrived_time: float
    source_qm: uuid.UUID
    transactional: bool
    destination: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReply:
    """One received or peeked message."""

    message: MessageData


@dataclass(frozen=True, slots=True, kw_only=True)
class NoMessage:
    """No message became available within the timeout (or none has that LookupId)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageList:
    """Messages in LookupId order; fewer than asked when the frame limit was reached."""

    messages: tuple[MessageData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """A queue and its counters."""

    name: str
    format_name: str
    kind: int
    transactional: bool
    journal: bool
    quota: int | None
    depth: int
    bytes: int
    locked: int
    created_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueList:
    """Every queue."""

    queues: tuple[QueueInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusInfo:
    """Queue manager identity and health."""

    qm_name: str
    qm_guid: uuid.UUID
    server_version: str
    started_at: float
    connections: int
    open_transactions: int
    queues: tuple[QueueInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReply:
    """A request failed; ``code`` says how, ``message`` says what was wrong."""

    code: int
    message: str


ClientRequest: TypeAlias = (
    Hello
    | CreateQueue
    | DeleteQueue
    | PurgeQueue
    | ListQueues
    | GetStatus
    | Begin
    | Commit
    | Abort
    | Send
    | Receive
    | PeekRange
)
ServerReply: TypeAlias = (
    HelloOk
    | Ok
    | Sent
    | MessageReply
    | NoMessage
    | MessageList
    | QueueList
    | StatusInfo
    | ErrorReply
)
FrameValue: TypeAlias = ClientRequest | ServerReply


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One decoded frame: the request id and its value."""

    request_id: int
    value: FrameValue


# --------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------

_Str = c.PascalString(c.Int16ul, "utf8")
_Bytes8 = c.Prefixed(c.Int8ul, c.GreedyBytes)
_Bytes32 = c.Prefixed(c.Int32ul, c.GreedyBytes)
_Guid = c.Bytes(16)
_OptionalU64 = c.Struct("present" / c.Flag, "value" / c.Int64ul)

_MESSAGE = c.Struct(
    "lookup_id" / c.Int64ul,
    "app_specific" / c.Int32ul,
    "priority" / c.Int8ul,
    "delivery" / c.Int8ul,
    "acknowledge" / c.Int8ul,
    "journal" / c.Int8ul,
    "time_to_reach_queue" / c.Int32ul,
    "time_to_be_received" / c.Int32ul,
    "message_class" / c.Int16ul,
    "sent_time" / c.Float64l,
    "arrived_time" / c.Float64l,
    "source_qm" / _Guid,
    "transactional" / c.Flag,
    "queue" / _Str,
    "message_id" / _Str,
    "label" / _Str,
    "admin_queue" / _Str,
    "response_queue" / _Str,
    "destination" / _Str,
    "correlation_id" / _Bytes8,
    "body" / _Bytes32,
)

_QUEUE_INFO = c.Struct(
    "name" / _Str,
    "format_name" / _Str,
    "kind" / c.Int8ul,
    "transactional" / c.Flag,
    "journal" / c.Flag,
    "quota" / _OptionalU64,
    "depth" / c.Int64ul,
    "bytes" / c.Int64ul,
    "locked" / c.Int64ul,
    "created_at" / c.Float64l,
)

_LAYOUT_SOURCES: dict[FrameKind, Any] = {
    FrameKind.HELLO: c.Struct(
        "magic" / c.Const(HELLO_MAGIC),
        "min_version" / c.Int16ul,
        "max_version" / c.Int16ul,
        "client_name" / _Str,
    ),
    FrameKind.CREATE_QUEUE: c.Struct(
        "name" / _Str,
        "transactional" / c.Flag,
        "journal" / c.Flag,
        "quota" / _OptionalU64,
    ),
    FrameKind.DELETE_QUEUE: c.Struct("name" / _Str),
    FrameKind.PURGE_QUEUE: c.Struct("name" / _Str),
    FrameKind.LIST_QUEUES: c.Struct(),
    FrameKind.GET_STATUS: c.Struct(),
    FrameKind.BEGIN: c.Struct("tx_id" / c.Int64ul),
    FrameKind.COMMIT: c.Struct("tx_id" / c.Int64ul),
    FrameKind.ABORT: c.Struct("tx_id" / c.Int64ul),
    FrameKind.SEND: c.Struct(
        "tx_id" / c.Int64ul,
        "mode" / c.Int8ul,
        "app_specific" / c.Int32ul,
        "priority" / c.Int8ul,
        "delivery" / c.Int8ul,
        "acknowledge" / c.Int8ul,
        "journal" / c.Int8ul,
        "time_to_reach_queue" / c.Int32ul,
        "time_to_be_received" / c.Int32ul,
        "destination" / _Str,
        "label" / _Str,
        "admin_queue" / _Str,
        "response_queue" / _Str,
        "correlation_id" / _Bytes8,
        "body" / _Bytes32,
    ),
    FrameKind.RECEIVE: c.Struct(
        "tx_id" / c.Int64ul,
        "queue" / _Str,
        "timeout_ms" / c.Int32ul,
        "peek" / c.Flag,
        "lookup_id" / c.Int64ul,
    ),
    FrameKind.PEEK_RANGE: c.Struct(
        "queue" / _Str,
        "after" / c.Int64ul,
        "max_count" / c.Int32ul,
    ),
    FrameKind.HELLO_OK: c.Struct(
        "version" / c.Int16ul,
        "server_version" / _Str,
        "qm_name" / _Str,
        "qm_guid" / _Guid,
        "max_frame_body" / c.Int32ul,
    ),
    FrameKind.OK: c.Struct("value" / c.Int64ul),
    FrameKind.SENT: c.Struct("message_id" / _Str, "queue" / _Str, "lookup_id" / c.Int64ul),
    FrameKind.MESSAGE: c.Struct("message" / _MESSAGE),
    FrameKind.NO_MESSAGE: c.Struct(),
    FrameKind.MESSAGE_LIST: c.Struct("messages" / c.PrefixedArray(c.Int32ul, _MESSAGE)),
    FrameKind.QUEUE_LIST: c.Struct("queues" / c.PrefixedArray(c.Int32ul, _QUEUE_INFO)),
    FrameKind.STATUS_INFO: c.Struct(
        "qm_name" / _Str,
        "qm_guid" / _Guid,
        "server_version" / _Str,
        "started_at" / c.Float64l,
        "connections" / c.Int32ul,
        "open_transactions" / c.Int32ul,
        "queues" / c.PrefixedArray(c.Int32ul, _QUEUE_INFO),
    ),
    FrameKind.ERROR: c.Struct("code" / c.Int16ul, "message" / _Str),
}

#: Compiled layouts, parsed strictly by ``parse_exactly``.
_LAYOUTS: dict[FrameKind, Any] = {kind: s.compile() for kind, s in _LAYOUT_SOURCES.items()}

_KIND_OF: dict[type[Any], FrameKind] = {
    Hello: FrameKind.HELLO,
    CreateQueue: FrameKind.CREATE_QUEUE,
    DeleteQueue: FrameKind.DELETE_QUEUE,
    PurgeQueue: FrameKind.PURGE_QUEUE,
    ListQueues: FrameKind.LIST_QUEUES,
    GetStatus: FrameKind.GET_STATUS,
    Begin: FrameKind.BEGIN,
    Commit: FrameKind.COMMIT,
    Abort: FrameKind.ABORT,
    Send: FrameKind.SEND,
    Receive: FrameKind.RECEIVE,
    PeekRange: FrameKind.PEEK_RANGE,
    HelloOk: FrameKind.HELLO_OK,
    Ok: FrameKind.OK,
    Sent: FrameKind.SENT,
    MessageReply: FrameKind.MESSAGE,
    NoMessage: FrameKind.NO_MESSAGE,
    MessageList: FrameKind.MESSAGE_LIST,
    QueueList: FrameKind.QUEUE_LIST,
    StatusInfo: FrameKind.STATUS_INFO,
    ErrorReply: FrameKind.ERROR,
}
_CLASS_OF: dict[FrameKind, type[Any]] = {kind: cls for cls, kind in _KIND_OF.items()}
_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {
    cls: tuple(f.name for f in fields(cls)) for cls in (*_KIND_OF, MessageData, QueueInfo)
}


# --------------------------------------------------------------------------
# Conversions between values and construct containers
# --------------------------------------------------------------------------


def _optional_to_wire(value: int | None) -> dict[str, Any]:
    return {"present": value is not None, "value": 0 if value is None else value}


def _optional_from_wire(container: Any) -> int | None:
    return int(container.value) if container.present else None


def _message_to_wire(message: MessageData) -> dict[str, Any]:
    data = {name: getattr(message, name) for name in _FIELD_NAMES[MessageData]}
    data["source_qm"] = message.source_qm.bytes
    return data


def _message_from_wire(container: Any) -> MessageData:
    data = {name: container[name] for name in _FIELD_NAMES[MessageData]}
    data["source_qm"] = uuid.UUID(bytes=container.source_qm)
    return MessageData(**data)


def _queue_to_wire(info: QueueInfo) -> dict[str, Any]:
    data = {name: getattr(info, name) for name in _FIELD_NAMES[QueueInfo]}
    data["quota"] = _optional_to_wire(info.quota)
    return data


def _queue_from_wire(container: Any) -> QueueInfo:
    data = {name: container[name] for name in _FIELD_NAMES[QueueInfo]}
    data["quota"] = _optional_from_wire(container.quota)
    return QueueInfo(**data)


def _plain_to_wire(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in _FIELD_NAMES[type(value)]}


_TO_WIRE: dict[type[Any], Callable[[Any], dict[str, Any]]] = {
    CreateQueue: lambda v: {**_plain_to_wire(v), "quota": _optional_to_wire(v.quota)},
    Hello: lambda v: {**_plain_to_wire(v), "magic": HELLO_MAGIC},
    HelloOk: lambda v: {**_plain_to_wire(v), "qm_guid": v.qm_guid.bytes},
    MessageReply: lambda v: {"message": _message_to_wire(v.message)},
    MessageList: lambda v: {"messages": [_message_to_wire(m) for m in v.messages]},
    QueueList: lambda v: {"queues": [_queue_to_wire(q) for q in v.queues]},
    StatusInfo: lambda v: {
        **_plain_to_wire(v),
        "qm_guid": v.qm_guid.bytes,
        "queues": [_queue_to_wire(q) for q in v.queues],
    },
}

_FROM_WIRE: dict[type[Any], Callable[[Any], Any]] = {
    CreateQueue: lambda w: CreateQueue(
        name=w.name,
        transactional=w.transactional,
        journal=w.journal,
        quota=_optional_from_wire(w.quota),
    ),
    HelloOk: lambda w: HelloOk(
        version=w.version,
        server_version=w.server_version,
        qm_name=w.qm_name,
        qm_guid=uuid.UUID(bytes=w.qm_guid),
        max_frame_body=w.max_frame_body,
    ),
    MessageReply: lambda w: MessageReply(message=_message_from_wire(w.message)),
    MessageList: lambda w: MessageList(messages=tuple(_message_from_wire(m) for m in w.messages)),
    QueueList: lambda w: QueueList(queues=tuple(_queue_from_wire(q) for q in w.queues)),
    StatusInfo: lambda w: StatusInfo(
        qm_name=w.qm_name,
        qm_guid=uuid.UUID(bytes=w.qm_guid),
        server_version=w.server_version,
        started_at=w.started_at,
        connections=w.connections,
        open_transactions=w.open_transactions,
        queues=tuple(_queue_from_wire(q) for q in w.queues),
    ),
}


# --------------------------------------------------------------------------
# Fast paths for the two hot frames
# --------------------------------------------------------------------------
#
# Send (client -> daemon) and Message (daemon -> client) carry every message,
# so they are encoded and decoded with precompiled ``struct`` formats instead
# of construct containers. The construct layouts above stay the definition:
# tests check, on generated values, that both paths produce the same bytes and
# reject the same malformed inputs. Fixed-size fields come first in both
# layouts so that one ``unpack_from`` reads them all.

_SEND_FIXED = struct.Struct("<QBIBBBBII")
_MESSAGE_FIXED = struct.Struct("<QIBBBBIIHdd16sB")
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def _put_str(parts: list[bytes], text: str) -> None:
    data = text.encode("utf-8")
    parts.append(_U16.pack(len(data)))
    parts.append(data)


def _put_tail(parts: list[bytes], correlation_id: bytes, body: bytes) -> None:
    parts.append(_U8.pack(len(correlation_id)))
    parts.append(correlation_id)
    parts.append(_U32.pack(len(body)))
    parts.append(body)


def _encode_send(value: Send) -> bytes:
    parts = [
        _SEND_FIXED.pack(
            value.tx_id,
            value.mode,
            value.app_specific,
            value.priority,
            value.delivery,
            value.acknowledge,
            value.journal,
            value.time_to_reach_queue,
            value.time_to_be_received,
        )
    ]
    for text in (value.destination, value.label, value.admin_queue, value.response_queue):
        _put_str(parts, text)
    _put_tail(parts, bytes(value.correlation_id), bytes(value.body))
    return b"".join(parts)


def _encode_message(message: MessageData) -> bytes:
    parts = [
        _MESSAGE_FIXED.pack(
            message.lookup_id,
            message.app_specific,
            message.priority,
            message.delivery,
            message.acknowledge,
            message.journal,
            message.time_to_reach_queue,
            message.time_to_be_received,
            message.message_class,
            message.sent_time,
            message.arrived_time,
            message.source_qm.bytes,
            1 if message.transactional else 0,
        )
    ]
    for text in (
        message.queue,
        message.message_id,
        message.label,
        message.admin_queue,
        message.response_queue,
        message.destination,
    ):
        _put_str(parts, text)
    _put_tail(parts, bytes(message.correlation_id), bytes(message.body))
    return b"".join(parts)


class _Cursor:
    """Bounds-checked reads from one frame body."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, pos: int, what: str) -> None:
        self.data = data
        self.pos = pos
        self.what = what

    def _fail(self, detail: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"malformed: {detail}", field=self.what)

    def text(self) -> str:
        data, pos = self.data, self.pos
        if pos + 2 > len(data):
            msg = f"string length runs past the end at byte {pos}"
            raise self._fail(msg)
        (length,) = _U16.unpack_from(data, pos)
        end = pos + 2 + length
        if end > len(data):
            msg = f"string of {length} bytes runs past the end at byte {pos}"
            raise self._fail(msg)
        self.pos = end
        try:
            return data[pos + 2 : end].decode("utf-8")
        except UnicodeDecodeError as exc:
            msg = f"string at byte {pos} is not UTF-8"
            raise self._fail(msg) from exc

    def blob(self, prefix: struct.Struct) -> bytes:
        data, pos = self.data, self.pos
        if pos + prefix.size > len(data):
            msg = f"length prefix runs past the end at byte {pos}"
            raise self._fail(msg)
        (length,) = prefix.unpack_from(data, pos)
        start = pos + prefix.size
        end = start + length
        if end > len(data):
            msg = f"{length} bytes declared at byte {pos}, {len(data) - start} present"
            raise self._fail(msg)
        self.pos = end
        return data[start:end]

    def finish(self) -> None:
        if self.pos != len(self.data):
            msg = f"{len(self.data) - self.pos} unexpected trailing bytes"
            raise self._fail(msg)


def _decode_send(body: bytes) -> Send:
    if len(body) < _SEND_FIXED.size:
        msg = f"malformed: {len(body)} bytes is shorter than the fixed part"
        raise RemoteProtocolError(msg, field="Send")
    fixed = _SEND_FIXED.unpack_from(body, 0)
    cursor = _Cursor(body, _SEND_FIXED.size, "Send")
    destination, label, admin_queue, response_queue = (cursor.text() for _ in range(4))
    correlation_id = cursor.blob(_U8)
    payload = cursor.blob(_U32)
    cursor.finish()
    return Send(
        tx_id=fixed[0],
        mode=fixed[1],
        app_specific=fixed[2],
        priority=fixed[3],
        delivery=fixed[4],
        acknowledge=fixed[5],
        journal=fixed[6],
        time_to_reach_queue=fixed[7],
        time_to_be_received=fixed[8],
        destination=destination,
        label=label,
        admin_queue=admin_queue,
        response_queue=response_queue,
        correlation_id=correlation_id,
        body=payload,
    )


def _decode_message(body: bytes, pos: int, what: str) -> tuple[MessageData, int]:
    if len(body) - pos < _MESSAGE_FIXED.size:
        msg = f"malformed: message at byte {pos} is shorter than its fixed part"
        raise RemoteProtocolError(msg, field=what)
    fixed = _MESSAGE_FIXED.unpack_from(body, pos)
    cursor = _Cursor(body, pos + _MESSAGE_FIXED.size, what)
    queue, message_id, label, admin_queue, response_queue, destination = (
        cursor.text() for _ in range(6)
    )
    correlation_id = cursor.blob(_U8)
    payload = cursor.blob(_U32)
    message = MessageData(
        queue=queue,
        lookup_id=fixed[0],
        message_id=message_id,
        label=label,
        body=payload,
        correlation_id=correlation_id,
        app_specific=fixed[1],
        priority=fixed[2],
        delivery=fixed[3],
        acknowledge=fixed[4],
        journal=fixed[5],
        admin_queue=admin_queue,
        response_queue=response_queue,
        time_to_reach_queue=fixed[6],
        time_to_be_received=fixed[7],
        message_class=fixed[8],
        sent_time=fixed[9],
        arrived_time=fixed[10],
        source_qm=uuid.UUID(bytes=fixed[11]),
        transactional=bool(fixed[12]),
        destination=destination,
    )
    return message, cursor.pos


def _decode_message_reply(body: bytes) -> MessageReply:
    message, end = _decode_message(body, 0, "MessageReply")
    _Cursor(body, end, "MessageReply").finish()
    return MessageReply(message=message)


def _decode_message_list(body: bytes) -> MessageList:
    if len(body) < 4:
        msg = "malformed: no message count"
        raise RemoteProtocolError(msg, field="MessageList")
    (count,) = _U32.unpack_from(body, 0)
    pos, messages = 4, []
    for _ in range(count):
        message, pos = _decode_message(body, pos, "MessageList")
        messages.append(message)
    _Cursor(body, pos, "MessageList").finish()
    return MessageList(messages=tuple(messages))


def _encode_message_list(value: MessageList) -> bytes:
    return _U32.pack(len(value.messages)) + b"".join(_encode_message(m) for m in value.messages)


def _u64_decoder(cls: type[Any], name: str) -> Callable[[bytes], Any]:
    """A decoder for the frames whose body is one u64 (Ok, Begin, Commit, Abort)."""
    what = cls.__name__

    def decode(body: bytes) -> Any:
        if len(body) != _U64.size:
            msg = f"malformed: {len(body)} bytes, expected {_U64.size}"
            raise RemoteProtocolError(msg, field=what)
        return cls(**{name: _U64.unpack(body)[0]})

    return decode


_RECEIVE_TAIL = struct.Struct("<IBQ")


def _encode_receive(value: Receive) -> bytes:
    queue = value.queue.encode("utf-8")
    return b"".join(
        (
            _U64.pack(value.tx_id),
            _U16.pack(len(queue)),
            queue,
            _RECEIVE_TAIL.pack(value.timeout_ms, 1 if value.peek else 0, value.lookup_id),
        )
    )


def _decode_receive(body: bytes) -> Receive:
    if len(body) < _U64.size:
        msg = f"malformed: {len(body)} bytes is shorter than the fixed part"
        raise RemoteProtocolError(msg, field="Receive")
    (tx_id,) = _U64.unpack_from(body, 0)
    cursor = _Cursor(body, _U64.size, "Receive")
    queue = cursor.text()
    if len(body) - cursor.pos != _RECEIVE_TAIL.size:
        msg = f"malformed: {len(body) - cursor.pos} bytes after the queue name, expected 13"
        raise RemoteProtocolError(msg, field="Receive")
    timeout_ms, peek, lookup_id = _RECEIVE_TAIL.unpack_from(body, cursor.pos)
    return Receive(
        tx_id=tx_id, queue=queue, timeout_ms=timeout_ms, peek=bool(peek), lookup_id=lookup_id
    )


_FAST_ENCODE: dict[type[Any], Callable[[Any], bytes]] = {
    Ok: lambda value: _U64.pack(value.value),
    Begin: lambda value: _U64.pack(value.tx_id),
    Commit: lambda value: _U64.pack(value.tx_id),
    Abort: lambda value: _U64.pack(value.tx_id),
    Receive: _encode_receive,
    Send: _encode_send,
    MessageReply: lambda value: _encode_message(value.message),
    MessageList: _encode_message_list,
}
_FAST_DECODE: dict[FrameKind, Callable[[bytes], FrameValue]] = {
    FrameKind.OK: _u64_decoder(Ok, "value"),
    FrameKind.BEGIN: _u64_decoder(Begin, "tx_id"),
    FrameKind.COMMIT: _u64_decoder(Commit, "tx_id"),
    FrameKind.ABORT: _u64_decoder(Abort, "tx_id"),
    FrameKind.RECEIVE: _decode_receive,
    FrameKind.SEND: _decode_send,
    FrameKind.MESSAGE: _decode_message_reply,
    FrameKind.MESSAGE_LIST: _decode_message_list,
}


def encode_body_with_layout(value: FrameValue) -> bytes:
    """Encode a frame body with its construct layout (the reference for the fast paths)."""
    cls = type(value)
    to_wire = _TO_WIRE.get(cls, _plain_to_wire)
    return build_with(_LAYOUTS[_KIND_OF[cls]], to_wire(value), cls.__name__)


def decode_body_with_layout(kind: FrameKind, body: bytes) -> FrameValue:
    """Decode a frame body with its construct layout (the reference for the fast paths)."""
    cls = _CLASS_OF[kind]
    container = parse_exactly(_LAYOUTS[kind], body, cls.__name__)
    from_wire = _FROM_WIRE.get(cls)
    try:
        if from_wire is not None:
            value: FrameValue = from_wire(container)
        else:
            value = cls(**{name: container[name] for name in _FIELD_NAMES[cls]})
    except Exception as exc:  # a layout/value mismatch is still the peer's malformed input
        msg = f"malformed: {type(exc).__name__}: {exc}"
        raise RemoteProtocolError(msg, field=cls.__name__) from exc
    return value


# --------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------


def encode_frame(request_id: int, value: FrameValue) -> bytes:
    """Encode one frame.

    Raises:
        LocalProtocolError: a field is out of range, or the body is over ``MAX_FRAME_BODY``.
    """
    cls = type(value)
    kind = _KIND_OF.get(cls)
    if kind is None:
        msg = f"{cls.__name__} is not a client-protocol frame"
        raise LocalProtocolError(msg)
    if not 0 <= request_id <= 0xFFFFFFFF:
        msg = f"request id {request_id} does not fit in 32 bits"
        raise LocalProtocolError(msg, field="request_id")
    fast = _FAST_ENCODE.get(cls)
    if fast is None:
        body = encode_body_with_layout(value)
    else:
        try:
            body = fast(value)
        except (struct.error, UnicodeEncodeError, TypeError, AttributeError) as exc:
            # Out-of-range numbers, lone surrogates, wrong types: say so, as the layout would.
            msg = f"cannot encode: {type(exc).__name__}: {exc}"
            raise LocalProtocolError(msg, field=cls.__name__) from exc
    if len(body) > MAX_FRAME_BODY:
        msg = f"frame body of {len(body)} bytes is over the {MAX_FRAME_BODY}-byte limit"
        raise LocalProtocolError(msg, field=cls.__name__)
    return _HEADER.pack(len(body), kind, 0, request_id) + body


_OK_FRAME = struct.Struct("<IHHIQ")


def encode_ok(request_id: int, value: int = 0) -> bytes:
    """Encode ``Ok(value)`` with ``request_id``: the same bytes as ``encode_frame``, faster.

    Raises:
        LocalProtocolError: the request id or the value is out of range.
    """
    try:
        return _OK_FRAME.pack(_U64.size, FrameKind.OK, 0, request_id, value)
    except struct.error as exc:
        msg = f"cannot encode: {exc}"
        raise LocalProtocolError(msg, field="Ok") from exc


def decode_body(kind: int, body: bytes) -> FrameValue:
    """Decode the body of a frame whose header said ``kind``.

    Raises:
        RemoteProtocolError: unknown kind, or the body does not match its layout.
    """
    try:
        frame_kind = FrameKind(kind)
    except ValueError:
        msg = f"unknown frame kind 0x{kind:02x}"
        raise RemoteProtocolError(msg, field="kind") from None
    fast = _FAST_DECODE.get(frame_kind)
    if fast is not None:
        return fast(body)
    return decode_body_with_layout(frame_kind, body)


class ClientFrameDecoder:
    """Sans-IO decoder for client-protocol frames.

    Feed bytes with :meth:`receive_data`; call :meth:`next_frame` until it
    returns ``None`` (more data needed). Any input either decodes or raises
    :class:`RemoteProtocolError`; after an error the decoder stays broken and
    the connection should be closed.
    """

    def __init__(self, *, max_body: int = MAX_FRAME_BODY) -> None:
        self._buffer = ReceiveBuffer()
        self._max_body = max_body
        self._header: tuple[int, int, int] | None = None
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buffer)

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes."""
        self._buffer.append(data)

    def next_frame(self) -> Frame | None:
        """Return the next whole frame, or None if more bytes are needed.

        Raises:
            RemoteProtocolError: the bytes are not a valid frame (bad header
                flags, a declared size over the limit, an unknown kind, or a
                body that does not match its layout).
        """
        if self._error is not None:
            raise self._error
        try:
            return self._next_frame()
        except RemoteProtocolError as exc:
            self._error = exc
            raise

    def _next_frame(self) -> Frame | None:
        if self._header is None:
            raw = self._buffer.take(HEADER_SIZE)
            if raw is None:
                return None
            length, kind, flags, request_id = _HEADER.unpack(raw)
            if flags != 0:
                msg = f"reserved flags 0x{flags:04x} are set"
                raise RemoteProtocolError(msg, field="FrameHeader.flags")
            if length > self._max_body:
                msg = f"declared body of {length} bytes is over the {self._max_body}-byte limit"
                raise RemoteProtocolError(msg, field="FrameHeader.length")
            if kind not in _VALID_KINDS:
                msg = f"unknown frame kind 0x{kind:02x}"
                raise RemoteProtocolError(msg, field="FrameHeader.kind")
            self._header = (length, kind, request_id)
        length, kind, request_id = self._header
        body = self._buffer.take(length)
        if body is None:
            return None
        self._header = None
        return Frame(request_id=request_id, value=decode_body(kind, body))


_VALID_KINDS: Final = frozenset(int(k) for k in FrameKind)


def is_request(value: FrameValue) -> bool:
    """True for frames a client sends, False for the daemon's replies."""
    return _KIND_OF[type(value)] < 0x80
