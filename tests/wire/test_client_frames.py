"""The client protocol's frames: round trips, fast paths, decoder, bad input."""

from __future__ import annotations

import contextlib
import struct
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from wire import LocalProtocolError, MessageProperties, RemoteProtocolError
from wire import client_frames as cf

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
text = st.text(max_size=40)
blob = st.binary(max_size=300)
times = st.floats(allow_nan=False, allow_infinity=False)
guids = st.uuids()

properties = st.builds(
    MessageProperties,
    body=blob,
    label=text,
    destination=text,
    correlation_id=st.just(b"") | st.binary(min_size=20, max_size=20),
    app_specific=u32,
    priority=u8,
    delivery=u8,
    acknowledge=u8,
    journal=u8,
    admin_queue=text,
    response_queue=text,
    time_to_reach_queue=u32,
    time_to_be_received=u32,
    message_class=u16,
    sent_time=times,
    source_qm=st.none() | guids,
    ordinal=u32,
    transactional=st.booleans(),
    extension=st.binary(max_size=30),
)
messages = st.builds(
    cf.QueuedMessage, queue=text, lookup_id=u64, arrived_time=times, message=properties
)
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
)
sends = st.builds(cf.Send, tx_id=u64, mode=u8, message=properties)
frames = st.one_of(
    st.builds(cf.Hello, min_version=u16, max_version=u16, client_name=text),
    st.builds(
        cf.CreateQueue,
        name=text,
        transactional=st.booleans(),
        journal=st.booleans(),
        quota=st.none() | u64,
    ),
    st.builds(cf.DeleteQueue, name=text),
    st.builds(cf.PurgeQueue, name=text),
    st.just(cf.ListQueues()),
    st.just(cf.GetStatus()),
    st.builds(cf.Begin, tx_id=u64),
    st.builds(cf.Commit, tx_id=u64),
    st.builds(cf.Abort, tx_id=u64),
    sends,
    st.builds(cf.Receive, tx_id=u64, queue=text, timeout_ms=u32, peek=st.booleans(), lookup_id=u64),
    st.builds(cf.PeekRange, queue=text, after=u64, max_count=u32),
    st.builds(
        cf.HelloOk,
        version=u16,
        server_version=text,
        qm_name=text,
        qm_guid=guids,
        max_frame_body=u32,
    ),
    st.builds(cf.Ok, value=u64),
    st.builds(cf.Sent, message_id=text, queue=text, lookup_id=u64),
    st.builds(cf.MessageReply, message=messages),
    st.just(cf.NoMessage()),
    st.builds(cf.MessageList, messages=st.lists(messages, max_size=3).map(tuple)),
    st.builds(cf.QueueList, queues=st.lists(queue_infos, max_size=3).map(tuple)),
    st.builds(
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
        queues=st.lists(queue_infos, max_size=3).map(tuple),
    ),
    st.builds(cf.ErrorReply, code=u16, message=text),
)


def _decode_all(data: bytes) -> list[cf.Frame]:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(data)
    found = []
    while (frame := decoder.next_frame()) is not None:
        found.append(frame)
    return found


@settings(max_examples=300)
@given(frame=frames, request_id=u32)
def test_every_frame_round_trips(frame: cf.FrameValue, request_id: int) -> None:
    data = cf.encode_frame(request_id, frame)
    [decoded] = _decode_all(data)
    assert decoded == cf.Frame(request_id=request_id, value=frame)
    assert cf.encode_frame(request_id, decoded.value) == data


@settings(max_examples=200)
@given(
    frame=st.one_of(
        sends,
        st.builds(cf.MessageReply, message=messages),
        st.builds(cf.MessageList, messages=st.lists(messages, max_size=3).map(tuple)),
        st.builds(cf.Ok, value=u64),
        st.builds(cf.Begin, tx_id=u64),
        st.builds(cf.Commit, tx_id=u64),
        st.builds(cf.Abort, tx_id=u64),
        st.builds(
            cf.Receive, tx_id=u64, queue=text, timeout_ms=u32, peek=st.booleans(), lookup_id=u64
        ),
    )
)
def test_fast_paths_match_the_layouts(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(1, frame)
    assert data[cf.HEADER_SIZE :] == cf.encode_body_with_layout(frame)
    kind = cf.FrameKind(struct.unpack_from("<H", data, 4)[0])
    assert cf.decode_body_with_layout(kind, data[cf.HEADER_SIZE :]) == frame


@settings(max_examples=200)
@given(message=messages, cut=st.integers(0, 400), junk=st.binary(max_size=8))
def test_fast_and_layout_decoders_reject_the_same_bodies(
    message: cf.QueuedMessage, cut: int, junk: bytes
) -> None:
    body = cf.encode_body_with_layout(cf.MessageReply(message=message))
    for mutated in (body[:cut], body + junk, junk + body):
        outcomes = []
        for decode in (cf.decode_body, cf.decode_body_with_layout):
            try:
                outcomes.append(decode(cf.FrameKind.MESSAGE, mutated))
            except RemoteProtocolError:
                outcomes.append("rejected")
        assert outcomes[0] == outcomes[1]


SAMPLE = [
    cf.Hello(client_name="test"),
    cf.Send(tx_id=3, message=MessageProperties(destination="orders", body=b"x" * 100, label="l")),
    cf.Commit(tx_id=3),
    cf.ErrorReply(code=cf.ErrorCode.QUEUE_NOT_FOUND, message="queue 'x' does not exist"),
]


@pytest.mark.parametrize("frame", SAMPLE, ids=lambda f: type(f).__name__)
def test_decoder_whole_bytewise_and_followed_by_the_next(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(9, frame)
    expected = cf.Frame(request_id=9, value=frame)
    assert _decode_all(data) == [expected]

    decoder = cf.ClientFrameDecoder()
    for index in range(len(data)):
        assert decoder.next_frame() is None
        decoder.receive_data(data[index : index + 1])
    assert decoder.next_frame() == expected
    assert decoder.next_frame() is None

    decoder = cf.ClientFrameDecoder()
    following = cf.encode_frame(10, cf.Ok())
    decoder.receive_data(data + following[:5])
    assert decoder.next_frame() == expected
    assert decoder.next_frame() is None
    decoder.receive_data(following[5:])
    assert decoder.next_frame() == cf.Frame(request_id=10, value=cf.Ok())


def test_oversized_declared_size_is_refused_before_buffering() -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", cf.MAX_FRAME_BODY + 1, cf.FrameKind.SEND, 0, 1))
    with pytest.raises(RemoteProtocolError, match="limit") as excinfo:
        decoder.next_frame()
    assert excinfo.value.field == "FrameHeader.length"
    # The decoder stays broken: a connection cannot recover after a framing error.
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


@pytest.mark.parametrize(
    ("header", "field"),
    [
        (struct.pack("<IHHI", 0, 0x7E, 0, 1), "FrameHeader.kind"),
        (struct.pack("<IHHI", 0, cf.FrameKind.OK, 1, 1), "FrameHeader.flags"),
    ],
)
def test_bad_headers_say_which_field(header: bytes, field: str) -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(header)
    with pytest.raises(RemoteProtocolError) as excinfo:
        decoder.next_frame()
    assert excinfo.value.field == field


def test_hello_magic_is_checked() -> None:
    body = cf.encode_frame(1, cf.Hello())[cf.HEADER_SIZE :]
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(cf.FrameKind.HELLO, b"QMGX" + body[4:])


def test_values_that_cannot_be_encoded_are_local_errors() -> None:
    with pytest.raises(LocalProtocolError, match="priority"):
        MessageProperties(destination="q", priority=300)
    with pytest.raises(LocalProtocolError, match="correlation"):
        MessageProperties(destination="q", correlation_id=b"x" * 256)
    with pytest.raises(LocalProtocolError, match="label"):
        MessageProperties(destination="q", label="x" * 70_000)
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(1, cf.Commit(tx_id=-1))
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(2**32, cf.Ok())
    too_big = MessageProperties(destination="q", body=b"x" * (cf.MAX_FRAME_BODY + 1))
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(1, cf.Send(message=too_big))


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=200), kind=st.sampled_from(list(cf.FrameKind)))
def test_any_body_parses_or_raises_remote_protocol_error(data: bytes, kind: cf.FrameKind) -> None:
    with contextlib.suppress(RemoteProtocolError):
        cf.decode_body(kind, data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    frame=frames,
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


def test_unknown_guid_bytes_round_trip() -> None:
    guid = uuid.UUID(bytes=bytes(range(16)))
    frame = cf.HelloOk(version=1, server_version="x", qm_name="n", qm_guid=guid)
    [decoded] = _decode_all(cf.encode_frame(1, frame))
    assert decoded.value == frame


@given(request_id=u32, value=u64)
def test_encode_ok_is_encode_frame(request_id: int, value: int) -> None:
    assert cf.encode_ok(request_id, value) == cf.encode_frame(request_id, cf.Ok(value=value))


@settings(max_examples=300)
@given(message=properties)
def test_message_properties_round_trip_through_their_bytes(message: MessageProperties) -> None:
    raw = message.raw
    again = MessageProperties.from_bytes(raw)
    assert again == message
    assert again.raw == raw
    assert len(again) == len(raw)
    assert MessageProperties.size_at(b"xx" + raw + b"yy", 2) == len(raw)
    assert again.body == message.body
    assert again.label == message.label
    assert again.destination == message.destination
    assert again.extension == message.extension
    assert again.correlation_id == message.correlation_id


def test_stamp_sets_the_identity_and_transactional_defaults() -> None:
    guid = uuid.UUID(int=7)
    message = MessageProperties(destination="q", body=b"b", priority=5, delivery=0)
    stamped = message.stamp(source_qm=guid, ordinal=42, sent_time=3.5, transactional=True)
    assert stamped.source_qm == guid
    assert stamped.ordinal == 42
    assert stamped.sent_time == 3.5
    assert stamped.transactional
    assert stamped.message_id == f"{{{guid}}}\\42"
    # A transactional message is sent with priority 0 and recoverable delivery.
    assert (stamped.priority, stamped.delivery) == (0, 1)
    assert stamped.body == b"b"
    plain = message.stamp(source_qm=guid, ordinal=43, sent_time=3.5, transactional=False)
    assert (plain.priority, plain.delivery, plain.transactional) == (5, 0, False)
    assert message.source_qm != guid  # the original is unchanged


def test_replace_changes_only_what_it_names() -> None:
    message = MessageProperties(destination="q", body=b"b", label="old", app_specific=9)
    changed = message.replace(label="new")
    assert (changed.label, changed.body, changed.app_specific) == ("new", b"b", 9)
    with pytest.raises(TypeError, match="colour"):
        message.replace(colour="red")


@pytest.mark.parametrize("cut", [0, 1, 83, 84, 85])
def test_truncated_message_bytes_are_remote_protocol_errors(cut: int) -> None:
    raw = MessageProperties(destination="q", body=b"body", label="l").raw
    with pytest.raises(RemoteProtocolError):
        MessageProperties.from_bytes(raw[:cut])
    with pytest.raises(RemoteProtocolError):
        MessageProperties.from_bytes(raw + b"x")


def test_append_send_frame_is_encode_frame() -> None:
    message = MessageProperties(destination="orders", body=b"x" * 10, label="l")
    out = bytearray(b"prefix")
    cf.append_send_frame(out, 5, 9, 0, (message.raw,))
    assert bytes(out) == b"prefix" + cf.encode_frame(5, cf.Send(tx_id=9, mode=0, message=message))


@given(request_id=u32, tx_id=u64)
def test_encode_tx_request_is_encode_frame(request_id: int, tx_id: int) -> None:
    for kind, cls in (
        (cf.FrameKind.BEGIN, cf.Begin),
        (cf.FrameKind.COMMIT, cf.Commit),
        (cf.FrameKind.ABORT, cf.Abort),
    ):
        assert cf.encode_tx_request(kind, request_id, tx_id) == cf.encode_frame(
            request_id, cls(tx_id=tx_id)
        )


@given(request_id=u32, message=messages)
def test_encode_message_reply_is_encode_frame(request_id: int, message: cf.QueuedMessage) -> None:
    expected = cf.encode_frame(request_id, cf.MessageReply(message=message))
    encoded = cf.encode_message_reply(
        request_id, message.queue, message.lookup_id, message.arrived_time, message.message.raw
    )
    assert encoded == expected
