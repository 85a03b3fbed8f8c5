"""commit_batch: lookup ids, per-unit failures, journal copies, priority order, reads."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from storage import (
    CommitUnit,
    InvalidRecord,
    MessageMissing,
    MessageRecord,
    NewMessage,
    QueueMissing,
    QueueRecord,
    QuotaExceeded,
    Removal,
    Store,
    StoreCorrupt,
    format_message_id,
)
from storage._keys import DB_MESSAGES, DB_META, META_NEXT_ORDINAL, message_key, u32

QM = uuid.UUID("11111111-2222-4333-8444-555555555555")


def message(body: bytes = b"x" * 100, priority: int = 3, label: str = "m") -> MessageRecord:
    return MessageRecord(
        message_id_qm=QM,
        message_id_ordinal=0,
        label=label,
        body=body,
        correlation_id=b"",
        app_specific=0,
        priority=priority,
        delivery=1,
        acknowledge=0,
        journal_level=0,
        admin_queue="",
        response_queue="",
        time_to_reach_queue=0xFFFFFFFF,
        time_to_be_received=0xFFFFFFFF,
        message_class=0,
        sent_time=1.0,
        arrived_time=0.0,
        source_qm=QM,
        transactional=False,
        destination="q",
    )


def send(queue: QueueRecord, record: MessageRecord | None = None) -> NewMessage:
    return NewMessage(queue_id=queue.queue_id, record=record or message())


def remove(queue: QueueRecord, lookup_id: int, journal: bool = False) -> Removal:
    return Removal(queue_id=queue.queue_id, lookup_id=lookup_id, journal=journal)


def counters(store: Store, name: str) -> tuple[int, int, int]:
    record = store.get_queue(name)
    assert record is not None
    return record.next_lookup_id, record.depth, record.bytes


def lookups(store: Store, queue: QueueRecord, **kwargs: object) -> list[int]:
    return [lookup for lookup, _ in store.read_range(queue.queue_id, **kwargs)]  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path, durable=False) as opened:
        yield opened


def test_lookup_ids_are_consecutive_across_units_and_batches(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False) as store:
        a = store.create_queue(name="a", display_name="a", now=0.0)
        b = store.create_queue(name="b", display_name="b", now=0.0)
        outcomes = store.commit_batch(
            [
                CommitUnit(sends=[send(a), send(b), send(a)]),
                CommitUnit(sends=[send(a), send(a)]),
            ],
            now=10.0,
        )
        assert [(s.queue_id, s.lookup_id) for s in outcomes[0].sends] == [
            (a.queue_id, 1),
            (b.queue_id, 1),
            (a.queue_id, 2),
        ]
        assert [s.lookup_id for s in outcomes[1].sends] == [3, 4]
        later = store.commit_batch([CommitUnit(sends=[send(a)])], now=11.0)
        assert later[0].sends[0].lookup_id == 5
    with Store(tmp_path, durable=False) as store:
        again = store.commit_batch([CommitUnit(sends=[send(a), send(b)])], now=12.0)
        assert [s.lookup_id for s in again[0].sends] == [6, 2]
        assert lookups(store, a) == [1, 2, 3, 4, 5, 6]
        assert counters(store, "a") == (7, 6, 600)


def test_committed_send_carries_final_record(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    sent = message(label="hello")
    committed = store.commit_batch([CommitUnit(sends=[send(queue, sent)])], now=123.5)[0].sends[0]
    assert committed.record.arrived_time == 123.5
    assert committed.record.message_id_ordinal == 1
    assert committed.message_id == format_message_id(QM, 1)
    assert committed.record == dataclasses.replace(sent, message_id_ordinal=1, arrived_time=123.5)
    assert store.read_message(queue.queue_id, committed.lookup_id) == committed.record
    assert store.read_message(queue.queue_id, 99) is None
    assert store.read_message(999, 1) is None


def test_message_ids_unique_and_increasing(tmp_path: Path) -> None:
    ordinals: list[int] = []
    with Store(tmp_path, durable=False) as store:
        a = store.create_queue(name="a", display_name="a", now=0.0)
        b = store.create_queue(name="b", display_name="b", now=0.0)
        for outcome in store.commit_batch(
            [CommitUnit(sends=[send(a), send(b)]), CommitUnit(sends=[send(b)])], now=1.0
        ):
            ordinals += [s.record.message_id_ordinal for s in outcome.sends]
    with Store(tmp_path, durable=False) as store:
        outcome = store.commit_batch([CommitUnit(sends=[send(a)] * 2)], now=2.0)[0]
        ordinals += [s.record.message_id_ordinal for s in outcome.sends]
        ids = [s.message_id for s in outcome.sends]
    assert ordinals == [1, 2, 3, 4, 5]
    assert len(set(ids)) == 2


def test_ordinal_wraps_to_one(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False) as store:
        queue = store.create_queue(name="q", display_name="q", now=0.0)
    with lmdb.open(str(tmp_path), max_dbs=16) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            txn.put(META_NEXT_ORDINAL, u32(0xFFFFFFFE), db=meta)
    with Store(tmp_path, durable=False) as store:
        outcome = store.commit_batch([CommitUnit(sends=[send(queue)] * 3)], now=1.0)[0]
        assert [s.record.message_id_ordinal for s in outcome.sends] == [0xFFFFFFFE, 0xFFFFFFFF, 1]
        assert outcome.sends[2].message_id.endswith("}\\1")
    with Store(tmp_path, durable=False) as store:
        outcome = store.commit_batch([CommitUnit(sends=[send(queue)])], now=1.0)[0]
        assert outcome.sends[0].record.message_id_ordinal == 2


def test_quota_failure_leaves_other_units_applied(store: Store) -> None:
    limited = store.create_queue(name="limited", display_name="limited", quota=250, now=0.0)
    free = store.create_queue(name="free", display_name="free", now=0.0)
    outcomes = store.commit_batch(
        [
            CommitUnit(sends=[send(limited), send(free)]),
            CommitUnit(sends=[send(free), send(limited), send(limited)]),  # 300 > 250
            CommitUnit(sends=[send(limited)]),
        ],
        now=1.0,
    )
    assert outcomes[0].error is None
    error = outcomes[1].error
    assert isinstance(error, QuotaExceeded)
    assert (error.queue_name, error.quota, error.would_be) == ("limited", 250, 300)
    assert outcomes[1].sends == ()
    assert outcomes[2].error is None
    assert [s.lookup_id for s in outcomes[2].sends] == [2]
    # The failed unit's send to "free" was not applied either.
    assert counters(store, "free") == (2, 1, 100)
    assert counters(store, "limited") == (3, 2, 200)
    assert lookups(store, free) == [1]
    assert [s.record.message_id_ordinal for o in outcomes for s in o.sends] == [1, 2, 3]


def test_removals_free_quota_before_sends(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", quota=200, now=0.0)
    store.commit_batch([CommitUnit(sends=[send(queue)] * 2)], now=1.0)
    full = store.commit_batch([CommitUnit(sends=[send(queue)])], now=1.0)[0]
    assert isinstance(full.error, QuotaExceeded)
    swap = store.commit_batch(
        [CommitUnit(sends=[send(queue)], removals=[remove(queue, 1)])], now=1.0
    )
    assert swap[0].error is None
    assert swap[0].removed == ((queue.queue_id, 1),)
    assert counters(store, "q") == (4, 2, 200)


def test_journal_copies_do_not_count_against_quota(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", quota=100, journal=True, now=0.0)
    store.commit_batch([CommitUnit(sends=[send(queue)])], now=1.0)
    outcome = store.commit_batch(
        [CommitUnit(removals=[remove(queue, 1, journal=True)], sends=[send(queue)])], now=2.0
    )[0]
    assert outcome.error is None
    assert counters(store, "q") == (3, 1, 100)
    assert counters(store, "q;journal") == (2, 1, 100)


def test_deleted_queue_fails_only_its_unit(store: Store) -> None:
    keep = store.create_queue(name="keep", display_name="keep", now=0.0)
    gone = store.create_queue(name="gone", display_name="gone", now=0.0)
    store.commit_batch([CommitUnit(sends=[send(gone)])], now=1.0)
    store.delete_queue("gone")
    outcomes = store.commit_batch(
        [
            CommitUnit(sends=[send(keep), send(gone)]),
            CommitUnit(removals=[remove(gone, 1)]),
            CommitUnit(sends=[send(keep)]),
        ],
        now=2.0,
    )
    assert isinstance(outcomes[0].error, QueueMissing)
    assert outcomes[0].error.queue == gone.queue_id
    assert isinstance(outcomes[1].error, QueueMissing)
    assert outcomes[2].error is None
    assert [s.lookup_id for s in outcomes[2].sends] == [1]
    assert counters(store, "keep") == (2, 1, 100)
    assert lookups(store, keep) == [1]


def test_missing_message_fails_only_its_unit(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", journal=True, now=0.0)
    other = store.create_queue(name="other", display_name="other", now=0.0)
    store.commit_batch([CommitUnit(sends=[send(queue)] * 3)], now=1.0)
    store.purge_queue(queue.queue_id, keep={3})
    outcomes = store.commit_batch(
        [
            # Removes 3 and journals it, sends elsewhere, then finds 1 missing: all undone.
            CommitUnit(
                removals=[remove(queue, 3, journal=True), remove(queue, 1)], sends=[send(other)]
            ),
            CommitUnit(removals=[remove(queue, 3)]),
        ],
        now=2.0,
    )
    error = outcomes[0].error
    assert isinstance(error, MessageMissing)
    assert (error.queue_id, error.lookup_id) == (queue.queue_id, 1)
    assert outcomes[0].removed == ()
    assert outcomes[1].error is None
    assert outcomes[1].removed == ((queue.queue_id, 3),)
    assert counters(store, "q") == (4, 0, 0)
    assert counters(store, "q;journal") == (1, 0, 0)
    assert counters(store, "other") == (1, 0, 0)
    assert lookups(store, other) == []


def test_removing_twice_in_one_unit_fails_the_unit(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    store.commit_batch([CommitUnit(sends=[send(queue)])], now=1.0)
    outcome = store.commit_batch(
        [CommitUnit(removals=[remove(queue, 1), remove(queue, 1)])], now=2.0
    )
    assert isinstance(outcome[0].error, MessageMissing)
    assert lookups(store, queue) == [1]


def test_invalid_record_fails_only_its_unit(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    bad = dataclasses.replace(message(), priority=9)
    outcomes = store.commit_batch(
        [CommitUnit(sends=[send(queue), send(queue, bad)]), CommitUnit(sends=[send(queue)])],
        now=1.0,
    )
    assert isinstance(outcomes[0].error, InvalidRecord)
    assert outcomes[1].sends[0].lookup_id == 1
    assert outcomes[1].sends[0].record.message_id_ordinal == 1


def test_journal_copies(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", journal=True, now=0.0)
    assert queue.journal_id is not None
    sent = store.commit_batch(
        [CommitUnit(sends=[send(queue, message(label=str(i))) for i in range(3)])], now=1.0
    )
    records = {s.lookup_id: s.record for s in sent[0].sends}
    outcome = store.commit_batch(
        [CommitUnit(removals=[remove(queue, 2, journal=True), remove(queue, 1, journal=False)])],
        now=5.0,
    )[0]
    assert outcome.removed == ((queue.queue_id, 2), (queue.queue_id, 1))
    assert store.read_range(queue.journal_id) == [
        (1, records[2])
    ]  # unchanged record, new lookup id
    assert lookups(store, queue) == [3]
    assert counters(store, "q") == (4, 1, 100)
    assert counters(store, "q;journal") == (2, 1, 100)
    # Removing from the journal queue itself (it has no journal) is a plain removal.
    store.commit_batch(
        [CommitUnit(removals=[Removal(queue_id=queue.journal_id, lookup_id=1, journal=True)])],
        now=6.0,
    )
    assert counters(store, "q;journal") == (2, 0, 0)


def test_priority_order_and_skip(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    priorities = [3, 7, 0, 7, 5, 3]  # lookup ids 1..6
    store.commit_batch(
        [CommitUnit(sends=[send(queue, message(priority=p)) for p in priorities])], now=1.0
    )

    def first(**kwargs: object) -> int | None:
        found = store.first_available(queue.queue_id, by_priority=True, **kwargs)  # type: ignore[arg-type]
        return None if found is None else found[0]

    assert first() == 2
    assert first(skip={2}) == 4
    assert first(skip={2, 4}) == 5
    assert first(skip={2, 4, 5}) == 1
    assert first(skip={1, 2, 4, 5, 6}) == 3
    assert first(skip={1, 2, 3, 4, 5, 6}) is None
    assert first(after=2) == 4
    assert first(after=4) == 5
    assert first(after=5) == 6
    assert first(after=6) is None
    found = store.first_available(queue.queue_id, by_priority=True)
    assert found is not None
    assert found[1].priority == 7
    # Removing updates the index.
    store.commit_batch([CommitUnit(removals=[remove(queue, 2), remove(queue, 4)])], now=2.0)
    assert first() == 5
    # FIFO ignores priority.
    fifo = store.first_available(queue.queue_id)
    assert fifo is not None
    assert fifo[0] == 1


def test_transactional_queues_are_fifo(store: Store) -> None:
    queue = store.create_queue(name="t", display_name="t", transactional=True, now=0.0)
    store.commit_batch(
        [CommitUnit(sends=[send(queue, message(priority=p)) for p in (0, 7, 3)])], now=1.0
    )
    found = store.first_available(queue.queue_id, by_priority=True)
    assert found is not None
    assert found[0] == 1
    found = store.first_available(queue.queue_id, by_priority=True, skip={1})
    assert found is not None
    assert found[0] == 2


def test_read_range_and_first_available_with_skip(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    neighbour = store.create_queue(name="r", display_name="r", now=0.0)
    store.commit_batch([CommitUnit(sends=[send(queue)] * 6 + [send(neighbour)] * 2)], now=1.0)
    assert lookups(store, queue) == [1, 2, 3, 4, 5, 6]
    assert lookups(store, queue, after=2) == [3, 4, 5, 6]
    assert lookups(store, queue, skip={1, 3}) == [2, 4, 5, 6]
    assert lookups(store, queue, skip={1, 3}, limit=2) == [2, 4]
    assert lookups(store, queue, after=3, skip={5}, limit=10) == [4, 6]
    assert lookups(store, queue, limit=0) == []
    assert lookups(store, queue, after=6) == []
    assert store.read_range(999) == []
    found = store.first_available(queue.queue_id, skip={1, 2})
    assert found is not None
    assert found[0] == 3
    assert store.first_available(queue.queue_id, skip=set(range(1, 7))) is None
    found = store.first_available(queue.queue_id, after=5)
    assert found is not None
    assert found[0] == 6
    assert store.first_available(999) is None
    assert store.first_available(999, by_priority=True) is None


def test_skipped_messages_are_never_decoded(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False) as store:
        queue = store.create_queue(name="q", display_name="q", now=0.0)
        store.commit_batch([CommitUnit(sends=[send(queue)] * 3)], now=1.0)
    with lmdb.open(str(tmp_path), max_dbs=16) as env:
        messages = env.open_db(DB_MESSAGES)
        with env.begin(write=True) as txn:
            txn.put(message_key(queue.queue_id, 1), b"garbage", db=messages)
    with Store(tmp_path, durable=False) as store:
        for by_priority in (False, True):
            found = store.first_available(queue.queue_id, skip={1}, by_priority=by_priority)
            assert found is not None
            assert found[0] == 2
            with pytest.raises(StoreCorrupt):
                store.first_available(queue.queue_id, by_priority=by_priority)
        assert lookups(store, queue, skip={1}) == [2, 3]
        with pytest.raises(StoreCorrupt):
            store.read_range(queue.queue_id)
        # A batch that meets the corrupt record fails as a whole: nothing applied.
        with pytest.raises(StoreCorrupt):
            store.commit_batch(
                [CommitUnit(removals=[remove(queue, 2)]), CommitUnit(removals=[remove(queue, 1)])],
                now=2.0,
            )
        assert lookups(store, queue, skip={1}) == [2, 3]
        assert counters(store, "q") == (4, 3, 300)
        # And the store goes on working.
        outcome = store.commit_batch(
            [CommitUnit(removals=[remove(queue, 2)], sends=[send(queue)])], now=3.0
        )
        assert outcome[0].error is None
        assert outcome[0].sends[0].lookup_id == 4


def test_empty_batch_and_empty_unit(store: Store) -> None:
    assert store.commit_batch([], now=0.0) == []
    outcome = store.commit_batch([CommitUnit()], now=0.0)
    assert outcome[0].error is None
    assert outcome[0].sends == ()
    assert outcome[0].removed == ()
