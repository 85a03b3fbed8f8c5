"""The SDK additions the Spark reader and writer use: raw pages and plain bulk sends."""

from __future__ import annotations

import pytest

from qmgr.client import QueueManager, QueueNotFound
from qmgr.client._bulk import send_bodies
from qmgr.client._pages import page_body, request_page
from qmgr.spark._arrow import messages_to_batch
from qmgr.spark._page import decode_page


def test_raw_pages_are_peek_range(qm: QueueManager, queue_name: str) -> None:
    qm.create_queue(queue_name, transactional=True)
    with qm.begin() as tx:
        for i in range(300):
            tx.send(queue_name, bytes([i % 256]) * (i * 150), label=f"m{i}", priority=i % 8)
    # Two requests under way at once on one connection, answered in order.
    first = request_page(qm, queue_name, 0, 100)
    second = request_page(qm, queue_name, 100, 1000)
    pages = [decode_page(page_body(first), 10**9), decode_page(page_body(second), 10**9)]
    expected = qm.peek_range(queue_name, max=1000)
    assert pages[0].count == 100
    assert pages[0].last == expected[99].lookup_id
    assert pages[0].batch().equals(messages_to_batch(expected[:100]))  # type: ignore[union-attr]
    # The daemon stops a page at about 4 MB: the rest comes on the next request.
    rest = expected[100 : 100 + pages[1].count]
    assert 0 < pages[1].count < 200
    assert pages[1].batch().equals(messages_to_batch(rest))  # type: ignore[union-attr]
    # The connection still decodes other replies as usual.
    assert qm.measure_range(queue_name).count == 300


def test_raw_page_errors_and_empty_pages(qm: QueueManager, queue_name: str) -> None:
    with pytest.raises(QueueNotFound):
        page_body(request_page(qm, queue_name, 0, 10))
    qm.create_queue(queue_name)
    page = decode_page(page_body(request_page(qm, queue_name, 0, 10)), 10**9)
    assert page.count == 0
    assert qm.peek_range(queue_name) == []


def test_send_bodies_is_send(qm: QueueManager, queue_name: str) -> None:
    one, many = f"{queue_name}-one", f"{queue_name}-many"
    qm.create_queue(one, transactional=True)
    qm.create_queue(many, transactional=True)
    bodies: list[object] = [b"", b"x" * 1000, "text", bytearray(b"array"), b"y" * 70_000] * 20
    with qm.begin() as tx:
        for body in bodies:
            tx.send(one, body)  # type: ignore[arg-type]
    with qm.begin() as tx:
        assert send_bodies(tx, many, bodies) == len(bodies)  # type: ignore[arg-type]
    sent = qm.peek_range(one, max=1000)
    found = qm.peek_range(many, max=1000)
    assert [m.body for m in found] == [m.body for m in sent]
    for a, b in zip(sent, found, strict=True):
        assert (a.label, a.priority, a.properties.delivery, a.properties.destination) == (
            b.label,
            b.priority,
            b.properties.delivery,
            b.properties.destination.replace(many, one),
        )


def test_send_bodies_errors_come_from_the_transaction(qm: QueueManager, queue_name: str) -> None:
    from qmgr.client import MessageTooLarge, QueueError

    qm.create_queue(queue_name, transactional=True)
    tx = qm.begin()
    with pytest.raises(MessageTooLarge):
        send_bodies(tx, queue_name, [b"a", b"b" * (4 * 1024 * 1024 + 1)])
    send_bodies(tx, f"{queue_name}-missing", [b"c"])
    with pytest.raises(QueueError):
        tx.commit()
    assert qm.peek_range(queue_name) == []
