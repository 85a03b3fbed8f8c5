"""Frames on a stream: whole frames, their header, the decoder's chunking, bounds and errors."""

from __future__ import annotations

import contextlib
import struct
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from reply_kit import long_queue_list
from wire_samples import PROPERTIES

from wire import LocalProtocolError, MessageProperties, RemoteProtocolError
from wire import client as cf
from wire.client.frames import CLASS_OF, KIND_OF
from wire.protocol_errors import TextFieldError

from . import client_strategies as cs
from .client_samples import (
    SAMPLE_PARAMS,
    decode_all,
)


@pytest.mark.parametrize("frame", SAMPLE_PARAMS)
def test_each_kind_round_trips_with_its_header(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(0xFFFFFFFF, frame)
    length, kind, flags, request_id = struct.unpack_from("<IHHI", data)
    assert (length, flags, request_id) == (len(data) - cf.HEADER_SIZE, 0, 0xFFFFFFFF)
    assert type(frame) is CLASS_OF[cf.FrameKind(kind)]
    assert cf.is_request(frame) == (kind < 0x80)
    assert decode_all(data) == [cf.Frame(request_id=0xFFFFFFFF, value=frame)]


@settings(max_examples=400)
@given(frame=cs.frames, request_id=cs.u32)
def test_every_frame_round_trips(frame: cf.FrameValue, request_id: int) -> None:
    data = cf.encode_frame(request_id, frame)
    [decoded] = decode_all(data)
    assert decoded == cf.Frame(request_id=request_id, value=frame)
    assert cf.encode_frame(request_id, decoded.value) == data


# --------------------------------------------------------------------------
# The stream decoder: chunking, truncation, bounds
# --------------------------------------------------------------------------


@pytest.mark.parametrize("frame", SAMPLE_PARAMS)
def test_decoder_whole_bytewise_and_followed_by_the_next(frame: cf.FrameValue) -> None:
    data = cf.encode_frame(9, frame)
    expected = cf.Frame(request_id=9, value=frame)
    assert decode_all(data) == [expected]

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


def assert_broken_for_good(decoder: cf.ClientFrameDecoder) -> None:
    """After a framing error the decoder refuses everything, a good frame too: a
    connection cannot recover from it."""
    decoder.receive_data(cf.encode_ok(2))
    for read in (decoder.next_frame, decoder.next_header, decoder.next_frame):
        with pytest.raises(RemoteProtocolError):
            read()


def test_oversized_declared_size_is_refused_before_buffering() -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", cf.MAX_FRAME_BODY + 1, cf.FrameKind.SEND, 0, 1))
    with pytest.raises(RemoteProtocolError, match="limit") as excinfo:
        decoder.next_frame()
    assert excinfo.value.field == "FrameHeader.length"
    assert decoder.pending_body == 0
    assert_broken_for_good(decoder)


def test_the_largest_declared_size_is_accepted() -> None:
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(struct.pack("<IHHI", cf.MAX_FRAME_BODY, cf.FrameKind.SEND, 0, 4))
    assert decoder.next_header() == (cf.MAX_FRAME_BODY, cf.FrameKind.SEND, 4)
    assert decoder.pending_body == cf.MAX_FRAME_BODY
    assert decoder.next_frame() is None
    assert decoder.in_frame


def test_a_whole_list_reply_may_be_large_from_version_9() -> None:
    queues = cf.QueueList(queues=long_queue_list(20_000))
    assert cf.max_reply_body(queues, cf.LARGE_LISTS_VERSION - 1) == cf.MAX_FRAME_BODY
    assert cf.max_reply_body(queues, cf.LARGE_LISTS_VERSION) == cf.MAX_LIST_FRAME_BODY
    assert cf.max_reply_body(cf.Ok(value=1), cf.LARGE_LISTS_VERSION) == cf.MAX_FRAME_BODY
    with pytest.raises(cf.FrameTooLarge) as excinfo:
        cf.encode_frame(7, queues)
    assert excinfo.value.limit == cf.MAX_FRAME_BODY
    assert excinfo.value.size > cf.MAX_FRAME_BODY
    assert isinstance(excinfo.value, LocalProtocolError)
    frame = cf.encode_frame(7, queues, max_body=cf.MAX_LIST_FRAME_BODY)
    assert len(frame) - cf.HEADER_SIZE == excinfo.value.size
    # A client's decoder takes it; one without the list limit refuses it before buffering.
    client = cf.ClientFrameDecoder(max_list_body=cf.MAX_LIST_FRAME_BODY)
    client.receive_data(frame)
    decoded = client.next_frame()
    assert decoded is not None
    assert decoded.request_id == 7
    assert decoded.value == queues
    daemon = cf.ClientFrameDecoder()
    daemon.receive_data(frame[: cf.HEADER_SIZE])
    with pytest.raises(RemoteProtocolError, match="limit"):
        daemon.next_frame()


@pytest.mark.parametrize("kind", [cf.FrameKind.SEND, cf.FrameKind.MESSAGE, cf.FrameKind.HELLO])
def test_the_list_limit_is_for_whole_list_replies_only(kind: cf.FrameKind) -> None:
    decoder = cf.ClientFrameDecoder(max_list_body=cf.MAX_LIST_FRAME_BODY)
    decoder.receive_data(struct.pack("<IHHI", cf.MAX_FRAME_BODY + 1, kind, 0, 1))
    with pytest.raises(RemoteProtocolError, match="limit"):
        decoder.next_frame()


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
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()
    assert_broken_for_good(decoder)


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
    position=cs.offsets,
    flip=cs.flips,
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


_LONG = "n" * 0x10000
_TOO_LONG = "is too long to send (65,536 characters): it can carry at most 65,535 bytes of UTF-8"
_NOT_UNICODE = (
    "is not valid Unicode text (position 3: a lone surrogate, "
    "as non-UTF-8 bytes in a command-line argument give)"
)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (cf.CreateQueue(name=_LONG), f"CreateQueue.name {_TOO_LONG}"),
        (cf.DeleteQueue(name=_LONG), f"DeleteQueue.name {_TOO_LONG}"),
        (cf.Receive(queue=_LONG), f"Receive.queue {_TOO_LONG}"),  # a hand-written encoder
        (cf.CreateList(name="l", targets=("q", _LONG)), f"CreateList.targets[1] {_TOO_LONG}"),
        (
            cf.ChangePermissions(queue="q", entry=_LONG, grant=1, revoke=0),
            f"ChangePermissions.entry {_TOO_LONG}",
        ),
        (cf.CreateQueue(name="bad\udcff"), f"CreateQueue.name {_NOT_UNICODE}"),
        (cf.Receive(queue="bad\udcff"), f"Receive.queue {_NOT_UNICODE}"),
        (cf.Authenticate(token="bad\udcff"), f"Authenticate.token {_NOT_UNICODE}"),
        (cf.CreateQueue(name=None), "CreateQueue.name must be text, not None"),  # type: ignore[arg-type]
        (cf.Receive(queue=5), "Receive.queue must be text, not 5"),  # type: ignore[arg-type]
    ],
    ids=lambda value: None if isinstance(value, str) else type(value).__name__,
)
def test_a_text_that_cannot_be_sent_is_named_not_the_encoders_words(
    value: cf.FrameValue, words: str
) -> None:
    with pytest.raises(TextFieldError) as caught:
        cf.encode_frame(1, value)
    assert str(caught.value) == words
    assert caught.value.field == type(value).__name__


def test_unknown_guid_bytes_round_trip() -> None:
    guid = uuid.UUID(bytes=bytes(range(16)))
    frame = cf.HelloOk(version=1, server_version="x", qm_name="n", qm_guid=guid)
    [decoded] = decode_all(cf.encode_frame(1, frame))
    assert decoded.value == frame


# --------------------------------------------------------------------------
# Size limits
# --------------------------------------------------------------------------


def test_a_largest_message_fits_in_a_frame() -> None:
    message = PROPERTIES.replace(body=b"\x01" * cf.MAX_MESSAGE_BODY)
    send = cf.Send(tx_id=1, message=message)
    data = cf.encode_frame(1, send)
    assert len(data) - cf.HEADER_SIZE <= cf.MAX_FRAME_BODY
    assert decode_all(data) == [cf.Frame(request_id=1, value=send)]
    reply = cf.MessageReply(
        message=cf.QueuedMessage(queue="q", lookup_id=1, arrived_time=0.0, message=message)
    )
    assert decode_all(cf.encode_frame(2, reply)) == [cf.Frame(request_id=2, value=reply)]


def test_a_frame_over_the_limit_cannot_be_encoded() -> None:
    too_big = MessageProperties(destination="q", body=b"x" * (cf.MAX_FRAME_BODY + 1))
    with pytest.raises(LocalProtocolError, match="limit"):
        cf.encode_frame(1, cf.Send(message=too_big))
    # Exactly at the limit is fine: 9 bytes of Send head, then the message.
    fitting = MessageProperties(body=b"x" * (cf.MAX_FRAME_BODY - 9 - 84))
    assert len(cf.encode_frame(1, cf.Send(message=fitting))) == cf.HEADER_SIZE + cf.MAX_FRAME_BODY
