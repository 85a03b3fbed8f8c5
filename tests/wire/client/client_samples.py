"""Sample client-protocol values and the checks several client tests share.

``SAMPLES`` holds one value of every frame kind, with non-default fields; the
helpers decode streams and compare or refuse bodies the way the tests of
every frame family need.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from wire_samples import (
    CONNECTED_INFO,
    GUID,
    OUTGOING_INFO,
    PROPERTIES,
    QUEUE_INFO,
    QUEUED,
    STATUS_INFO,
    TRACE_FINDING,
)

from wire import LocalProtocolError, RemoteProtocolError
from wire import client as cf
from wire.client.frames import CLASS_OF


def fields_of(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


#: One value of every frame kind, with non-default fields.
SAMPLES: dict[cf.FrameKind, cf.FrameValue] = {
    cf.FrameKind.HELLO: cf.Hello(client_name="test"),
    cf.FrameKind.CREATE_QUEUE: cf.CreateQueue(name="orders", transactional=True, quota=5),
    cf.FrameKind.DELETE_QUEUE: cf.DeleteQueue(name="orders"),
    cf.FrameKind.PURGE_QUEUE: cf.PurgeQueue(name="orders"),
    cf.FrameKind.LIST_QUEUES: cf.ListQueues(),
    cf.FrameKind.GET_STATUS: cf.GetStatus(),
    cf.FrameKind.BEGIN: cf.Begin(tx_id=3),
    cf.FrameKind.COMMIT: cf.Commit(tx_id=3),
    cf.FrameKind.ABORT: cf.Abort(tx_id=2**64 - 1),
    cf.FrameKind.SEND: cf.Send(tx_id=3, mode=2, message=PROPERTIES),
    cf.FrameKind.RECEIVE: cf.Receive(
        tx_id=3, queue="orders", timeout_ms=cf.INFINITE_TIMEOUT_MS, peek=True, lookup_id=8
    ),
    cf.FrameKind.PEEK_RANGE: cf.PeekRange(queue="orders", after=4, max_count=10),
    cf.FrameKind.LIST_OUTGOING: cf.ListOutgoing(),
    cf.FrameKind.CONTROL_OUTGOING: cf.ControlOutgoing(
        action=3, destination=OUTGOING_INFO.destination
    ),
    cf.FrameKind.BEGIN_GLOBAL: cf.BeginGlobal(tx_id=4, xid="spark:q:7:0:0123456789ab"),
    cf.FrameKind.PREPARE: cf.Prepare(tx_id=4),
    cf.FrameKind.RESOLVE: cf.Resolve(commit=True, xids=("a", "b\u00e9")),
    cf.FrameKind.LIST_TRANSACTIONS: cf.ListTransactions(prefix="spark:", resolved=True),
    cf.FrameKind.REMOVE_THROUGH: cf.RemoveThrough(queue="orders", lookup_id=2**40),
    cf.FrameKind.MEASURE_RANGE: cf.MeasureRange(queue="orders", after=7, max_count=100),
    cf.FrameKind.CREATE_LIST: cf.CreateList(name="fanout", targets=("orders", "audit")),
    cf.FrameKind.CHANGE_LIST: cf.ChangeList(name="fanout", add=("x",), remove=("audit",)),
    cf.FrameKind.DELETE_LIST: cf.DeleteList(name="fanout"),
    cf.FrameKind.GET_LISTS: cf.GetLists(name=""),
    cf.FrameKind.GET_ROUTING: cf.GetRouting(destination="DIRECT=TCP:10.2.0.7\\private$\\orders"),
    cf.FrameKind.CANCEL_RECEIVE: cf.CancelReceive(request_id=41),
    cf.FrameKind.TRACE_MESSAGE: cf.TraceMessage(
        message_id="{6f9619ff-8b86-d011-b42d-00c04fc964ff}\\7"
    ),
    cf.FrameKind.HELLO_OK: cf.HelloOk(
        version=cf.PROTOCOL_VERSION, server_version="1.0", qm_name="qm", qm_guid=GUID
    ),
    cf.FrameKind.OK: cf.Ok(value=2**63),
    cf.FrameKind.SENT: cf.Sent(message_id=PROPERTIES.message_id, queue="orders", lookup_id=9),
    cf.FrameKind.MESSAGE: cf.MessageReply(message=QUEUED),
    cf.FrameKind.NO_MESSAGE: cf.NoMessage(),
    cf.FrameKind.MESSAGE_LIST: cf.MessageList(messages=(QUEUED, QUEUED)),
    cf.FrameKind.QUEUE_LIST: cf.QueueList(queues=(QUEUE_INFO,)),
    cf.FrameKind.STATUS_INFO: STATUS_INFO,
    cf.FrameKind.OUTGOING_LIST: cf.OutgoingList(
        outgoing=(OUTGOING_INFO, CONNECTED_INFO), purged=2**40
    ),
    cf.FrameKind.RESOLUTIONS: cf.Resolutions(outcomes=(1, 2, 4)),
    cf.FrameKind.TRANSACTION_LIST: cf.TransactionList(
        transactions=(
            cf.TransactionInfo(
                xid="a", state=1, since=1_700_000_000.5, sends=2, receives=1, bytes=300
            ),
            cf.TransactionInfo(xid="b", state=3, since=1.0, sends=0, receives=0, bytes=0),
        )
    ),
    cf.FrameKind.RANGE_INFO: cf.RangeInfo(queue_id=5, count=10, last=2**63),
    cf.FrameKind.SET_QUEUE_PROPERTIES: cf.SetQueueProperties(
        name="orders", poison=cf.PoisonHandling.ON, retry_count=1, retry_delay=1.5
    ),
    cf.FrameKind.MOVE_MESSAGES: cf.MoveMessages(
        source="orders;poison", target="orders", lookup_id=7
    ),
    cf.FrameKind.MOVED: cf.Moved(count=1, lookup_id=2**40),
    cf.FrameKind.GET_PERMISSIONS: cf.GetPermissions(queue="orders"),
    cf.FrameKind.AUTHENTICATE: cf.Authenticate(token="s3cret-token"),
    cf.FrameKind.CHANGE_PERMISSIONS: cf.ChangePermissions(
        queue="orders", entry="group:ops", grant=0x06, revoke=0x08
    ),
    cf.FrameKind.PERMISSIONS: cf.Permissions(
        queue="orders",
        entries=(cf.AclEntry(name="alice", rights=0xFF), cf.AclEntry(name="everyone", rights=1)),
    ),
    cf.FrameKind.LIST_INFO_LIST: cf.ListInfoList(
        lists=(cf.ListInfo(name="fanout", targets=("orders",)),)
    ),
    cf.FrameKind.TRACE_REPORT: cf.TraceReport(qm_name="qm", findings=(TRACE_FINDING,)),
    cf.FrameKind.ROUTING_INFO: cf.RoutingInfo(
        router=True,
        failover_after=30.0,
        aliases=("203.0.113.5:11801", "qm1.example.net"),
        routes=(cf.RouteEntry(key="*", hops=("gate1:1801", "direct")),),
        destination="10.2.0.7:1801",
        local=False,
        entry="*",
        hops=(
            cf.HopInfo(
                hop="gate1:1801", state="waiting", in_use=False, down_since=1.5e9, last_error="x"
            ),
            cf.HopInfo(
                hop="10.2.0.7:1801", state="connected", in_use=True, down_since=0.0, last_error=""
            ),
        ),
    ),
    cf.FrameKind.ERROR: cf.ErrorReply(code=cf.ErrorCode.QUEUE_NOT_FOUND, message="no 'x'"),
}
SAMPLE_PARAMS = [pytest.param(value, id=kind.name) for kind, value in SAMPLES.items()]


def decode_all(data: bytes) -> list[cf.Frame]:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(data)
    found = []
    while (frame := decoder.next_frame()) is not None:
        found.append(frame)
    assert not decoder.in_frame
    return found


def outcome(decode: Any, kind: cf.FrameKind, body: bytes) -> object:
    """What a body decoder makes of ``body``, as something comparable."""
    try:
        value = decode(kind, body)
    except RemoteProtocolError:
        return "rejected"
    # The layout re-encodes canonically: equal bytes mean equal fields.
    return cf.encode_body_with_layout(value)


def text(value: str) -> bytes:
    """A string as the protocol lays it out: u16 length, then UTF-8."""
    data = value.encode()
    return struct.pack("<H", len(data)) + data


def assert_cannot_encode(value: cf.FrameValue) -> None:
    """``value`` is refused by ``encode_frame``, the error naming its class."""
    with pytest.raises(LocalProtocolError) as excinfo:
        cf.encode_frame(1, value)
    assert excinfo.value.field == type(value).__name__


def assert_refused(kind: cf.FrameKind, body: bytes) -> None:
    """``body`` is refused by ``decode_body`` and by a decoder reading it as a frame."""
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(kind, body)
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", len(body), kind, 0, 1) + body)
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def assert_mutations_decode_or_are_refused(
    kind: cf.FrameKind, body: bytes, position: int, flip: int, cut: int
) -> None:
    """A bit flipped, the body cut short or a byte added: each decodes to a value of
    the kind that encodes again, or raises RemoteProtocolError."""
    flipped = bytearray(body)
    if flipped:
        flipped[position % len(flipped)] ^= flip
    for mutated in (bytes(flipped), body[: cut % (len(body) + 1)], body + b"\x00"):
        try:
            decoded = cf.decode_body(kind, mutated)
        except RemoteProtocolError:
            continue
        assert type(decoded) is CLASS_OF[kind]
        cf.encode_body_with_layout(decoded)


def body_of(value: cf.FrameValue) -> bytes:
    """The body ``encode_frame`` gives ``value``."""
    return cf.encode_frame(1, value)[cf.HEADER_SIZE :]


def both_decode(kind: cf.FrameKind, data: bytes) -> cf.FrameValue:
    """Decode with the daemon's decoder and the construct layout; they must agree."""
    fast = cf.decode_body(kind, data)
    assert cf.decode_body_with_layout(kind, data) == fast
    return fast


def both_refuse(kind: cf.FrameKind, data: bytes) -> None:
    """Both decoders refuse ``data``."""
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(kind, data)
    with pytest.raises(RemoteProtocolError):
        cf.decode_body_with_layout(kind, data)
