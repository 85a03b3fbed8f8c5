"""Queue format names: which of them name a queue manager's ``order_queue$``."""

from __future__ import annotations

import pytest

import wire


@pytest.mark.parametrize(
    "queue",
    [
        wire.ORDER_QUEUE,
        wire.PrivateQueueId(number=4),
        wire.DirectQueue(name="TCP:10.1.2.3\\PRIVATE$\\order_queue$"),
        wire.DirectQueue(name="os:host\\private$\\ORDER_QUEUE$"),
    ],
)
def test_order_queues(queue: wire.QueueAddress) -> None:
    assert wire.is_order_queue(queue)


@pytest.mark.parametrize(
    "queue",
    [
        None,
        wire.PrivateQueueId(number=5),
        wire.PrivateQueueId(number=4, host=wire.QueueFormatType.PRIVATE_ON_SOURCE),
        wire.PrivateQueue(qm=wire.NULL_GUID, number=4),
        wire.PublicQueue(queue_id=wire.NULL_GUID),
        wire.DirectQueue(name="TCP:10.1.2.3\\PRIVATE$\\order_queue"),
        wire.DirectQueue(name="TCP:10.1.2.3\\PRIVATE$\\orders"),
    ],
)
def test_other_queues(queue: wire.QueueAddress | None) -> None:
    assert not wire.is_order_queue(queue)
