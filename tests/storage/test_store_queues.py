"""Queue creation, deletion, purge and listing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import (
    CommitUnit,
    InvalidOperation,
    InvalidRecord,
    MessageRecord,
    NewMessage,
    QueueExists,
    QueueKind,
    QueueMissing,
    Removal,
    Store,
)


def message(body: bytes = b"x" * 100, priority: int = 3) -> MessageRecord:
    return MessageRecord(
        message_id_qm=uuid.UUID(int=1),
        message_id_ordinal=0,
        label="m",
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
        source_qm=uuid.UUID(int=1),
        transactional=False,
        destination="q",
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path, durable=False) as opened:
        yield opened


def fill(store: Store, queue_id: int, count: int, body: bytes = b"x" * 100) -> None:
    units = [CommitUnit(sends=[NewMessage(queue_id=queue_id, record=message(body))] * count)]
    assert store.commit_batch(units, now=2.0)[0].error is None


def test_create_normal_queue_creates_its_journal(store: Store) -> None:
    queue = store.create_queue(
        name="orders",
        display_name="Orders",
        transactional=True,
        journal=True,
        quota=4096,
        now=12.5,
    )
    assert queue.name == "orders"
    assert queue.display_name == "Orders"
    assert queue.kind is QueueKind.NORMAL
    assert (queue.transactional, queue.journal, queue.quota) == (True, True, 4096)
    assert (queue.next_lookup_id, queue.depth, queue.bytes) == (1, 0, 0)
    assert queue.created_at == 12.5
    assert queue.parent_id is None
    journal = store.get_queue("orders;journal")
    assert journal is not None
    assert queue.journal_id == journal.queue_id
    assert journal.kind is QueueKind.JOURNAL
    assert journal.display_name == "Orders;journal"
    assert journal.parent_id == queue.queue_id
    assert (journal.transactional, journal.journal, journal.quota) == (True, False, None)
    assert journal.journal_id is None
    assert store.get_queue_by_id(queue.queue_id) == queue
    assert store.get_queue_by_id(journal.queue_id) == journal


def test_system_queues_have_no_journal(store: Store) -> None:
    dead = store.create_queue(
        name="system$;deadletter",
        display_name="system$;deadletter",
        kind=QueueKind.DEADLETTER,
        now=0.0,
    )
    xact = store.create_queue(
        name="system$;deadxact",
        display_name="system$;deadxact",
        kind=QueueKind.DEADXACT,
        transactional=True,
        now=0.0,
    )
    assert dead.journal_id is None
    assert xact.journal_id is None
    assert [q.name for q in store.list_queues()] == ["system$;deadletter", "system$;deadxact"]


def test_journal_queue_cannot_be_created_on_its_own(store: Store) -> None:
    with pytest.raises(InvalidOperation):
        store.create_queue(
            name="x;journal", display_name="x;journal", kind=QueueKind.JOURNAL, now=0.0
        )


def test_queue_exists(store: Store) -> None:
    store.create_queue(name="orders", display_name="orders", now=0.0)
    with pytest.raises(QueueExists) as caught:
        store.create_queue(name="orders", display_name="ORDERS", now=0.0)
    assert caught.value.name == "orders"
    # A queue whose journal name is taken cannot be created either.
    store.create_queue(name="system$;x", display_name="x", kind=QueueKind.DEADLETTER, now=0.0)
    store.create_queue(name="a", display_name="a", now=0.0)
    with pytest.raises(QueueExists):
        store.create_queue(
            name="a;journal", display_name="a;journal", kind=QueueKind.DEADLETTER, now=0.0
        )


def test_bad_names_and_quota(store: Store) -> None:
    with pytest.raises(InvalidRecord):
        store.create_queue(name="", display_name="", now=0.0)
    with pytest.raises(InvalidRecord):
        store.create_queue(name="q" * 510, display_name="q", now=0.0)
    with pytest.raises(InvalidRecord):
        store.create_queue(name="q", display_name="q", quota=-1, now=0.0)
    assert store.list_queues() == []


def test_list_queues_is_ordered_by_name(store: Store) -> None:
    for name in ("zeta", "alpha", "mid"):
        store.create_queue(name=name, display_name=name, now=0.0)
    assert [q.name for q in store.list_queues()] == [
        "alpha",
        "alpha;journal",
        "mid",
        "mid;journal",
        "zeta",
        "zeta;journal",
    ]


def test_delete_queue_removes_queue_journal_and_messages(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False) as store:
        queue = store.create_queue(name="orders", display_name="orders", now=0.0)
        other = store.create_queue(name="other", display_name="other", now=0.0)
        assert queue.journal_id is not None
        fill(store, queue.queue_id, 3)
        fill(store, other.queue_id, 2)
        store.commit_batch(
            [CommitUnit(removals=[Removal(queue_id=queue.queue_id, lookup_id=1, journal=True)])],
            now=3.0,
        )
        assert store.delete_queue("orders") == 3  # 2 left in the queue + 1 in its journal
        assert store.get_queue("orders") is None
        assert store.get_queue("orders;journal") is None
        assert store.get_queue_by_id(queue.queue_id) is None
        assert store.read_range(queue.queue_id) == []
        assert store.read_range(queue.journal_id) == []
        assert store.first_available(queue.queue_id, by_priority=True) is None
        assert len(store.read_range(other.queue_id)) == 2
        with pytest.raises(QueueMissing):
            store.delete_queue("orders")
        # Ids are never reused; the name can be used again.
        again = store.create_queue(name="orders", display_name="orders", now=0.0)
        assert again.queue_id > other.queue_id
        assert again.next_lookup_id == 1
    with Store(tmp_path, durable=False) as store:
        assert [q.name for q in store.list_queues()] == [
            "orders",
            "orders;journal",
            "other",
            "other;journal",
        ]
        assert store.read_range(again.queue_id) == []


def test_journal_queue_cannot_be_deleted_on_its_own(store: Store) -> None:
    store.create_queue(name="orders", display_name="orders", now=0.0)
    with pytest.raises(InvalidOperation):
        store.delete_queue("orders;journal")
    assert store.get_queue("orders;journal") is not None


def test_purge_queue(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False) as store:
        queue = store.create_queue(name="orders", display_name="orders", now=0.0)
        assert queue.journal_id is not None
        fill(store, queue.queue_id, 4)
        store.commit_batch(
            [CommitUnit(removals=[Removal(queue_id=queue.queue_id, lookup_id=1, journal=True)])],
            now=3.0,
        )
        assert store.purge_queue(queue.queue_id) == 3
        purged = store.get_queue("orders")
        assert purged is not None
        assert (purged.depth, purged.bytes, purged.next_lookup_id) == (0, 0, 5)
        assert store.read_range(queue.queue_id) == []
        assert store.first_available(queue.queue_id, by_priority=True) is None
        journal = store.get_queue_by_id(queue.journal_id)
        assert journal is not None
        assert journal.depth == 1
        assert len(store.read_range(queue.journal_id)) == 1
        fill(store, queue.queue_id, 1)
        assert [lookup for lookup, _ in store.read_range(queue.queue_id)] == [5]
        assert store.purge_queue(queue.journal_id) == 1
        with pytest.raises(QueueMissing):
            store.purge_queue(9999)
    with Store(tmp_path, durable=False) as store:
        reopened = store.get_queue("orders")
        assert reopened is not None
        assert (reopened.depth, reopened.bytes, reopened.next_lookup_id) == (1, 100, 6)


def test_purge_keeps_messages_in_keep(store: Store) -> None:
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    fill(store, queue.queue_id, 5)
    assert store.purge_queue(queue.queue_id, keep={2, 4}) == 3
    purged = store.get_queue("q")
    assert purged is not None
    assert (purged.depth, purged.bytes) == (2, 200)
    assert [lookup for lookup, _ in store.read_range(queue.queue_id)] == [2, 4]
    found = store.first_available(queue.queue_id, by_priority=True)
    assert found is not None
    assert found[0] == 2
    outcome = store.commit_batch(
        [CommitUnit(removals=[Removal(queue_id=queue.queue_id, lookup_id=2, journal=False)])],
        now=1.0,
    )
    assert outcome[0].error is None
    left = store.get_queue("q")
    assert left is not None
    assert (left.depth, left.bytes) == (1, 100)
