"""Frame bodies with their construct layouts: frame values to containers and back.

The reference codec of the client protocol: :func:`encode_body_with_layout`
turns a frame value into the container its layout in :mod:`wire.client.layouts`
builds from, and :func:`decode_body_with_layout` makes the value from what the
layout parsed. Most fields go across as they are (the dataclass fields a value
shares with its layout); the tables ``_TO_CONTAINER`` and ``_FROM_CONTAINER``
convert the others (GUIDs, optional values, messages, tuples, the version 5
trailers of :mod:`wire.client.trailers`). :mod:`wire.client.framing` uses it
for every kind that :mod:`wire.client.fast_codec` does not encode by hand.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Final

from ..message_layout import (
    FIXED_FIELDS,
    FLAG_CORRELATION,
    FLAG_TRANSACTIONAL,
    KNOWN_FLAGS,
    NO_CORRELATION,
)
from ..message_properties import MessageProperties
from ..protocol_errors import RemoteProtocolError
from ..strict_construct import build_with, parse_exactly
from .constants import HELLO_MAGIC, FrameKind
from .frames import CLASS_OF, KIND_OF, FrameValue
from .layouts import layout, optional_container, optional_value
from .lists import ChangeList, CreateList, ListInfo, ListInfoList
from .permissions import AclEntry, Permissions
from .poison import SetQueueProperties
from .routing import HopInfo, RouteEntry, RoutingInfo
from .trace import TraceFinding, TraceReport
from .trailers import (
    counters_to_container,
    counters_trailer,
    quota_change,
    quota_fields,
    retry_fields,
    retry_trailer,
    retry_values,
    with_counters,
    with_retry,
)
from .two_phase import Resolutions, Resolve, TransactionInfo, TransactionList
from .values import (
    CreateQueue,
    Hello,
    HelloOk,
    IncomingInfo,
    MessageList,
    MessageReply,
    OutgoingInfo,
    OutgoingList,
    QueuedMessage,
    QueueInfo,
    QueueList,
    Send,
    StatusInfo,
)

__all__ = [
    "decode_body_with_layout",
    "encode_body_with_layout",
    "message_from_container",
    "message_to_container",
]

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
        HopInfo,
    )
}
#: Fields that travel in a version 4 trailer, not in their value's own layout.
_IN_TRAILERS: Final = frozenset({"counters", "retry", "retry_count", "retry_cycles", "retry_delay"})
_FIELD_NAMES = {
    cls: tuple(name for name in names if name not in _IN_TRAILERS or cls is SetQueueProperties)
    for cls, names in _FIELD_NAMES.items()
}
#: The message's fields that ``MESSAGE_LAYOUT`` carries as they are (not the
#: source GUID, the flags and the correlation id, which are encoded).
_MESSAGE_FIELDS: Final = tuple(
    name for name, _code in FIXED_FIELDS if name not in {"source_qm", "flags", "correlation_id"}
)
_MESSAGE_TEXTS: Final = ("label", "admin_queue", "response_queue", "destination")


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
    data["correlation"] = correlation or NO_CORRELATION
    data["flags"] = (FLAG_TRANSACTIONAL if message.transactional else 0) | (
        FLAG_CORRELATION if correlation else 0
    )
    return data


def message_from_container(container: Any) -> MessageProperties:
    """A message parsed by ``MESSAGE_LAYOUT``.

    Raises:
        RemoteProtocolError: unknown flags, or correlation bytes without their flag.
    """
    flags = container.flags
    if flags & ~KNOWN_FLAGS:
        msg = f"unknown flags {flags:#04x}"
        raise RemoteProtocolError(msg, field="MessageProperties.flags")
    if not flags & FLAG_CORRELATION and any(container.correlation):
        msg = "a correlation id without the flag that says there is one"
        raise RemoteProtocolError(msg, field="MessageProperties.correlation_id")
    values = {name: container[name] for name in _MESSAGE_FIELDS}
    for name in _MESSAGE_TEXTS:
        values[name] = values[name].decode("utf-8")
    return MessageProperties(
        **values,
        source_qm=uuid.UUID(bytes=container.source_qm),
        correlation_id=container.correlation if flags & FLAG_CORRELATION else b"",
        transactional=bool(flags & FLAG_TRANSACTIONAL),
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


# --------------------------------------------------------------------------
# Version 5 trailers (see :mod:`wire.client.poison`; their values in :mod:`wire.client.trailers`)
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
    data = {**_plain_to_container(value), "quota": optional_container(value.quota, 0)}
    given = (value.retry_count, value.retry_cycles, value.retry_delay)
    data["retry"] = None if all(v is None for v in given) else retry_fields(value)
    return data


def _create_from_container(w: Any) -> CreateQueue:
    retry = w.retry
    return CreateQueue(
        name=w.name,
        transactional=w.transactional,
        journal=w.journal,
        quota=optional_value(w.quota),
        **({} if retry is None else retry_values(retry)),
    )


def _plain_to_container(value: Any) -> dict[str, Any]:
    """The fields of ``value`` its layout carries as they are."""
    return {name: getattr(value, name) for name in _FIELD_NAMES[type(value)]}


def _plain_fields(cls: type[Any], container: Any) -> dict[str, Any]:
    """The fields of a ``cls`` a layout parsed into ``container``, as they are."""
    return {name: container[name] for name in _FIELD_NAMES[cls]}


def _queue_to_container(info: QueueInfo) -> dict[str, Any]:
    data = _plain_to_container(info)
    data["quota"] = optional_container(info.quota, 0)
    return data


def _queue_from_container(container: Any) -> QueueInfo:
    data = _plain_fields(QueueInfo, container)
    data["quota"] = optional_value(container.quota)
    return QueueInfo(**data)


_OUTGOING_TIMES: Final = ("next_attempt", "last_order_ack")


def _outgoing_to_container(info: OutgoingInfo) -> dict[str, Any]:
    data = _plain_to_container(info)
    for name in _OUTGOING_TIMES:
        data[name] = optional_container(data[name], 0.0)
    return data


def _outgoing_from_container(container: Any) -> OutgoingInfo:
    data = _plain_fields(OutgoingInfo, container)
    for name in _OUTGOING_TIMES:
        data[name] = optional_value(data[name])
    return OutgoingInfo(**data)


def _incoming_to_container(info: IncomingInfo) -> dict[str, Any]:
    return {**_plain_to_container(info), "source_qm": info.source_qm.bytes}


def _incoming_from_container(container: Any) -> IncomingInfo:
    data = _plain_fields(IncomingInfo, container)
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
    data = _plain_fields(StatusInfo, container)
    data["qm_guid"] = uuid.UUID(bytes=container.qm_guid)
    queues = tuple(_queue_from_container(q) for q in container.queues)
    data["queues"] = with_retry(queues, container.trailer)
    data["outgoing"] = tuple(_outgoing_from_container(o) for o in container.outgoing)
    data["incoming"] = tuple(_incoming_from_container(i) for i in container.incoming)
    return StatusInfo(**data)


_TO_CONTAINER: dict[type[Any], Callable[[Any], dict[str, Any]]] = {
    CreateQueue: _create_to_container,
    SetQueueProperties: lambda v: {
        "name": v.name,
        "poison": v.poison,
        **retry_fields(v),
        "quota": quota_change(v),
    },
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
    RoutingInfo: lambda v: {
        **_plain_to_container(v),
        "aliases": list(v.aliases),
        "routes": [{"key": r.key, "hops": list(r.hops)} for r in v.routes],
        "hops": [_plain_to_container(h) for h in v.hops],
    },
}

_FROM_CONTAINER: dict[type[Any], Callable[[Any], Any]] = {
    CreateQueue: _create_from_container,
    SetQueueProperties: lambda w: SetQueueProperties(
        name=w.name, poison=w.poison, **retry_values(w), **quota_fields(w.quota)
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
            TransactionInfo(**_plain_fields(TransactionInfo, t)) for t in w.transactions
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
        findings=tuple(TraceFinding(**_plain_fields(TraceFinding, f)) for f in w.findings),
    ),
    RoutingInfo: lambda w: RoutingInfo(
        **{
            **_plain_fields(RoutingInfo, w),
            "aliases": tuple(w.aliases),
            "routes": tuple(RouteEntry(key=r.key, hops=tuple(r.hops)) for r in w.routes),
            "hops": tuple(HopInfo(**_plain_fields(HopInfo, h)) for h in w.hops),
        }
    ),
}


def encode_body_with_layout(value: FrameValue) -> bytes:
    """Encode a frame body with its construct layout.

    Raises:
        LocalProtocolError: a field cannot be encoded.
    """
    cls = type(value)
    to_container = _TO_CONTAINER.get(cls, _plain_to_container)
    return build_with(layout(KIND_OF[cls]), to_container(value), cls.__name__)


def decode_body_with_layout(kind: FrameKind, body: bytes) -> FrameValue:
    """Decode a frame body with its construct layout.

    Raises:
        RemoteProtocolError: the body does not match the layout.
    """
    cls = CLASS_OF[kind]
    container = parse_exactly(layout(kind), body, cls.__name__)
    from_container = _FROM_CONTAINER.get(cls)
    try:
        if from_container is not None:
            value: FrameValue = from_container(container)
        else:
            value = cls(**_plain_fields(cls, container))
    except RemoteProtocolError:
        raise
    except Exception as exc:  # a layout/value mismatch is still the peer's malformed input
        msg = f"malformed: {type(exc).__name__}: {exc}"
        raise RemoteProtocolError(msg, field=cls.__name__) from exc
    return value
