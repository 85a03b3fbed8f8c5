"""Map growth: transparent doubling, and StoreFull with nothing applied at the limit."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from storage import CommitUnit, MessageRecord, NewMessage, Removal, Store, StoreFull

KIB = 1 << 10
MIB = 1 << 20


def message(body: bytes) -> MessageRecord:
    return MessageRecord(
        message_id_qm=uuid.UUID(int=1),
        message_id_ordinal=0,
        label="m",
        body=body,
        correlation_id=b"",
        app_specific=0,
        priority=3,
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


def test_map_grows_transparently(tmp_path: Path) -> None:
    with Store(tmp_path, initial_map_size=256 * KIB, durable=False) as store:
        assert store.map_size == 256 * KIB
        queue = store.create_queue(name="q", display_name="q", now=0.0)
        big = NewMessage(queue_id=queue.queue_id, record=message(bytes(range(256)) * 16))  # 4 KiB
        for _ in range(20):
            outcome = store.commit_batch([CommitUnit(sends=[big] * 25)], now=1.0)
            assert outcome[0].error is None
        large = NewMessage(queue_id=queue.queue_id, record=message(b"L" * (3 * MIB)))
        assert store.commit_batch([CommitUnit(sends=[large])], now=2.0)[0].error is None
        assert store.map_size > 4 * MIB
        record = store.get_queue("q")
        assert record is not None
        assert (record.depth, record.next_lookup_id) == (501, 502)
        grown = store.map_size
    with Store(tmp_path, initial_map_size=256 * KIB, durable=False) as store:
        assert store.map_size == grown  # an existing store keeps its size
        stored = store.read_range(queue.queue_id, limit=1000)
        assert [lookup for lookup, _ in stored] == list(range(1, 502))
        assert stored[-1][1].body == b"L" * (3 * MIB)


def test_full_map_raises_store_full_with_nothing_applied(tmp_path: Path) -> None:
    with Store(tmp_path, initial_map_size=256 * KIB, max_map_size=1 * MIB, durable=False) as store:
        queue = store.create_queue(name="q", display_name="q", now=0.0)
        small = NewMessage(queue_id=queue.queue_id, record=message(b"s" * 1000))
        first = store.commit_batch([CommitUnit(sends=[small] * 10)], now=1.0)
        assert first[0].error is None
        before = store.get_queue("q")
        huge = NewMessage(queue_id=queue.queue_id, record=message(b"h" * (2 * MIB)))
        with pytest.raises(StoreFull):
            store.commit_batch(
                [CommitUnit(sends=[small]), CommitUnit(sends=[huge]), CommitUnit(sends=[small])],
                now=2.0,
            )
        assert store.map_size == 1 * MIB
        # Nothing of the batch was applied, in the file or in the cache.
        assert store.get_queue("q") == before
        assert [lookup for lookup, _ in store.read_range(queue.queue_id)] == list(range(1, 11))
        # Smaller writes still work and continue the sequences.
        after = store.commit_batch([CommitUnit(sends=[small])], now=3.0)[0]
        assert after.error is None
        assert after.sends[0].lookup_id == 11
        assert after.sends[0].record.message_id_ordinal == 11
        # Fill the map with small messages until it is full, then free space.
        with pytest.raises(StoreFull):
            for _ in range(1000):
                store.commit_batch([CommitUnit(sends=[small] * 20)], now=4.0)
        full = store.get_queue("q")
        assert full is not None
        assert len(store.read_range(queue.queue_id, limit=10_000)) == full.depth
        assert store.purge_queue(queue.queue_id) == full.depth
        assert store.commit_batch([CommitUnit(sends=[small] * 20)], now=5.0)[0].error is None
    with Store(tmp_path, durable=False) as store:
        record = store.get_queue("q")
        assert record is not None
        assert record.depth == 20
        assert len(store.read_range(queue.queue_id)) == 20


def test_store_full_for_other_writes(tmp_path: Path) -> None:
    with Store(
        tmp_path, initial_map_size=256 * KIB, max_map_size=512 * KIB, durable=False
    ) as store:
        queue = store.create_queue(name="q", display_name="q", now=0.0)
        with pytest.raises(StoreFull):
            store.set_setting("big", "v" * (600 * KIB))
        assert store.get_setting("big") is None
        store.set_setting("small", "v")
        outcome = store.commit_batch(
            [CommitUnit(sends=[NewMessage(queue_id=queue.queue_id, record=message(b"x"))])], now=1.0
        )[0]
        removal = Removal(
            queue_id=queue.queue_id, lookup_id=outcome.sends[0].lookup_id, journal=True
        )
        assert store.commit_batch([CommitUnit(removals=[removal])], now=2.0)[0].error is None
