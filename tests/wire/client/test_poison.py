"""The version 5 frames of poison handling and subqueues: their documented bytes, decoded
alike by the hand-written and the construct decoders.
"""

from __future__ import annotations

import struct

import pytest

from wire import LocalProtocolError
from wire import client as cf

from .client_samples import (
    body_of,
    both_decode,
    both_refuse,
)


def test_the_poison_requests_need_version_5() -> None:
    assert cf.POISON_VERSION == 5
    assert frozenset({cf.SetQueueProperties, cf.MoveMessages}) == cf.POISON_REQUESTS
    assert not cf.POISON_REQUESTS & (cf.TWO_PHASE_REQUESTS | cf.OUTCOMES_REQUESTS)
    kinds = {cf.FrameKind.SET_QUEUE_PROPERTIES, cf.FrameKind.MOVE_MESSAGES, cf.FrameKind.MOVED}
    assert {int(k) for k in kinds} == {0x19, 0x1A, 0x8E}
    assert int(cf.QueueKind.SUBQUEUE) == 5


def test_request_layouts() -> None:
    move = cf.MoveMessages(tx_id=7, source="a;poison", target="a", lookup_id=3, all=True)
    assert body_of(move) == (
        struct.pack("<Q", 7) + b"\x08\x00a;poison" + b"\x01\x00a" + struct.pack("<Q?", 3, True)
    )
    assert both_decode(cf.FrameKind.MOVE_MESSAGES, body_of(move)) == move
    props = cf.SetQueueProperties(name="a", poison=cf.PoisonHandling.ON, retry_delay=2.0)
    assert body_of(props) == (
        b"\x01\x00a\x01" + struct.pack("<?I", False, 0) * 2 + struct.pack("<?d", True, 2.0)
    )
    assert both_decode(cf.FrameKind.SET_QUEUE_PROPERTIES, body_of(props)) == props
    assert body_of(cf.Moved(count=2, lookup_id=9)) == struct.pack("<QQ", 2, 9)


def test_a_quota_change_is_a_version_10_trailer_after_the_version_5_body() -> None:
    assert cf.QUOTA_VERSION == 10 <= cf.PROTOCOL_VERSION
    unchanged = cf.SetQueueProperties(name="a", retry_count=2)
    assert not unchanged.changes_quota
    raised = cf.SetQueueProperties(name="a", retry_count=2, quota=2**40)
    removed = cf.SetQueueProperties(name="a", no_quota=True)
    assert raised.changes_quota
    assert removed.changes_quota
    # The version 5 body is byte for byte what it was; the trailer follows it.
    assert body_of(raised) == body_of(unchanged) + struct.pack("<?Q", True, 2**40)
    assert body_of(removed) == (
        b"\x01\x00a\x00" + struct.pack("<?I", False, 0) * 2 + struct.pack("<?d", False, 0.0)
    ) + struct.pack("<?Q", False, 0)
    for value in (unchanged, raised, removed):
        assert both_decode(cf.FrameKind.SET_QUEUE_PROPERTIES, body_of(value)) == value
    # A short or a longer trailer is malformed.
    for bad in (body_of(raised)[:-1], body_of(raised) + b"\x00"):
        both_refuse(cf.FrameKind.SET_QUEUE_PROPERTIES, bad)


def test_a_quota_and_no_quota_at_once_cannot_be_encoded() -> None:
    with pytest.raises(LocalProtocolError, match="no_quota"):
        body_of(cf.SetQueueProperties(name="a", quota=1, no_quota=True))


@pytest.mark.parametrize("quota", [-1, 1 << 64, 1.5, True])
def test_a_quota_the_trailer_cannot_carry_is_refused_not_left_out(quota: object) -> None:
    # The layout's optional trailer would silently drop a value it cannot
    # build, and the daemon would answer Ok, the quota unchanged.
    with pytest.raises(LocalProtocolError, match="whole number of bytes"):
        body_of(cf.SetQueueProperties(name="a", quota=quota))  # type: ignore[arg-type]
