"""The version 5 frames of poison handling and subqueues: their documented bytes, decoded
alike by the hand-written and the construct decoders.
"""

from __future__ import annotations

import struct

from wire import client as cf

from .client_samples import (
    body_of,
    both_decode,
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
