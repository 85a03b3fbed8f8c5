"""LookupId ranges of a queue (``qmgr.core.ranges``): reading them, measuring them
and removing through a LookupId in bounded steps, passing over held messages."""

from __future__ import annotations

import pytest

import storage
from qmgr.core.outcomes import correlation_of
from storage import Unit
from wire import MessageClass

from .conftest import OpenCore
from .harness import POS_RECEIVE, WALL, CoreHarness, messages


@pytest.fixture
def qm(open_core: OpenCore) -> CoreHarness:
    return open_core(
        {
            "src": {"transactional": True},
            "q": {"transactional": True, "journal": True},
            "admin": {},
        }
    )


def remove_through(qm: CoreHarness, queue: str, through: int, step: int = 2) -> int:
    record = qm.core.queue(queue)
    total = 0
    while (found := qm.core.ranges.removal_step(record, through=through, limit=step)) is not None:
        held, unit = found
        assert len(held) <= step
        removed, _ = qm.core.ranges.removal_done(record, held, qm.write(unit))
        total += removed
    return total


def test_remove_through_removes_the_visible_messages_up_to_a_lookup_id(qm: CoreHarness) -> None:
    ids = [qm.send("q", bytes([i])) for i in range(7)]
    holder = qm.begin()
    assert qm.take("q", holder) == (ids[0], b"\x00")
    assert remove_through(qm, "q", ids[4]) == 4
    assert qm.bodies("q") == [b"\x05", b"\x06"]
    assert qm.bodies("q;journal") == [b"\x01", b"\x02", b"\x03", b"\x04"]
    assert remove_through(qm, "q", ids[4]) == 0  # idempotent
    qm.core.abort(holder)
    assert qm.bodies("q")[0] == b"\x00"  # the held one was left alone


def test_measure_range_counts_visible_messages_without_reading_them(qm: CoreHarness) -> None:
    ids = [qm.send("src", bytes([i])) for i in range(5)]
    record = qm.core.queue("src")
    assert qm.core.ranges.measure_range(record, after=0, limit=3) == (3, ids[2])
    assert qm.core.ranges.measure_range(record, after=ids[2], limit=10) == (2, ids[4])
    assert qm.core.ranges.measure_range(record, after=ids[4], limit=10) == (0, ids[4])
    assert qm.core.ranges.measure_range(record, after=0, limit=0)[1] == ids[4]
    holder = qm.begin()
    qm.take("src", holder)
    assert qm.core.ranges.measure_range(record, after=0, limit=10) == (4, ids[4])


def test_remove_through_reports_each_receipt(qm: CoreHarness) -> None:
    qm.send_tx("q", b"a", acknowledge=POS_RECEIVE, admin_queue="admin")
    qm.send_tx("q", b"b")
    qm.send_tx("q", b"c", acknowledge=POS_RECEIVE, admin_queue="admin")
    sent = messages(qm, "q")
    queue = qm.core.queue("q")
    step = qm.core.ranges.removal_step(queue, through=3, limit=10, wall=WALL)
    assert step is not None
    held, unit = step
    removed, _ = qm.core.ranges.removal_done(queue, held, qm.write(unit))
    assert removed == 3
    acks = messages(qm, "admin")
    assert [ack.correlation_id for ack in acks] == [
        correlation_of(sent[0]),
        correlation_of(sent[2]),
    ]
    assert [ack.message_class for ack in acks] == [MessageClass.ACK_RECEIVE] * 2


def test_peek_range_passes_over_held_messages_and_holds_none(qm: CoreHarness) -> None:
    ids = [qm.send("src", bytes([i])) for i in range(4)]
    record = qm.core.queue("src")
    holder = qm.begin()
    assert qm.take("src", holder) == (ids[0], b"\x00")
    peeked = qm.core.ranges.peek_range(record, after=0, limit=2)
    assert [lookup_id for lookup_id, _ in peeked] == ids[1:3]
    assert qm.core.ranges.peek_range(record, after=ids[2], limit=10)[0][0] == ids[3]
    assert qm.core.holds.count(record.queue_id) == 1  # only the receive holds


def first_step(qm: CoreHarness, count: int, through: int) -> tuple[list[int], list[int], Unit]:
    """Send ``count`` messages to src; the first removal step through the
    ``through``-th: ``(ids, held, unit)``."""
    ids = [qm.send("src", bytes([i])) for i in range(count)]
    step = qm.core.ranges.removal_step(qm.core.queue("src"), through=ids[through], limit=10)
    assert step is not None
    return ids, *step


def test_a_step_holds_its_messages_until_it_is_written(qm: CoreHarness) -> None:
    ids, held, _ = first_step(qm, 3, through=1)
    assert held == ids[:2]
    assert qm.take("src") == (ids[2], b"\x02")  # a receive passes over them
    # Never written: the messages are released, counted as nothing removed.
    record = qm.core.queue("src")
    removed, woken = qm.core.ranges.removal_done(record, held, RuntimeError("lost batch"))
    assert (removed, woken) == (0, {record.queue_id})
    assert qm.bodies("src") == [b"\x00", b"\x01"]


def test_a_message_gone_before_its_removal_is_written_is_not_counted(qm: CoreHarness) -> None:
    _, held, unit = first_step(qm, 2, through=1)
    first = unit.ops[0]
    assert isinstance(first, storage.RemoveMessage)
    # The first message is removed by another unit before the step is written.
    qm.write(Unit((storage.RemoveMessage(first.queue_id, first.lookup_id),)))
    commits = qm.core.tally.commits
    record = qm.core.queue("src")
    removed, _ = qm.core.ranges.removal_done(record, held, qm.write(unit))
    assert removed == 1
    assert qm.core.tally.commits == commits + 1
    assert qm.core.holds.count(record.queue_id) == 0
