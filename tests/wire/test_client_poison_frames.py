"""The version 4 frames of poison handling and subqueues, and the trailers version 4
adds to existing frames: their documented bytes, the version 3 part left as it
was, and malformed trailers refused alike by the hand-written and the construct
decoders."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from wire import LocalProtocolError, MessageProperties, RemoteProtocolError
from wire import client_frames as cf
from wire._client_layouts import decode_body_with_layout, encode_body_with_layout

MESSAGE = MessageProperties(body=b"hello", label="l", destination="orders")
QUEUED = cf.QueuedMessage(queue="orders", lookup_id=9, arrived_time=2.5, message=MESSAGE)
COUNTERS = cf.MessageCounters(abort_count=3, move_count=2, last_move_time=1.5)
COUNTED = cf.QueuedMessage(
    queue="orders", lookup_id=9, arrived_time=2.5, message=MESSAGE, counters=COUNTERS
)
INFO = cf.QueueInfo(
    name="orders",
    format_name=".\\private$\\orders",
    kind=0,
    transactional=True,
    journal=False,
    quota=None,
    depth=1,
    bytes=5,
    locked=0,
    created_at=1.0,
)
RETRY = cf.RetrySettings(retry_count=5, retry_cycles=2, retry_delay=1800.0)


def body(value: cf.FrameValue) -> bytes:
    return cf.encode_frame(1, value)[cf.HEADER_SIZE :]


def both_decode(kind: cf.FrameKind, data: bytes) -> cf.FrameValue:
    """Decode with the daemon's decoder and the construct layout; they must agree."""
    fast = cf.decode_body(kind, data)
    assert decode_body_with_layout(kind, data) == fast
    return fast


def both_refuse(kind: cf.FrameKind, data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(kind, data)
    with pytest.raises(RemoteProtocolError):
        decode_body_with_layout(kind, data)


def test_the_poison_requests_need_version_5() -> None:
    assert cf.POISON_VERSION == 5
    assert frozenset({cf.SetQueueProperties, cf.MoveMessages}) == cf.POISON_REQUESTS
    assert not cf.POISON_REQUESTS & (cf.TWO_PHASE_REQUESTS | cf.OUTCOMES_REQUESTS)
    kinds = {cf.FrameKind.SET_QUEUE_PROPERTIES, cf.FrameKind.MOVE_MESSAGES, cf.FrameKind.MOVED}
    assert {int(k) for k in kinds} == {0x19, 0x1A, 0x8E}
    assert int(cf.QueueKind.SUBQUEUE) == 5


def test_request_layouts() -> None:
    move = cf.MoveMessages(tx_id=7, source="a;poison", target="a", lookup_id=3, all=True)
    assert body(move) == (
        struct.pack("<Q", 7) + b"\x08\x00a;poison" + b"\x01\x00a" + struct.pack("<Q?", 3, True)
    )
    assert both_decode(cf.FrameKind.MOVE_MESSAGES, body(move)) == move
    props = cf.SetQueueProperties(name="a", poison=cf.PoisonHandling.ON, retry_delay=2.0)
    assert body(props) == (
        b"\x01\x00a\x01" + struct.pack("<?I", False, 0) * 2 + struct.pack("<?d", True, 2.0)
    )
    assert both_decode(cf.FrameKind.SET_QUEUE_PROPERTIES, body(props)) == props
    assert body(cf.Moved(count=2, lookup_id=9)) == struct.pack("<QQ", 2, 9)


def test_create_queue_carries_its_retry_settings_in_a_trailer() -> None:
    plain = cf.CreateQueue(name="a", transactional=True)
    retried = cf.CreateQueue(name="a", transactional=True, retry_count=1)
    assert body(retried) == body(plain) + struct.pack("<?I?I?d", True, 1, False, 0, False, 0.0)
    assert both_decode(cf.FrameKind.CREATE_QUEUE, body(retried)) == retried
    assert both_decode(cf.FrameKind.CREATE_QUEUE, body(plain)) == plain
    both_refuse(cf.FrameKind.CREATE_QUEUE, body(retried)[:-1])


def test_a_message_with_counters_is_the_version_3_frame_and_a_trailer() -> None:
    old = body(cf.MessageReply(message=QUEUED))
    new = body(cf.MessageReply(message=COUNTED))
    assert new == old + struct.pack("<IId", 3, 2, 1.5)
    assert both_decode(cf.FrameKind.MESSAGE, new) == cf.MessageReply(message=COUNTED)
    for cut in (1, 8, 15):
        both_refuse(cf.FrameKind.MESSAGE, new[:-cut])
    both_refuse(cf.FrameKind.MESSAGE, new + b"\x00")


def test_a_message_list_has_one_counters_record_per_message_or_none() -> None:
    old = body(cf.MessageList(messages=(QUEUED, QUEUED)))
    new = body(cf.MessageList(messages=(COUNTED, COUNTED)))
    assert new == old + struct.pack("<IId", 3, 2, 1.5) * 2
    assert both_decode(cf.FrameKind.MESSAGE_LIST, new).messages == (COUNTED, COUNTED)  # type: ignore[union-attr]
    both_refuse(cf.FrameKind.MESSAGE_LIST, new[:-16])  # one record for two messages
    both_refuse(cf.FrameKind.MESSAGE_LIST, new + bytes(16))
    both_refuse(cf.FrameKind.MESSAGE_LIST, body(cf.MessageList(messages=())) + bytes(16))
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(1, cf.MessageList(messages=(QUEUED, COUNTED)))
    with pytest.raises(LocalProtocolError):
        encode_body_with_layout(cf.MessageList(messages=(QUEUED, COUNTED)))


def test_queue_lists_and_status_carry_retry_settings_in_a_trailer() -> None:
    queues = (INFO, INFO)
    with_retry = (INFO, dataclasses.replace(INFO, retry=RETRY))
    old = body(cf.QueueList(queues=queues))
    new = body(cf.QueueList(queues=with_retry))
    absent = struct.pack("<?IId", False, 0, 0, 0.0)
    assert new == old + absent + struct.pack("<?IId", True, 5, 2, 1800.0)
    assert both_decode(cf.FrameKind.QUEUE_LIST, new) == cf.QueueList(queues=with_retry)
    both_refuse(cf.FrameKind.QUEUE_LIST, new[:-17])
    status = cf.StatusInfo(
        qm_name="qm",
        qm_guid=MESSAGE.source_qm,
        server_version="1",
        started_at=0.0,
        connections=1,
        open_transactions=0,
        commits=0,
        aborts=0,
        batches=0,
        uncommitted_bytes=0,
        erasing=0,
        queues=with_retry,
    )
    plain = body(dataclasses.replace(status, queues=queues))
    assert body(status) == plain + absent + struct.pack("<?IId", True, 5, 2, 1800.0)
    assert both_decode(cf.FrameKind.STATUS_INFO, body(status)) == status
