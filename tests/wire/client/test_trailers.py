"""The trailers version 5 adds to existing frames: their documented bytes, the version 3
part left as it was, and malformed trailers refused alike by the hand-written and the
construct decoders.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from wire_samples import QUEUE_INFO

from wire import LocalProtocolError, MessageProperties
from wire import client as cf

from .client_samples import SAMPLES, body_of, both_decode, both_refuse

MESSAGE = MessageProperties(body=b"hello", label="l", destination="orders")
QUEUED = cf.QueuedMessage(queue="orders", lookup_id=9, arrived_time=2.5, message=MESSAGE)
COUNTERS = cf.MessageCounters(abort_count=3, move_count=2, last_move_time=1.5)
COUNTED = cf.QueuedMessage(
    queue="orders", lookup_id=9, arrived_time=2.5, message=MESSAGE, counters=COUNTERS
)
RETRY = cf.RetrySettings(retry_count=5, retry_cycles=2, retry_delay=1800.0)


def test_create_queue_carries_its_retry_settings_in_a_trailer() -> None:
    plain = cf.CreateQueue(name="a", transactional=True)
    retried = cf.CreateQueue(name="a", transactional=True, retry_count=1)
    assert body_of(retried) == body_of(plain) + struct.pack(
        "<?I?I?d", True, 1, False, 0, False, 0.0
    )
    assert both_decode(cf.FrameKind.CREATE_QUEUE, body_of(retried)) == retried
    assert both_decode(cf.FrameKind.CREATE_QUEUE, body_of(plain)) == plain
    both_refuse(cf.FrameKind.CREATE_QUEUE, body_of(retried)[:-1])


def test_a_message_with_counters_is_the_version_3_frame_and_a_trailer() -> None:
    old = body_of(cf.MessageReply(message=QUEUED))
    new = body_of(cf.MessageReply(message=COUNTED))
    assert new == old + struct.pack("<IId", 3, 2, 1.5)
    assert both_decode(cf.FrameKind.MESSAGE, new) == cf.MessageReply(message=COUNTED)
    for cut in (1, 8, 15):
        both_refuse(cf.FrameKind.MESSAGE, new[:-cut])
    both_refuse(cf.FrameKind.MESSAGE, new + b"\x00")


def test_a_message_list_has_one_counters_record_per_message_or_none() -> None:
    old = body_of(cf.MessageList(messages=(QUEUED, QUEUED)))
    new = body_of(cf.MessageList(messages=(COUNTED, COUNTED)))
    assert new == old + struct.pack("<IId", 3, 2, 1.5) * 2
    assert both_decode(cf.FrameKind.MESSAGE_LIST, new).messages == (COUNTED, COUNTED)  # type: ignore[union-attr]
    both_refuse(cf.FrameKind.MESSAGE_LIST, new[:-16])  # one record for two messages
    both_refuse(cf.FrameKind.MESSAGE_LIST, new + bytes(16))
    both_refuse(cf.FrameKind.MESSAGE_LIST, body_of(cf.MessageList(messages=())) + bytes(16))
    with pytest.raises(LocalProtocolError):
        cf.encode_frame(1, cf.MessageList(messages=(QUEUED, COUNTED)))
    with pytest.raises(LocalProtocolError):
        cf.encode_body_with_layout(cf.MessageList(messages=(QUEUED, COUNTED)))


def test_queue_lists_and_status_carry_retry_settings_in_a_trailer() -> None:
    queues = (QUEUE_INFO, QUEUE_INFO)
    with_retry = (QUEUE_INFO, dataclasses.replace(QUEUE_INFO, retry=RETRY))
    old = body_of(cf.QueueList(queues=queues))
    new = body_of(cf.QueueList(queues=with_retry))
    absent = struct.pack("<?IId", False, 0, 0, 0.0)
    assert new == old + absent + struct.pack("<?IId", True, 5, 2, 1800.0)
    assert both_decode(cf.FrameKind.QUEUE_LIST, new) == cf.QueueList(queues=with_retry)
    both_refuse(cf.FrameKind.QUEUE_LIST, new[:-17])
    status = dataclasses.replace(SAMPLES[cf.FrameKind.STATUS_INFO], queues=with_retry)
    plain = body_of(dataclasses.replace(status, queues=queues))
    assert body_of(status) == plain + absent + struct.pack("<?IId", True, 5, 2, 1800.0)
    assert both_decode(cf.FrameKind.STATUS_INFO, body_of(status)) == status
