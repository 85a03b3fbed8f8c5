"""The SDK's values converted from the wire: messages, queues, outgoing queues, incoming
sequences and the status."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import pickle
import uuid

import pytest
from client_kit import status_info
from wire_samples import (
    GUID,
    INCOMING_INFO,
    ORDERS,
    OUTGOING_INFO,
    PROPERTIES,
    QM_GUID,
    QUEUE_INFO,
    QUEUED,
    SOURCE_QM,
)

from qmgr.client import Delivery, IncomingInfo, Message, OutgoingInfo, QueueInfo, QueueKind, Status
from wire import MessageProperties
from wire import client as cf

UTC = dt.UTC
WIRE_OUTGOING = dataclasses.replace(OUTGOING_INFO, next_attempt=1_700_000_100.25)
WIRE_INCOMING = dataclasses.replace(INCOMING_INFO, last_access=20.5)


def _message(properties: MessageProperties = PROPERTIES, lookup_id: int = 9) -> Message:
    return Message.from_wire(dataclasses.replace(QUEUED, lookup_id=lookup_id, message=properties))


def test_message_from_wire() -> None:
    message = _message()
    assert message.queue == "orders"
    assert message.lookup_id == 9
    assert message.properties is PROPERTIES
    assert message.body == b"x" * 100
    assert message.text == "x" * 100
    assert message.label == "l\u00e9"
    assert message.id == f"{{{GUID}}}\\42"
    assert message.correlation_id == bytes(range(20))
    assert message.app_specific == 7
    assert message.priority == 5
    assert message.message_class == 0
    assert message.delivery is Delivery.EXPRESS
    assert message.acknowledge == 0x0E
    assert message.journal == 2
    assert message.admin_queue == ".\\private$\\admin"
    assert message.response_queue == ".\\private$\\replies"
    assert message.time_to_reach_queue == 60
    assert message.time_to_be_received == 3600
    assert message.transactional is True
    assert message.destination == "DIRECT=OS:.\\private$\\orders"
    assert message.source_qm == GUID
    assert message.sent_time == dt.datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=UTC)
    assert message.arrived_time == dt.datetime(2023, 11, 14, 22, 13, 21, 500000, tzinfo=UTC)
    assert (message.abort_count, message.move_count, message.last_move_time) == (0, 0, None)


def test_message_text_and_an_infinite_time_to_reach_queue() -> None:
    message = _message(PROPERTIES.replace(body="h\u00e9".encode(), time_to_reach_queue=0xFFFFFFFF))
    assert message.text == "h\u00e9"
    assert message.time_to_reach_queue is None


def test_message_counters_from_wire() -> None:
    counters = cf.MessageCounters(abort_count=2, move_count=1, last_move_time=30.0)
    message = Message.from_wire(dataclasses.replace(QUEUED, counters=counters))
    assert (message.abort_count, message.move_count) == (2, 1)
    assert message.last_move_time == dt.datetime(1970, 1, 1, 0, 0, 30, tzinfo=UTC)
    never = Message.from_wire(dataclasses.replace(QUEUED, counters=cf.MessageCounters()))
    assert never.last_move_time is None


def test_message_defaults_read_as_python_values() -> None:
    message = _message(MessageProperties(body=b"\xff"))
    assert message.correlation_id is None
    assert message.time_to_reach_queue is None
    assert message.time_to_be_received is None
    assert message.delivery is Delivery.RECOVERABLE
    assert message.sent_time == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert message.source_qm == uuid.UUID(int=0)
    assert message.transactional is False
    assert message.admin_queue == message.response_queue == message.label == ""
    assert message.acknowledged_id is None
    with pytest.raises(UnicodeDecodeError):
        _ = message.text


def test_message_from_a_decoded_frame() -> None:
    """A message read from a reply frame (a view over the frame) reads the same."""
    decoder = cf.ClientFrameDecoder()
    decoder.receive_data(cf.encode_frame(1, cf.MessageReply(message=QUEUED)))
    frame = decoder.next_frame()
    assert frame is not None
    assert isinstance(frame.value, cf.MessageReply)
    message = Message.from_wire(frame.value.message)
    assert message == _message()
    assert (message.body, message.label, message.id) == (PROPERTIES.body, "l\u00e9", _message().id)


def test_a_message_of_a_page_keeps_only_its_own_bytes_and_pickles() -> None:
    """A small message kept from a page of large ones does not keep the page
    alive; a message crosses to another process (multiprocessing) whole."""
    big = dataclasses.replace(QUEUED, message=MessageProperties(body=b"x" * 1_000_000))
    page = cf.MessageList(messages=(QUEUED, big, big))
    decoder = cf.ClientFrameDecoder(max_list_body=cf.MAX_LIST_FRAME_BODY)
    decoder.receive_data(cf.encode_frame(1, page))
    frame = decoder.next_frame()
    assert frame is not None
    assert isinstance(frame.value, cf.MessageList)
    small, large, _ = (Message.from_wire(m) for m in frame.value.messages)
    assert small == _message()
    assert small.properties.view.obj is not frame.value.messages[0].message.view.obj
    assert len(small.properties.view.obj) == len(small.properties)  # type: ignore[arg-type]
    assert small.body == PROPERTIES.body
    for message in (small, large):
        again = pickle.loads(pickle.dumps(message))
        assert again == message
        assert again.body == message.body
        assert copy.deepcopy(message) == message


def test_an_acknowledgment_names_the_message_it_is_about() -> None:
    about = GUID.bytes_le + (7).to_bytes(4, "little")  # [MS-DTYP] packet form, as on the wire
    ack = _message(PROPERTIES.replace(message_class=0x0002, correlation_id=about))
    assert ack.acknowledged_id == f"{{{GUID}}}\\7"
    assert ack.class_name == "ACK_REACH_QUEUE"


def test_an_unknown_delivery_value_reads_as_recoverable() -> None:
    assert _message(MessageProperties(delivery=7)).delivery is Delivery.RECOVERABLE


def test_message_equality_and_repr() -> None:
    assert _message() == _message()
    assert hash(_message()) == hash(_message())
    assert _message() != _message(lookup_id=4)
    assert _message() != _message(PROPERTIES.replace(body=b"other"))
    assert _message() != PROPERTIES
    big = _message(PROPERTIES.replace(body=b"x" * 1000))
    text = repr(big)
    assert "lookup_id=9" in text
    assert "1000 bytes" in text
    assert len(text) < 400


def test_queue_info_from_wire() -> None:
    info = QueueInfo.from_wire(QUEUE_INFO)
    assert info.kind is QueueKind.NORMAL
    assert info.created_at == dt.datetime(2020, 9, 13, 12, 26, 40, tzinfo=UTC)
    assert (info.name, info.format_name) == (QUEUE_INFO.name, QUEUE_INFO.format_name)
    assert (info.transactional, info.journal, info.quota) == (True, False, 1 << 40)
    assert (info.depth, info.bytes, info.locked) == (3, 300, 1)
    assert (info.retry_count, info.poison_handling) == (None, False)
    assert QueueInfo.from_wire(dataclasses.replace(QUEUE_INFO, quota=None)).quota is None
    kinds = {
        QueueInfo.from_wire(dataclasses.replace(QUEUE_INFO, kind=k)).kind for k in cf.QueueKind
    }
    assert kinds == set(QueueKind)
    assert QueueInfo.from_wire(dataclasses.replace(QUEUE_INFO, kind=99)).kind is QueueKind.NORMAL


def test_queue_info_with_poison_handling() -> None:
    retry = cf.RetrySettings(retry_count=3, retry_cycles=2, retry_delay=60.0)
    info = QueueInfo.from_wire(dataclasses.replace(QUEUE_INFO, retry=retry))
    assert (info.retry_count, info.retry_cycles, info.retry_delay) == (3, 2, 60.0)
    assert info.poison_handling


def test_outgoing_info_from_wire() -> None:
    info = OutgoingInfo.from_wire(WIRE_OUTGOING)
    assert (info.destination, info.next_hop, info.state) == (ORDERS, "10.0.0.9:1801", "waiting")
    assert info.next_attempt == dt.datetime.fromtimestamp(1_700_000_100.25, UTC)
    assert info.next_attempt is not None
    assert info.next_attempt.tzinfo is UTC
    assert info.last_order_ack is None
    assert (info.waiting, info.unacknowledged, info.next_number) == (12, 3, 16)
    assert (info.sequence_timestamp, info.sequence_ordinal) == (1_700_000_000, 2)
    assert info.sequence == "1700000000:2"
    assert info.last_error == "connection refused"
    acked = OutgoingInfo.from_wire(
        dataclasses.replace(WIRE_OUTGOING, next_attempt=None, last_order_ack=0.0)
    )
    assert acked.next_attempt is None
    assert acked.last_order_ack == dt.datetime(1970, 1, 1, tzinfo=UTC)  # 0.0 is a time, not None


def test_incoming_info_from_wire() -> None:
    info = IncomingInfo.from_wire(WIRE_INCOMING)
    assert (info.source_qm, info.queue) == (SOURCE_QM, "payments")
    assert info.sequence == "1650000000:4"
    assert (info.last_number, info.reject_count) == (41, 2)
    assert info.last_access == dt.datetime(1970, 1, 1, 0, 0, 20, 500000, tzinfo=UTC)


def test_status_from_wire() -> None:
    counts = {"connections": 2, "open_transactions": 1, "commits": 9, "aborts": 3, "batches": 5}
    status = Status.from_wire(status_info(started_at=20.0, uncommitted_bytes=64, **counts))
    assert (status.qm_name, status.qm_guid, status.server_version) == ("fake", QM_GUID, "0.test")
    assert status.started_at == dt.datetime(1970, 1, 1, 0, 0, 20, tzinfo=UTC)
    assert (status.connections, status.open_transactions) == (2, 1)
    assert (status.commits, status.aborts, status.batches) == (9, 3, 5)
    assert (status.uncommitted_bytes, status.erasing) == (64, 0)
    assert status.queues == (QueueInfo.from_wire(QUEUE_INFO),)
    assert status.uptime > dt.timedelta(days=365)
    assert (status.outgoing, status.incoming) == ((), ())


def test_status_carries_outgoing_queues_and_incoming_sequences() -> None:
    status = Status.from_wire(
        status_info(outgoing=(WIRE_OUTGOING,), incoming=(WIRE_INCOMING, WIRE_INCOMING))
    )
    assert status.outgoing == (OutgoingInfo.from_wire(WIRE_OUTGOING),)
    assert status.incoming == (IncomingInfo.from_wire(WIRE_INCOMING),) * 2


def test_a_message_is_a_frozen_value() -> None:
    message = Message.from_wire(QUEUED)
    for name, value in (("lookup_id", 5), ("queue", "other"), ("abort_count", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, name, value)
    assert {message} == {Message.from_wire(QUEUED)}  # hashed by what cannot change
