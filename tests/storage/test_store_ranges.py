"""``range_end`` and ``read_through``: a queue's range measured and listed by
its keys alone, past purge marks, removed messages and the held ones a
caller skips; both counting strategies of ``range_end`` without a limit
(keys up to the last one, or the depth less what lies before) against a
plain model."""

from __future__ import annotations

from collections.abc import Container

import pytest
from conftest import commit_ok, create_queue, fill, lookups, remove, unit

from storage import DeleteQueue, PurgeQueue, QueueRecord, Store


class OnlyContains:
    """A skip set that can only be asked (not iterated)."""

    def __init__(self, ids: set[int]) -> None:
        self._ids = ids

    def __contains__(self, item: object) -> bool:
        return item in self._ids


@pytest.fixture
def ranged(store: Store) -> QueueRecord:
    """A queue whose messages 1..5 are purged (not yet erased), 9 removed, 6..15 else visible."""
    q = create_queue(store, "q", transactional=False)
    fill(store, q, 5)
    commit_ok(store, unit(PurgeQueue(q.queue_id)))
    fill(store, q, 10)
    commit_ok(store, unit(remove(q, 9)))
    return q


def expected_range(visible: list[int], after: int, limit: int) -> tuple[int, int]:
    counted = [lookup_id for lookup_id in visible if lookup_id > after]
    if limit:
        counted = counted[:limit]
    return len(counted), counted[-1] if counted else after


@pytest.mark.parametrize("skip", [set(), {7, 15}, {6, 7, 8, 10}, {14, 15}, {1, 2, 99}])
def test_range_end_counts_the_visible_messages_after_a_lookup_id(
    store: Store, ranged: QueueRecord, skip: set[int]
) -> None:
    visible = [lookup_id for lookup_id in lookups(store, ranged) if lookup_id not in skip]
    assert lookups(store, ranged) == [6, 7, 8, 10, 11, 12, 13, 14, 15]
    for wrapped in (skip, frozenset(skip), OnlyContains(skip)):
        for after in range(18):
            for limit in (0, 1, 3, 100):
                found = store.range_end(ranged.queue_id, after=after, limit=limit, skip=wrapped)
                assert found == expected_range(visible, after, limit), (after, limit, skip)


def test_range_end_examples(store: Store, ranged: QueueRecord) -> None:
    skip: Container[int] = {7, 15}
    qid = ranged.queue_id
    assert store.range_end(qid, after=0, limit=0, skip=skip) == (7, 14)
    assert store.range_end(qid, after=7, limit=0, skip=skip) == (6, 14)
    assert store.range_end(qid, after=0, limit=3, skip=skip) == (3, 10)
    assert store.range_end(qid, after=14, limit=0, skip=skip) == (0, 14)
    assert store.range_end(qid, after=100, limit=0, skip=skip) == (0, 100)
    assert store.range_end(qid, after=0, limit=0, skip=()) == (9, 15)
    assert store.range_end(999, after=3, limit=0, skip=()) == (0, 3)
    with pytest.raises(ValueError, match="negative"):
        store.range_end(qid, after=0, limit=-1, skip=())


def test_range_end_of_a_deleted_or_empty_queue(store: Store) -> None:
    q = create_queue(store, "q")
    assert store.range_end(q.queue_id, after=0, limit=0, skip=()) == (0, 0)
    fill(store, q, 3)
    commit_ok(store, unit(DeleteQueue(q.queue_id)))
    assert store.range_end(q.queue_id, after=1, limit=0, skip=()) == (0, 1)
    assert store.read_through(q.queue_id, through=3, limit=10, skip=()) == []


def test_range_end_stops_at_its_own_queue(store: Store) -> None:
    first = create_queue(store, "first", transactional=True)
    second = create_queue(store, "second", transactional=True)
    fill(store, first, 3)
    fill(store, second, 4)
    assert store.range_end(first.queue_id, after=0, limit=0, skip=()) == (3, 3)
    assert store.range_end(first.queue_id, after=1, limit=0, skip={3}) == (1, 2)
    assert store.range_end(second.queue_id, after=0, limit=0, skip={1, 2, 3, 4}) == (0, 0)
    assert store.read_through(second.queue_id, through=10, limit=10, skip=()) == [1, 2, 3, 4]


def test_read_through_lists_the_visible_lookup_ids_up_to_one(
    store: Store, ranged: QueueRecord
) -> None:
    qid = ranged.queue_id
    assert store.read_through(qid, through=12, limit=100, skip={7}) == [6, 8, 10, 11, 12]
    assert store.read_through(qid, through=12, limit=2, skip={7}) == [6, 8]
    assert store.read_through(qid, through=5, limit=100, skip=()) == []  # purged
    assert store.read_through(qid, through=2**64 - 1, limit=100, skip=OnlyContains({15})) == [
        6,
        7,
        8,
        10,
        11,
        12,
        13,
        14,
    ]
    assert store.read_through(qid, through=12, limit=0, skip=()) == []
