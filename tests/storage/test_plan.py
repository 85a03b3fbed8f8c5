"""Planning and applying a batch (``storage.plan``): one result per operation,
atomic and non-atomic units, a store that disagrees with its plan, and a
corrupt record met while planning."""

from __future__ import annotations

import gc

import pytest
from store_kit import (
    NOW,
    Reopener,
    append,
    commit,
    commit_ok,
    counters,
    create_queue,
    delete_raw,
    fill,
    lookups,
    put_raw,
    remove,
    unit,
)

from storage import (
    SKIPPED,
    Appended,
    CreateQueue,
    DeleteQueue,
    Done,
    Erased,
    EraseStep,
    Failed,
    MessageMissing,
    PurgeQueue,
    QueueCreated,
    QueueDeleted,
    QueueMissing,
    QueuePurged,
    QuotaExceeded,
    Removed,
    ReserveOrdinals,
    SetSetting,
    Store,
    StoreCorrupt,
    Unit,
)
from storage.keys import DB_BY_PRIORITY, DB_QUEUE_IDS, message_key, priority_key, queue_id_key


def test_every_operation_gets_its_own_result(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    outcomes = commit(
        store,
        unit(CreateQueue("new", "New", transactional=True)),
        unit(append(queue), remove(queue, 1), SetSetting("k", "v"), ReserveOrdinals(10)),
        unit(PurgeQueue(queue.queue_id), EraseStep(queue.queue_id, 10)),
        unit(DeleteQueue(queue.queue_id)),
    )
    [created] = outcomes[0].results
    assert isinstance(created, QueueCreated)
    assert (created.record.name, created.record.display_name) == ("new", "New")
    assert created.journal is not None
    assert created.journal.name == "new;journal"
    assert outcomes[1].results == (
        Appended(queue.queue_id, 3),
        Removed(queue.queue_id, 1),
        Done(),
        Done(),
    )
    # The purge saw the batch's own append and removal: 2 messages; erasing
    # them in the same batch must wait for the append to be committed.
    assert outcomes[2].results == (
        QueuePurged(queue.queue_id, 2),
        Erased(queue.queue_id, 1, False),
    )
    assert outcomes[3].results == (QueueDeleted((queue.queue_id, queue.queue_id + 1), 0),)
    assert all(outcome.error is None for outcome in outcomes)


def test_a_committed_batch_leaves_nothing_for_the_garbage_collector(store: Store) -> None:
    """A batch's planning state is freed when its last reference goes: a daemon
    committing thousands of batches a second would otherwise hand the garbage
    collector about twenty objects per batch."""
    queue = create_queue(store, "q")
    fill(store, queue, 3)
    gc.collect()
    gc.disable()
    try:
        commit_ok(store, unit(append(queue)))
        commit_ok(store, unit(remove(queue, 1)), unit(append(queue), remove(queue, 2)))
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_failed_atomic_unit_applies_nothing_and_skips_its_other_operations(store: Store) -> None:
    a = create_queue(store, "a")
    b = create_queue(store, "b")
    fill(store, a, 1)
    before = store.list_queues()
    outcomes = commit(
        store,
        unit(append(b)),
        unit(append(a), remove(a, 1), append(b), remove(a, 99), append(a)),
        unit(append(a)),
    )
    assert outcomes[0].results == (Appended(b.queue_id, 1),)
    failing = outcomes[1].results
    assert failing[:3] == (SKIPPED,) * 3
    assert failing[4] is SKIPPED
    assert isinstance(failing[3], Failed)
    error = outcomes[1].error
    assert isinstance(error, MessageMissing)
    assert (error.queue_id, error.lookup_id) == (a.queue_id, 99)
    # The other units committed, and the failed unit used no lookup id.
    assert outcomes[2].results == (Appended(a.queue_id, 2),)
    assert lookups(store, a) == [1, 2]
    assert lookups(store, b) == [1]
    assert counters(store, "a") == (3, 2, 200)
    assert counters(store, "b") == (2, 1, 100)
    assert [q.name for q in store.list_queues()] == [q.name for q in before]


def test_failed_atomic_unit_leaves_queues_settings_and_ordinals_untouched(
    store: Store, reopen: Reopener
) -> None:
    queue = create_queue(store, "q")
    [outcome] = commit(
        store,
        unit(
            CreateQueue("created", "created"),
            SetSetting("k", "v"),
            ReserveOrdinals(1000),
            PurgeQueue(queue.queue_id),
            DeleteQueue(queue.queue_id),
            append(queue),  # the queue is deleted by now: QueueMissing
        ),
    )
    assert isinstance(outcome.error, QueueMissing)
    assert outcome.results[:5] == (SKIPPED,) * 5

    def untouched(current: Store) -> None:
        assert current.get_queue("created") is None
        assert current.get_queue("q") == queue
        assert current.get_setting("k") is None
        assert current.ordinal_limit == 1
        assert current.queues_to_erase() == []

    untouched(store)
    untouched(reopen(store))


def test_non_atomic_unit_applies_each_operation_on_its_own(store: Store) -> None:
    queue = create_queue(store, "q", quota=250)
    outcomes = commit(
        store,
        unit(
            append(queue),
            remove(queue, 7),
            append(queue),
            append(queue),
            append(queue),
            atomic=False,
        ),
    )
    results = outcomes[0].results
    assert results[0] == Appended(queue.queue_id, 1)
    assert isinstance(results[1], Failed)
    assert isinstance(results[1].error, MessageMissing)
    assert results[2] == Appended(queue.queue_id, 2)
    assert isinstance(results[3], Failed)
    assert isinstance(results[3].error, QuotaExceeded)
    assert isinstance(results[4], Failed)
    # The first failure is the unit's error.
    assert outcomes[0].error is results[1].error
    assert lookups(store, queue) == [1, 2]
    assert counters(store, "q") == (3, 2, 200)


def test_operations_on_a_deleted_queue_fail_only_their_unit(store: Store) -> None:
    keep = create_queue(store, "keep")
    gone = create_queue(store, "gone")
    fill(store, gone, 1)
    commit_ok(store, unit(DeleteQueue(gone.queue_id)))
    outcomes = commit(
        store,
        unit(append(keep), append(gone)),
        unit(remove(gone, 1)),
        unit(PurgeQueue(gone.queue_id)),
        unit(DeleteQueue(gone.queue_id)),
        unit(append(keep)),
    )
    for outcome in outcomes[:4]:
        assert isinstance(outcome.error, QueueMissing)
        assert outcome.error.queue == gone.queue_id
    assert outcomes[4].results == (Appended(keep.queue_id, 1),)
    assert counters(store, "keep") == (2, 1, 100)


def test_empty_batch_and_empty_unit(store: Store) -> None:
    assert store.commit([], now=NOW) == []
    [outcome] = commit(store, Unit(()))
    assert outcome.results == ()
    assert outcome.error is None


def test_one_unit_twice_in_a_batch_gets_an_outcome_each_time(store: Store) -> None:
    queue = create_queue(store, "q")
    twice = unit(append(queue))
    first, second = commit_ok(store, twice, twice)
    assert first.results == (Appended(queue.queue_id, 1),)
    assert second.results == (Appended(queue.queue_id, 2),)


def test_corrupt_record_met_while_planning_fails_the_whole_batch(
    store: Store, reopen: Reopener
) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 3)
    store.close()
    put_raw(store.path, None, message_key(queue.queue_id, 1), b"garbage")
    store = reopen(store)
    # Reads hand records over as they are: only the one asked for is looked at.
    assert lookups(store, queue, skip={1}) == [2, 3]
    with pytest.raises(StoreCorrupt):
        commit(store, unit(remove(queue, 2)), unit(remove(queue, 1)))
    assert lookups(store, queue) == [1, 2, 3]
    assert counters(store, "q") == (4, 3, 300)
    # The store goes on working.
    [outcome] = commit_ok(store, unit(remove(queue, 2), append(queue)))
    assert outcome.results == (Removed(queue.queue_id, 2), Appended(queue.queue_id, 4))


@pytest.mark.parametrize("taken", ["message key", "queue id"])
def test_new_key_that_already_exists_is_corrupt_and_nothing_is_applied(
    store: Store, reopen: Reopener, taken: str
) -> None:
    queue = create_queue(store, "q")
    other = create_queue(store, "other")
    fill(store, queue, 1)
    store.close()
    if taken == "message key":
        put_raw(store.path, None, message_key(queue.queue_id, 2), b"stray")
    else:
        put_raw(store.path, DB_QUEUE_IDS, queue_id_key(other.queue_id + 2), b"stray")
    store = reopen(store)
    conflicting = unit(append(queue)) if taken == "message key" else unit(CreateQueue("x", "x"))
    with pytest.raises(StoreCorrupt, match="already in the store"):
        commit(store, unit(append(other)), conflicting, unit(SetSetting("k", "v")))

    def untouched(current: Store) -> None:
        assert lookups(current, other) == []
        assert counters(current, "other") == (1, 0, 0)
        assert counters(current, "q") == (2, 1, 100)
        assert current.get_queue("x") is None
        assert current.get_setting("k") is None

    untouched(store)
    untouched(reopen(store))


def test_key_to_delete_that_is_missing_is_corrupt_and_nothing_is_applied(
    store: Store, reopen: Reopener
) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    store.close()
    delete_raw(store.path, DB_BY_PRIORITY, priority_key(queue.queue_id, 3, 1))
    store = reopen(store)
    with pytest.raises(StoreCorrupt, match="not in the store"):
        commit(store, unit(remove(queue, 2)), unit(remove(queue, 1)))
    assert lookups(store, queue) == [1, 2]
    assert counters(store, "q") == (3, 2, 200)
