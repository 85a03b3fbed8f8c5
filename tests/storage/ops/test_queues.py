"""Queues (``storage.ops.queues``): creation (with journal queues), system queue
kinds, quota changes, deletion and purge (marks that take effect at once), and erasing in
bounded steps that resume after a reopening."""

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
    erase_all,
    fill,
    lookups,
    payloads,
    remove,
    stored_keys,
    unit,
)

from storage import (
    CreateQueue,
    DeleteQueue,
    Erased,
    EraseStep,
    InvalidOperation,
    InvalidRecord,
    PurgeQueue,
    QueueCreated,
    QueueDeleted,
    QueueExists,
    QueueKind,
    QueueMissing,
    QueuePurged,
    QuotaExceeded,
    QuotaSet,
    Removed,
    SetQuota,
    Store,
)

# --------------------------------------------------------------------------- creation


def test_normal_queue_is_created_with_its_journal_queue(store: Store) -> None:
    [outcome] = commit_ok(
        store,
        unit(
            CreateQueue(
                "orders",
                "Orders",
                transactional=True,
                journal=True,
                quota=4096,
                created_at=12.5,
            )
        ),
    )
    [created] = outcome.results
    assert isinstance(created, QueueCreated)
    queue, journal = created.record, created.journal
    assert journal is not None
    assert (queue.name, queue.display_name, queue.kind) == ("orders", "Orders", QueueKind.NORMAL)
    assert (queue.transactional, queue.journal, queue.quota) == (True, True, 4096)
    assert (queue.next_lookup_id, queue.depth, queue.bytes) == (1, 0, 0)
    assert (queue.purged_below, queue.erasing) == (0, False)
    assert (queue.created_at, queue.parent_id, queue.journal_id) == (12.5, None, journal.queue_id)
    assert (journal.name, journal.display_name) == ("orders;journal", "Orders;journal")
    assert (journal.kind, journal.parent_id, journal.journal_id) == (
        QueueKind.JOURNAL,
        queue.queue_id,
        None,
    )
    assert (journal.transactional, journal.journal, journal.quota) == (True, False, None)
    assert journal.queue_id == queue.queue_id + 1
    assert store.get_queue("orders") == queue
    assert store.get_queue("orders;journal") == journal
    assert store.get_queue_by_id(queue.queue_id) == queue
    assert store.get_queue_by_id(journal.queue_id) == journal


@pytest.mark.parametrize(
    ("name", "kind", "transactional"),
    [
        ("system$;deadletter", QueueKind.DEADLETTER, False),
        ("system$;deadxact", QueueKind.DEADXACT, True),
    ],
)
def test_system_queues_have_no_journal_queue(
    store: Store, name: str, kind: QueueKind, transactional: bool
) -> None:
    queue = create_queue(store, name, kind=kind, transactional=transactional)
    assert (queue.kind, queue.transactional, queue.journal_id) == (kind, transactional, None)
    assert [q.name for q in store.list_queues()] == [name]


def test_journal_queue_cannot_be_created_on_its_own(store: Store) -> None:
    [outcome] = commit(store, unit(CreateQueue("x;journal", "x;journal", kind=QueueKind.JOURNAL)))
    assert isinstance(outcome.error, InvalidOperation)
    assert store.list_queues() == []


def test_taken_name_or_journal_name_is_queue_exists(store: Store) -> None:
    create_queue(store, "orders")
    create_queue(store, "x;journal", kind=QueueKind.DEADLETTER)
    outcomes = commit(
        store,
        unit(CreateQueue("orders", "ORDERS")),
        unit(CreateQueue("orders;journal", "j", kind=QueueKind.DEADLETTER)),
        # A normal queue whose journal queue's name is taken cannot be created either.
        unit(CreateQueue("x", "x")),
    )
    for outcome, name in zip(outcomes, ["orders", "orders;journal", "x;journal"], strict=True):
        assert isinstance(outcome.error, QueueExists)
        assert outcome.error.name == name
    assert [q.name for q in store.list_queues()] == ["orders", "orders;journal", "x;journal"]


def test_one_name_created_twice_in_a_batch_is_queue_exists(store: Store) -> None:
    first, second = commit(store, unit(CreateQueue("q", "q")), unit(CreateQueue("q", "Q")))
    assert first.error is None
    assert isinstance(second.error, QueueExists)
    assert [q.display_name for q in store.list_queues()] == ["q", "q;journal"]


def test_queue_exists_names_the_queue_as_its_creator_wrote_it(store: Store) -> None:
    # U+2126 OHM SIGN folds to U+03C9: the error names the queue that exists, not the key.
    create_queue(store, "\u03c9", display_name="\u2126")
    [outcome] = commit(store, unit(CreateQueue("\u03c9", "\u2126")))
    assert isinstance(outcome.error, QueueExists)
    assert outcome.error.name == "\u03c9"
    assert str(outcome.error) == "queue '\u2126' already exists"


@pytest.mark.parametrize(
    "create",
    [
        CreateQueue("", ""),
        CreateQueue("q" * 504, "q"),  # its journal's name is 512 bytes
        CreateQueue("é" * 252, "q"),  # 504 bytes of UTF-8
        CreateQueue("q" * 512, "q", kind=QueueKind.DEADLETTER),
        CreateQueue("q", "q", quota=-1),
    ],
    ids=["empty", "journal too long", "utf8 too long", "too long", "negative quota"],
)
def test_bad_name_or_quota_is_invalid_record(store: Store, create: CreateQueue) -> None:
    [outcome] = commit(store, unit(create))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.list_queues() == []


def test_longest_names_are_accepted(store: Store) -> None:
    create_queue(store, "q" * 503)
    create_queue(store, "d" * 511, kind=QueueKind.DEADLETTER)
    assert {len(q.name) for q in store.list_queues()} == {503, 511}


def test_list_queues_is_ordered_by_name(store: Store) -> None:
    for name in ("zeta", "alpha", "mid"):
        create_queue(store, name)
    assert [q.name for q in store.list_queues()] == [
        "alpha",
        "alpha;journal",
        "mid",
        "mid;journal",
        "zeta",
        "zeta;journal",
    ]


# --------------------------------------------------------------------------- quota


def set_quota(store: Store, name: str, quota: int | None) -> QuotaSet:
    [outcome] = commit_ok(store, unit(SetQuota(name, quota)))
    [result] = outcome.results
    assert isinstance(result, QuotaSet)
    return result


def test_a_full_queue_takes_messages_again_once_its_quota_is_raised(
    store: Store, reopen: Reopener
) -> None:
    queue = create_queue(store, "q", quota=200)
    commit_ok(store, unit(append(queue, size=200)))
    [refused] = commit(store, unit(append(queue, size=1)))
    assert isinstance(refused.error, QuotaExceeded)
    result = set_quota(store, "q", 300)
    assert (result.record.quota, result.record.depth, result.record.bytes) == (300, 1, 200)
    commit_ok(store, unit(append(queue, size=100)))
    store = reopen(store)
    record = store.get_queue("q")
    assert record is not None
    assert (record.quota, record.depth, record.bytes, record.next_lookup_id) == (300, 2, 300, 3)
    # No quota at all: anything fits.
    set_quota(store, "q", None)
    commit_ok(store, unit(append(queue, size=10_000)))
    assert reopen(store).get_queue("q").quota is None  # type: ignore[union-attr]


def test_a_quota_below_what_a_queue_holds_refuses_sends_until_it_is_below(
    store: Store,
) -> None:
    queue = create_queue(store, "q")
    first, _ = fill(store, queue, 2)
    assert set_quota(store, "q", 10).record.bytes == 2 * len(BODY) > 10
    [refused] = commit(store, unit(append(queue, size=1)))
    assert isinstance(refused.error, QuotaExceeded)
    assert (refused.error.quota, refused.error.would_be) == (10, 2 * len(BODY) + 1)
    # Nothing stored is refused: receiving still works, and frees room.
    commit_ok(store, unit(remove(queue, first)))
    [still] = commit(store, unit(append(queue, size=len(BODY))))
    assert isinstance(still.error, QuotaExceeded)
    commit_ok(store, unit(remove(queue, first + 1)))
    [last] = appended(commit_ok(store, unit(append(queue, size=10)))[0])
    # A quota of 0 takes only empty bodies, as at creation.
    set_quota(store, "q", 0)
    commit_ok(store, unit(remove(queue, last)))
    commit_ok(store, unit(append(queue, b"", size=0)))
    [full] = commit(store, unit(append(queue, size=1)))
    assert isinstance(full.error, QuotaExceeded)


def test_a_quota_set_in_a_batch_judges_the_writes_after_it(store: Store) -> None:
    queue = create_queue(store, "q", quota=100)
    before, change, after = commit(
        store,
        unit(append(queue, size=100)),
        unit(SetQuota("q", 150)),
        unit(append(queue, size=50)),
    )
    assert (before.error, change.error, after.error) == (None, None, None)
    [refused] = commit(store, unit(append(queue, size=1)))
    assert isinstance(refused.error, QuotaExceeded)
    # A queue created in the same unit gets it too.
    [outcome] = commit_ok(
        store, unit(CreateQueue("new", "new"), SetQuota("new", 5), append(queue, size=0))
    )
    assert store.get_queue("new").quota == 5  # type: ignore[union-attr]
    assert isinstance(outcome.results[1], QuotaSet)


@pytest.mark.parametrize(
    ("name", "quota", "error"),
    [
        ("missing", 10, QueueMissing),
        ("q;journal", 10, InvalidOperation),
        ("system$;deadletter", 10, InvalidOperation),
        ("q", -1, InvalidRecord),
        ("q", 2**64, InvalidRecord),
    ],
)
def test_a_quota_only_for_an_application_queue_and_in_range(
    store: Store, name: str, quota: int, error: type[Exception]
) -> None:
    create_queue(store, "q", journal=True, quota=7)
    create_queue(store, "system$;deadletter", kind=QueueKind.DEADLETTER)
    [outcome] = commit(store, unit(SetQuota(name, quota)))
    assert isinstance(outcome.error, error)
    assert store.get_queue("q").quota == 7  # type: ignore[union-attr]


# --------------------------------------------------------------------------- deletion


def test_deleting_a_queue_hides_it_and_its_journal_at_once(store: Store) -> None:
    queue = create_queue(store, "orders")
    other = create_queue(store, "other")
    journal_id = queue.journal_id
    assert journal_id is not None
    fill(store, queue, 3)
    fill(store, other, 2)
    commit_ok(store, unit(remove(queue, 1, journal=True)))
    [outcome] = commit_ok(store, unit(DeleteQueue(queue.queue_id)))
    # 2 left in the queue + 1 in its journal.
    assert outcome.results == (QueueDeleted((queue.queue_id, journal_id), 3),)
    for name in ("orders", "orders;journal"):
        assert store.get_queue(name) is None
    for deleted in (queue.queue_id, journal_id):
        assert store.get_queue_by_id(deleted) is None
        assert store.read_range(deleted) == []
        assert store.read_message(deleted, 2) is None
        assert store.first_fifo(deleted, start=1, skip=()) is None
        assert store.first_by_priority(deleted, start=(0, 0), skip=()) is None
    assert store.queues_to_erase() == [queue.queue_id, journal_id]
    assert lookups(store, other) == [1, 2]
    [again] = commit(store, unit(DeleteQueue(queue.queue_id)))
    assert isinstance(again.error, QueueMissing)


def test_journal_queue_cannot_be_deleted_on_its_own(store: Store) -> None:
    queue = create_queue(store, "orders")
    assert queue.journal_id is not None
    [outcome] = commit(store, unit(DeleteQueue(queue.journal_id)))
    assert isinstance(outcome.error, InvalidOperation)
    assert store.get_queue("orders;journal") is not None


def test_deleted_queue_messages_are_erased_in_bounded_steps(store: Store, reopen: Reopener) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 10)
    commit_ok(store, unit(DeleteQueue(queue.queue_id)))
    steps = erase_all(store, queue, 3)
    assert [(step.messages, step.done) for step in steps] == [
        (3, False),
        (3, False),
        (3, False),
        (1, True),
    ]
    assert queue.journal_id is not None
    assert store.queues_to_erase() == [queue.journal_id]
    assert erase_all(store, queue.journal_id, 3) == [Erased(queue.journal_id, 0, True)]
    assert store.queues_to_erase() == []
    store.close()
    assert stored_keys(store.path, queue) == ([], [])
    assert reopen(store).queues_to_erase() == []


def test_queue_ids_are_never_reused(store: Store, reopen: Reopener) -> None:
    first = create_queue(store, "a")
    commit_ok(store, unit(DeleteQueue(first.queue_id)))
    second = create_queue(store, "a")
    assert second.queue_id == first.queue_id + 2
    store = reopen(store)
    commit_ok(store, unit(DeleteQueue(second.queue_id)))
    assert create_queue(store, "b").queue_id == second.queue_id + 2


def test_recreated_name_is_a_new_queue_while_the_old_messages_are_erased(
    store: Store, reopen: Reopener
) -> None:
    old = create_queue(store, "orders", transactional=True)
    fill(store, old, 5, b"old")
    commit_ok(store, unit(DeleteQueue(old.queue_id)))
    new = create_queue(store, "orders", transactional=True)
    assert new.queue_id > old.queue_id
    assert (new.next_lookup_id, new.depth) == (1, 0)
    fill(store, new, 2, b"new")
    [step] = commit_ok(store, unit(EraseStep(old.queue_id, 2)))
    assert step.results == (Erased(old.queue_id, 2, False),)
    fill(store, new, 1, b"new")
    store = reopen(store)
    assert old.queue_id in store.queues_to_erase()
    erase_all(store, old, 2)
    assert payloads(store, new) == [b"new"] * 3
    assert counters(store, "orders") == (4, 3, 9)
    store.close()
    assert stored_keys(store.path, old) == ([], [])
    assert stored_keys(store.path, new) == ([1, 2, 3], [])


def test_delete_and_recreate_in_one_unit(store: Store) -> None:
    old = create_queue(store, "q")
    fill(store, old, 2)
    [outcome] = commit_ok(store, unit(DeleteQueue(old.queue_id), CreateQueue("q", "Q")))
    deleted, created = outcome.results
    assert deleted == QueueDeleted((old.queue_id, old.queue_id + 1), 2)
    assert isinstance(created, QueueCreated)
    assert store.get_queue("q") == created.record
    assert created.record.display_name == "Q"
    assert lookups(store, created.record) == []
    erase_all(store, old, 10)
    assert lookups(store, created.record) == []


def test_queue_created_and_deleted_in_one_batch_leaves_only_marks_to_erase(
    store: Store, reopen: Reopener
) -> None:
    [created] = commit_ok(store, unit(CreateQueue("brief", "brief")))[0].results
    assert isinstance(created, QueueCreated)
    brief = created.record
    outcomes = commit_ok(
        store,
        unit(CreateQueue("flash", "flash")),
        unit(append(brief.queue_id + 2)),
        unit(DeleteQueue(brief.queue_id + 2)),
    )
    assert outcomes[2].results == (QueueDeleted((brief.queue_id + 2, brief.queue_id + 3), 1),)
    assert store.get_queue("flash") is None
    store = reopen(store)
    assert store.get_queue("flash") is None
    assert store.queues_to_erase() == [brief.queue_id + 2, brief.queue_id + 3]
    erase_all(store, brief.queue_id + 2, 10)
    erase_all(store, brief.queue_id + 3, 10)
    assert store.queues_to_erase() == []
    store.close()
    assert stored_keys(store.path, brief.queue_id + 2) == ([], [])


# --------------------------------------------------------------------------- purge and erase


def test_purge_makes_every_message_invisible_at_once(store: Store) -> None:
    queue = create_queue(store, "orders")
    assert queue.journal_id is not None
    fill(store, queue, 4)
    commit_ok(store, unit(remove(queue, 1, journal=True)))
    [outcome] = commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    assert outcome.results == (QueuePurged(queue.queue_id, 3),)
    assert counters(store, "orders") == (5, 0, 0)
    purged = store.get_queue("orders")
    assert purged is not None
    assert (purged.purged_below, purged.erasing) == (5, True)
    assert store.read_range(queue.queue_id) == []
    assert store.read_message(queue.queue_id, 2) is None
    assert store.first_fifo(queue.queue_id, start=1, skip=()) is None
    assert store.first_by_priority(queue.queue_id, start=(0, 0), skip=()) is None
    assert store.queues_to_erase() == [queue.queue_id]
    # The journal queue is a queue of its own: untouched.
    assert lookups(store, queue.journal_id) == [1]
    # New messages are visible as usual.
    assert fill(store, queue, 1) == [5]
    assert lookups(store, queue) == [5]


def test_purged_messages_are_erased_in_bounded_steps(store: Store, reopen: Reopener) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 7)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    fill(store, queue, 2)
    steps = erase_all(store, queue, 3)
    assert [(step.messages, step.done) for step in steps] == [(3, False), (3, False), (1, True)]
    assert store.queues_to_erase() == []
    record = store.get_queue("q")
    assert record is not None
    assert not record.erasing
    assert lookups(store, queue) == [8, 9]
    store.close()
    assert stored_keys(store.path, queue) == ([8, 9], [8, 9])
    assert counters(reopen(store), "q") == (10, 2, 200)


def test_erase_step_leaves_kept_messages_for_the_transactions_holding_them(
    store: Store,
) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 5)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    [first] = commit_ok(store, unit(EraseStep(queue.queue_id, 10, frozenset({2, 4}))))
    assert first.results == (Erased(queue.queue_id, 3, False),)
    assert store.queues_to_erase() == [queue.queue_id]
    # Kept messages stay invisible to reads...
    assert lookups(store, queue) == []
    # ...but the transactions that hold them can still remove them, once.
    [removed] = commit_ok(store, unit(remove(queue, 2), remove(queue, 4)))
    assert removed.results == (Removed(queue.queue_id, 2), Removed(queue.queue_id, 4))
    assert counters(store, "q") == (6, 0, 0)
    assert erase_all(store, queue, 10) == [Erased(queue.queue_id, 0, True)]
    assert store.queues_to_erase() == []


def test_erase_step_with_a_kept_message_never_reports_done(store: Store) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 3)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    keep = EraseStep(queue.queue_id, 1, frozenset({3}))
    results = [commit_ok(store, unit(keep))[0].results[0] for _ in range(4)]
    assert results == [
        Erased(queue.queue_id, 1, False),
        Erased(queue.queue_id, 1, False),
        Erased(queue.queue_id, 0, False),
        Erased(queue.queue_id, 0, False),
    ]
    # Once nothing holds it, it is erased too.
    assert erase_all(store, queue, 1) == [Erased(queue.queue_id, 1, True)]


def test_erase_step_with_nothing_to_erase_is_done(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    outcomes = commit_ok(
        store,
        unit(EraseStep(queue.queue_id, 5)),
        unit(EraseStep(999, 5)),
    )
    assert [outcome.results for outcome in outcomes] == [
        (Erased(queue.queue_id, 0, True),),
        (Erased(999, 0, True),),
    ]
    assert lookups(store, queue) == [1, 2]


def test_purging_an_empty_queue_leaves_nothing_to_erase(store: Store) -> None:
    queue = create_queue(store, "q")
    [outcome] = commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    assert outcome.results == (QueuePurged(queue.queue_id, 0),)
    assert store.queues_to_erase() == []
    [missing] = commit(store, unit(PurgeQueue(999)))
    assert isinstance(missing.error, QueueMissing)


def test_second_purge_before_erasing_covers_both(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 3)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    fill(store, queue, 2)
    [outcome] = commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    assert outcome.results == (QueuePurged(queue.queue_id, 2),)
    assert [step.messages for step in erase_all(store, queue, 10)] == [5]


def test_deleting_a_purged_queue_erases_all_its_messages(store: Store) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 4)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)), unit(EraseStep(queue.queue_id, 1)))
    fill(store, queue, 2)
    [deleted] = commit_ok(store, unit(DeleteQueue(queue.queue_id)))
    assert deleted.results == (QueueDeleted((queue.queue_id, queue.queue_id + 1), 2),)
    assert [step.messages for step in erase_all(store, queue, 10)] == [5]
    store.close()
    assert stored_keys(store.path, queue) == ([], [])


def test_messages_appended_in_the_batch_that_purges_and_erases_are_erased_later(
    store: Store,
) -> None:
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    outcomes = commit_ok(
        store,
        unit(append(queue)),
        unit(PurgeQueue(queue.queue_id)),
        unit(EraseStep(queue.queue_id, 10)),
    )
    # The erase step could not see the append its batch made: not done yet.
    assert outcomes[2].results == (Erased(queue.queue_id, 2, False),)
    assert store.queues_to_erase() == [queue.queue_id]
    assert erase_all(store, queue, 10) == [Erased(queue.queue_id, 1, True)]
    store.close()
    assert stored_keys(store.path, queue) == ([], [])


def test_messages_appended_in_the_batch_that_deletes_and_erases_are_erased_later(
    store: Store,
) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 1)
    outcomes = commit_ok(
        store,
        unit(append(queue), DeleteQueue(queue.queue_id)),
        unit(EraseStep(queue.queue_id, 10)),
    )
    assert outcomes[1].results == (Erased(queue.queue_id, 1, False),)
    assert queue.queue_id in store.queues_to_erase()
    assert erase_all(store, queue, 10) == [Erased(queue.queue_id, 1, True)]
    store.close()
    assert stored_keys(store.path, queue) == ([], [])


def test_erasing_resumes_after_reopen(store: Store, reopen: Reopener) -> None:
    purged = create_queue(store, "purged")
    deleted = create_queue(store, "deleted", transactional=True)
    fill(store, purged, 6)
    fill(store, deleted, 6)
    commit_ok(store, unit(PurgeQueue(purged.queue_id)), unit(DeleteQueue(deleted.queue_id)))
    commit_ok(store, unit(EraseStep(purged.queue_id, 2)), unit(EraseStep(deleted.queue_id, 2)))
    store = reopen(store)
    assert store.queues_to_erase() == [deleted.queue_id, deleted.queue_id + 1, purged.queue_id]
    assert [step.messages for step in erase_all(store, purged, 10)] == [4]
    assert [step.messages for step in erase_all(store, deleted, 10)] == [4]
    erase_all(store, deleted.queue_id + 1, 10)
    store = reopen(store)
    assert store.queues_to_erase() == []
    assert counters(store, "purged") == (7, 0, 0)
    store.close()
    assert stored_keys(store.path, purged) == ([], [])
    assert stored_keys(store.path, deleted) == ([], [])
