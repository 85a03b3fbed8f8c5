"""The client protocol's frames for global transactions and queue ranges: layouts, bounds."""

from __future__ import annotations

import struct

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from wire import RemoteProtocolError
from wire import client as cf
from wire.client.fast_codec import FAST_ENCODE
from wire.client.frames import CLASS_OF, KIND_OF

from . import client_strategies as cs
from .client_samples import (
    assert_cannot_encode,
    assert_mutations_decode_or_are_refused,
    assert_refused,
    text,
)

NEW_KINDS = (
    cf.FrameKind.BEGIN_GLOBAL,
    cf.FrameKind.PREPARE,
    cf.FrameKind.RESOLVE,
    cf.FrameKind.LIST_TRANSACTIONS,
    cf.FrameKind.REMOVE_THROUGH,
    cf.FrameKind.MEASURE_RANGE,
    cf.FrameKind.RESOLUTIONS,
    cf.FrameKind.TRANSACTION_LIST,
    cf.FrameKind.RANGE_INFO,
)


def test_the_two_phase_requests_are_the_new_request_kinds() -> None:
    requests = {CLASS_OF[kind] for kind in NEW_KINDS if kind < 0x80}
    assert requests == cf.TWO_PHASE_REQUESTS
    assert all(KIND_OF[cls] >= cf.FrameKind.BEGIN_GLOBAL for cls in requests)
    # Not hot: they are encoded and decoded by their layouts only.
    assert not requests & set(FAST_ENCODE)


GOLDEN = [
    pytest.param(
        cf.BeginGlobal(tx_id=7, xid="x1"), struct.pack("<Q", 7) + text("x1"), id="begin-global"
    ),
    pytest.param(cf.BeginGlobal(xid="x"), bytes(8) + text("x"), id="begin-global-daemon-id"),
    pytest.param(cf.Prepare(tx_id=2**63), struct.pack("<Q", 2**63), id="prepare"),
    pytest.param(
        cf.Resolve(commit=True, xids=("a", "bc")),
        b"\x01" + struct.pack("<I", 2) + text("a") + text("bc"),
        id="resolve",
    ),
    pytest.param(
        cf.Resolve(commit=False, xids=()), b"\x00" + struct.pack("<I", 0), id="resolve-none"
    ),
    pytest.param(
        cf.ListTransactions(),
        text("") + b"\x00" + struct.pack("<I", 1000),
        id="list-transactions-defaults",
    ),
    pytest.param(
        cf.ListTransactions(prefix="sp", resolved=True, max_count=5),
        text("sp") + b"\x01" + struct.pack("<I", 5),
        id="list-transactions",
    ),
    pytest.param(
        cf.RemoveThrough(queue="q", lookup_id=9),
        text("q") + struct.pack("<Q", 9),
        id="remove-through",
    ),
    pytest.param(
        cf.MeasureRange(queue="q"), text("q") + struct.pack("<QI", 0, 0), id="measure-range"
    ),
    pytest.param(cf.Resolutions(outcomes=(1, 4)), struct.pack("<IBB", 2, 1, 4), id="resolutions"),
    pytest.param(
        cf.TransactionList(
            transactions=(
                cf.TransactionInfo(xid="t", state=2, since=1.5, sends=3, receives=4, bytes=5),
            )
        ),
        struct.pack("<I", 1) + text("t") + struct.pack("<BdQQQ", 2, 1.5, 3, 4, 5),
        id="transaction-list",
    ),
    pytest.param(
        cf.RangeInfo(queue_id=3, count=2, last=11),
        struct.pack("<IQQ", 3, 2, 11),
        id="range-info",
    ),
]


@pytest.mark.parametrize(("value", "body"), GOLDEN)
def test_bodies_are_the_documented_layouts(value: cf.FrameValue, body: bytes) -> None:
    data = cf.encode_frame(6, value)
    assert data[cf.HEADER_SIZE :] == body
    assert struct.unpack_from("<IHHI", data) == (len(body), KIND_OF[type(value)], 0, 6)
    assert cf.decode_body(KIND_OF[type(value)], body) == value


@settings(max_examples=300)
@given(kind=st.sampled_from(NEW_KINDS), data=st.data(), request_id=cs.u32)
def test_new_frames_round_trip(kind: cf.FrameKind, data: st.DataObject, request_id: int) -> None:
    value = data.draw(cs.FRAMES_BY_KIND[kind])
    encoded = cf.encode_frame(request_id, value)
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(encoded)
    frame = decoder.next_frame()
    assert frame == cf.Frame(request_id=request_id, value=value)
    # Sequences decode as tuples, so that values compare and hash like the originals.
    assert hash(frame.value) == hash(value)


def test_the_largest_resolve_fits_in_a_frame() -> None:
    xids = tuple(f"{i:0200d}" for i in range(cf.MAX_RESOLVE_XIDS))
    value = cf.Resolve(commit=True, xids=xids)
    data = cf.encode_frame(1, value)
    assert len(data) - cf.HEADER_SIZE <= cf.MAX_FRAME_BODY
    assert cf.decode_body(cf.FrameKind.RESOLVE, data[cf.HEADER_SIZE :]) == value


BAD_VALUES = [
    pytest.param(cf.BeginGlobal(tx_id=-1, xid="x"), id="begin-global-tx-id"),
    pytest.param(cf.BeginGlobal(xid="x" * 0x10000), id="begin-global-long-xid"),
    pytest.param(cf.BeginGlobal(xid="\ud800"), id="begin-global-surrogate"),
    pytest.param(cf.Prepare(tx_id=2**64), id="prepare-tx-id"),
    pytest.param(cf.Resolve(commit=True, xids=("\udfff",)), id="resolve-surrogate"),
    pytest.param(
        cf.Resolve(commit=True, xids=("x",) * (cf.MAX_RESOLVE_XIDS + 1)), id="resolve-too-many"
    ),
    pytest.param(cf.ListTransactions(max_count=2**32), id="list-max-count"),
    pytest.param(cf.RemoveThrough(queue="q", lookup_id=-1), id="remove-through-lookup-id"),
    pytest.param(cf.MeasureRange(queue="q", after=2**64), id="measure-after"),
    pytest.param(cf.Resolutions(outcomes=(256,)), id="resolutions-outcome"),
    pytest.param(
        cf.TransactionList(
            transactions=(
                cf.TransactionInfo(xid="t", state=1, since=0.0, sends=-1, receives=0, bytes=0),
            )
        ),
        id="transaction-sends",
    ),
    pytest.param(cf.RangeInfo(queue_id=2**32, count=0, last=0), id="range-queue-id"),
]


@pytest.mark.parametrize("value", BAD_VALUES)
def test_values_that_cannot_be_encoded_are_local_errors(value: cf.FrameValue) -> None:
    assert_cannot_encode(value)


def test_a_resolve_is_refused_by_its_count_before_its_xids_are_read() -> None:
    """A frame of millions of empty xids must cost the daemon nothing to refuse."""
    count = (cf.MAX_FRAME_BODY - 5) // 2
    body = b"\x01" + struct.pack("<I", count) + text("") * count
    with pytest.raises(RemoteProtocolError, match="Check"):
        cf.decode_body(cf.FrameKind.RESOLVE, body)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        pytest.param(cf.FrameKind.BEGIN_GLOBAL, bytes(8), id="begin-global-no-xid"),
        pytest.param(cf.FrameKind.BEGIN_GLOBAL, bytes(8) + b"\x02\x00\xff\xfe", id="xid-utf8"),
        pytest.param(cf.FrameKind.PREPARE, bytes(9), id="prepare-trailing"),
        pytest.param(cf.FrameKind.RESOLVE, b"\x01" + struct.pack("<I", 1), id="resolve-no-xid"),
        pytest.param(cf.FrameKind.RESOLVE, b"\x01" + b"\xff" * 4, id="resolve-huge-count"),
        pytest.param(
            cf.FrameKind.RESOLVE,
            b"\x01" + struct.pack("<I", cf.MAX_RESOLVE_XIDS + 1) + text("") * 10_001,
            id="resolve-too-many",
        ),
        pytest.param(cf.FrameKind.LIST_TRANSACTIONS, text("p") + b"\x00", id="list-cut"),
        pytest.param(cf.FrameKind.REMOVE_THROUGH, text("q") + bytes(7), id="remove-cut"),
        pytest.param(cf.FrameKind.MEASURE_RANGE, text("q") + bytes(13), id="measure-trailing"),
        pytest.param(cf.FrameKind.RESOLUTIONS, struct.pack("<IB", 2, 1), id="resolutions-cut"),
        pytest.param(
            cf.FrameKind.TRANSACTION_LIST,
            struct.pack("<I", 1) + text("t") + bytes(10),
            id="transaction-cut",
        ),
        pytest.param(cf.FrameKind.RANGE_INFO, bytes(19), id="range-cut"),
    ],
)
def test_malformed_bodies_are_refused(kind: cf.FrameKind, body: bytes) -> None:
    assert_refused(kind, body)


@settings(max_examples=300)
@given(
    kind=st.sampled_from(NEW_KINDS),
    **cs.body_mutations,
)
def test_mutated_bodies_decode_or_raise_remote_protocol_error(
    kind: cf.FrameKind, value: st.DataObject, position: int, flip: int, cut: int
) -> None:
    body = cf.encode_body_with_layout(value.draw(cs.FRAMES_BY_KIND[kind]))
    assert_mutations_decode_or_are_refused(kind, body, position, flip, cut)
