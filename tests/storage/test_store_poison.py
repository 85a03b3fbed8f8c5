"""Poison handling in the store: subqueues, queue records with poison settings,
message counters (aborts, moves), moves, the retry time index, erasing the
counters with their messages, reopening, and the migration of a schema-4 store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lmdb
import pytest
from conftest import (
    BODY,
    NOW,
    Reopener,
    append,
    commit,
    commit_ok,
    create_queue,
    erase_all,
    fill,
    lookups,
    payloads,
    raw_lmdb,
    remove,
    unit,
)

from storage import (
    NO_COUNTERS,
    SCHEMA_VERSION,
    AbortCounted,
    CreateSubqueues,
    DeleteQueue,
    DeleteSubqueues,
    DropRetryEntry,
    InvalidOperation,
    InvalidRecord,
    MessageCounters,
    MessageMissing,
    Moved,
    MoveMessage,
    MoveReason,
    PoisonSet,
    PoisonSettings,
    PurgeQueue,
    QueueKind,
    QueueRecord,
    QuotaExceeded,
    RecordAbort,
    SetPoisonSettings,
    Store,
    StoreCorrupt,
    SubqueuesCreated,
    SubqueuesDeleted,
    decode_queue,
    encode_queue,
    message_arrived_time,
    message_header,
)
from storage._keys import DB_META, META_SCHEMA_VERSION, u32
from storage._poison import (
    DB_MESSAGE_COUNTERS,
    DB_RETRY_DUE,
    decode_message_counters,
    due_milliseconds,
    encode_message_counters,
    split_retry_key,
)

POISON_DBS = (DB_MESSAGE_COUNTERS, DB_RETRY_DUE)
SETTINGS = PoisonSettings(retry_count=1, retry_cycles=2, retry_delay=30.0)


def family(
    store: Store, name: str, **options: object
) -> tuple[QueueRecord, QueueRecord, QueueRecord]:
    """A queue with its subqueues: ``(queue, ;retry, ;poison)``."""
    queue = create_queue(store, name, **options)
    commit_ok(store, unit(CreateSubqueues(name, created_at=7.0)))
    retry = store.get_queue(name + ";retry")
    poison = store.get_queue(name + ";poison")
    assert retry is not None
    assert poison is not None
    return queue, retry, poison


def move(
    store: Store,
    source: QueueRecord,
    lookup_id: int,
    target: QueueRecord,
    reason: MoveReason = MoveReason.REQUEST,
) -> Moved:
    op = MoveMessage(source.queue_id, lookup_id, target.queue_id, reason)
    [outcome] = commit_ok(store, unit(op))
    [result] = outcome.results
    assert isinstance(result, Moved)
    return result


def abort(store: Store, queue: QueueRecord, lookup_id: int) -> int | None:
    [outcome] = commit_ok(store, unit(RecordAbort(queue.queue_id, lookup_id)))
    [result] = outcome.results
    assert isinstance(result, AbortCounted)
    return result.abort_count


def counters_of(store: Store, queue: QueueRecord, lookup_id: int) -> MessageCounters:
    return store.message_counters(queue.queue_id, [lookup_id]).get(lookup_id, NO_COUNTERS)


def raw_keys(store: Store, name: bytes) -> list[bytes]:
    """Every key of one of the poison databases of an open store."""
    dbs = store._catalog.dbs
    db = dbs.message_counters if name == DB_MESSAGE_COUNTERS else dbs.retry_due
    with store._env.read("test") as txn:
        return [bytes(key) for key, _ in txn.cursor(db=db)]


# --------------------------------------------------------------------------- records


def test_a_queue_without_poison_settings_keeps_the_version_2_record() -> None:
    record = QueueRecord(
        queue_id=3,
        name="q",
        display_name="Q",
        kind=QueueKind.NORMAL,
        transactional=True,
        journal=False,
        quota=None,
        parent_id=None,
        journal_id=4,
        created_at=1.5,
    )
    data = encode_queue(record)
    assert data[0] == 2
    with_settings = encode_queue(
        record.with_counters(next_lookup_id=1, depth=0, size=0, purged_below=0, erasing=False)
    )
    assert with_settings == data
    poisoned = dataclasses.replace(record, poison=SETTINGS)
    encoded = encode_queue(poisoned)
    assert encoded[0] == 3
    assert len(encoded) == len(data) + 16
    assert decode_queue(encoded) == poisoned
    assert decode_queue(data) == record
    # The counters keep their own format whatever the record's version.
    assert (
        poisoned.with_counters(
            next_lookup_id=2, depth=1, size=3, purged_below=0, erasing=False
        ).poison
        == SETTINGS
    )


@pytest.mark.parametrize("cut", [1, 10, 16, 17])
def test_a_truncated_version_3_record_is_corrupt(cut: int) -> None:
    record = QueueRecord(
        queue_id=3,
        name="q",
        display_name="q",
        kind=QueueKind.NORMAL,
        transactional=False,
        journal=False,
        quota=None,
        parent_id=None,
        journal_id=None,
        created_at=0.0,
        poison=SETTINGS,
    )
    data = encode_queue(record)
    with pytest.raises(StoreCorrupt):
        decode_queue(data[:-cut])


@pytest.mark.parametrize(
    "settings",
    [
        PoisonSettings(-1, 0, 0.0),
        PoisonSettings(0, 1 << 32, 0.0),
        PoisonSettings(0, 0, -1.0),
        PoisonSettings(0, 0, float("nan")),
        PoisonSettings(0, 0, float("inf")),
    ],
)
def test_settings_out_of_range_are_invalid_records(store: Store, settings: PoisonSettings) -> None:
    create_queue(store, "q")
    [outcome] = commit(store, unit(SetPoisonSettings("q", settings)))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.get_queue("q").poison is None  # type: ignore[union-attr]


def test_counters_records_round_trip_and_garbage_is_corrupt() -> None:
    counters = MessageCounters(3, 4, 1, 12.5, 99)
    data = encode_message_counters(counters)
    assert len(data) == 30
    assert decode_message_counters(data) == counters
    for bad in (data[:-1], b"\x02" + data[1:], data[:1] + b"\x01" + data[2:]):
        with pytest.raises(StoreCorrupt):
            decode_message_counters(bad)
    with pytest.raises(InvalidRecord):
        encode_message_counters(MessageCounters(abort_count=1 << 32))


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


def test_poison_settings_are_set_cleared_and_kept(store: Store, reopen: Reopener) -> None:
    queue, _, _ = family(store, "q", transactional=True)
    fill(store, queue, 2)
    [outcome] = commit_ok(store, unit(SetPoisonSettings("q", SETTINGS)))
    [result] = outcome.results
    assert isinstance(result, PoisonSet)
    assert result.record.poison == SETTINGS
    assert result.record.depth == 2
    store = reopen(store)
    record = store.get_queue("q")
    assert record is not None
    assert (record.poison, record.depth, record.next_lookup_id) == (SETTINGS, 2, 3)
    commit_ok(store, unit(SetPoisonSettings("q", None)))
    store = reopen(store)
    assert store.get_queue("q").poison is None  # type: ignore[union-attr]
    [outcome] = commit(store, unit(SetPoisonSettings("q;poison", SETTINGS)))
    assert isinstance(outcome.error, InvalidOperation)


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


# --------------------------------------------------------------------------- counters


def test_aborts_count_and_two_in_one_batch_both_count(store: Store, reopen: Reopener) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 2)
    assert counters_of(store, queue, 1) == NO_COUNTERS
    assert abort(store, queue, 1) == 1
    outcomes = commit_ok(
        store, unit(RecordAbort(queue.queue_id, 1)), unit(RecordAbort(queue.queue_id, 1))
    )
    assert [o.results[0].abort_count for o in outcomes] == [2, 3]  # type: ignore[attr-defined]
    store = reopen(store)
    assert counters_of(store, queue, 1) == MessageCounters(abort_count=3)
    assert store.message_counters(queue.queue_id, [1, 2, 3]) == {1: MessageCounters(3)}
    # The message itself was never rewritten.
    assert payloads(store, queue) == [BODY, BODY]


def test_an_abort_of_a_message_that_is_gone_is_passed_over(store: Store) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 3)
    commit_ok(store, unit(remove(queue, 1)))
    assert abort(store, queue, 1) is None
    # Removed in the same batch, before or after: nothing of it stays.
    outcomes = commit_ok(
        store,
        unit(RecordAbort(queue.queue_id, 2)),
        unit(remove(queue, 2)),
        unit(RecordAbort(queue.queue_id, 2)),
    )
    assert outcomes[0].results[0].abort_count == 1  # type: ignore[attr-defined]
    assert outcomes[2].results[0].abort_count is None  # type: ignore[attr-defined]
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    assert abort(store, queue, 3) is None
    assert raw_keys(store, DB_MESSAGE_COUNTERS) == []


def test_counters_are_erased_with_their_messages(store: Store) -> None:
    queue = create_queue(store, "q", transactional=True)
    fill(store, queue, 4)
    for lookup_id in (1, 2, 3, 4):
        abort(store, queue, lookup_id)
    assert len(raw_keys(store, DB_MESSAGE_COUNTERS)) == 4
    commit_ok(store, unit(remove(queue, 1)))
    assert len(raw_keys(store, DB_MESSAGE_COUNTERS)) == 3
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    erase_all(store, queue, 2)
    assert raw_keys(store, DB_MESSAGE_COUNTERS) == []


# --------------------------------------------------------------------------- moves


def test_a_move_keeps_the_message_and_counts_it(store: Store) -> None:
    queue, retry, _ = family(store, "q", transactional=True)
    fill(store, queue, 2)
    abort(store, queue, 2)
    before = store.read_message(queue.queue_id, 2)
    assert before is not None
    result = move(store, queue, 2, retry)
    assert result.target_lookup_id == 1
    assert result.counters == MessageCounters(0, 1, 0, NOW, 0)  # no poison handling: no due time
    after = store.read_message(retry.queue_id, 1)
    assert after is not None
    assert after == before  # payload, priority, size and arrival time as they were
    assert store.read_message(queue.queue_id, 2) is None
    assert counters_of(store, queue, 2) == NO_COUNTERS
    assert counters_of(store, retry, 1) == MessageCounters(0, 1, 0, NOW, 0)
    assert store.get_queue("q").depth == 1  # type: ignore[union-attr]
    assert store.get_queue("q;retry").depth == 1  # type: ignore[union-attr]
    # Back again: a new lookup id there, the move count goes on.
    back = move(store, retry, 1, queue)
    assert back.target_lookup_id == 3
    assert back.counters.move_count == 2
    assert lookups(store, queue) == [1, 3]


def test_a_move_between_non_transactional_queues_keeps_the_priority_order(store: Store) -> None:
    queue, _, poison = family(store, "q")
    fill(store, queue, 1, priority=1)
    fill(store, queue, 1, priority=6)
    fill(store, queue, 1, priority=3)
    for lookup_id in (1, 2, 3):
        move(store, queue, lookup_id, poison)
    found = store.first_by_priority(poison.queue_id, start=(0, 0), skip=())
    assert found is not None
    assert found[1] == 2  # priority 6 first
    record = store.read_message(poison.queue_id, 1)
    assert record is not None
    assert message_header(record)[0] == 1
    assert message_arrived_time(record) == NOW


def test_moves_go_only_within_one_family(store: Store) -> None:
    a, a_retry, a_poison = family(store, "a", transactional=True)
    b, b_retry, _ = family(store, "b", transactional=True)
    fill(store, a, 1)
    fill(store, a_retry, 0)
    for source, target in ((a, b), (a, b_retry), (a, a), (a, store.get_queue("a;journal"))):
        assert target is not None
        [outcome] = commit(store, unit(MoveMessage(source.queue_id, 1, target.queue_id)))
        assert isinstance(outcome.error, InvalidOperation), (source.name, target.name)
    moved = move(store, a, 1, a_retry)
    # Between two subqueues of one queue.
    move(store, a_retry, moved.target_lookup_id, a_poison)
    [outcome] = commit(store, unit(MoveMessage(a_retry.queue_id, 1, a.queue_id)))
    assert isinstance(outcome.error, MessageMissing)


def test_a_purged_message_does_not_move(store: Store) -> None:
    queue, retry, _ = family(store, "q", transactional=True)
    fill(store, queue, 1)
    commit_ok(store, unit(PurgeQueue(queue.queue_id)))
    [outcome] = commit(store, unit(MoveMessage(queue.queue_id, 1, retry.queue_id)))
    assert isinstance(outcome.error, MessageMissing)


# --------------------------------------------------------------------------- the retry index


def test_a_move_to_retry_of_a_queue_with_poison_handling_is_indexed(
    store: Store, reopen: Reopener
) -> None:
    queue, retry, poison = family(store, "q", transactional=True)
    commit_ok(store, unit(SetPoisonSettings("q", SETTINGS)))
    fill(store, queue, 3)
    abort(store, queue, 1)
    first = move(store, queue, 1, retry, reason=MoveReason.RETRY)
    due = due_milliseconds(NOW + 30.0)
    assert first.counters == MessageCounters(0, 1, 1, NOW, due)
    [outcome] = commit_ok(
        store, unit(MoveMessage(queue.queue_id, 2, retry.queue_id, MoveReason.RETRY)), now=NOW + 5
    )
    assert store.retries_due(None, 10) == [
        (due, retry.queue_id, 1),
        (due_milliseconds(NOW + 35.0), retry.queue_id, 2),
    ]
    assert store.retries_due(NOW + 30.0, 10) == [(due, retry.queue_id, 1)]
    assert store.retries_due(NOW + 29.999, 10) == []
    assert store.retries_due(None, 1) == [(due, retry.queue_id, 1)]
    store = reopen(store)
    assert len(store.retries_due(None, 10)) == 2
    # Back to the queue: the entry goes, the cycle stays counted, aborts start at 0.
    [outcome] = commit_ok(
        store,
        unit(MoveMessage(retry.queue_id, 1, queue.queue_id, MoveReason.RETURN)),
        now=NOW + 31,
    )
    back = outcome.results[0]
    assert isinstance(back, Moved)
    assert back.counters == MessageCounters(0, 2, 1, NOW + 31, 0)
    assert [entry[2] for entry in store.retries_due(None, 10)] == [2]
    # To ;poison and by request: no due time; into the queue by request, cycles start afresh.
    to_poison = move(store, retry, 2, poison, reason=MoveReason.POISON)
    assert to_poison.counters.retry_due == 0
    assert to_poison.counters.retry_cycles == 1
    assert store.retries_due(None, 10) == []
    again = move(store, poison, to_poison.target_lookup_id, queue)
    assert again.counters == MessageCounters(0, 3, 0, NOW, 0)
    for key in raw_keys(store, DB_RETRY_DUE):
        split_retry_key(key)


def test_a_dangling_retry_entry_is_dropped(store: Store) -> None:
    queue, retry, _ = family(store, "q", transactional=True)
    commit_ok(store, unit(SetPoisonSettings("q", SETTINGS)))
    fill(store, queue, 1)
    moved = move(store, queue, 1, retry, reason=MoveReason.RETRY)
    commit_ok(store, unit(remove(retry, moved.target_lookup_id)))
    [(due, queue_id, lookup_id)] = store.retries_due(None, 10)
    assert counters_of(store, retry, lookup_id) == NO_COUNTERS
    commit_ok(store, unit(DropRetryEntry(due, queue_id, lookup_id)))
    assert store.retries_due(None, 10) == []


# --------------------------------------------------------------------------- schema 5 -> 6


def make_schema_5(path: Path) -> None:
    """Turn a closed store into what schema 5 wrote: no poison databases."""
    with raw_lmdb(path) as env:
        dbs = [env.open_db(name) for name in POISON_DBS]
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            for db in dbs:
                txn.drop(db, delete=True)
            txn.put(META_SCHEMA_VERSION, u32(5), db=meta)
    with raw_lmdb(path) as env:
        for name in POISON_DBS:
            with pytest.raises(lmdb.NotFoundError):
                env.open_db(name, create=False)


def test_a_schema_5_store_is_migrated_at_opening(store: Store, reopen: Reopener) -> None:
    assert SCHEMA_VERSION == 6
    queue = create_queue(store, "old", transactional=True)
    fill(store, queue, 2)
    queues = store.list_queues()
    store.close()
    make_schema_5(store.path)
    store = reopen(store)
    assert store.list_queues() == queues
    assert payloads(store, queue) == [BODY, BODY]
    # Queues of schema 5 have no subqueues until asked for.
    assert store.get_queue("old;retry") is None
    commit_ok(store, unit(CreateSubqueues("old")), unit(SetPoisonSettings("old", SETTINGS)))
    assert abort(store, queue, 1) == 1
    retry = store.get_queue("old;retry")
    assert retry is not None
    move(store, queue, 2, retry, reason=MoveReason.RETRY)
    store.close()
    with raw_lmdb(store.path) as env:
        meta = env.open_db(DB_META, create=False)
        with env.begin() as txn:
            assert txn.get(META_SCHEMA_VERSION, db=meta) == u32(6)
    store = reopen(store)
    assert counters_of(store, queue, 1).abort_count == 1
    assert len(store.retries_due(None, 10)) == 1
    assert store.get_queue("old").poison == SETTINGS  # type: ignore[union-attr]
