"""Record batches built from a page's bytes are those built from ``Message`` objects."""

from __future__ import annotations

import uuid

import pytest

import wire.client as cf
from qmgr.client import Message
from qmgr.spark._arrow import COLUMNS, messages_to_batch
from qmgr.spark._options import DataSourceError
from qmgr.spark._page import decode_page
from wire import MessageProperties
from wire.client.fast_codec import FAST_ENCODE

SOURCES = [uuid.UUID(int=7), uuid.uuid4()]


def queued(index: int, *, queue: str = "orders") -> cf.QueuedMessage:
    """A message with properties that vary with ``index``."""
    correlation = uuid.uuid4().bytes + index.to_bytes(4, "little") if index % 3 == 0 else b""
    properties = MessageProperties(
        body=bytes([index % 256]) * (index % 300),
        label=["", "order", "Ünïcode ✓", "x" * 250][index % 4],
        destination=queue,
        correlation_id=correlation,
        app_specific=(index * 7919) % 2**32,
        priority=index % 8,
        message_class=[0, 1, 0x8000, 0xFFFF][index % 4],
        sent_time=[0.0, 1.7e9 + index / 7, 1.5e9 + 0.0000005, 2e9 - 1e-7][index % 4],
        source_qm=SOURCES[index % 2],
        ordinal=index * 13,
        admin_queue="admin" if index % 5 == 0 else "",
        response_queue="reply" if index % 6 == 0 else "",
        extension=b"ext" if index % 7 == 0 else b"",
    )
    arrived = [1.7e9 + index / 3, 1.6e9 + 0.0000015, 1.6e9 + 0.0000025, 0.5, 1e9 - 1e-7][index % 5]
    return cf.QueuedMessage(
        queue=queue, lookup_id=index * 2 + 1, arrived_time=arrived, message=properties
    )


def page_bytes(messages: list[cf.QueuedMessage]) -> bytes:
    return FAST_ENCODE[cf.MessageList](cf.MessageList(messages=tuple(messages)))


@pytest.mark.parametrize("columns", [COLUMNS, ("body", "lookup_id"), ("queue", "label", "id")])
def test_page_batch_is_the_messages_batch(columns: tuple[str, ...]) -> None:
    messages = [queued(i) for i in range(200)]
    page = decode_page(page_bytes(messages), through=10**9)
    assert (page.count, page.last, page.beyond) == (200, messages[-1].lookup_id, False)
    assert page.body_bytes == sum(len(m.message.body) for m in messages)
    expected = messages_to_batch([Message.from_wire(m) for m in messages], columns)
    assert page.batch(columns).equals(expected)


def test_page_stops_at_through() -> None:
    messages = [queued(i) for i in range(50)]
    page = decode_page(page_bytes(messages), through=messages[19].lookup_id)
    assert page.count == 50
    assert page.beyond
    batch = page.batch()
    assert batch is not None
    assert batch.num_rows == 20
    expected = messages_to_batch([Message.from_wire(m) for m in messages[:20]])
    assert batch.equals(expected)


def test_empty_page() -> None:
    page = decode_page(page_bytes([]), through=10)
    assert (page.count, page.last, page.beyond) == (0, 0, False)
    assert page.batch() is None
    assert decode_page(page_bytes([queued(40)]), through=10).batch() is None


@pytest.mark.parametrize("cut", [3, 30, 150, -1])
def test_malformed_pages_are_errors(cut: int) -> None:
    data = page_bytes([queued(i) for i in range(3)])
    with pytest.raises(DataSourceError, match="malformed page"):
        decode_page(data[:cut], through=10**9)
    with pytest.raises(DataSourceError, match="malformed page"):
        decode_page(data + b"\0", through=10**9)


def test_a_label_that_is_not_utf8_is_an_error() -> None:
    data = bytearray(page_bytes([queued(1)]))
    at = data.index(b"order", data.index(b"orders") + 1)  # the label, after the queue's name
    data[at] = 0xFF
    with pytest.raises(DataSourceError, match="not UTF-8"):
        decode_page(bytes(data), through=10**9).batch()
