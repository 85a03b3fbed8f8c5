"""Frame values to construct containers and back: optional times, values that cannot be
encoded, and malformed bodies.
"""

from __future__ import annotations

import struct

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from wire_samples import INCOMING_INFO, OUTGOING_INFO

from wire import client as cf

from . import client_strategies as cs
from .client_samples import (
    SAMPLES,
    assert_cannot_encode,
    assert_mutations_decode_or_are_refused,
    assert_refused,
    decode_all,
    fields_of,
)


@pytest.mark.parametrize("name", ["next_attempt", "last_order_ack"])
def test_an_absent_time_is_not_the_epoch(name: str) -> None:
    for value in (None, 0.0, -1.5):
        info = cf.OutgoingInfo(**{**fields_of(OUTGOING_INFO), name: value})
        [frame] = decode_all(cf.encode_frame(1, cf.OutgoingList(outgoing=(info,))))
        assert isinstance(frame.value, cf.OutgoingList)
        assert getattr(frame.value.outgoing[0], name) == value
        assert (getattr(frame.value.outgoing[0], name) is None) == (value is None)


BAD_OUTGOING_VALUES = [
    pytest.param(cf.ControlOutgoing(action=256, destination="d"), id="action-too-big"),
    pytest.param(cf.ControlOutgoing(action=-1, destination="d"), id="action-negative"),
    pytest.param(cf.ControlOutgoing(action=1, destination="\ud800"), id="destination-surrogate"),
    pytest.param(cf.ControlOutgoing(action=1, destination="d" * 0x10000), id="destination-long"),
    pytest.param(
        cf.OutgoingList(outgoing=(cf.OutgoingInfo(**{**fields_of(OUTGOING_INFO), "waiting": -1}),)),
        id="waiting-negative",
    ),
    pytest.param(
        cf.OutgoingList(
            outgoing=(cf.OutgoingInfo(**{**fields_of(OUTGOING_INFO), "sequence_timestamp": 2**32}),)
        ),
        id="sequence-timestamp-too-big",
    ),
    pytest.param(cf.OutgoingList(outgoing=(), purged=2**64), id="purged-too-big"),
    pytest.param(
        cf.StatusInfo(
            **{
                **fields_of(SAMPLES[cf.FrameKind.STATUS_INFO]),
                "incoming": (cf.IncomingInfo(**{**fields_of(INCOMING_INFO), "reject_count": -1}),),
            }
        ),
        id="status-reject-count",
    ),
]


@pytest.mark.parametrize("value", BAD_OUTGOING_VALUES)
def test_outgoing_values_that_cannot_be_encoded_are_local_errors(value: cf.FrameValue) -> None:
    assert_cannot_encode(value)


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
    assert_refused(kind, body)


@settings(max_examples=300)
@given(
    kind=st.sampled_from(
        [cf.FrameKind.CONTROL_OUTGOING, cf.FrameKind.OUTGOING_LIST, cf.FrameKind.STATUS_INFO]
    ),
    **cs.body_mutations,
)
def test_mutated_outgoing_bodies_decode_or_raise_remote_protocol_error(
    kind: cf.FrameKind, value: st.DataObject, position: int, flip: int, cut: int
) -> None:
    body = cf.encode_body_with_layout(value.draw(cs.FRAMES_BY_KIND[kind]))
    assert_mutations_decode_or_are_refused(kind, body, position, flip, cut)
