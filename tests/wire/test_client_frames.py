"""The client protocol's frames: round trips, fast paths, decoder bounds, messages, bad input."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
import uuid
from typing import Any

import client_strategies as cs
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from wire import LocalProtocolError, MessageProperties, RemoteProtocolError
from wire import client_frames as cf
from wire._client_fast import FAST_DECODE, FAST_ENCODE
from wire._client_values import CLASS_OF, KIND_OF

GUID = uuid.UUID("6f1c2e3a-94b1-4c52-9d0e-1234567890ab")


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


PROPERTIES = MessageProperties(
    body=b"x" * 100,
    label="l\u00e9",
    destination="DIRECT=OS:.\\private$\\orders",
    correlation_id=bytes(range(20)),
    app_specific=7,
    priority=5,
    delivery=0,
    acknowledge=0x0E,
    journal=2,
    admin_queue=".\\private$\\admin",
    response_queue=".\\private$\\replies",
    time_to_reach_queue=60,
    time_to_be_received=3600,
    message_class=0,
    sent_time=1_700_000_000.25,
    source_qm=GUID,
    ordinal=42,
    transactional=True,
    extension=b"ext",
)
QUEUED = cf.QueuedMessage(
    queue="orders", lookup_id=9, arrived_time=1_700_000_001.5, message=PROPERTIES
)
QUEUE_INFO = cf.QueueInfo(
    name="orders",
    format_name=".\\private$\\orders",
    kind=int(cf.QueueKind.NORMAL),
    transactional=True,
    journal=False,
    quota=1 << 40,
    depth=3,
    bytes=300,
    locked=1,
    created_at=1_600_000_000.0,
)
OUTGOING_INFO = cf.OutgoingInfo(
    destination="DIRECT=TCP:10.0.0.5:1901\\private$\\orders",
    next_hop="10.0.0.9:1801",
    state="waiting",
    next_attempt=1_700_000_100.5,
    waiting=12,
    unacknowledged=3,
    sequence_timestamp=1_700_000_000,
    sequence_ordinal=2,
    next_number=16,
    last_order_ack=None,
    last_error="connection refused",
)
INCOMING_INFO = cf.IncomingInfo(
    source_qm=GUID,
    queue="orders",
    sequence_timestamp=1_690_000_000,
    sequence_ordinal=7,
    last_number=41,
    reject_count=2,
    last_access=1_700_000_002.25,
)

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
    cf.FrameKind.STATUS_INFO: cf.StatusInfo(
        qm_name="qm",
        qm_guid=GUID,
        server_version="1.0",
        started_at=1.5,
        connections=2,
        open_transactions=1,
        commits=10,
        aborts=2,
        batches=7,
        uncommitted_bytes=100,
        erasing=0,
        queues=(QUEUE_INFO, QUEUE_INFO),
        outgoing=(OUTGOING_INFO,),
        incoming=(INCOMING_INFO, INCOMING_INFO),
    ),
    cf.FrameKind.OUTGOING_LIST: cf.OutgoingList(
        outgoing=(OUTGOING_INFO, cf.OutgoingInfo(**{**_fields(OUTGOING_INFO), "state": "idle"})),
        purged=2**40,
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
    cf.FrameKind.TRACE_REPORT: cf.TraceReport(
        qm_name="qm",
        findings=(
            cf.TraceFinding(
                kind="queue",
                place="orders",
                time=1.5,
                message_class=0xC002,
                detail="lookup id 3",
                next_hop="10.0.0.5:1801",
            ),
        ),
    ),
    cf.FrameKind.ERROR: cf.ErrorReply(code=cf.ErrorCode.QUEUE_NOT_FOUND, message="no 'x'"),
}
SAMPLE_PARAMS = [pytest.param(value, id=kind.name) for kind, value in SAMPLES.items()]


def _decode_all(data: bytes) -> list[cf.Frame]:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(data)
    found = []
    while (frame := decoder.next_frame()) is not None:
        found.append(frame)
    assert not decoder.in_frame
    return found


def _outcome(decode: Any, kind: cf.FrameKind, body: bytes) -> object:
    """What a body decoder makes of ``body``, as something comparable."""
    try:
        value = decode(kind, body)
    except RemoteProtocolError:
        return "rejected"
    # The layout re-encodes canonically: equal bytes mean equal fields.
    return cf.encode_body_with_layout(value)


# --------------------------------------------------------------------------
# Every frame kind round trips
# --------------------------------------------------------------------------


def test_samples_and_strategies_cover_every_frame_kind() -> None:
    assert set(SAMPLES) == set(cf.FrameKind)
    assert set(cs.FRAMES_BY_KIND) == set(cf.FrameKind)
    assert all(type(value) is CLASS_OF[kind] for kind, value in SAMPLES.items())
    # Every hand-written path is compared with its layout below.
    assert set(FAST_DECODE) == set(cs.FAST_KINDS)
    assert set(FAST_ENCODE) == {CLASS_OF[kind] for kind in cs.FAST_KINDS}


@pytest.mark.parametrize("frame", SAMPLE_PARAMS)
def test_each_kind_round_trips_with_its_header(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(0xFFFFFFFF, frame)
    length, kind, flags, request_id = struct.unpack_from("<IHHI", data)
    assert (length, flags, request_id) == (len(data) - cf.HEADER_SIZE, 0, 0xFFFFFFFF)
    assert type(frame) is CLASS_OF[cf.FrameKind(kind)]
    assert cf.is_request(frame) == (kind < 0x80)
    assert _decode_all(data) == [cf.Frame(request_id=0xFFFFFFFF, value=frame)]


@settings(max_examples=400)
@given(frame=cs.frames, request_id=cs.u32)
def test_every_frame_round_trips(frame: cf.FrameValue, request_id: int) -> None:
    data = cf.encode_frame(request_id, frame)
    [decoded] = _decode_all(data)
    assert decoded == cf.Frame(request_id=request_id, value=frame)
    assert cf.encode_frame(request_id, decoded.value) == data


# --------------------------------------------------------------------------
# The hand-written fast paths agree with the construct layouts
# --------------------------------------------------------------------------


@settings(max_examples=300)
@given(frame=cs.fast_frames)
def test_fast_paths_match_the_layouts_byte_for_byte(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(1, frame)
    body = data[cf.HEADER_SIZE :]
    kind = cf.FrameKind(struct.unpack_from("<H", data, 4)[0])
    assert kind in FAST_DECODE
    assert body == cf.encode_body_with_layout(frame)
    assert cf.decode_body_with_layout(kind, body) == frame
    assert cf.decode_body(kind, body) == frame


@settings(max_examples=300)
@given(
    frame=cs.fast_frames,
    cut=st.integers(0, 10_000),
    position=st.integers(0, 10_000),
    flip=st.integers(1, 255),
    junk=st.binary(min_size=1, max_size=8),
)
def test_fast_and_layout_decoders_agree_on_malformed_bodies(
    frame: cf.FrameValue, cut: int, position: int, flip: int, junk: bytes
) -> None:
    body = cf.encode_body_with_layout(frame)
    kind = KIND_OF[type(frame)]
    mutations = [body[: cut % (len(body) + 1)], body + junk, junk + body]
    if body:
        flipped = bytearray(body)
        flipped[position % len(body)] ^= flip
        mutations.append(bytes(flipped))
    for mutated in mutations:
        fast = _outcome(cf.decode_body, kind, mutated)
        assert fast == _outcome(cf.decode_body_with_layout, kind, mutated)


def test_correlation_bytes_without_their_flag_are_refused_by_both_decoders() -> None:
    raw = bytearray(MessageProperties(destination="q", body=b"b").raw)
    raw[48:68] = b"\x01" * 20  # correlation id bytes; flag bit 1 stays clear
    body = struct.pack("<QB", 0, 0) + bytes(raw)
    with pytest.raises(RemoteProtocolError, match="correlation"):
        cf.decode_body(cf.FrameKind.SEND, body)
    with pytest.raises(RemoteProtocolError, match="correlation"):
        cf.decode_body_with_layout(cf.FrameKind.SEND, body)


BAD_FAST_VALUES = [
    pytest.param(cf.Ok(value=-1), id="ok-negative"),
    pytest.param(cf.Ok(value=2**64), id="ok-too-big"),
    pytest.param(cf.Begin(tx_id=2**64), id="begin-too-big"),
    pytest.param(cf.Commit(tx_id=-1), id="commit-negative"),
    pytest.param(cf.Receive(queue="q" * 0x10000), id="receive-long-queue"),
    pytest.param(cf.Receive(queue="\ud800"), id="receive-lone-surrogate"),
    pytest.param(cf.Receive(queue="q", timeout_ms=2**32), id="receive-timeout"),
    pytest.param(cf.Receive(queue="q", lookup_id=-1), id="receive-lookup-id"),
    pytest.param(cf.Send(tx_id=2**64, message=PROPERTIES), id="send-tx-id"),
    pytest.param(
        cf.Send(mode=256, message=PROPERTIES),
        id="send-mode",
    ),
    pytest.param(
        cf.MessageReply(
            message=cf.QueuedMessage(
                queue="q" * 0x10000, lookup_id=1, arrived_time=0.0, message=PROPERTIES
            )
        ),
        id="message-long-queue",
    ),
    pytest.param(
        cf.MessageList(
            messages=(
                cf.QueuedMessage(queue="q", lookup_id=-1, arrived_time=0.0, message=PROPERTIES),
            )
        ),
        id="list-lookup-id",
    ),
]


@pytest.mark.parametrize("value", BAD_FAST_VALUES)
def test_fast_and_layout_encoders_refuse_the_same_values(value: cf.FrameValue) -> None:
    with pytest.raises(LocalProtocolError):
        cf.encode_body_with_layout(value)
    with pytest.raises(LocalProtocolError) as excinfo:
        cf.encode_frame(1, value)
    assert excinfo.value.field == type(value).__name__


# --------------------------------------------------------------------------
# The byte-level helpers of the hot paths
# --------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    request_id=cs.u32,
    tx_id=cs.u64,
    mode=cs.u8,
    fields=cs.message_fields,
    prefix=st.binary(max_size=20),
)
def test_append_send_frame_is_encode_frame(
    request_id: int, tx_id: int, mode: int, fields: dict[str, Any], prefix: bytes
) -> None:
    message = MessageProperties(**fields)
    parts = cf.encode_message_parts(**fields)
    assert b"".join(parts) == message.raw
    out = bytearray(prefix)
    cf.append_send_frame(out, request_id, tx_id, mode, parts)
    expected = cf.encode_frame(request_id, cf.Send(tx_id=tx_id, mode=mode, message=message))
    assert bytes(out) == prefix + expected
    assert _decode_all(expected) == [
        cf.Frame(request_id=request_id, value=cf.Send(tx_id=tx_id, mode=mode, message=message))
    ]


@pytest.mark.parametrize(
    ("request_id", "tx_id", "mode"), [(2**32, 0, 0), (1, -1, 0), (1, 0, 256), (1, 2**64, 0)]
)
def test_append_send_frame_appends_nothing_when_it_fails(
    request_id: int, tx_id: int, mode: int
) -> None:
    out = bytearray(b"kept")
    with pytest.raises(struct.error):
        cf.append_send_frame(out, request_id, tx_id, mode, (PROPERTIES.raw,))
    assert out == b"kept"


@settings(max_examples=200)
@given(request_id=cs.u32, message=cs.queued_messages)
def test_encode_message_reply_is_encode_frame(request_id: int, message: cf.QueuedMessage) -> None:
    expected = cf.encode_frame(request_id, cf.MessageReply(message=message))
    raw = message.message.raw
    for stored in (raw, memoryview(raw), message.message.view):
        encoded = cf.encode_message_reply(
            request_id,
            message.queue,
            message.lookup_id,
            message.arrived_time,
            stored,
            message.counters,
        )
        assert encoded == expected


@settings(max_examples=100)
@given(messages=cs.message_tuples)
def test_queued_message_parts_make_a_message_list_body(messages: list[cf.QueuedMessage]) -> None:
    parts: list[bytes | memoryview] = [struct.pack("<I", len(messages))]
    for message in messages:
        parts.extend(
            cf.queued_message_parts(
                message.queue.encode(),
                message.lookup_id,
                message.arrived_time,
                message.message.view,
            )
        )
    # A version 4 list: the counters trailer after the last message.
    parts.extend(cf.counters_record(m.counters) for m in messages if m.counters is not None)
    body = b"".join(parts)
    value = cf.MessageList(messages=tuple(messages))
    assert body == cf.encode_frame(5, value)[cf.HEADER_SIZE :]
    assert cf.decode_body(cf.FrameKind.MESSAGE_LIST, body) == value


@given(request_id=cs.u32, value=cs.u64)
def test_encode_ok_is_encode_frame(request_id: int, value: int) -> None:
    assert cf.encode_ok(request_id, value) == cf.encode_frame(request_id, cf.Ok(value=value))
    assert cf.encode_ok(request_id) == cf.encode_frame(request_id, cf.Ok())


@given(request_id=cs.u32, tx_id=cs.u64)
def test_encode_tx_request_is_encode_frame(request_id: int, tx_id: int) -> None:
    for kind, cls in (
        (cf.FrameKind.BEGIN, cf.Begin),
        (cf.FrameKind.COMMIT, cf.Commit),
        (cf.FrameKind.ABORT, cf.Abort),
    ):
        data = cf.encode_tx_request(kind, request_id, tx_id)
        assert data == cf.encode_frame(request_id, cls(tx_id=tx_id))
        assert _decode_all(data) == [cf.Frame(request_id=request_id, value=cls(tx_id=tx_id))]


@pytest.mark.parametrize(("request_id", "value"), [(2**32, 0), (-1, 0), (0, 2**64), (0, -1)])
def test_hot_helpers_refuse_values_out_of_range(request_id: int, value: int) -> None:
    with pytest.raises(struct.error):
        cf.encode_ok(request_id, value)
    with pytest.raises(struct.error):
        cf.encode_tx_request(cf.FrameKind.COMMIT, request_id, value)


# --------------------------------------------------------------------------
# The stream decoder: chunking, truncation, bounds
# --------------------------------------------------------------------------


@pytest.mark.parametrize("frame", SAMPLE_PARAMS)
def test_decoder_whole_bytewise_and_followed_by_the_next(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(9, frame)
    expected = cf.Frame(request_id=9, value=frame)
    assert _decode_all(data) == [expected]

    decoder = cf.ClientFrameDecoder()
    for index in range(len(data)):
        assert decoder.next_frame() is None
        assert decoder.in_frame == (index > 0)
        decoder.receive_data(data[index : index + 1])
    assert decoder.next_frame() == expected
    assert decoder.next_frame() is None
    assert not decoder.in_frame

    decoder = cf.ClientFrameDecoder()
    following = cf.encode_frame(10, cf.Ok())
    decoder.receive_data(data + following[:5])
    assert decoder.next_frame() == expected
    assert decoder.next_frame() is None
    decoder.receive_data(following[5:])
    assert decoder.next_frame() == cf.Frame(request_id=10, value=cf.Ok())


@pytest.mark.parametrize("frame", SAMPLE_PARAMS)
def test_decoder_split_in_two_at_every_byte(frame: cf.FrameValue) -> None:
    stream = cf.encode_frame(1, frame) + cf.encode_frame(2, cf.NoMessage())
    expected = [cf.Frame(request_id=1, value=frame), cf.Frame(request_id=2, value=cf.NoMessage())]
    for cut in range(len(stream) + 1):
        decoder = cf.ClientFrameDecoder()
        found: list[cf.Frame] = []
        for chunk in (stream[:cut], memoryview(stream)[cut:]):
            decoder.receive_data(chunk)
            while (decoded := decoder.next_frame()) is not None:
                found.append(decoded)
        assert found == expected, cut
        assert decoder.buffered == 0


@pytest.mark.parametrize("frame", SAMPLE_PARAMS)
def test_truncated_frames_wait_and_truncated_bodies_are_refused(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(3, frame)
    kind = KIND_OF[type(frame)]
    body = data[cf.HEADER_SIZE :]
    for cut in range(len(data)):
        decoder = cf.ClientFrameDecoder()
        decoder.receive_data(data[:cut])
        assert decoder.next_frame() is None
        assert decoder.in_frame == (cut > 0)
        assert decoder.pending_body == (len(body) if cut >= cf.HEADER_SIZE else 0)
    # A header that declares fewer bytes than the value needs is a malformed body.
    for cut in range(len(body)):
        with pytest.raises(RemoteProtocolError):
            cf.decode_body(kind, body[:cut])
        short = struct.pack("<IHHI", cut, kind, 0, 3) + body[:cut]
        decoder = cf.ClientFrameDecoder()
        decoder.receive_data(short)
        with pytest.raises(RemoteProtocolError):
            decoder.next_frame()


def test_oversized_declared_size_is_refused_before_buffering() -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", cf.MAX_FRAME_BODY + 1, cf.FrameKind.SEND, 0, 1))
    with pytest.raises(RemoteProtocolError, match="limit") as excinfo:
        decoder.next_frame()
    assert excinfo.value.field == "FrameHeader.length"
    assert decoder.pending_body == 0
    # The decoder stays broken: a connection cannot recover after a framing error.
    decoder.receive_data(cf.encode_ok(2))
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()
    with pytest.raises(RemoteProtocolError):
        decoder.next_header()


def test_the_largest_declared_size_is_accepted() -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", cf.MAX_FRAME_BODY, cf.FrameKind.SEND, 0, 4))
    assert decoder.next_header() == (cf.MAX_FRAME_BODY, cf.FrameKind.SEND, 4)
    assert decoder.pending_body == cf.MAX_FRAME_BODY
    assert decoder.next_frame() is None
    assert decoder.in_frame


@pytest.mark.parametrize("limit", [0, 8, 100])
def test_decoder_limit_is_configurable(limit: int) -> None:
    decoder = cf.ClientFrameDecoder(max_body=limit)
    decoder.receive_data(struct.pack("<IHHI", limit, cf.FrameKind.OK, 0, 1))
    assert decoder.next_header() is not None
    decoder = cf.ClientFrameDecoder(max_body=limit)
    decoder.receive_data(struct.pack("<IHHI", limit + 1, cf.FrameKind.OK, 0, 1))
    with pytest.raises(RemoteProtocolError) as excinfo:
        decoder.next_header()
    assert excinfo.value.field == "FrameHeader.length"


@pytest.mark.parametrize(
    ("header", "field"),
    [
        (struct.pack("<IHHI", 0, 0x7E, 0, 1), "FrameHeader.kind"),
        (struct.pack("<IHHI", 0, 0x100 | cf.FrameKind.OK, 0, 1), "FrameHeader.kind"),
        (struct.pack("<IHHI", 0, cf.FrameKind.OK, 1, 1), "FrameHeader.flags"),
        (struct.pack("<IHHI", 0, cf.FrameKind.OK, 0x8000, 1), "FrameHeader.flags"),
    ],
)
def test_bad_headers_say_which_field(header: bytes, field: str) -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(header)
    with pytest.raises(RemoteProtocolError) as excinfo:
        decoder.next_frame()
    assert excinfo.value.field == field


def test_a_malformed_body_breaks_the_decoder_for_good() -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", 1, cf.FrameKind.NO_MESSAGE, 0, 1) + b"x")
    decoder.receive_data(cf.encode_ok(2))
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


def test_decode_body_refuses_an_unknown_kind() -> None:
    with pytest.raises(RemoteProtocolError, match="0x7e") as excinfo:
        cf.decode_body(0x7E, b"")
    assert excinfo.value.field == "kind"


def test_hello_magic_is_checked() -> None:
    body = cf.encode_frame(1, cf.Hello())[cf.HEADER_SIZE :]
    assert body[:4] == cf.HELLO_MAGIC
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(cf.FrameKind.HELLO, b"QMGX" + body[4:])


@settings(max_examples=500)
@given(data=st.binary(max_size=200), kind=st.sampled_from(list(cf.FrameKind)))
def test_any_body_parses_or_raises_remote_protocol_error(data: bytes, kind: cf.FrameKind) -> None:
    with contextlib.suppress(RemoteProtocolError):
        cf.decode_body(kind, data)


@settings(max_examples=300)
@given(
    frame=cs.frames,
    position=st.integers(0, 10_000),
    flip=st.integers(1, 255),
    chunk=st.integers(1, 64),
)
def test_mutated_streams_parse_or_raise_remote_protocol_error(
    frame: cf.FrameValue, position: int, flip: int, chunk: int
) -> None:
    data = bytearray(cf.encode_frame(1, frame))
    data[position % len(data)] ^= flip
    decoder = cf.ClientFrameDecoder()
    try:
        for start in range(0, len(data), chunk):
            decoder.receive_data(bytes(data[start : start + chunk]))
            while decoder.next_frame() is not None:
                pass
    except RemoteProtocolError:
        pass


def test_values_that_cannot_be_encoded_are_local_errors() -> None:
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(2**32, cf.Ok())
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(-1, cf.Ok())
    with pytest.raises(LocalProtocolError, match="not a client-protocol frame"):
        cf.encode_frame(1, PROPERTIES)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(1, cf.CreateQueue(name="q", quota=-1))
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(1, cf.ErrorReply(code=0x10000, message=""))


def test_unknown_guid_bytes_round_trip() -> None:
    guid = uuid.UUID(bytes=bytes(range(16)))
    frame = cf.HelloOk(version=1, server_version="x", qm_name="n", qm_guid=guid)
    [decoded] = _decode_all(cf.encode_frame(1, frame))
    assert decoded.value == frame


# --------------------------------------------------------------------------
# Outgoing queues and incoming sequences
# --------------------------------------------------------------------------


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<H", len(data)) + data


def _outgoing_bytes(info: cf.OutgoingInfo) -> bytes:
    """An OutgoingInfo as the protocol lays it out, written out by hand."""

    def optional_time(value: float | None) -> bytes:
        return struct.pack("<?d", value is not None, 0.0 if value is None else value)

    return b"".join(
        (
            _text(info.destination),
            _text(info.next_hop),
            _text(info.state),
            optional_time(info.next_attempt),
            struct.pack(
                "<QQIIQ",
                info.waiting,
                info.unacknowledged,
                info.sequence_timestamp,
                info.sequence_ordinal,
                info.next_number,
            ),
            optional_time(info.last_order_ack),
            _text(info.last_error),
        )
    )


def test_outgoing_frames_have_the_documented_layout() -> None:
    control = cf.ControlOutgoing(action=2, destination="DIRECT=TCP:h\\q")
    assert cf.encode_frame(1, control)[cf.HEADER_SIZE :] == b"\x02" + _text(control.destination)
    assert cf.encode_frame(1, cf.ListOutgoing())[cf.HEADER_SIZE :] == b""
    listed = cf.OutgoingList(outgoing=(OUTGOING_INFO,), purged=5)
    body = cf.encode_frame(1, listed)[cf.HEADER_SIZE :]
    assert body == struct.pack("<I", 1) + _outgoing_bytes(OUTGOING_INFO) + struct.pack("<Q", 5)
    incoming = b"".join(
        (
            GUID.bytes,
            _text("orders"),
            struct.pack("<IIQQd", 1_690_000_000, 7, 41, 2, 1_700_000_002.25),
        )
    )
    status = SAMPLES[cf.FrameKind.STATUS_INFO]
    assert cf.encode_frame(1, status)[cf.HEADER_SIZE :].endswith(
        struct.pack("<I", 1) + _outgoing_bytes(OUTGOING_INFO) + struct.pack("<I", 2) + incoming * 2
    )


def test_a_status_without_peering_has_empty_lists_at_the_end() -> None:
    old_style = cf.StatusInfo(
        **{**_fields(SAMPLES[cf.FrameKind.STATUS_INFO]), "outgoing": (), "incoming": ()}
    )
    fields = _fields(old_style)
    del fields["outgoing"], fields["incoming"]
    assert cf.StatusInfo(**fields) == old_style  # the new fields have defaults
    data = cf.encode_frame(4, old_style)
    assert data.endswith(bytes(8))  # two empty u32-counted lists
    assert _decode_all(data) == [cf.Frame(request_id=4, value=old_style)]
    # The lists are part of the frame: a body without them is malformed.
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(cf.FrameKind.STATUS_INFO, data[cf.HEADER_SIZE : -8])


@pytest.mark.parametrize("name", ["next_attempt", "last_order_ack"])
def test_an_absent_time_is_not_the_epoch(name: str) -> None:
    for value in (None, 0.0, -1.5):
        info = cf.OutgoingInfo(**{**_fields(OUTGOING_INFO), name: value})
        [frame] = _decode_all(cf.encode_frame(1, cf.OutgoingList(outgoing=(info,))))
        assert isinstance(frame.value, cf.OutgoingList)
        assert getattr(frame.value.outgoing[0], name) == value
        assert (getattr(frame.value.outgoing[0], name) is None) == (value is None)


BAD_OUTGOING_VALUES = [
    pytest.param(cf.ControlOutgoing(action=256, destination="d"), id="action-too-big"),
    pytest.param(cf.ControlOutgoing(action=-1, destination="d"), id="action-negative"),
    pytest.param(cf.ControlOutgoing(action=1, destination="\ud800"), id="destination-surrogate"),
    pytest.param(cf.ControlOutgoing(action=1, destination="d" * 0x10000), id="destination-long"),
    pytest.param(
        cf.OutgoingList(outgoing=(cf.OutgoingInfo(**{**_fields(OUTGOING_INFO), "waiting": -1}),)),
        id="waiting-negative",
    ),
    pytest.param(
        cf.OutgoingList(
            outgoing=(cf.OutgoingInfo(**{**_fields(OUTGOING_INFO), "sequence_timestamp": 2**32}),)
        ),
        id="sequence-timestamp-too-big",
    ),
    pytest.param(cf.OutgoingList(outgoing=(), purged=2**64), id="purged-too-big"),
    pytest.param(
        cf.StatusInfo(
            **{
                **_fields(SAMPLES[cf.FrameKind.STATUS_INFO]),
                "incoming": (cf.IncomingInfo(**{**_fields(INCOMING_INFO), "reject_count": -1}),),
            }
        ),
        id="status-reject-count",
    ),
]


@pytest.mark.parametrize("value", BAD_OUTGOING_VALUES)
def test_outgoing_values_that_cannot_be_encoded_are_local_errors(value: cf.FrameValue) -> None:
    with pytest.raises(LocalProtocolError) as excinfo:
        cf.encode_frame(1, value)
    assert excinfo.value.field == type(value).__name__


@pytest.mark.parametrize(
    ("kind", "body", "why"),
    [
        (cf.FrameKind.LIST_OUTGOING, b"\x00", "trailing byte"),
        (cf.FrameKind.CONTROL_OUTGOING, b"\x01\x02\x00\xff\xfe", "destination not UTF-8"),
        (cf.FrameKind.CONTROL_OUTGOING, b"\x01\x05\x00abc", "destination cut short"),
        (cf.FrameKind.CONTROL_OUTGOING, b"\x01", "no destination"),
        (cf.FrameKind.OUTGOING_LIST, struct.pack("<IQ", 1, 0), "a count with no entry"),
        (cf.FrameKind.OUTGOING_LIST, struct.pack("<I", 0), "no purged count"),
        (cf.FrameKind.OUTGOING_LIST, struct.pack("<IQB", 0, 0, 0), "trailing byte"),
        (cf.FrameKind.OUTGOING_LIST, struct.pack("<I", 0xFFFFFFFF) + bytes(8), "a huge count"),
    ],
)
def test_malformed_outgoing_bodies_are_refused(kind: cf.FrameKind, body: bytes, why: str) -> None:
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(kind, body)
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", len(body), kind, 0, 1) + body)
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


@settings(max_examples=300)
@given(
    kind=st.sampled_from(
        [cf.FrameKind.CONTROL_OUTGOING, cf.FrameKind.OUTGOING_LIST, cf.FrameKind.STATUS_INFO]
    ),
    value=st.data(),
    position=st.integers(0, 10_000),
    flip=st.integers(1, 255),
    cut=st.integers(0, 10_000),
)
def test_mutated_outgoing_bodies_decode_or_raise_remote_protocol_error(
    kind: cf.FrameKind, value: st.DataObject, position: int, flip: int, cut: int
) -> None:
    body = cf.encode_body_with_layout(value.draw(cs.FRAMES_BY_KIND[kind]))
    flipped = bytearray(body)
    if flipped:
        flipped[position % len(flipped)] ^= flip
    for mutated in (bytes(flipped), body[: cut % (len(body) + 1)], body + b"\x00"):
        try:
            decoded = cf.decode_body(kind, mutated)
        except RemoteProtocolError:
            continue
        # Whatever decodes is a value of the kind that encodes again.
        assert type(decoded) is CLASS_OF[kind]
        cf.encode_body_with_layout(decoded)


# --------------------------------------------------------------------------
# MessageProperties: the message, kept encoded
# --------------------------------------------------------------------------


def _expected_field(name: str, fields: dict[str, Any]) -> object:
    value = fields[name]
    if name == "source_qm" and value is None:
        return uuid.UUID(int=0)
    return value


@settings(max_examples=300)
@given(fields=cs.message_fields)
def test_message_properties_round_trip_every_field(fields: dict[str, Any]) -> None:
    message = MessageProperties(**fields)
    raw = message.raw
    for source in (raw, memoryview(raw), bytearray(raw)):
        again = MessageProperties.from_bytes(source)
        assert again == message
        assert hash(again) == hash(message)
        assert again.raw == raw
        assert len(again) == len(raw)
        for name, _ in fields.items():
            assert getattr(again, name) == _expected_field(name, fields), name
    assert message.body_size == len(fields["body"])
    assert MessageProperties.size_at(b"xx" + raw + b"yy", 2) == len(raw)
    assert message.message_id == cf.format_message_id(message.source_qm, fields["ordinal"])
    assert message.replace() == message


@settings(max_examples=200)
@given(fields=cs.message_fields)
def test_message_bytes_are_the_documented_layout(fields: dict[str, Any]) -> None:
    """The construct reference layout, fed by hand, builds the same bytes."""
    correlation: bytes = fields["correlation_id"]
    source_qm = fields["source_qm"]
    container = {
        name: fields[name]
        for name in (
            "ordinal",
            "app_specific",
            "priority",
            "delivery",
            "acknowledge",
            "journal",
            "message_class",
            "time_to_reach_queue",
            "time_to_be_received",
            "sent_time",
            "extension",
            "body",
        )
    }
    container |= {
        "source_qm": bytes(16) if source_qm is None else source_qm.bytes,
        "flags": (1 if fields["transactional"] else 0) | (2 if correlation else 0),
        "correlation": correlation or bytes(20),
        **{
            name: fields[name].encode()
            for name in ("label", "admin_queue", "response_queue", "destination")
        },
    }
    raw = MessageProperties(**fields).raw
    assert raw == cf.MESSAGE_LAYOUT.build(container)
    parsed = cf.MESSAGE_LAYOUT.parse(raw)
    assert parsed.body == fields["body"]
    assert parsed.label == fields["label"].encode()


def test_message_fixed_part_offsets() -> None:
    raw = PROPERTIES.raw
    assert raw[0:16] == GUID.bytes
    assert struct.unpack_from("<II", raw, 16) == (42, 7)
    assert tuple(raw[24:30]) == (5, 0, 0x0E, 2, 0x03, 0)
    assert struct.unpack_from("<HIId", raw, 30) == (0, 60, 3600, 1_700_000_000.25)
    assert raw[48:68] == bytes(range(20))
    lengths = struct.unpack_from("<HHHHII", raw, 68)
    texts = (PROPERTIES.label, PROPERTIES.admin_queue, PROPERTIES.response_queue)
    assert lengths[:3] == tuple(len(t.encode()) for t in texts)
    assert lengths[3:] == (len(PROPERTIES.destination), 3, 100)
    assert len(raw) == 84 + sum(lengths)
    assert raw.endswith(b"ext" + b"x" * 100)


def test_from_bytes_keeps_immutable_bytes_and_copies_mutable_ones() -> None:
    raw = PROPERTIES.raw
    frame = b"head" + raw
    viewed = MessageProperties.from_bytes(memoryview(frame)[4:])
    assert viewed.view.obj is frame  # a received frame is not copied
    buffer = bytearray(raw)
    copied = MessageProperties.from_bytes(buffer)
    buffer[-1:] = b"y"  # the caller may reuse its buffer
    assert copied.body == b"x" * 100
    assert copied == viewed == PROPERTIES


@pytest.mark.parametrize("cut", [0, 1, 83, 84, 85, -1])
def test_truncated_or_padded_message_bytes_are_remote_protocol_errors(cut: int) -> None:
    raw = MessageProperties(destination="q", body=b"body", label="l").raw
    with pytest.raises(RemoteProtocolError):
        MessageProperties.from_bytes(raw[:cut])
    with pytest.raises(RemoteProtocolError, match="add up"):
        MessageProperties.from_bytes(raw + b"x")
    with pytest.raises(RemoteProtocolError):
        MessageProperties.size_at(raw[:83], 0)


@pytest.mark.parametrize(
    ("offset", "value", "field"),
    [
        (28, 0x04, "MessageProperties.flags"),  # an unknown flag
        (29, 0x01, "MessageProperties.flags"),  # the reserved byte
        (84, 0xFF, "MessageProperties"),  # the label's first byte: not UTF-8
    ],
)
def test_malformed_message_bytes_say_what_is_wrong(offset: int, value: int, field: str) -> None:
    raw = bytearray(MessageProperties(destination="q", body=b"body", label="l").raw)
    raw[offset] = value
    with pytest.raises(RemoteProtocolError) as excinfo:
        MessageProperties.from_bytes(bytes(raw))
    assert excinfo.value.field == field


def test_stamp_sets_the_identity_and_transactional_defaults() -> None:
    guid = uuid.UUID(int=7)
    message = MessageProperties(destination="q", body=b"b", priority=5, delivery=0, message_class=9)
    stamped = message.stamp(source_qm=guid, ordinal=42, sent_time=3.5, transactional=True)
    assert stamped.source_qm == guid
    assert stamped.ordinal == 42
    assert stamped.sent_time == 3.5
    assert stamped.transactional
    assert stamped.message_class == 0
    assert stamped.message_id == f"{{{guid}}}\\42"
    # A transactional message is sent with priority 0 and recoverable delivery.
    assert (stamped.priority, stamped.delivery) == (0, 1)
    assert stamped.body == b"b"
    assert MessageProperties.from_bytes(stamped.raw) == stamped
    plain = stamped.stamp(source_qm=guid, ordinal=43, sent_time=3.5, transactional=False)
    assert (plain.priority, plain.delivery, plain.transactional) == (0, 1, False)
    plain = message.stamp(source_qm=guid, ordinal=43, sent_time=3.5, transactional=False)
    assert (plain.priority, plain.delivery, plain.transactional) == (5, 0, False)
    assert message.source_qm != guid  # the original is unchanged
    with pytest.raises(LocalProtocolError):
        message.stamp(source_qm=guid, ordinal=2**32, sent_time=0.0, transactional=False)


def test_replace_changes_only_what_it_names() -> None:
    changed = PROPERTIES.replace(label="new")
    assert changed.label == "new"
    for name in ("body", "destination", "correlation_id", "app_specific", "source_qm", "extension"):
        assert getattr(changed, name) == getattr(PROPERTIES, name)
    with pytest.raises(TypeError, match="colour"):
        PROPERTIES.replace(colour="red")


def test_message_values_that_cannot_be_encoded_are_local_errors() -> None:
    with pytest.raises(LocalProtocolError, match="priority"):
        MessageProperties(destination="q", priority=300)
    with pytest.raises(LocalProtocolError, match="app_specific"):
        MessageProperties(destination="q", app_specific=-1)
    with pytest.raises(LocalProtocolError, match="correlation"):
        MessageProperties(destination="q", correlation_id=b"x" * 19)
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(destination="q", label="x" * 70_000)
    with pytest.raises(LocalProtocolError, match="text field"):
        MessageProperties(destination="\ud800")


# --------------------------------------------------------------------------
# Size limits
# --------------------------------------------------------------------------


def test_limits() -> None:
    assert cf.MAX_MESSAGE_BODY == 4 * 1024 * 1024
    assert cf.MAX_LABEL_CHARS == 250
    assert cf.MAX_FRAME_BODY == cf.MAX_MESSAGE_BODY + 64 * 1024
    assert cf.CORRELATION_ID_SIZE == 20


def test_a_largest_message_fits_in_a_frame() -> None:
    message = PROPERTIES.replace(body=b"\x01" * cf.MAX_MESSAGE_BODY)
    send = cf.Send(tx_id=1, message=message)
    data = cf.encode_frame(1, send)
    assert len(data) - cf.HEADER_SIZE <= cf.MAX_FRAME_BODY
    assert _decode_all(data) == [cf.Frame(request_id=1, value=send)]
    reply = cf.MessageReply(
        message=cf.QueuedMessage(queue="q", lookup_id=1, arrived_time=0.0, message=message)
    )
    assert _decode_all(cf.encode_frame(2, reply)) == [cf.Frame(request_id=2, value=reply)]


def test_a_frame_over_the_limit_cannot_be_encoded() -> None:
    too_big = MessageProperties(destination="q", body=b"x" * (cf.MAX_FRAME_BODY + 1))
    with pytest.raises(LocalProtocolError, match="limit"):
        cf.encode_frame(1, cf.Send(message=too_big))
    # Exactly at the limit is fine: 9 bytes of Send head, then the message.
    fitting = MessageProperties(body=b"x" * (cf.MAX_FRAME_BODY - 9 - 84))
    assert len(cf.encode_frame(1, cf.Send(message=fitting))) == cf.HEADER_SIZE + cf.MAX_FRAME_BODY


def test_label_limit_is_judged_by_the_queue_manager_not_the_format() -> None:
    # The format carries any label up to 65535 bytes of UTF-8; MAX_LABEL_CHARS is
    # for the queue manager to enforce with a typed error, not a broken frame.
    for label in ("x" * (cf.MAX_LABEL_CHARS + 1), "\u00e9" * cf.MAX_LABEL_CHARS, "x" * 0xFFFF):
        message = MessageProperties(label=label)
        assert MessageProperties.from_bytes(message.raw).label == label
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(label="x" * 0x10000)
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(label="\u00e9" * 0x8000)  # 32768 characters, 65536 bytes


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(memoryview(b"abcdef")[::2], id="strided"),
        pytest.param(memoryview(struct.pack("<3H", 1, 2, 3)).cast("H"), id="itemsize-2"),
        pytest.param(bytearray(b"ace"), id="bytearray"),
        pytest.param(
            memoryview(b"abcd").cast("B", shape=[2, 2]),
            id="two-dimensional",
        ),
    ],
)
def test_any_byte_buffer_is_a_body(body: bytes | bytearray | memoryview) -> None:
    expected = memoryview(body).tobytes()
    message = MessageProperties(body=body)
    assert message.body == expected
    assert message.body_size == len(expected)
    assert MessageProperties.from_bytes(message.raw) == message
