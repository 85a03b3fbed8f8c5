"""Reading committed messages (``storage.reads``): FIFO and priority order,
start positions, skip sets, ranges measured and listed by their keys alone,
and what one queue's reads never see."""

from __future__ import annotations

from collections.abc import Container

import pytest
from store_kit import (
    Reopener,
    append,
    commit_ok,
    create_queue,
    delete_raw,
    fill,
    lookups,
    put_raw,
    remove,
    unit,
)

from storage import DeleteQueue, PurgeQueue, QueueRecord, Store, StoreCorrupt, message_header
from storage.keys import MAX_LOOKUP_ID, message_key


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
    # After a lookup id: where the step before stopped.
    assert store.read_through(qid, through=12, limit=2, skip={7}, after=6) == [8, 10]
    assert store.read_through(qid, through=12, limit=100, skip=(), after=2) == [6, 7, 8, 10, 11, 12]
    assert store.read_through(qid, through=12, limit=100, skip=(), after=12) == []
    assert store.read_through(qid, through=2**64 - 1, limit=9, skip=(), after=2**64 - 1) == []


#: Priorities of the messages with lookup ids 1..6.


PRIORITIES = (3, 7, 0, 7, 5, 3)


#: Their priority order: highest priority first, then lowest lookup id.


PRIORITY_ORDER = [2, 4, 5, 1, 6, 3]


@pytest.fixture
def prioritized(store: Store) -> QueueRecord:
    """A non-transactional queue holding messages 1..6 with ``PRIORITIES``."""
    queue = create_queue(store, "q")
    commit_ok(store, unit(*(append(queue, priority=p) for p in PRIORITIES)))
    return queue


def first_by_priority(
    store: Store, queue: QueueRecord, start: tuple[int, int] = (0, 0), skip: set[int] | None = None
) -> int | None:
    found = store.first_by_priority(queue.queue_id, start=start, skip=skip or set())
    return None if found is None else found[1]


def test_priority_queue_serves_highest_priority_then_oldest(
    store: Store, prioritized: QueueRecord
) -> None:
    served: list[int] = []
    while (found := first_by_priority(store, prioritized, skip=set(served))) is not None:
        served.append(found)
    assert served == PRIORITY_ORDER


def test_priority_read_returns_band_lookup_id_and_record(
    store: Store, prioritized: QueueRecord
) -> None:
    found = store.first_by_priority(prioritized.queue_id, start=(0, 0), skip=())
    assert found is not None
    band, lookup_id, record = found
    assert (band, lookup_id) == (0, 2)
    assert message_header(record) == (7, 100)
    assert record == store.read_message(prioritized.queue_id, 2)


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ((0, 0), 2),
        ((0, 3), 4),  # priority 7 from lookup id 3 on
        ((0, 5), 5),  # no more priority 7: the next band down
        ((2, 0), 5),  # priority 5 and below
        ((4, 2), 6),  # priority 3 from lookup id 2 on
        ((7, 0), 3),  # priority 0
        ((7, 4), None),
    ],
)
def test_priority_read_starts_at_its_start_position(
    store: Store, prioritized: QueueRecord, start: tuple[int, int], expected: int | None
) -> None:
    assert first_by_priority(store, prioritized, start=start) == expected


def test_priority_read_skips_held_messages_after_its_start(
    store: Store, prioritized: QueueRecord
) -> None:
    assert first_by_priority(store, prioritized, start=(0, 3), skip={4}) == 5
    assert first_by_priority(store, prioritized, start=(4, 0), skip={1, 6}) == 3


def test_removing_a_message_removes_it_from_the_priority_order(
    store: Store, prioritized: QueueRecord, reopen: Reopener
) -> None:
    commit_ok(store, unit(remove(prioritized, 2), remove(prioritized, 4)))
    assert first_by_priority(store, prioritized) == 5
    store = reopen(store)
    assert first_by_priority(store, prioritized) == 5
    found = store.first_fifo(prioritized.queue_id, start=1, skip=())
    assert found is not None
    assert found[0] == 1  # FIFO ignores priority


def test_transactional_queue_is_fifo_and_has_no_priority_index(store: Store) -> None:
    queue = create_queue(store, "t", transactional=True)
    commit_ok(store, unit(*(append(queue, priority=p) for p in PRIORITIES)))
    assert store.first_by_priority(queue.queue_id, start=(0, 0), skip=()) is None
    served: list[int] = []
    while (found := store.first_fifo(queue.queue_id, start=1, skip=set(served))) is not None:
        served.append(found[0])
    assert served == [1, 2, 3, 4, 5, 6]


def test_fifo_read_starts_at_its_start_and_skips_held_messages(store: Store) -> None:
    queue = create_queue(store, "t", transactional=True)
    fill(store, queue, 6)

    def first(start: int, skip: set[int]) -> int | None:
        found = store.first_fifo(queue.queue_id, start=start, skip=skip)
        return None if found is None else found[0]

    assert first(1, set()) == 1
    assert first(0, set()) == 1
    assert first(3, set()) == 3
    assert first(1, {1, 2}) == 3
    assert first(4, {4, 6}) == 5
    assert first(1, set(range(1, 7))) is None
    assert first(7, set()) is None


def test_read_range_follows_after_skip_and_limit(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 6)
    assert lookups(store, queue) == [1, 2, 3, 4, 5, 6]
    assert lookups(store, queue, after=2) == [3, 4, 5, 6]
    assert lookups(store, queue, skip={1, 3}) == [2, 4, 5, 6]
    assert lookups(store, queue, skip={1, 3}, limit=2) == [2, 4]
    assert lookups(store, queue, after=3, skip={5}, limit=10) == [4, 6]
    assert lookups(store, queue, skip=range(2, 6)) == [1, 6]
    assert lookups(store, queue, limit=0) == []
    assert lookups(store, queue, limit=-1) == []
    assert lookups(store, queue, after=6) == []
    assert lookups(store, queue, after=MAX_LOOKUP_ID) == []


def test_read_range_stops_at_the_record_that_reaches_max_bytes(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 6)
    [(_, record)] = store.read_range(queue.queue_id, limit=1)
    size = len(record)

    def read(**kwargs: int) -> list[int]:
        return [n for n, _ in store.read_range(queue.queue_id, **kwargs)]

    assert read(max_bytes=1) == [1]  # one, however large
    assert read(max_bytes=size) == [1]
    assert read(max_bytes=size + 1) == [1, 2]
    assert read(max_bytes=3 * size, after=2) == [3, 4, 5]
    assert read(max_bytes=100 * size, limit=4) == [1, 2, 3, 4]


def test_reads_of_a_queue_never_see_its_neighbours_or_its_counters(store: Store) -> None:
    first, second, third = (create_queue(store, name) for name in ("a", "b", "c"))
    assert (first.queue_id + 2, second.queue_id + 2) == (second.queue_id, third.queue_id)
    fill(store, first, 2)
    fill(store, third, 3)
    assert lookups(store, second) == []
    assert store.first_fifo(second.queue_id, start=1, skip=()) is None
    assert store.first_by_priority(second.queue_id, start=(0, 0), skip=()) is None
    assert lookups(store, first) == [1, 2]
    assert lookups(store, third) == [1, 2, 3]
    # The counters sit under the one lookup id never assigned to a message.
    assert store.read_message(first.queue_id, MAX_LOOKUP_ID) is None
    assert store.read_message(first.queue_id, MAX_LOOKUP_ID + 1) is None
    assert store.read_message(first.queue_id, 0) is None
    assert store.read_message(first.queue_id, -1) is None


def test_unknown_queue_reads_nothing(store: Store) -> None:
    assert store.read_range(999) == []
    assert store.read_message(999, 1) is None
    assert store.first_fifo(999, start=1, skip=()) is None
    assert store.first_by_priority(999, start=(0, 0), skip=()) is None


def test_priority_index_naming_a_missing_message_is_corrupt(
    store: Store, prioritized: QueueRecord, reopen: Reopener
) -> None:
    store.close()
    delete_raw(store.path, None, message_key(prioritized.queue_id, 2))
    store = reopen(store)
    with pytest.raises(StoreCorrupt, match="missing"):
        store.first_by_priority(prioritized.queue_id, start=(0, 0), skip=())
    # A held entry is passed over without looking at its message.
    assert first_by_priority(store, prioritized, skip={2}) == 4


def test_reads_hand_over_records_without_decoding_them(store: Store, reopen: Reopener) -> None:
    queue = create_queue(store, "t", transactional=True)
    fill(store, queue, 2)
    store.close()
    put_raw(store.path, None, message_key(queue.queue_id, 1), b"garbage")
    store = reopen(store)
    assert store.read_message(queue.queue_id, 1) == b"garbage"
    assert store.read_range(queue.queue_id, limit=1) == [(1, b"garbage")]
    found = store.first_fifo(queue.queue_id, start=1, skip={1})
    assert found is not None
    assert found[0] == 2
