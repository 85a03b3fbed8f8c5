"""The store facade and its commit driver (``storage.store``): plans applied
wherever the caller likes (here, as in the daemon, on a writer thread of its
own), errors sent back, and a closed store."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest
from store_kit import (
    KIB,
    NOW,
    StoreOpener,
    append,
    counters,
    create_queue,
    drive,
    fill,
    lookups,
    unit,
)

from storage import (
    Appended,
    MapFull,
    Plan,
    ReclaimSpace,
    Store,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    Unit,
    UnitOutcome,
)


class WriterThread:
    """Applies plans on a thread of its own, one at a time, like the daemon's writer."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._jobs: queue.SimpleQueue[Plan | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[StoreError | None] = queue.SimpleQueue()
        self.thread_ids: set[int] = set()
        self._thread = threading.Thread(target=self._run, name="test-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (plan := self._jobs.get()) is not None:
            self.thread_ids.add(threading.get_ident())
            try:
                self._store.apply(plan)
            except StoreError as exc:
                self._results.put(exc)
            else:
                self._results.put(None)

    def apply(self, plan: Plan) -> StoreError | None:
        """Apply ``plan`` on the writer thread; returns what to send back."""
        self._jobs.put(plan)
        return self._results.get(timeout=30)

    def commit(self, store: Store, units: Sequence[Unit]) -> list[UnitOutcome]:
        """The daemon's commit loop: plan here, apply there, send the result back."""
        driver = store.committing(units, now=NOW)
        plan = next(driver)
        while True:
            try:
                plan = driver.send(self.apply(plan))
            except StopIteration as done:
                outcomes: list[UnitOutcome] = done.value
                return outcomes

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()


@pytest.fixture
def small(open_store: StoreOpener) -> Store:
    """A store whose map starts at 64 KiB, so that commits make it grow."""
    return open_store(initial_map_size=64 * KIB)


@pytest.fixture
def writer(small: Store) -> Iterator[WriterThread]:
    thread = WriterThread(small)
    yield thread
    thread.close()


def test_plans_applied_on_a_writer_thread_commit_and_grow_the_map(
    small: Store, writer: WriterThread
) -> None:
    queue_record = create_queue(small, "q")
    body = b"w" * 1000
    for round_ in range(5):
        units = [unit(*(append(queue_record, body),) * 40) for _ in range(5)]
        outcomes = writer.commit(small, units)
        assert [outcome.error for outcome in outcomes] == [None] * 5
        first = round_ * 200 + 1
        assert outcomes[0].results[0] == Appended(queue_record.queue_id, first)
    assert small.map_size > 64 * KIB
    assert writer.thread_ids
    assert threading.get_ident() not in writer.thread_ids
    assert lookups(small, queue_record) == list(range(1, 1001))
    assert counters(small, "q") == (1001, 1000, 1_000_000)


def test_applied_plan_is_readable_at_once_and_counted_once_installed(
    small: Store, writer: WriterThread
) -> None:
    queue_record = create_queue(small, "q")
    driver = small.committing([unit(append(queue_record), append(queue_record))], now=NOW)
    plan = next(driver)
    assert lookups(small, queue_record) == []
    assert writer.apply(plan) is None
    # Committed in LMDB: readable, whatever thread wrote it...
    assert lookups(small, queue_record) == [1, 2]
    # ...but the queue's counters change only when the owner installs the plan.
    assert counters(small, "q") == (1, 0, 0)
    with pytest.raises(StopIteration) as done:
        driver.send(None)
    [outcome] = done.value.value
    assert outcome.results == (
        Appended(queue_record.queue_id, 1),
        Appended(queue_record.queue_id, 2),
    )
    assert counters(small, "q") == (3, 2, 200)


def test_map_full_sent_back_grows_the_map_and_yields_the_same_plan(small: Store) -> None:
    queue_record = create_queue(small, "q")
    driver = small.committing([unit(append(queue_record))], now=NOW)
    plan = next(driver)
    size = small.map_size
    assert driver.send(MapFull("did not fit")) is plan
    assert small.map_size == 2 * size
    small.apply(plan)
    with pytest.raises(StopIteration):
        driver.send(None)
    assert lookups(small, queue_record) == [1]


def test_map_full_at_the_limit_first_reclaims_freed_pages_then_retries(
    open_store: StoreOpener,
) -> None:
    store = open_store(initial_map_size=256 * KIB, max_map_size=256 * KIB)
    queue_record = create_queue(store, "q")
    seen: list[Plan] = []

    def respond(plan: Plan) -> StoreError | None:
        seen.append(plan)
        return MapFull("did not fit") if len(seen) == 1 else None

    [outcome] = drive(store, [unit(append(queue_record))], respond)
    assert outcome.results == (Appended(queue_record.queue_id, 1),)
    # Two tiny writes let LMDB reuse freed pages; then the same plan again.
    first, reclaim_1, reclaim_2, retried = seen
    assert retried is first
    for reclaim in (reclaim_1, reclaim_2):
        [reclaim_unit] = reclaim.units
        assert reclaim_unit.ops == (ReclaimSpace(),)


@pytest.mark.parametrize(
    "error", [StoreError("commit: I/O error"), StoreCorrupt("commit: bad page")], ids=str
)
def test_other_errors_sent_back_fail_the_whole_batch(small: Store, error: StoreError) -> None:
    queue_record = create_queue(small, "q")
    fill(small, queue_record, 1)
    driver = small.committing([unit(append(queue_record)), unit(append(queue_record))], now=NOW)
    next(driver)
    with pytest.raises(StoreError) as caught:
        driver.send(error)
    assert caught.value is error
    assert counters(small, "q") == (2, 1, 100)
    assert lookups(small, queue_record) == [1]
    # The next batch plans from the committed state.
    assert fill(small, queue_record, 1) == [2]


def test_a_driver_that_is_never_resumed_changes_nothing(small: Store) -> None:
    queue_record = create_queue(small, "q")
    driver = small.committing([unit(append(queue_record))], now=NOW)
    next(driver)
    driver.close()
    assert counters(small, "q") == (1, 0, 0)
    assert fill(small, queue_record, 1) == [1]


def test_closed_store_raises_store_closed(store: Store) -> None:
    queue = create_queue(store, "q")
    [lookup_id] = fill(store, queue, 1)
    store.close()
    store.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: store.get_queue("q"),
        lambda: store.list_queues(),
        lambda: store.read_message(queue.queue_id, lookup_id),
        lambda: store.read_range(queue.queue_id),
        lambda: store.first_fifo(queue.queue_id, start=1, skip=()),
        lambda: store.first_by_priority(queue.queue_id, start=(0, 1), skip=()),
        lambda: store.commit([unit(append(queue))], now=1.0),
        lambda: store.get_setting("k"),
        lambda: store.map_size,
    ]
    for call in calls:
        with pytest.raises(StoreClosed):
            call()
