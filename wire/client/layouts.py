"""The client protocol's frame bodies as construct layouts: the reference definition.

Each frame kind's body is one construct ``Struct`` (compiled at its first use
by :func:`layout`, parsed strictly by :func:`wire.strict_construct.parse_exactly`);
:mod:`wire.client.layout_codec` turns frame values into the containers these
layouts build from and back. The hot frames are encoded and decoded by hand in
:mod:`wire.client.fast_codec`; property tests check, on generated values, that
both produce the same bytes and refuse the same malformed input. All integers
are little-endian; strings are UTF-8 with a u16 length; GUIDs are 16 bytes in
RFC 4122 order; times are float seconds since the Unix epoch. A message is laid
out as :mod:`wire.message_layout` documents.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import construct as c

from .constants import HELLO_MAGIC, FrameKind
from .two_phase import MAX_RESOLVE_XIDS

__all__ = [
    "COUNTERS_ENTRY",
    "CREATE_RETRY",
    "MESSAGE_LAYOUT",
    "QUOTA_CHANGE",
    "RETRY_ENTRY",
    "layout",
    "optional_container",
    "optional_value",
]

_Str = c.PascalString(c.Int16ul, "utf8")
_Guid = c.Bytes(16)


def _optional(value: Any) -> Any:
    """A value that may be absent: a presence flag, then the value (zero when absent)."""
    return c.Struct("present" / c.Flag, "value" / value)


_OPTIONAL_TIME = _optional(c.Float64l)


def optional_container(value: Any, zero: Any) -> dict[str, Any]:
    """The container an optional value's layout builds ``value`` from (None: absent)."""
    return {"present": value is not None, "value": zero if value is None else value}


def optional_value(container: Any) -> Any:
    """The value an optional value's layout parsed into ``container``, or None if absent."""
    return container.value if container.present else None


#: A message (see :mod:`wire.message_layout`): the fixed part with every length,
#: then the variable fields. The strings are UTF-8 bytes here;
#: :mod:`wire.client.layout_codec` encodes and decodes them.
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
    "quota" / _optional(c.Int64ul),
    "depth" / c.Int64ul,
    "bytes" / c.Int64ul,
    "locked" / c.Int64ul,
    "created_at" / c.Float64l,
)

_OUTGOING_INFO = c.Struct(
    "destination" / _Str,
    "next_hop" / _Str,
    "state" / _Str,
    "next_attempt" / _OPTIONAL_TIME,
    "waiting" / c.Int64ul,
    "unacknowledged" / c.Int64ul,
    "sequence_timestamp" / c.Int32ul,
    "sequence_ordinal" / c.Int32ul,
    "next_number" / c.Int64ul,
    "last_order_ack" / _OPTIONAL_TIME,
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

#: The records of version 5 trailers (see :mod:`wire.client.poison`): a message's
#: counters, and a queue's retry settings.
COUNTERS_ENTRY: Final = c.Struct(
    "abort_count" / c.Int32ul,
    "move_count" / c.Int32ul,
    "last_move_time" / c.Float64l,
)
RETRY_ENTRY: Final = c.Struct(
    "present" / c.Flag,
    "retry_count" / c.Int32ul,
    "retry_cycles" / c.Int32ul,
    "retry_delay" / c.Float64l,
)
#: The three optional retry values of ``CreateQueue`` (its trailer) and ``SetQueueProperties``.
_RETRY_VALUES = (
    "retry_count" / _optional(c.Int32ul),
    "retry_cycles" / _optional(c.Int32ul),
    "retry_delay" / _optional(c.Float64l),
)
CREATE_RETRY: Final = c.Struct(*_RETRY_VALUES)
#: The version 10 trailer of ``SetQueueProperties``: the new quota (present 0: none).
QUOTA_CHANGE: Final = _optional(c.Int64ul)


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
        "quota" / _optional(c.Int64ul),
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
    FrameKind.GET_ROUTING: c.Struct("destination" / _Str),
    FrameKind.CANCEL_RECEIVE: c.Struct("request_id" / c.Int32ul),
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
    FrameKind.SET_QUEUE_PROPERTIES: c.Struct(
        "name" / _Str,
        "poison" / c.Int8ul,
        *_RETRY_VALUES,
        "quota" / c.Optional(QUOTA_CHANGE),
    ),
    FrameKind.MOVE_MESSAGES: c.Struct(
        "tx_id" / c.Int64ul,
        "source" / _Str,
        "target" / _Str,
        "lookup_id" / c.Int64ul,
        "all" / c.Flag,
    ),
    FrameKind.MOVED: c.Struct("count" / c.Int64ul, "lookup_id" / c.Int64ul),
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
    FrameKind.ROUTING_INFO: c.Struct(
        "router" / c.Flag,
        "failover_after" / c.Float64l,
        "aliases" / c.PrefixedArray(c.Int32ul, _Str),
        "routes"
        / c.PrefixedArray(
            c.Int32ul, c.Struct("key" / _Str, "hops" / c.PrefixedArray(c.Int32ul, _Str))
        ),
        "destination" / _Str,
        "local" / c.Flag,
        "entry" / _Str,
        "hops"
        / c.PrefixedArray(
            c.Int32ul,
            c.Struct(
                "hop" / _Str,
                "state" / _Str,
                "in_use" / c.Flag,
                "down_since" / c.Float64l,
                "last_error" / _Str,
            ),
        ),
    ),
    FrameKind.ERROR: c.Struct("code" / c.Int16ul, "message" / _Str),
}


@functools.cache
def layout(kind: FrameKind) -> Any:
    """The compiled layout of ``kind``'s body, parsed strictly by ``parse_exactly``.

    Each is compiled at its first use: compiled, the layouts of every kind
    hold some 2 MB of generated code, and a process uses few of them (a
    daemon, those of the requests its clients make; a client, those of the
    answers it gets)."""
    return _SOURCES[kind].compile()
