"""Store.commit: one result per operation, atomic and non-atomic units,
Attempt, quotas, journal copies, ordinals, and a store that disagrees with
its catalog."""

from __future__ import annotations

import pytest
from conftest import (
    BODY,
    NOW,
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
    raw_lmdb,
    remove,
    unit,
)

from storage import (
    SKIPPED,
    Appended,
    AppendMessage,
    Attempt,
    CreateQueue,
    DeleteQueue,
    Done,
    Erased,
    EraseStep,
    Failed,
    Fallback,
    InvalidRecord,
    MessageMissing,
    PurgeQueue,
    QueueCreated,
    QueueDeleted,
    QueueKind,
    QueueMissing,
    QueuePurged,
    QuotaExceeded,
    Removed,
    ReserveOrdinals,
    SetSetting,
    Store,
    StoreCorrupt,
    Unit,
    message_arrived_time,
    message_header,
    message_payload,
)
from storage._keys import (
    DB_BY_PRIORITY,
    DB_QUEUE_IDS,
    MAX_LOOKUP_ID,
    message_key,
    priority_key,
    queue_id_key,
)


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


def test_stored_record_is_the_store_header_and_the_payload(store: Store) -> None:
    queue = create_queue(store, "q")
    parts: list[bytes | bytearray | memoryview] = [
        b"head-",
        memoryview(b"middle-"),
        bytearray(b"tail"),
    ]
    in_parts = AppendMessage(queue.queue_id, parts, 3, 4)
    [outcome] = commit_ok(
        store, unit(append(queue, b"body", priority=6, size=1000), in_parts), now=123.5
    )
    first, second = appended(outcome)
    record = store.read_message(queue.queue_id, first)
    assert record is not None
    assert message_header(record) == (6, 1000)
    assert message_arrived_time(record) == 123.5
    assert bytes(message_payload(record)) == b"body"
    joined = store.read_message(queue.queue_id, second)
    assert joined is not None
    assert bytes(message_payload(joined)) == b"head-middle-tail"
    # The quota counts the given size, not the payload's length.
    assert counters(store, "q") == (3, 2, 1004)
    assert store.read_message(queue.queue_id, 99) is None
    assert store.read_message(999, 1) is None


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


def test_attempt_falls_back_when_the_first_operation_fails(store: Store) -> None:
    full = create_queue(store, "full", quota=100)
    dead = create_queue(store, "system$;deadletter", kind=QueueKind.DEADLETTER)
    fill(store, full, 1)
    [outcome] = commit_ok(store, unit(Attempt(append(full), append(dead))))
    [result] = outcome.results
    assert isinstance(result, Fallback)
    assert isinstance(result.error, QuotaExceeded)
    assert result.result == Appended(dead.queue_id, 1)
    assert lookups(store, full) == [1]
    assert lookups(store, dead) == [1]
    assert counters(store, "full") == (2, 1, 100)


def test_attempt_gives_the_first_result_when_the_first_operation_succeeds(store: Store) -> None:
    queue = create_queue(store, "q")
    dead = create_queue(store, "system$;deadletter", kind=QueueKind.DEADLETTER)
    [outcome] = commit_ok(store, unit(Attempt(append(queue), append(dead))))
    assert outcome.results == (Appended(queue.queue_id, 1),)
    assert lookups(store, dead) == []


def test_attempt_whose_fallback_fails_fails_its_atomic_unit(store: Store) -> None:
    queue = create_queue(store, "q", quota=0)
    other = create_queue(store, "other")
    [outcome] = commit(store, unit(append(other), Attempt(append(queue), remove(queue, 5))))
    assert outcome.results[0] is SKIPPED
    assert isinstance(outcome.error, MessageMissing)
    assert lookups(store, other) == []


def test_attempt_and_units_free_space_only_if_every_operation_does() -> None:
    removal, addition = remove(1, 1), append(1)
    assert removal.frees_space
    assert not addition.frees_space
    assert Attempt(removal, remove(1, 2)).frees_space
    assert not Attempt(removal, addition).frees_space
    assert not Attempt(addition, removal).frees_space
    assert Unit((removal, PurgeQueue(1), DeleteQueue(1), EraseStep(1, 5))).frees_space
    assert not Unit((removal, addition)).frees_space
    assert not Unit((CreateQueue("q", "q"),)).frees_space
    assert not Unit((SetSetting("k", "v"),)).frees_space
    assert not Unit((ReserveOrdinals(5),)).frees_space


def test_quota_failure_fails_only_its_unit(store: Store) -> None:
    limited = create_queue(store, "limited", quota=250)
    free = create_queue(store, "free")
    outcomes = commit(
        store,
        unit(append(limited), append(free)),
        unit(append(free), append(limited), append(limited)),  # 300 > 250
        unit(append(limited)),
    )
    assert outcomes[0].error is None
    error = outcomes[1].error
    assert isinstance(error, QuotaExceeded)
    assert (error.queue_name, error.quota, error.would_be) == ("limited", 250, 300)
    assert outcomes[2].results == (Appended(limited.queue_id, 2),)
    assert counters(store, "free") == (2, 1, 100)
    assert counters(store, "limited") == (3, 2, 200)


def test_removal_before_an_append_frees_quota_for_it(store: Store) -> None:
    queue = create_queue(store, "q", quota=200)
    fill(store, queue, 2)
    [refused] = commit(store, unit(append(queue)))
    assert isinstance(refused.error, QuotaExceeded)
    [refused_again] = commit(store, unit(append(queue), remove(queue, 1)))
    assert isinstance(refused_again.error, QuotaExceeded)
    [swapped] = commit_ok(store, unit(remove(queue, 1), append(queue)))
    assert swapped.results == (Removed(queue.queue_id, 1), Appended(queue.queue_id, 3))
    assert counters(store, "q") == (4, 2, 200)


def test_removal_with_journal_copies_the_record_to_the_journal_queue(store: Store) -> None:
    queue = create_queue(store, "q", journal=True, quota=100)
    journal_id = queue.journal_id
    assert journal_id is not None
    bodies = [b"a" * 100, b"b" * 100, b"c" * 100]
    for body in bodies[:2]:
        [lookup_id] = fill(store, queue, 1, body)
        commit_ok(store, unit(remove(queue, lookup_id, journal=True)))
    fill(store, queue, 1, bodies[2])
    assert store.read_message(queue.queue_id, 2) is None  # moved to the journal
    assert payloads(store, queue) == [bodies[2]]
    journaled = store.read_range(journal_id)
    assert [lookup for lookup, _ in journaled] == [1, 2]
    assert [bytes(message_payload(record)) for _, record in journaled] == bodies[:2]
    # The copy is the record unchanged (arrival time included), under a new lookup id.
    assert message_header(journaled[0][1]) == (3, 100)
    assert message_arrived_time(journaled[0][1]) == NOW
    # Journal copies do not count against the parent's quota.
    assert counters(store, "q") == (4, 1, 100)
    assert counters(store, "q;journal") == (3, 2, 200)
    # Removing from the journal queue itself (it has none) is a plain removal.
    commit_ok(store, unit(remove(journal_id, 1, journal=True)))
    assert counters(store, "q;journal") == (3, 1, 100)


def test_removal_without_journal_copies_nothing(store: Store) -> None:
    queue = create_queue(store, "q", journal=True)
    fill(store, queue, 2)
    commit_ok(store, unit(remove(queue, 1), remove(queue, 2, journal=False)))
    assert queue.journal_id is not None
    assert lookups(store, queue.journal_id) == []
    assert counters(store, "q") == (3, 0, 0)


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


@pytest.mark.parametrize("priority", [-1, 8])
def test_invalid_priority_fails_only_its_unit(store: Store, priority: int) -> None:
    queue = create_queue(store, "q")
    bad, good = commit(
        store, unit(append(queue), append(queue, priority=priority)), unit(append(queue))
    )
    assert isinstance(bad.error, InvalidRecord)
    assert good.results == (Appended(queue.queue_id, 1),)


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


def test_reserve_ordinals_never_lowers_the_limit(store: Store, reopen: Reopener) -> None:
    assert store.ordinal_limit == 1
    commit_ok(store, unit(ReserveOrdinals(100)))
    assert store.ordinal_limit == 100
    commit_ok(store, unit(ReserveOrdinals(50)))
    assert store.ordinal_limit == 100
    commit_ok(store, unit(ReserveOrdinals(300)), unit(ReserveOrdinals(200)))
    assert store.ordinal_limit == 300
    store = reopen(store)
    assert store.ordinal_limit == 300
    commit_ok(store, unit(ReserveOrdinals(299)))
    assert reopen(store).ordinal_limit == 300


def test_corrupt_record_met_while_planning_fails_the_whole_batch(
    store: Store, reopen: Reopener
) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 3)
    store.close()
    with raw_lmdb(store.path) as env, env.begin(write=True) as txn:
        txn.put(message_key(queue.queue_id, 1), b"garbage")
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
    with raw_lmdb(store.path) as env:
        queue_ids = env.open_db(DB_QUEUE_IDS)
        with env.begin(write=True) as txn:
            if taken == "message key":
                txn.put(message_key(queue.queue_id, 2), b"stray")
            else:
                txn.put(queue_id_key(other.queue_id + 2), b"stray", db=queue_ids)
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
    with raw_lmdb(store.path) as env:
        by_priority = env.open_db(DB_BY_PRIORITY)
        with env.begin(write=True) as txn:
            assert txn.delete(priority_key(queue.queue_id, 3, 1), db=by_priority)
    store = reopen(store)
    with pytest.raises(StoreCorrupt, match="not in the store"):
        commit(store, unit(remove(queue, 2)), unit(remove(queue, 1)))
    assert lookups(store, queue) == [1, 2]
    assert counters(store, "q") == (3, 2, 200)


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
