"""Subqueues (``storage.ops.subqueues``): made with their queue's type and
journal, only for normal queues, sharing its quota, deleted with it."""

from __future__ import annotations

from store_kit import (
    SETTINGS,
    Reopener,
    append,
    commit,
    commit_ok,
    create_queue,
    erase_all,
    family,
    fill,
    move,
    raw_keys,
    remove,
    unit,
)

from storage import (
    CreateSubqueues,
    DeleteQueue,
    DeleteSubqueues,
    InvalidOperation,
    QueueKind,
    QuotaExceeded,
    SetPoisonSettings,
    Store,
    SubqueuesCreated,
    SubqueuesDeleted,
)
from storage.keys import DB_MESSAGE_COUNTERS

# --------------------------------------------------------------------------- subqueues


def test_subqueues_take_the_queues_type_and_journal(store: Store, reopen: Reopener) -> None:
    queue, retry, poison = family(store, "orders", transactional=True, journal=True)
    for sub, suffix in ((retry, ";retry"), (poison, ";poison")):
        assert sub.kind is QueueKind.SUBQUEUE
        assert sub.name == "orders" + suffix
        assert sub.display_name == "orders" + suffix
        assert (sub.transactional, sub.journal, sub.quota) == (True, True, None)
        assert (sub.parent_id, sub.journal_id) == (queue.queue_id, queue.journal_id)
        assert sub.created_at == 7.0
    # Asking again makes nothing; the records survive a reopen.
    [outcome] = commit_ok(store, unit(CreateSubqueues("orders")))
    assert outcome.results == (SubqueuesCreated(()),)
    store = reopen(store)
    assert store.get_queue("orders;retry") == retry
    assert store.get_queue("orders;poison") == poison


def test_only_normal_queues_have_subqueues(store: Store) -> None:
    create_queue(store, "q", transactional=True)
    for name in ("q;journal", "nothing"):
        [outcome] = commit(store, unit(CreateSubqueues(name)))
        assert outcome.error is not None
    commit_ok(store, unit(CreateSubqueues("q")))
    [outcome] = commit(store, unit(CreateSubqueues("q;retry")))
    assert isinstance(outcome.error, InvalidOperation)


def test_a_queue_and_its_subqueues_are_made_in_one_unit(store: Store) -> None:
    from storage import CreateQueue

    commit_ok(
        store,
        unit(
            CreateQueue("n", "N", transactional=True),
            CreateSubqueues("n"),
            SetPoisonSettings("n", SETTINGS),
        ),
    )
    record = store.get_queue("n")
    assert record is not None
    assert record.poison == SETTINGS
    assert store.get_queue("n;retry").display_name == "N;retry"  # type: ignore[union-attr]


def test_subqueues_share_the_queues_quota(store: Store) -> None:
    queue, retry, poison = family(store, "q", quota=300)
    fill(store, queue, 3)
    move(store, queue, 1, retry)
    move(store, queue, 2, poison)
    # The moves never count twice and never fail; the family holds 300 bytes.
    [outcome] = commit(store, unit(append(queue)))
    assert isinstance(outcome.error, QuotaExceeded)
    commit_ok(store, unit(remove(poison, 1)))
    commit_ok(store, unit(append(queue)))


def test_deleting_a_queue_deletes_its_subqueues(store: Store) -> None:
    queue, retry, poison = family(store, "q", transactional=True)
    fill(store, queue, 3)
    move(store, queue, 1, retry)
    move(store, queue, 2, poison)
    [outcome] = commit_ok(store, unit(DeleteQueue(queue.queue_id), DeleteSubqueues("q")))
    assert outcome.results[1] == SubqueuesDeleted((retry.queue_id, poison.queue_id), 2)
    assert [q.name for q in store.list_queues()] == []
    for doomed in store.queues_to_erase():
        erase_all(store, doomed, 10)
    assert store.queues_to_erase() == []
    assert raw_keys(store, DB_MESSAGE_COUNTERS) == []
