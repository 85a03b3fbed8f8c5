"""The hand-written codec of the hot frames: it agrees with the construct layouts byte
for byte, refuses what they refuse, and its byte-level helpers make the frames
``encode_frame`` makes.
"""

from __future__ import annotations

import struct
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from wire_samples import PROPERTIES

from wire import LocalProtocolError, MessageProperties, RemoteProtocolError
from wire import client as cf
from wire.client.fast_codec import FAST_DECODE
from wire.client.frames import KIND_OF

from . import client_strategies as cs
from .client_samples import (
    decode_all,
    outcome,
)


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
    cut=cs.offsets,
    position=cs.offsets,
    flip=cs.flips,
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
        fast = outcome(cf.decode_body, kind, mutated)
        assert fast == outcome(cf.decode_body_with_layout, kind, mutated)


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
    pytest.param(cf.Sent(message_id="\ud800", queue="q", lookup_id=1), id="sent-surrogate"),
    pytest.param(cf.Sent(message_id="m", queue="q" * 0x10000, lookup_id=1), id="sent-long-queue"),
    pytest.param(cf.Sent(message_id="m", queue="q", lookup_id=-1), id="sent-lookup-id"),
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
    assert decode_all(expected) == [
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
        assert decode_all(data) == [cf.Frame(request_id=request_id, value=cls(tx_id=tx_id))]


@pytest.mark.parametrize(("request_id", "value"), [(2**32, 0), (-1, 0), (0, 2**64), (0, -1)])
def test_hot_helpers_refuse_values_out_of_range(request_id: int, value: int) -> None:
    with pytest.raises(struct.error):
        cf.encode_ok(request_id, value)
    with pytest.raises(struct.error):
        cf.encode_tx_request(cf.FrameKind.COMMIT, request_id, value)
