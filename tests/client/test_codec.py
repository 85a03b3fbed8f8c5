"""The SDK's hand-packed frames and reply reader agree with ``wire.client``."""

from __future__ import annotations

import array
import dataclasses
import datetime as dt
import decimal
import fractions
import itertools
import math
from typing import Any

import pytest
from client_kit import frames, status_info
from fake_daemon import sample_outgoing
from hypothesis import given
from hypothesis import strategies as st
from wire_samples import QUEUE_INFO, QUEUED
from wire_strategies import blob, text, u8, u32, u64

from qmgr.client import InvalidArgument, MessageTooLarge
from qmgr.client._codec import (
    ABORT,
    BEGIN,
    COMMIT,
    ReplyReader,
    SendOptions,
    append_receive,
    append_request,
    append_send,
    append_tx_request,
    check_range,
)
from wire import MessageProperties, RemoteProtocolError
from wire import client as cf


@given(
    request_id=u32,
    tx_id=u64,
    mode=st.integers(0, 2),
    destination=text,
    body=blob,
    label=text,
    correlation=st.none() | st.binary(min_size=20, max_size=20),
    app_specific=u32,
    priority=st.integers(0, 7),
    delivery=st.sampled_from([0, 1, "express", "recoverable"]),
    acknowledge=st.integers(0, 15),
    journal=u8,
    admin=text,
    response=text,
    ttrq=st.none() | st.integers(0, 0xFFFFFFFE),
    ttbr=st.none() | st.integers(0, 0xFFFFFFFE),
)
def test_append_send_matches_encode_frame(
    request_id: int,
    tx_id: int,
    mode: int,
    destination: str,
    body: bytes,
    label: str,
    correlation: bytes | None,
    app_specific: int,
    priority: int,
    delivery: int | str,
    acknowledge: int,
    journal: int,
    admin: str,
    response: str,
    ttrq: int | None,
    ttbr: int | None,
) -> None:
    out = bytearray(b"before")
    options: SendOptions = {
        "label": label,
        "correlation_id": correlation,
        "app_specific": app_specific,
        "priority": priority,
        "delivery": delivery,
        "acknowledge": acknowledge,
        "journal": journal,
        "admin_queue": admin,
        "response_queue": response,
        "time_to_reach_queue": ttrq,
        "time_to_be_received": ttbr,
    }
    append_send(out, request_id, tx_id, mode, destination, body, options)
    message = MessageProperties(
        destination=destination,
        body=body,
        label=label,
        correlation_id=correlation or b"",
        app_specific=app_specific,
        priority=priority,
        delivery={"express": 0, "recoverable": 1}.get(delivery, delivery),  # type: ignore[arg-type]
        acknowledge=acknowledge,
        journal=journal,
        admin_queue=admin,
        response_queue=response,
        time_to_reach_queue=0xFFFFFFFF if ttrq is None else ttrq,
        time_to_be_received=0xFFFFFFFF if ttbr is None else ttbr,
    )
    send = cf.Send(tx_id=tx_id, mode=mode, message=message)
    assert bytes(out) == b"before" + cf.encode_frame(request_id, send)
    # And the daemon's decoder reads back what was sent.
    assert frames(out[len(b"before") :]) == [(request_id, send)]


def _sent(data: bytes | bytearray) -> MessageProperties:
    [(_, value)] = frames(data)
    assert isinstance(value, cf.Send)
    return value.message


def _send(out: bytearray, **fields: Any) -> None:
    """``append_send`` with ``destination`` and ``body`` defaulted; other fields are options."""
    destination = fields.pop("destination", "q")
    body = fields.pop("body", b"x")
    append_send(out, 1, 0, 0, destination, body, fields)  # type: ignore[arg-type]


def test_append_send_defaults_are_msmq_defaults() -> None:
    out = bytearray()
    _send(out, destination="orders", body=b"b")
    assert _sent(out) == MessageProperties(destination="orders", body=b"b")
    message = _sent(out)
    assert (message.priority, message.delivery) == (3, int(cf.Delivery.RECOVERABLE))
    assert message.time_to_reach_queue == message.time_to_be_received == 0xFFFFFFFF
    assert message.correlation_id == b""


@pytest.mark.parametrize(
    ("seconds", "wire_seconds"),
    [
        (None, 0xFFFFFFFF),
        (0, 0),
        (0.0, 0),
        (1.2, 2),
        (30, 30),
        (1e12, 0xFFFFFFFE),
        (dt.timedelta(minutes=2), 120),
        (decimal.Decimal("2.5"), 3),
        (fractions.Fraction(1, 3), 1),
    ],
)
def test_append_send_converts_seconds(seconds: float | None, wire_seconds: int) -> None:
    out = bytearray()
    _send(out, time_to_reach_queue=seconds, time_to_be_received=seconds)
    message = _sent(out)
    assert message.time_to_reach_queue == message.time_to_be_received == wire_seconds


@pytest.mark.parametrize("name", ["time_to_reach_queue", "time_to_be_received"])
def test_append_send_infinite_seconds_is_no_limit(name: str) -> None:
    out = bytearray(b"kept")
    _send(out, **{name: math.inf})
    assert getattr(_sent(out[4:]), name) == 0xFFFFFFFF


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(bytearray(b"ace"), id="bytearray"),
        pytest.param(memoryview(b"ace"), id="memoryview"),
        pytest.param(memoryview(b"abcdef")[::2], id="strided"),
        pytest.param(array.array("H", [1, 2]), id="array"),
        pytest.param("\u00e9t\u00e9", id="str"),
        pytest.param(
            memoryview(b"abcd").cast("B", shape=[2, 2]),
            id="two-dimensional",
        ),
    ],
)
def test_append_send_takes_any_byte_buffer(body: object) -> None:
    expected = body.encode() if isinstance(body, str) else memoryview(body).tobytes()  # type: ignore[arg-type]
    out = bytearray()
    _send(out, body=body)
    assert _sent(out).body == expected


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"priority": 256}, "priority"),
        # What the daemon would refuse, refused here: in a transaction it would
        # otherwise fail the whole transaction at its commit.
        ({"priority": 8}, "priority must be 0..7, not 8"),
        ({"priority": -1}, "priority must be 0..7, not -1"),
        ({"delivery": 2}, "delivery must be 0..1, not 2"),
        ({"acknowledge": 16}, "acknowledge must be 0..15, not 16"),
        ({"app_specific": -1}, "app_specific"),
        ({"label": "x" * 70_000}, "label"),
        ({"correlation_id": b"c" * 300}, "correlation"),
        ({"colour": "red"}, "unknown message properties: colour"),
        ({"delivery": "fast"}, "delivery"),
        ({"time_to_be_received": -1}, "time_to_be_received"),
        ({"destination": "\ud800"}, "cannot send"),
        ({"label": "\udfff"}, "cannot send"),
        ({"priority": "high"}, "cannot send"),
        ({"time_to_reach_queue": float("nan")}, "time_to_reach_queue"),
        ({"time_to_be_received": "5"}, r"time_to_be_received must be .* seconds >= 0, not '5'"),
        ({"time_to_reach_queue": True}, r"time_to_reach_queue must be .*, not True"),
        ({"time_to_reach_queue": dt.timedelta(seconds=-1)}, "time_to_reach_queue must be"),
        ({"body": 12}, "a message body is bytes"),
        ({"body": "caf\udce9"}, "the body is not valid Unicode text \\(position 3"),
    ],
)
def test_append_send_rejects_what_cannot_be_sent(changes: dict[str, object], match: str) -> None:
    out = bytearray(b"kept")
    with pytest.raises(InvalidArgument, match=match):
        _send(out, **changes)
    assert out == b"kept"


_TOO_LONG = "is too long to send (65,536 characters): it can carry at most 65,535 bytes of UTF-8"
_NOT_UNICODE = (
    "is not valid Unicode text (position 0: a lone surrogate, "
    "as non-UTF-8 bytes in a command-line argument give)"
)
U32 = 2**32 - 1
U64 = 2**64 - 1


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"priority": 8}, "priority must be 0..7, not 8"),
        ({"priority": "high"}, "priority must be 0..7, not 'high'"),
        ({"priority": 3.0}, "priority must be 0..7, not 3.0"),
        ({"priority": True}, "priority must be 0..7, not True"),
        ({"acknowledge": -1}, "acknowledge must be 0..15, not -1"),
        ({"journal": 256}, "journal must be 0..255, not 256"),
        ({"app_specific": 2**32}, f"app_specific must be 0..{U32}, not {2**32}"),
        ({"app_specific": -1}, f"app_specific must be 0..{U32}, not -1"),
        ({"app_specific": 1.5}, f"app_specific must be 0..{U32}, not 1.5"),
        ({"delivery": 2}, "delivery must be 0..1, not 2"),
        ({"delivery": 1.0}, "delivery must be 'recoverable', 'express' or 0..1, not 1.0"),
        ({"label": "\udcff"}, f"label {_NOT_UNICODE}"),
        ({"label": "x" * 0x10000}, f"label {_TOO_LONG}"),
        ({"destination": "\udcff"}, f"destination {_NOT_UNICODE}"),
        ({"response_queue": "x" * 0x10000}, f"response_queue {_TOO_LONG}"),
    ],
)
def test_a_message_value_that_cannot_be_sent_is_named_not_the_encoders_words(
    changes: dict[str, object], words: str
) -> None:
    out = bytearray(b"kept")
    with pytest.raises(InvalidArgument) as caught:
        _send(out, **changes)
    # No class name, no struct or construct text: the argument and its range.
    assert caught.value.message == f"cannot send this message: {words}"
    assert out == b"kept"


def test_the_largest_message_numbers_are_sent() -> None:
    out = bytearray()
    _send(out, priority=7, acknowledge=15, journal=255, app_specific=U32, delivery=1)
    message = _sent(out)
    assert (message.priority, message.acknowledge, message.journal) == (7, 15, 255)
    assert message.app_specific == U32


@pytest.mark.parametrize(
    ("value", "words"),
    [
        # Numbers out of their field's range.
        (cf.CreateQueue(name="q", quota=-1), f"quota must be 0..{U64} bytes or None, not -1"),
        (
            cf.CreateQueue(name="q", quota=99999999999999999999999),
            f"quota must be 0..{U64} bytes or None, not 99999999999999999999999",
        ),
        (cf.CreateQueue(name="q", quota="10"), f"quota must be 0..{U64} bytes or None, not '10'"),  # type: ignore[arg-type]
        (
            cf.CreateQueue(name="q", retry_count=2**32),
            f"retry_count must be 0..{U32} or None, not {2**32}",
        ),
        (
            cf.CreateQueue(name="q", retry_cycles=-1),
            f"retry_cycles must be 0..{U32} or None, not -1",
        ),
        (
            cf.SetQueueProperties(name="q", poison=1, retry_count=-2),
            f"retry_count must be 0..{U32} or None, not -2",
        ),
        (
            cf.SetQueueProperties(name="q", poison=1, retry_cycles=2**40),
            f"retry_cycles must be 0..{U32} or None, not {2**40}",
        ),
        (cf.PeekRange(queue="q", after=-1), f"after must be 0..{U64}, not -1"),
        (cf.PeekRange(queue="q", max_count=2**32), f"max_count must be 0..{U32}, not {2**32}"),
        (cf.MeasureRange(queue="q", after=2**64), f"after must be 0..{U64}, not {2**64}"),
        (cf.MeasureRange(queue="q", max_count=-1), f"max_count must be 0..{U32}, not -1"),
        (cf.RemoveThrough(queue="q", lookup_id=-1), f"lookup_id must be 0..{U64}, not -1"),
        (
            cf.MoveMessages(source="a", target="b", lookup_id=2**64),
            f"lookup_id must be 0..{U64}, not {2**64}",
        ),
        (cf.ListTransactions(max_count=-1), f"limit must be 0..{U32}, not -1"),
        # Text fields: too long for their u16 length, or not valid Unicode.
        (cf.CreateQueue(name="n" * 0x10000), f"CreateQueue.name {_TOO_LONG}"),
        (cf.PurgeQueue(name="n" * 0x10000), f"PurgeQueue.name {_TOO_LONG}"),
        (cf.Receive(queue="n" * 0x10000), f"Receive.queue {_TOO_LONG}"),
        (cf.GetRouting(destination="n" * 0x10000), f"GetRouting.destination {_TOO_LONG}"),
        (cf.CreateQueue(name="\udcff"), f"CreateQueue.name {_NOT_UNICODE}"),
        (cf.TraceMessage(message_id="\udcff"), f"TraceMessage.message_id {_NOT_UNICODE}"),
    ],
    ids=lambda value: None if isinstance(value, str) else type(value).__name__,
)
def test_a_request_value_that_cannot_be_sent_is_named_before_encoding(
    value: cf.ClientRequest, words: str
) -> None:
    out = bytearray(b"kept")
    with pytest.raises(InvalidArgument) as caught:
        append_request(out, 1, value)
    assert caught.value.message == f"cannot send this request: {words}"
    assert out == b"kept"


@pytest.mark.parametrize(
    "value",
    [
        cf.CreateQueue(name="q", quota=U64, retry_count=U32, retry_cycles=0),
        cf.CreateQueue(name="q"),
        cf.SetQueueProperties(name="q", poison=1, retry_count=0, retry_cycles=U32),
        cf.PeekRange(queue="q", after=U64, max_count=U32),
        cf.MeasureRange(queue="q", after=0, max_count=0),
        cf.RemoveThrough(queue="q", lookup_id=U64),
        cf.MoveMessages(source="a", target="b", lookup_id=0, all=True),
        cf.ListTransactions(max_count=U32),
    ],
    ids=lambda value: type(value).__name__,
)
def test_every_number_in_range_is_sent(value: cf.ClientRequest) -> None:
    out = bytearray()
    append_request(out, 1, value)
    assert frames(out) == [(1, value)]


def test_check_range_is_the_one_check() -> None:
    check_range("n", 0, 7)
    check_range("n", 7, 7)
    check_range("n", None, 7, optional=True)
    with pytest.raises(InvalidArgument, match=r"^n must be 0\.\.7, not None$"):
        check_range("n", None, 7)
    with pytest.raises(InvalidArgument, match=r"^n must be 0\.\.7 s or None, not 8$"):
        check_range("n", 8, 7, unit="s", optional=True)


def test_append_send_body_limit() -> None:
    out = bytearray(b"kept")
    for too_large in (b"x" * (cf.MAX_MESSAGE_BODY + 1), "x" * (cf.MAX_MESSAGE_BODY + 1)):
        with pytest.raises(MessageTooLarge, match="4 MB"):
            _send(out, body=too_large)
    # The limit counts bytes, not characters.
    with pytest.raises(MessageTooLarge):
        _send(out, body="\u00e9" * (cf.MAX_MESSAGE_BODY // 2 + 1))
    assert out == b"kept"
    largest = b"\x01" * cf.MAX_MESSAGE_BODY
    _send(out, body=largest, label="x" * cf.MAX_LABEL_CHARS)
    message = _sent(out[4:])
    assert message.body_size == cf.MAX_MESSAGE_BODY
    assert message.label == "x" * cf.MAX_LABEL_CHARS


def test_append_send_refuses_a_message_over_the_frame_limit() -> None:
    out = bytearray(b"kept")
    with pytest.raises(InvalidArgument, match="frame limit"):
        _send(
            out,
            body=b"x" * cf.MAX_MESSAGE_BODY,
            admin_queue="a" * 0xFFFF,
            response_queue="r" * 0xFFFF,
        )
    assert out == b"kept"


@given(request_id=u32, tx_id=u64, queue=text, timeout=u32, peek=st.booleans(), lookup=u64)
def test_append_receive_matches_encode_frame(
    request_id: int, tx_id: int, queue: str, timeout: int, peek: bool, lookup: int
) -> None:
    out = bytearray()
    append_receive(out, request_id, tx_id, queue, timeout, peek, lookup or None)
    request = cf.Receive(tx_id=tx_id, queue=queue, timeout_ms=timeout, peek=peek, lookup_id=lookup)
    assert bytes(out) == cf.encode_frame(request_id, request)


def test_append_receive_rejects_what_cannot_be_sent() -> None:
    with pytest.raises(InvalidArgument):
        append_receive(bytearray(), 1, 0, "q", 0, False, -5)
    # 0 is the wire's "the next message", never a message's lookup id.
    out = bytearray()
    for lookup_id in (0, 1 << 64):
        with pytest.raises(InvalidArgument, match="lookup_id must be a message's lookup id"):
            append_receive(out, 1, 0, "q", 0, False, lookup_id)
    assert out == b""


@given(request_id=u32, tx_id=u64)
def test_append_tx_request_matches_encode_frame(request_id: int, tx_id: int) -> None:
    for kind, cls in ((BEGIN, cf.Begin), (COMMIT, cf.Commit), (ABORT, cf.Abort)):
        out = bytearray()
        append_tx_request(out, kind, request_id, tx_id)
        assert bytes(out) == cf.encode_frame(request_id, cls(tx_id=tx_id))


MESSAGE = dataclasses.replace(QUEUED, lookup_id=7, message=QUEUED.message.replace(body=b"b" * 1000))
REPLIES: list[cf.ServerReply] = [
    cf.Ok(),
    cf.Ok(value=2**63),
    cf.ErrorReply(code=3, message="queue 'x' does not exist"),
    cf.NoMessage(),
    cf.MessageReply(message=MESSAGE),
    cf.Sent(message_id="m", queue="q", lookup_id=1),
    cf.MessageList(messages=(MESSAGE, MESSAGE)),
    cf.MessageList(messages=()),
    cf.HelloOk(version=2, server_version="1", qm_name="qm", qm_guid=QUEUED.message.source_qm),
    cf.QueueList(queues=(QUEUE_INFO,)),
    status_info(),
    cf.OutgoingList(outgoing=tuple(sample_outgoing().values()), purged=1),
    cf.Resolutions(outcomes=(1, 2)),
    cf.TransactionList(
        transactions=(
            cf.TransactionInfo(xid="x", state=1, since=2.5, sends=1, receives=2, bytes=3),
        )
    ),
    cf.RangeInfo(queue_id=1, count=2, last=3),
    cf.Moved(count=1, lookup_id=7),
    cf.MessageReply(message=dataclasses.replace(MESSAGE, counters=cf.MessageCounters())),
    cf.TraceReport(qm_name="qm", findings=()),
    cf.ListInfoList(lists=()),
    cf.Permissions(queue="q", entries=()),
    cf.RoutingInfo(
        router=False,
        failover_after=30.0,
        aliases=(),
        routes=(),
        destination="",
        local=False,
        entry="",
        hops=(),
    ),
]


def test_replies_cover_every_reply_kind() -> None:
    kinds = {cf.FrameKind(int.from_bytes(cf.encode_frame(1, r)[4:6], "little")) for r in REPLIES}
    assert kinds == {kind for kind in cf.FrameKind if kind >= 0x80}


@given(
    replies=st.lists(st.tuples(st.integers(1, 50), st.sampled_from(REPLIES)), max_size=30),
    cuts=st.lists(st.integers(0, 5000), max_size=10),
)
def test_reply_reader_delivers_every_reply_whatever_the_chunks(
    replies: list[tuple[int, cf.ServerReply]], cuts: list[int]
) -> None:
    """Any chunking gives, in order, the frames a ClientFrameDecoder gives."""
    stream = b"".join(cf.encode_frame(rid, value) for rid, value in replies)
    delivered: list[tuple[int, cf.FrameValue]] = []
    reader = ReplyReader(lambda rid, value: delivered.append((rid, value)))
    points = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    for start, end in itertools.pairwise(points):
        reader.feed(stream[start:end])
    assert delivered == replies


def test_reply_reader_reads_a_frame_fed_one_byte_at_a_time() -> None:
    replies: list[tuple[int, cf.ServerReply]] = [
        (1, cf.Ok(value=5)),
        (2, cf.MessageReply(message=MESSAGE)),
        (3, cf.Ok()),
    ]
    stream = b"".join(cf.encode_frame(rid, value) for rid, value in replies)
    delivered: list[tuple[int, cf.FrameValue]] = []
    reader = ReplyReader(lambda rid, value: delivered.append((rid, value)))
    for index in range(len(stream)):
        reader.feed(stream[index : index + 1])
    assert delivered == replies


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff" * 12,  # unknown kind
        cf.encode_frame(1, cf.Ok())[:4] + b"\x81\x00\x01\x00" + b"\x00" * 12,  # flags set
        (cf.MAX_FRAME_BODY + 1).to_bytes(4, "little") + b"\x83\x00\x00\x00" + b"\x00" * 4,
        b"\x01\x00\x00\x00\x84\x00\x00\x00\x01\x00\x00\x00x",  # NoMessage with a body
    ],
)
def test_reply_reader_rejects_garbage(garbage: bytes) -> None:
    reader = ReplyReader(lambda rid, value: None)
    with pytest.raises(RemoteProtocolError):
        reader.feed(garbage)
    # Also when it trickles in after a good reply, one byte at a time.
    delivered: list[int] = []
    reader = ReplyReader(lambda rid, value: delivered.append(rid))
    stream = cf.encode_ok(7) + garbage
    with pytest.raises(RemoteProtocolError):
        for index in range(len(stream)):
            reader.feed(stream[index : index + 1])
    assert delivered == [7]


def test_reply_reader_refuses_an_oversized_frame_before_its_body() -> None:
    header = (cf.MAX_FRAME_BODY + 1).to_bytes(4, "little") + b"\x83\x00\x00\x00\x01\x00\x00\x00"
    reader = ReplyReader(lambda rid, value: None)
    with pytest.raises(RemoteProtocolError, match="limit"):
        reader.feed(header + b"\x00" * 100)
