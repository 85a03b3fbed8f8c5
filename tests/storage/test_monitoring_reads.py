"""What monitoring reads of the store: counted appends, the oldest message of each
queue, and how full the store is."""

from __future__ import annotations

from store_kit import (
    NOW,
    StoreOpener,
    append,
    commit,
    commit_ok,
    create_queue,
    fill,
    remove,
    unit,
)

from storage import CountedAppend, PurgeQueue, QueueMissing, Store, Unit

KEY = ("dead_letter", 7, 0x8001)


def counted(queue_id: int, key: tuple[object, ...] = KEY) -> CountedAppend:
    return CountedAppend(queue_id, b"dead", 0, 4, exempt=True, key=key)


def test_a_counted_append_counts_once_its_batch_commits(store: Store) -> None:
    orders = create_queue(store, "orders", transactional=False)
    assert store.counts() == {}
    other = ("dead_letter", 7, 0x8002)
    commit_ok(store, unit(counted(orders.queue_id), counted(orders.queue_id)))
    commit_ok(store, unit(append(orders), counted(orders.queue_id, other)))
    assert store.counts() == {KEY: 2, other: 1}
    # A counted append is still an append.
    assert store.get_queue("orders").depth == 4  # type: ignore[union-attr]


def test_a_counted_append_in_a_failed_unit_or_operation_is_not_counted(store: Store) -> None:
    orders = create_queue(store, "orders", transactional=False)
    # The atomic unit fails at its second operation: its first is undone, count and all.
    [failed] = commit(store, unit(counted(orders.queue_id), append(999)))
    assert isinstance(failed.error, QueueMissing)
    # A non-atomic unit keeps what succeeded, and counts only that.
    [partial] = commit(store, Unit((counted(orders.queue_id), counted(999)), atomic=False))
    assert partial.results[1].__class__.__name__ == "Failed"
    assert store.counts() == {KEY: 1}


def test_counts_live_in_memory_since_the_store_opened(open_store: StoreOpener) -> None:
    store = open_store()
    orders = create_queue(store, "orders", transactional=False)
    commit_ok(store, unit(counted(orders.queue_id)))
    store.close()
    assert open_store(store.path).counts() == {}


def test_the_oldest_arrival_of_each_queue_is_its_first_visible_message(store: Store) -> None:
    orders = create_queue(store, "orders", transactional=False)
    empty = create_queue(store, "empty", transactional=False)
    purged = create_queue(store, "purged", transactional=False)
    fill(store, orders, 2)
    commit_ok(store, unit(append(orders)), now=NOW + 10)
    commit_ok(store, unit(append(purged)), now=NOW + 1)
    commit_ok(store, unit(PurgeQueue(purged.queue_id)), now=NOW + 2)
    commit_ok(store, unit(append(purged)), now=NOW + 3)
    ids = sorted((orders.queue_id, empty.queue_id, purged.queue_id, 999))
    # Messages below a purge mark wait in the file to be erased: not the oldest.
    assert store.oldest_arrivals(ids) == {orders.queue_id: NOW, purged.queue_id: NOW + 3}
    commit_ok(store, unit(remove(orders, 1), remove(orders, 2)), now=NOW + 20)
    assert store.oldest_arrivals(ids)[orders.queue_id] == NOW + 10
    commit_ok(store, unit(remove(orders, 3)), now=NOW + 30)
    assert orders.queue_id not in store.oldest_arrivals(ids)


def test_usage_counts_the_pages_in_use_against_the_limit(open_store: StoreOpener) -> None:
    unlimited = open_store()
    usage = unlimited.usage()
    assert usage.limit_bytes is None
    assert 0 < usage.used_bytes <= usage.file_bytes
    unlimited.close()
    limited = open_store(
        unlimited.path.parent / "limited",
        initial_map_size=1 << 20,
        max_map_size=4 << 20,
        reserve_size=512 << 10,
    )
    before = limited.usage()
    assert before.limit_bytes == (4 << 20) - (512 << 10)
    orders = create_queue(limited, "orders", transactional=False)
    fill(limited, orders, 200, b"x" * 4000)
    assert limited.usage().used_bytes >= before.used_bytes + 200 * 4000
