"""The plan context (``storage.context``): lookup ids, the batch's view of
removed and appended messages, and queue counters written once per batch."""

from __future__ import annotations

import pytest
from store_kit import (
    BODY,
    Reopener,
    append,
    appended,
    commit,
    commit_ok,
    counters,
    create_queue,
    fill,
    lookups,
    payloads,
    remove,
    unit,
)

from storage import (
    Appended,
    MessageMissing,
    PurgeQueue,
    Removed,
    Store,
)
from storage.keys import MAX_LOOKUP_ID


def test_lookup_ids_are_consecutive_across_units_batches_and_reopen(
    store: Store, reopen: Reopener
) -> None:
    a = create_queue(store, "a")
    b = create_queue(store, "b")
    outcomes = commit_ok(store, unit(append(a), append(b), append(a)), unit(append(a), append(a)))
    assert outcomes[0].results == (
        Appended(a.queue_id, 1),
        Appended(b.queue_id, 1),
        Appended(a.queue_id, 2),
    )
    assert appended(outcomes[1]) == [3, 4]
    assert appended(commit_ok(store, unit(append(a)))[0]) == [5]
    store = reopen(store)
    assert appended(commit_ok(store, unit(append(a), append(b)))[0]) == [6, 2]
    assert lookups(store, a) == [1, 2, 3, 4, 5, 6]
    assert counters(store, "a") == (7, 6, 600)


def test_removing_one_message_twice_in_a_unit_fails_the_unit(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 1)
    [outcome] = commit(store, unit(remove(queue, 1), remove(queue, 1)))
    assert isinstance(outcome.error, MessageMissing)
    assert lookups(store, queue) == [1]
    # Across units of one batch, the second removal finds it gone.
    first, second = commit(store, unit(remove(queue, 1)), unit(remove(queue, 1)))
    assert first.results == (Removed(queue.queue_id, 1),)
    assert isinstance(second.error, MessageMissing)


@pytest.mark.parametrize("transactional", [False, True])
@pytest.mark.parametrize("lookup_id", [0, -1, MAX_LOOKUP_ID, MAX_LOOKUP_ID + 1])
def test_removing_a_lookup_id_no_message_can_have_fails_only_its_unit(
    store: Store, reopen: Reopener, transactional: bool, lookup_id: int
) -> None:
    queue = create_queue(store, "q", transactional=transactional)
    fill(store, queue, 2)
    refused, accepted = commit(store, unit(remove(queue, lookup_id)), unit(remove(queue, 1)))
    assert isinstance(refused.error, MessageMissing)
    assert accepted.results == (Removed(queue.queue_id, 1),)
    assert counters(store, "q") == (3, 1, 100)
    assert counters(reopen(store), "q") == (3, 1, 100)


def test_message_appended_in_a_batch_cannot_be_removed_in_it(store: Store) -> None:
    queue = create_queue(store, "q")
    first, second = commit(store, unit(append(queue)), unit(remove(queue, 1)))
    assert first.error is None
    assert isinstance(second.error, MessageMissing)
    assert lookups(store, queue) == [1]


def test_counters_are_durable_across_reopen(store: Store, reopen: Reopener) -> None:
    queue = create_queue(store, "q", transactional=True)
    other = create_queue(store, "other")
    fill(store, queue, 5)
    fill(store, other, 3, b"y" * 10)
    commit_ok(store, unit(remove(queue, 2), remove(other, 1)), unit(PurgeQueue(other.queue_id)))
    fill(store, other, 1, b"z" * 7)
    expected = store.list_queues()
    store = reopen(store)
    assert store.list_queues() == expected
    assert counters(store, "q") == (6, 4, 400)
    assert counters(store, "other") == (5, 1, 7)
    assert payloads(store, other) == [b"z" * 7]
    assert payloads(store, queue) == [BODY] * 4
