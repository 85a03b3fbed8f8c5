"""Operations and units (``storage.units``): Attempt and Together, what frees
space, and the per-operation errors."""

from __future__ import annotations

from store_kit import (
    append,
    commit,
    commit_ok,
    counters,
    create_queue,
    fill,
    lookups,
    remove,
    unit,
)

import storage
from storage import (
    SKIPPED,
    Appended,
    Attempt,
    CreateQueue,
    DeleteQueue,
    Done,
    EraseStep,
    Fallback,
    MessageMissing,
    PurgeQueue,
    QueueKind,
    QuotaExceeded,
    ReserveOrdinals,
    SetSetting,
    Store,
    Together,
    Unit,
)
from storage.units import Removal


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


def test_together_applies_all_of_its_operations_or_none(store: Store) -> None:
    queue = create_queue(store, "q")
    [both] = commit_ok(store, unit(Together((append(queue), append(queue)))))
    assert both.results == (Appended(queue.queue_id, 1),)
    assert lookups(store, queue) == [1, 2]
    [failed] = commit(store, unit(Together((append(queue), remove(queue, 9))), atomic=False))
    assert isinstance(failed.error, MessageMissing)
    assert lookups(store, queue) == [1, 2]
    assert counters(store, "q") == (3, 2, 200)
    undone = Together((append(queue), remove(queue, 9)))
    [fallback] = commit_ok(store, unit(Attempt(undone, SetSetting("k", "v"))))
    [result] = fallback.results
    assert isinstance(result, Fallback)
    assert isinstance(result.error, MessageMissing)
    assert result.result == Done()
    assert lookups(store, queue) == [1, 2]
    assert not Together((remove(1, 1), append(1))).frees_space
    assert Together((remove(1, 1), PurgeQueue(1))).frees_space


def test_a_removal_frees_space_whatever_its_fields() -> None:
    assert issubclass(DeleteQueue, Removal)
    assert issubclass(PurgeQueue, Removal)
    assert all(op.frees_space for op in (DeleteQueue(1), PurgeQueue(2), EraseStep(3, 10)))
    assert not issubclass(CreateQueue, Removal)


def test_operation_errors_are_the_per_operation_failures() -> None:
    assert set(storage.OPERATION_ERRORS) == {
        storage.ConfirmationMissing,
        storage.IncomingStreamMoved,
        storage.ListExists,
        storage.ListMissing,
        storage.QueueMissing,
        storage.QueueExists,
        storage.QuotaExceeded,
        storage.MessageMissing,
        storage.InvalidRecord,
        storage.InvalidOperation,
        storage.XidInUse,
        storage.XidResolved,
        storage.XidUnknown,
    }
    # Batch-level errors are not among them: they fail a batch, not an operation.
    for batch_level in (storage.StoreFull, storage.StoreCorrupt, storage.StoreClosed):
        assert not issubclass(batch_level, storage.OPERATION_ERRORS)
