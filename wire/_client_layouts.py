"""The client protocol's frame bodies as construct layouts: the reference definition.

Each frame kind's body is one construct ``Struct`` (compiled once, parsed
strictly by ``_construct.parse_exactly``). The hot frames are encoded and
decoded by hand in ``_client_fast``; property tests check, on generated
values, that both produce the same bytes and refuse the same malformed
input. All integers are little-endian; strings are UTF-8 with a u16 length;
GUIDs are 16 bytes in RFC 4122 order; times are float seconds since the Unix
epoch. A message is laid out as ``_message`` documents.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Final

import construct as c

from ._client_poison import (
    COUNTERS_ENTRY,
    CREATE_RETRY,
    MOVE_MESSAGES,
    MOVED,
    RETRY_ENTRY,
    SET_QUEUE_PROPERTIES,
    SetQueueProperties,
)
from ._client_trailers import (
    counters_to_container,
    counters_trailer,
    retry_fields,
    retry_trailer,
    retry_values,
    with_counters,
    with_retry,
)
from ._client_values import (
    CLASS_OF,
    HELLO_MAGIC,
    KIND_OF,
    MAX_RESOLVE_XIDS,
    AclEntry,
    ChangeList,
    CreateList,
    CreateQueue,
    FrameKind,
    FrameValue,
    Hello,
    HelloOk,
    IncomingInfo,
    ListInfo,
    ListInfoList,
    MessageList,
    MessageReply,
    OutgoingInfo,
    OutgoingList,
    Permissions,
    QueuedMessage,
    QueueInfo,
    QueueList,
    Resolutions,
    Resolve,
    Send,
    StatusInfo,
    TraceFinding,
    TraceReport,
    TransactionInfo,
    TransactionList,
)
from ._construct import build_with, parse_exactly
from ._errors import RemoteProtocolError
from ._message import MessageProperties

_Str = c.PascalString(c.Int16ul, "utf8")
_Guid = c.Bytes(16)
_OptionalU64 = c.Struct("present" / c.Flag, "value" / c.Int64ul)
_OptionalTime = c.Struct("present" / c.Flag, "value" / c.Float64l)


#: A message (see ``_message``): the fixed part with every length, then the
#: variable fields. The strings are UTF-8 bytes here; the conversions below
#: encode and decode them.
MESSAGE_LAYOUT: Final = c.Struct(
    "source_qm" / _Guid,
    "ordinal" / c.Int32ul,
    "app_specific" / c.Int32ul,
    "priority" / c.Int8ul,
    "delivery" / c.Int8ul,
    "acknowledge" / c.Int8ul,
    "journal" / c.Int8ul,
    "flags" / c.Int8ul,
    "reserved" / c.Const(b"\x00"),
    "message_class" / c.Int16ul,
    "time_to_reach_queue" / c.Int32ul,
    "time_to_be_received" / c.Int32ul,
    "sent_time" / c.Float64l,
    "correlation" / c.Bytes(20),
    "label_length" / c.Rebuild(c.Int16ul, c.len_(c.this.label)),
    "admin_length" / c.Rebuild(c.Int16ul, c.len_(c.this.admin_queue)),
    "response_length" / c.Rebuild(c.Int16ul, c.len_(c.this.response_queue)),
    "destination_length" / c.Rebuild(c.Int16ul, c.len_(c.this.destination)),
    "extension_length" / c.Rebuild(c.Int32ul, c.len_(c.this.extension)),
    "body_length" / c.Rebuild(c.Int32ul, c.len_(c.this.body)),
    "label" / c.Bytes(c.this.label_length),
    "admin_queue" / c.Bytes(c.this.admin_length),
    "response_queue" / c.Bytes(c.this.response_length),
    "destination" / c.Bytes(c.this.destination_length),
    "extension" / c.Bytes(c.this.extension_length),
    "body" / c.Bytes(c.this.body_length),
)

_QUEUED_MESSAGE = c.Struct(
    "lookup_id" / c.Int64ul,
    "arrived_time" / c.Float64l,
    "queue" / _Str,
    "message" / MESSAGE_LAYOUT,
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

_OUTGOING_INFO = c.Struct(
    "destination" / _Str,
    "next_hop" / _Str,
    "state" / _Str,
    "next_attempt" / _OptionalTime,
    "waiting" / c.Int64ul,
    "unacknowledged" / c.Int64ul,
    "sequence_timestamp" / c.Int32ul,
    "sequence_ordinal" / c.Int32ul,
    "next_number" / c.Int64ul,
    "last_order_ack" / _OptionalTime,
    "last_error" / _Str,
)

_INCOMING_INFO = c.Struct(
    "source_qm" / _Guid,
    "queue" / _Str,
    "sequence_timestamp" / c.Int32ul,
    "sequence_ordinal" / c.Int32ul,
    "last_number" / c.Int64ul,
    "reject_count" / c.Int64ul,
    "last_access" / c.Float64l,
)

_TRANSACTION_INFO = c.Struct(
    "xid" / _Str,
    "state" / c.Int8ul,
    "since" / c.Float64l,
    "sends" / c.Int64ul,
    "receives" / c.Int64ul,
    "bytes" / c.Int64ul,
)

_TX_ID = c.Struct("tx_id" / c.Int64ul)


def _one_each(items: Any) -> Any:
    """A version 4 trailer (``trailer``) holds one entry per element of ``items``, or none."""
    return c.Check((c.len_(c.this.trailer) == 0) | (c.len_(c.this.trailer) == c.len_(items)))


_SOURCES: dict[FrameKind, Any] = {
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
        "retry" / c.Optional(CREATE_RETRY),
    ),
    FrameKind.DELETE_QUEUE: c.Struct("name" / _Str),
    FrameKind.PURGE_QUEUE: c.Struct("name" / _Str),
    FrameKind.LIST_QUEUES: c.Struct(),
    FrameKind.GET_STATUS: c.Struct(),
    FrameKind.BEGIN: _TX_ID,
    FrameKind.COMMIT: _TX_ID,
    FrameKind.ABORT: _TX_ID,
    FrameKind.SEND: c.Struct("tx_id" / c.Int64ul, "mode" / c.Int8ul, "message" / MESSAGE_LAYOUT),
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
    FrameKind.LIST_OUTGOING: c.Struct(),
    FrameKind.CONTROL_OUTGOING: c.Struct("action" / c.Int8ul, "destination" / _Str),
    FrameKind.BEGIN_GLOBAL: c.Struct("tx_id" / c.Int64ul, "xid" / _Str),
    FrameKind.PREPARE: _TX_ID,
    # The count is checked before any xid is parsed: a frame of millions of
    # empty xids would otherwise hold the daemon for seconds.
    FrameKind.RESOLVE: c.Struct(
        "commit" / c.Flag,
        "count" / c.Rebuild(c.Int32ul, c.len_(c.this.xids)),
        c.Check(c.this.count <= MAX_RESOLVE_XIDS),
        "xids" / c.Array(c.this.count, _Str),
    ),
    FrameKind.LIST_TRANSACTIONS: c.Struct(
        "prefix" / _Str,
        "resolved" / c.Flag,
        "max_count" / c.Int32ul,
    ),
    FrameKind.REMOVE_THROUGH: c.Struct("queue" / _Str, "lookup_id" / c.Int64ul),
    FrameKind.TRACE_MESSAGE: c.Struct("message_id" / _Str),
    FrameKind.CREATE_LIST: c.Struct("name" / _Str, "targets" / c.PrefixedArray(c.Int32ul, _Str)),
    FrameKind.CHANGE_LIST: c.Struct(
        "name" / _Str,
        "add" / c.PrefixedArray(c.Int32ul, _Str),
        "remove" / c.PrefixedArray(c.Int32ul, _Str),
    ),
    FrameKind.DELETE_LIST: c.Struct("name" / _Str),
    FrameKind.GET_LISTS: c.Struct("name" / _Str),
    FrameKind.MEASURE_RANGE: c.Struct(
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
    FrameKind.MESSAGE: c.Struct(
        "message" / _QUEUED_MESSAGE, "counters" / c.Optional(COUNTERS_ENTRY)
    ),
    FrameKind.NO_MESSAGE: c.Struct(),
    FrameKind.MESSAGE_LIST: c.Struct(
        "messages" / c.PrefixedArray(c.Int32ul, _QUEUED_MESSAGE),
        "trailer" / c.GreedyRange(COUNTERS_ENTRY),
        _one_each(c.this.messages),
    ),
    FrameKind.QUEUE_LIST: c.Struct(
        "queues" / c.PrefixedArray(c.Int32ul, _QUEUE_INFO),
        "trailer" / c.GreedyRange(RETRY_ENTRY),
        _one_each(c.this.queues),
    ),
    FrameKind.STATUS_INFO: c.Struct(
        "qm_name" / _Str,
        "qm_guid" / _Guid,
        "server_version" / _Str,
        "started_at" / c.Float64l,
        "connections" / c.Int32ul,
        "open_transactions" / c.Int32ul,
        "commits" / c.Int64ul,
        "aborts" / c.Int64ul,
        "batches" / c.Int64ul,
        "uncommitted_bytes" / c.Int64ul,
        "erasing" / c.Int32ul,
        "queues" / c.PrefixedArray(c.Int32ul, _QUEUE_INFO),
        "outgoing" / c.PrefixedArray(c.Int32ul, _OUTGOING_INFO),
        "incoming" / c.PrefixedArray(c.Int32ul, _INCOMING_INFO),
        "trailer" / c.GreedyRange(RETRY_ENTRY),
        _one_each(c.this.queues),
    ),
    FrameKind.OUTGOING_LIST: c.Struct(
        "outgoing" / c.PrefixedArray(c.Int32ul, _OUTGOING_INFO),
        "purged" / c.Int64ul,
    ),
    FrameKind.RESOLUTIONS: c.Struct("outcomes" / c.PrefixedArray(c.Int32ul, c.Int8ul)),
    FrameKind.TRANSACTION_LIST: c.Struct(
        "transactions" / c.PrefixedArray(c.Int32ul, _TRANSACTION_INFO)
    ),
    FrameKind.RANGE_INFO: c.Struct(
        "queue_id" / c.Int32ul,
        "count" / c.Int64ul,
        "last" / c.Int64ul,
    ),
    FrameKind.SET_QUEUE_PROPERTIES: SET_QUEUE_PROPERTIES,
    FrameKind.MOVE_MESSAGES: MOVE_MESSAGES,
    FrameKind.MOVED: MOVED,
    FrameKind.GET_PERMISSIONS: c.Struct("queue" / _Str),
    FrameKind.AUTHENTICATE: c.Struct("token" / _Str),
    FrameKind.CHANGE_PERMISSIONS: c.Struct(
        "queue" / _Str, "entry" / _Str, "grant" / c.Int16ul, "revoke" / c.Int16ul
    ),
    FrameKind.PERMISSIONS: c.Struct(
        "queue" / _Str,
        "entries" / c.PrefixedArray(c.Int32ul, c.Struct("name" / _Str, "rights" / c.Int16ul)),
    ),
    FrameKind.LIST_INFO_LIST: c.Struct(
        "lists"
        / c.PrefixedArray(
            c.Int32ul, c.Struct("name" / _Str, "targets" / c.PrefixedArray(c.Int32ul, _Str))
        )
    ),
    FrameKind.TRACE_REPORT: c.Struct(
        "qm_name" / _Str,
        "findings"
        / c.PrefixedArray(
            c.Int32ul,
            c.Struct(
                "kind" / _Str,
                "place" / _Str,
                "time" / c.Float64l,
                "message_class" / c.Int16ul,
                "detail" / _Str,
                "next_hop" / _Str,
            ),
        ),
    ),
    FrameKind.ERROR: c.Struct("code" / c.Int16ul, "message" / _Str),
}

#: Compiled layouts, parsed strictly by ``parse_exactly``.
LAYOUTS: Final[dict[FrameKind, Any]] = {kind: s.compile() for kind, s in _SOURCES.items()}

_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {
    cls: tuple(f.name for f in fields(cls))
    for cls in (
        *KIND_OF,
        QueuedMessage,
        QueueInfo,
        OutgoingInfo,
        IncomingInfo,
        TransactionInfo,
        TraceFinding,
    )
}
#: Fields that travel in a version 4 trailer, not in their value's own layout.
_IN_TRAILERS: Final = frozenset({"counters", "retry", "retry_count", "retry_cycles", "retry_delay"})
_FIELD_NAMES = {
    cls: tuple(name for name in names if name not in _IN_TRAILERS or cls is SetQueueProperties)
    for cls, names in _FIELD_NAMES.items()
}
_MESSAGE_FIELDS: Final = (
    "app_specific",
    "priority",
    "delivery",
    "acknowledge",
    "journal",
    "message_class",
    "time_to_reach_queue",
    "time_to_be_received",
    "sent_time",
    "ordinal",
    "label",
    "admin_queue",
    "response_queue",
    "destination",
    "extension",
    "body",
)
_MESSAGE_TEXTS: Final = ("label", "admin_queue", "response_queue", "destination")
_TRANSACTIONAL = 0x01
_CORRELATION = 0x02


# --------------------------------------------------------------------------
# Values <-> construct containers
# --------------------------------------------------------------------------


def message_to_container(message: MessageProperties) -> dict[str, Any]:
    """A message as the mapping ``MESSAGE_LAYOUT`` builds from."""
    data: dict[str, Any] = {name: getattr(message, name) for name in _MESSAGE_FIELDS}
    for name in _MESSAGE_TEXTS:
        data[name] = data[name].encode("utf-8")
    data["source_qm"] = message.source_qm.bytes
    correlation = message.correlation_id
    data["correlation"] = correlation or bytes(20)
    data["flags"] = (_TRANSACTIONAL if message.transactional else 0) | (
        _CORRELATION if correlation else 0
    )
    return data


def message_from_container(container: Any) -> MessageProperties:
    """A message parsed by ``MESSAGE_LAYOUT``.

    Raises:
        RemoteProtocolError: unknown flags, or correlation bytes without their flag.
    """
    flags = container.flags
    if flags & ~(_TRANSACTIONAL | _CORRELATION):
        msg = f"unknown flags {flags:#04x}"
        raise RemoteProtocolError(msg, field="MessageProperties.flags")
    if not flags & _CORRELATION and any(container.correlation):
        msg = "a correlation id without the flag that says there is one"
        raise RemoteProtocolError(msg, field="MessageProperties.correlation_id")
    values = {name: container[name] for name in _MESSAGE_FIELDS}
    for name in _MESSAGE_TEXTS:
        values[name] = values[name].decode("utf-8")
    return MessageProperties(
        **values,
        source_qm=uuid.UUID(bytes=container.source_qm),
        correlation_id=container.correlation if flags & _CORRELATION else b"",
        transactional=bool(flags & _TRANSACTIONAL),
    )


def _queued_to_container(value: QueuedMessage) -> dict[str, Any]:
    return {
        "lookup_id": value.lookup_id,
        "arrived_time": value.arrived_time,
        "queue": value.queue,
        "message": message_to_container(value.message),
    }


def _queued_from_container(container: Any) -> QueuedMessage:
    return QueuedMessage(
        queue=container.queue,
        lookup_id=container.lookup_id,
        arrived_time=container.arrived_time,
        message=message_from_container(container.message),
    )


def _optional_to_container(value: int | None) -> dict[str, Any]:
    return {"present": value is not None, "value": 0 if value is None else value}


def _optional_from_container(container: Any) -> int | None:
    return int(container.value) if container.present else None


# --------------------------------------------------------------------------
# Version 5 trailers (see ``_client_poison``; their values in ``_client_trailers``)
# --------------------------------------------------------------------------


def _messages_to_container(messages: tuple[QueuedMessage, ...]) -> dict[str, Any]:
    return {
        "messages": [_queued_to_container(m) for m in messages],
        "trailer": counters_trailer(messages),
    }


def _messages_from_container(container: Any) -> tuple[QueuedMessage, ...]:
    messages = tuple(_queued_from_container(m) for m in container.messages)
    return with_counters(messages, container.trailer)


def _create_to_container(value: CreateQueue) -> dict[str, Any]:
    data = {**_plain_to_container(value), "quota": _optional_to_container(value.quota)}
    given = (value.retry_count, value.retry_cycles, value.retry_delay)
    data["retry"] = None if all(v is None for v in given) else retry_fields(value)
    return data


def _create_from_container(w: Any) -> CreateQueue:
    retry = w.retry
    return CreateQueue(
        name=w.name,
        transactional=w.transactional,
        journal=w.journal,
        quota=_optional_from_container(w.quota),
        **({} if retry is None else retry_values(retry)),
    )


def _queue_to_container(info: QueueInfo) -> dict[str, Any]:
    data = {name: getattr(info, name) for name in _FIELD_NAMES[QueueInfo]}
    data["quota"] = _optional_to_container(info.quota)
    return data


def _queue_from_container(container: Any) -> QueueInfo:
    data = {name: container[name] for name in _FIELD_NAMES[QueueInfo]}
    data["quota"] = _optional_from_container(container.quota)
    return QueueInfo(**data)


def _plain_to_container(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in _FIELD_NAMES[type(value)]}


def _optional_time_to_container(value: float | None) -> dict[str, Any]:
    return {"present": value is not None, "value": 0.0 if value is None else value}


def _optional_time_from_container(container: Any) -> float | None:
    return float(container.value) if container.present else None


_OUTGOING_TIMES: Final = ("next_attempt", "last_order_ack")


def _outgoing_to_container(info: OutgoingInfo) -> dict[str, Any]:
    data = _plain_to_container(info)
    for name in _OUTGOING_TIMES:
        data[name] = _optional_time_to_container(data[name])
    return data


def _outgoing_from_container(container: Any) -> OutgoingInfo:
    data = {name: container[name] for name in _FIELD_NAMES[OutgoingInfo]}
    for name in _OUTGOING_TIMES:
        data[name] = _optional_time_from_container(data[name])
    return OutgoingInfo(**data)


def _incoming_to_container(info: IncomingInfo) -> dict[str, Any]:
    return {**_plain_to_container(info), "source_qm": info.source_qm.bytes}


def _incoming_from_container(container: Any) -> IncomingInfo:
    data = {name: container[name] for name in _FIELD_NAMES[IncomingInfo]}
    data["source_qm"] = uuid.UUID(bytes=container.source_qm)
    return IncomingInfo(**data)


def _status_to_container(value: StatusInfo) -> dict[str, Any]:
    data = _plain_to_container(value)
    data["qm_guid"] = value.qm_guid.bytes
    data["queues"] = [_queue_to_container(q) for q in value.queues]
    data["trailer"] = retry_trailer(value.queues)
    data["outgoing"] = [_outgoing_to_container(o) for o in value.outgoing]
    data["incoming"] = [_incoming_to_container(i) for i in value.incoming]
    return data


def _status_from_container(container: Any) -> StatusInfo:
    data = {name: container[name] for name in _FIELD_NAMES[StatusInfo]}
    data["qm_guid"] = uuid.UUID(bytes=container.qm_guid)
    queues = tuple(_queue_from_container(q) for q in container.queues)
    data["queues"] = with_retry(queues, container.trailer)
    data["outgoing"] = tuple(_outgoing_from_container(o) for o in container.outgoing)
    data["incoming"] = tuple(_incoming_from_container(i) for i in container.incoming)
    return StatusInfo(**data)


_TO_CONTAINER: dict[type[Any], Callable[[Any], dict[str, Any]]] = {
    CreateQueue: _create_to_container,
    SetQueueProperties: lambda v: {"name": v.name, "poison": v.poison, **retry_fields(v)},
    Hello: lambda v: {**_plain_to_container(v), "magic": HELLO_MAGIC},
    HelloOk: lambda v: {**_plain_to_container(v), "qm_guid": v.qm_guid.bytes},
    Send: lambda v: {"tx_id": v.tx_id, "mode": v.mode, "message": message_to_container(v.message)},
    MessageReply: lambda v: {
        "message": _queued_to_container(v.message),
        "counters": None
        if v.message.counters is None
        else counters_to_container(v.message.counters),
    },
    MessageList: lambda v: _messages_to_container(v.messages),
    QueueList: lambda v: {
        "queues": [_queue_to_container(q) for q in v.queues],
        "trailer": retry_trailer(v.queues),
    },
    StatusInfo: _status_to_container,
    OutgoingList: lambda v: {
        "outgoing": [_outgoing_to_container(o) for o in v.outgoing],
        "purged": v.purged,
    },
    Resolve: lambda v: {"commit": v.commit, "xids": list(v.xids)},
    Resolutions: lambda v: {"outcomes": list(v.outcomes)},
    TransactionList: lambda v: {"transactions": [_plain_to_container(t) for t in v.transactions]},
    CreateList: lambda v: {"name": v.name, "targets": list(v.targets)},
    ChangeList: lambda v: {"name": v.name, "add": list(v.add), "remove": list(v.remove)},
    ListInfoList: lambda v: {
        "lists": [{"name": i.name, "targets": list(i.targets)} for i in v.lists]
    },
    Permissions: lambda v: {
        "queue": v.queue,
        "entries": [{"name": e.name, "rights": e.rights} for e in v.entries],
    },
    TraceReport: lambda v: {
        "qm_name": v.qm_name,
        "findings": [_plain_to_container(f) for f in v.findings],
    },
}

_FROM_CONTAINER: dict[type[Any], Callable[[Any], Any]] = {
    CreateQueue: _create_from_container,
    SetQueueProperties: lambda w: SetQueueProperties(
        name=w.name, poison=w.poison, **retry_values(w)
    ),
    HelloOk: lambda w: HelloOk(
        version=w.version,
        server_version=w.server_version,
        qm_name=w.qm_name,
        qm_guid=uuid.UUID(bytes=w.qm_guid),
        max_frame_body=w.max_frame_body,
    ),
    Send: lambda w: Send(tx_id=w.tx_id, mode=w.mode, message=message_from_container(w.message)),
    MessageReply: lambda w: MessageReply(
        message=with_counters((_queued_from_container(w.message),), [w.counters])[0]
        if w.counters is not None
        else _queued_from_container(w.message)
    ),
    MessageList: lambda w: MessageList(messages=_messages_from_container(w)),
    QueueList: lambda w: QueueList(
        queues=with_retry(tuple(_queue_from_container(q) for q in w.queues), w.trailer)
    ),
    StatusInfo: _status_from_container,
    OutgoingList: lambda w: OutgoingList(
        outgoing=tuple(_outgoing_from_container(o) for o in w.outgoing), purged=w.purged
    ),
    Resolve: lambda w: Resolve(commit=w.commit, xids=tuple(w.xids)),
    Resolutions: lambda w: Resolutions(outcomes=tuple(w.outcomes)),
    TransactionList: lambda w: TransactionList(
        transactions=tuple(
            TransactionInfo(**{name: t[name] for name in _FIELD_NAMES[TransactionInfo]})
            for t in w.transactions
        )
    ),
    CreateList: lambda w: CreateList(name=w.name, targets=tuple(w.targets)),
    ChangeList: lambda w: ChangeList(name=w.name, add=tuple(w.add), remove=tuple(w.remove)),
    ListInfoList: lambda w: ListInfoList(
        lists=tuple(ListInfo(name=i.name, targets=tuple(i.targets)) for i in w.lists)
    ),
    Permissions: lambda w: Permissions(
        queue=w.queue, entries=tuple(AclEntry(name=e.name, rights=e.rights) for e in w.entries)
    ),
    TraceReport: lambda w: TraceReport(
        qm_name=w.qm_name,
        findings=tuple(
            TraceFinding(**{name: f[name] for name in _FIELD_NAMES[TraceFinding]})
            for f in w.findings
        ),
    ),
}


def encode_body_with_layout(value: FrameValue) -> bytes:
    """Encode a frame body with its construct layout.

    Raises:
        LocalProtocolError: a field cannot be encoded.
    """
    cls = type(value)
    to_container = _TO_CONTAINER.get(cls, _plain_to_container)
    return build_with(LAYOUTS[KIND_OF[cls]], to_container(value), cls.__name__)


def decode_body_with_layout(kind: FrameKind, body: bytes) -> FrameValue:
    """Decode a frame body with its construct layout.

    Raises:
        RemoteProtocolError: the body does not match the layout.
    """
    cls = CLASS_OF[kind]
    container = parse_exactly(LAYOUTS[kind], body, cls.__name__)
    from_container = _FROM_CONTAINER.get(cls)
    try:
        if from_container is not None:
            value: FrameValue = from_container(container)
        else:
            value = cls(**{name: container[name] for name in _FIELD_NAMES[cls]})
    except RemoteProtocolError:
        raise
    except Exception as exc:  # a layout/value mismatch is still the peer's malformed input
        msg = f"malformed: {type(exc).__name__}: {exc}"
        raise RemoteProtocolError(msg, field=cls.__name__) from exc
    return value
