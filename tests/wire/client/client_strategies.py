"""Hypothesis strategies for the client protocol's values (``wire.client``).

Everything generated here can be encoded, and decodes back to an equal value:
numbers fit their widths, strings have no lone surrogates, times are finite
(a NaN would not compare equal to itself). ``FRAMES_BY_KIND`` has one
strategy per frame kind, so a test can check that none is left out.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from wire_strategies import blob, message_fields, properties, text, times, u8, u16, u32, u64

from wire import client as cf

__all__ = [
    "FAST_KINDS",
    "FRAMES_BY_KIND",
    "blob",
    "body_mutations",
    "fast_frames",
    "flips",
    "frames",
    "message_fields",
    "message_tuples",
    "offsets",
    "properties",
    "queued_messages",
    "u8",
    "u16",
    "u32",
    "u64",
]

guids = st.uuids()
#: Where in a body to flip bits or cut it (taken modulo its length), and the bits to flip.
offsets = st.integers(0, 10_000)
flips = st.integers(1, 255)
#: The arguments of a test that mutates the body of a drawn frame (see
#: ``client_samples.assert_mutations_decode_or_are_refused``).
body_mutations: dict[str, st.SearchStrategy[Any]] = {
    "value": st.data(),
    "position": offsets,
    "flip": flips,
    "cut": offsets,
}


def tuples(elements: st.SearchStrategy[Any], max_size: int = 3) -> st.SearchStrategy[Any]:
    """Tuples of up to ``max_size`` values of ``elements`` (a frame's repeated field)."""
    return st.lists(elements, max_size=max_size).map(tuple)


message_counters = st.builds(
    cf.MessageCounters, abort_count=u32, move_count=u32, last_move_time=times
)


def queued(counters: st.SearchStrategy[cf.MessageCounters | None]) -> st.SearchStrategy[Any]:
    """Messages where a reader finds them, with ``counters``."""
    return st.builds(
        cf.QueuedMessage,
        queue=text,
        lookup_id=u64,
        arrived_time=times,
        message=properties,
        counters=counters,
    )


queued_messages = queued(st.none() | message_counters)
#: Messages of one list: with their counters (a version 5 list) or none of them.
message_tuples = st.one_of(
    tuples(queued(st.none())),
    tuples(queued(message_counters)),
)
retry_settings = st.builds(cf.RetrySettings, retry_count=u32, retry_cycles=u32, retry_delay=times)
#: The poison retry settings of a CreateQueue or SetQueueProperties (None: not set).
retry_overrides: dict[str, st.SearchStrategy[Any]] = {
    "retry_count": st.none() | u32,
    "retry_cycles": st.none() | u32,
    "retry_delay": st.none() | times,
}
queue_infos = st.builds(
    cf.QueueInfo,
    name=text,
    format_name=text,
    kind=u8,
    transactional=st.booleans(),
    journal=st.booleans(),
    quota=st.none() | u64,
    depth=u64,
    bytes=u64,
    locked=u64,
    created_at=times,
    retry=st.none() | retry_settings,
)
optional_times = st.none() | times
outgoing_infos = st.builds(
    cf.OutgoingInfo,
    destination=text,
    next_hop=text,
    state=text,
    next_attempt=optional_times,
    waiting=u64,
    unacknowledged=u64,
    sequence_timestamp=u32,
    sequence_ordinal=u32,
    next_number=u64,
    last_order_ack=optional_times,
    last_error=text,
)
incoming_infos = st.builds(
    cf.IncomingInfo,
    source_qm=guids,
    queue=text,
    sequence_timestamp=u32,
    sequence_ordinal=u32,
    last_number=u64,
    reject_count=u64,
    last_access=times,
)
sends = st.builds(cf.Send, tx_id=u64, mode=u8, message=properties)
message_replies = st.builds(cf.MessageReply, message=queued_messages)
message_lists = st.builds(cf.MessageList, messages=message_tuples)
receives = st.builds(
    cf.Receive, tx_id=u64, queue=text, timeout_ms=u32, peek=st.booleans(), lookup_id=u64
)
transaction_infos = st.builds(
    cf.TransactionInfo,
    xid=text,
    state=u8,
    since=times,
    sends=u64,
    receives=u64,
    bytes=u64,
)

#: One strategy per frame kind.
FRAMES_BY_KIND: dict[cf.FrameKind, st.SearchStrategy[Any]] = {
    cf.FrameKind.HELLO: st.builds(cf.Hello, min_version=u16, max_version=u16, client_name=text),
    cf.FrameKind.CREATE_QUEUE: st.builds(
        cf.CreateQueue,
        name=text,
        transactional=st.booleans(),
        journal=st.booleans(),
        quota=st.none() | u64,
        **retry_overrides,
    ),
    cf.FrameKind.DELETE_QUEUE: st.builds(cf.DeleteQueue, name=text),
    cf.FrameKind.PURGE_QUEUE: st.builds(cf.PurgeQueue, name=text),
    cf.FrameKind.LIST_QUEUES: st.just(cf.ListQueues()),
    cf.FrameKind.GET_STATUS: st.just(cf.GetStatus()),
    cf.FrameKind.BEGIN: st.builds(cf.Begin, tx_id=u64),
    cf.FrameKind.COMMIT: st.builds(cf.Commit, tx_id=u64),
    cf.FrameKind.ABORT: st.builds(cf.Abort, tx_id=u64),
    cf.FrameKind.SEND: sends,
    cf.FrameKind.RECEIVE: receives,
    cf.FrameKind.PEEK_RANGE: st.builds(cf.PeekRange, queue=text, after=u64, max_count=u32),
    cf.FrameKind.LIST_OUTGOING: st.just(cf.ListOutgoing()),
    cf.FrameKind.CONTROL_OUTGOING: st.builds(cf.ControlOutgoing, action=u8, destination=text),
    cf.FrameKind.BEGIN_GLOBAL: st.builds(cf.BeginGlobal, tx_id=u64, xid=text),
    cf.FrameKind.PREPARE: st.builds(cf.Prepare, tx_id=u64),
    cf.FrameKind.RESOLVE: st.builds(
        cf.Resolve, commit=st.booleans(), xids=tuples(text, max_size=5)
    ),
    cf.FrameKind.LIST_TRANSACTIONS: st.builds(
        cf.ListTransactions, prefix=text, resolved=st.booleans(), max_count=u32
    ),
    cf.FrameKind.REMOVE_THROUGH: st.builds(cf.RemoveThrough, queue=text, lookup_id=u64),
    cf.FrameKind.MEASURE_RANGE: st.builds(cf.MeasureRange, queue=text, after=u64, max_count=u32),
    cf.FrameKind.TRACE_MESSAGE: st.builds(cf.TraceMessage, message_id=text),
    cf.FrameKind.GET_ROUTING: st.builds(cf.GetRouting, destination=text),
    cf.FrameKind.CANCEL_RECEIVE: st.builds(cf.CancelReceive, request_id=u32),
    cf.FrameKind.CREATE_LIST: st.builds(cf.CreateList, name=text, targets=tuples(text)),
    cf.FrameKind.CHANGE_LIST: st.builds(
        cf.ChangeList,
        name=text,
        add=tuples(text),
        remove=tuples(text),
    ),
    cf.FrameKind.DELETE_LIST: st.builds(cf.DeleteList, name=text),
    cf.FrameKind.GET_LISTS: st.builds(cf.GetLists, name=text),
    cf.FrameKind.HELLO_OK: st.builds(
        cf.HelloOk,
        version=u16,
        server_version=text,
        qm_name=text,
        qm_guid=guids,
        max_frame_body=u32,
    ),
    cf.FrameKind.OK: st.builds(cf.Ok, value=u64),
    cf.FrameKind.SENT: st.builds(cf.Sent, message_id=text, queue=text, lookup_id=u64),
    cf.FrameKind.MESSAGE: message_replies,
    cf.FrameKind.NO_MESSAGE: st.just(cf.NoMessage()),
    cf.FrameKind.MESSAGE_LIST: message_lists,
    cf.FrameKind.QUEUE_LIST: st.builds(cf.QueueList, queues=tuples(queue_infos)),
    cf.FrameKind.STATUS_INFO: st.builds(
        cf.StatusInfo,
        qm_name=text,
        qm_guid=guids,
        server_version=text,
        started_at=times,
        connections=u32,
        open_transactions=u32,
        commits=u64,
        aborts=u64,
        batches=u64,
        uncommitted_bytes=u64,
        erasing=u32,
        queues=tuples(queue_infos),
        outgoing=tuples(outgoing_infos),
        incoming=tuples(incoming_infos),
    ),
    cf.FrameKind.OUTGOING_LIST: st.builds(
        cf.OutgoingList, outgoing=tuples(outgoing_infos), purged=u64
    ),
    cf.FrameKind.RESOLUTIONS: st.builds(cf.Resolutions, outcomes=tuples(u8, max_size=5)),
    cf.FrameKind.TRANSACTION_LIST: st.builds(
        cf.TransactionList, transactions=tuples(transaction_infos)
    ),
    cf.FrameKind.RANGE_INFO: st.builds(cf.RangeInfo, queue_id=u32, count=u64, last=u64),
    # The quota trailer (version 10) is there with a quota or with none, not otherwise.
    cf.FrameKind.SET_QUEUE_PROPERTIES: st.builds(
        cf.SetQueueProperties, name=text, poison=u8, quota=st.none() | u64, **retry_overrides
    )
    | st.builds(
        cf.SetQueueProperties, name=text, poison=u8, no_quota=st.just(True), **retry_overrides
    ),
    cf.FrameKind.MOVE_MESSAGES: st.builds(
        cf.MoveMessages,
        tx_id=u64,
        source=text,
        target=text,
        lookup_id=u64,
        all=st.booleans(),
    ),
    cf.FrameKind.MOVED: st.builds(cf.Moved, count=u64, lookup_id=u64),
    cf.FrameKind.GET_PERMISSIONS: st.builds(cf.GetPermissions, queue=text),
    cf.FrameKind.AUTHENTICATE: st.builds(cf.Authenticate, token=text),
    cf.FrameKind.CHANGE_PERMISSIONS: st.builds(
        cf.ChangePermissions, queue=text, entry=text, grant=u16, revoke=u16
    ),
    cf.FrameKind.PERMISSIONS: st.builds(
        cf.Permissions,
        queue=text,
        entries=tuples(st.builds(cf.AclEntry, name=text, rights=u16)),
    ),
    cf.FrameKind.LIST_INFO_LIST: st.builds(
        cf.ListInfoList,
        lists=tuples(st.builds(cf.ListInfo, name=text, targets=tuples(text))),
    ),
    cf.FrameKind.TRACE_REPORT: st.builds(
        cf.TraceReport,
        qm_name=text,
        findings=tuples(
            st.builds(
                cf.TraceFinding,
                kind=text,
                place=text,
                time=times,
                message_class=u16,
                detail=text,
                next_hop=text,
            )
        ),
    ),
    cf.FrameKind.ROUTING_INFO: st.builds(
        cf.RoutingInfo,
        router=st.booleans(),
        failover_after=times,
        aliases=tuples(text),
        routes=tuples(st.builds(cf.RouteEntry, key=text, hops=tuples(text))),
        destination=text,
        local=st.booleans(),
        entry=text,
        hops=tuples(
            st.builds(
                cf.HopInfo,
                hop=text,
                state=text,
                in_use=st.booleans(),
                down_since=times,
                last_error=text,
            )
        ),
    ),
    cf.FrameKind.ERROR: st.builds(cf.ErrorReply, code=u16, message=text),
}

#: Any frame value.
frames: st.SearchStrategy[cf.FrameValue] = st.one_of(*FRAMES_BY_KIND.values())

#: The kinds ``wire.client.fast_codec`` encodes and decodes by hand.
FAST_KINDS: tuple[cf.FrameKind, ...] = (
    cf.FrameKind.OK,
    cf.FrameKind.BEGIN,
    cf.FrameKind.COMMIT,
    cf.FrameKind.ABORT,
    cf.FrameKind.RECEIVE,
    cf.FrameKind.SEND,
    cf.FrameKind.MESSAGE,
    cf.FrameKind.MESSAGE_LIST,
    cf.FrameKind.SENT,
)
#: Frames of the hand-written kinds only.
fast_frames: st.SearchStrategy[cf.FrameValue] = st.one_of(
    *(FRAMES_BY_KIND[kind] for kind in FAST_KINDS)
)
