"""The catalog (``storage.catalog``): what opening reads, reopening, the schema
check, and meta values, queue records or counters that do not decode."""

from __future__ import annotations

import uuid
from pathlib import Path

import lmdb
import pytest
from store_kit import (
    BODY,
    Reopener,
    StoreOpener,
    commit_ok,
    counters,
    create_queue,
    delete_raw,
    fill,
    payloads,
    put_raw,
    raw_lmdb,
    unit,
)

import storage.catalog
from storage import (
    SCHEMA_VERSION,
    SchemaMismatch,
    SetSetting,
    Store,
    StoreCorrupt,
)
from storage.keys import (
    DB_META,
    DB_QUEUES,
    META_NEXT_QUEUE_ID,
    META_ORDINAL_LIMIT,
    META_QM_GUID,
    META_SCHEMA_VERSION,
    counters_key,
    message_key,
    u32,
)


def test_reopen_keeps_guid_queues_messages_counters_and_settings(
    store: Store, reopen: Reopener
) -> None:
    guid = store.qm_guid
    queue = create_queue(store, "orders", display_name="Orders", quota=10_000, created_at=5.0)
    fill(store, queue, 3)
    commit_ok(store, unit(SetSetting("qm_name", "alpha")))
    before = store.list_queues()
    assert guid != uuid.UUID(int=0)

    again = reopen(store)
    assert again.qm_guid == guid
    assert again.list_queues() == before
    assert again.get_setting("qm_name") == "alpha"
    assert payloads(again, queue) == [BODY] * 3
    assert counters(again, "orders") == (4, 3, 300)


def test_new_stores_get_different_guids_and_report_their_path(
    open_store: StoreOpener, tmp_path: Path
) -> None:
    a, b = open_store(tmp_path / "a"), open_store(tmp_path / "b")
    assert a.qm_guid != b.qm_guid
    assert (a.path, b.path) == (tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize(("found", "relation"), [(SCHEMA_VERSION + 1, "newer"), (1, "older")])
def test_other_schema_version_is_refused_and_releases_the_directory(
    open_store: StoreOpener, store_dir: Path, found: int, relation: str
) -> None:
    open_store().close()
    put_raw(store_dir, DB_META, META_SCHEMA_VERSION, u32(found))
    with pytest.raises(SchemaMismatch, match=relation) as caught:
        open_store(reserve_size=64 * 1024)
    assert (caught.value.found, caught.value.supported) == (found, SCHEMA_VERSION)
    assert not (store_dir / "reserve").exists()  # nothing written into a refused store
    # The failed open released the directory: it can be repaired and opened.
    put_raw(store_dir, DB_META, META_SCHEMA_VERSION, u32(SCHEMA_VERSION))
    open_store().close()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (META_SCHEMA_VERSION, b"\x02"),
        (META_NEXT_QUEUE_ID, b"\x00\x01"),
        (META_ORDINAL_LIMIT, b"\x01"),
        (META_QM_GUID, b"short"),
    ],
    ids=["schema_version", "next_queue_id", "ordinal_limit", "qm_guid"],
)
def test_meta_value_that_does_not_decode_is_corrupt(
    open_store: StoreOpener, store_dir: Path, key: bytes, value: bytes
) -> None:
    open_store().close()
    put_raw(store_dir, DB_META, key, value)
    with pytest.raises(StoreCorrupt):
        open_store()


@pytest.mark.parametrize("key", [META_QM_GUID, META_NEXT_QUEUE_ID, META_ORDINAL_LIMIT])
def test_missing_meta_value_is_corrupt(
    open_store: StoreOpener, store_dir: Path, key: bytes
) -> None:
    open_store().close()
    delete_raw(store_dir, DB_META, key)
    with pytest.raises(StoreCorrupt, match="incomplete"):
        open_store()


def test_queues_without_a_schema_version_are_corrupt(store: Store, store_dir: Path) -> None:
    create_queue(store, "q")
    store.close()
    delete_raw(store_dir, DB_META, META_SCHEMA_VERSION)
    with pytest.raises(StoreCorrupt, match="no schema version"):
        Store(store_dir, durable=False)


def test_queue_without_counters_is_corrupt(store: Store, store_dir: Path) -> None:
    queue = create_queue(store, "q")
    store.close()
    delete_raw(store_dir, None, counters_key(queue.queue_id))
    with pytest.raises(StoreCorrupt, match="no counters"):
        Store(store_dir, durable=False)


@pytest.mark.parametrize("damaged", ["record", "counters"])
def test_garbage_queue_record_or_counters_are_corrupt(
    store: Store, store_dir: Path, damaged: str
) -> None:
    queue = create_queue(store, "q")
    store.close()
    if damaged == "record":
        put_raw(store_dir, DB_QUEUES, b"q", b"garbage")
    else:
        put_raw(store_dir, None, counters_key(queue.queue_id), b"garbage")
    with pytest.raises(StoreCorrupt):
        Store(store_dir, durable=False)


def test_opening_reads_queues_and_counters_but_no_message(
    store: Store, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = create_queue(store, "q")
    lookup_ids = fill(store, queue, 50)
    store.close()
    # Every message record becomes garbage: opening must not notice.
    with raw_lmdb(store_dir) as env, env.begin(write=True) as txn:
        for lookup_id in lookup_ids:
            txn.put(message_key(queue.queue_id, lookup_id), b"garbage")
    walked: list[object] = []
    original = storage.catalog._items

    def spy(txn: lmdb.Transaction, db: object) -> object:
        walked.append(db)
        return original(txn, db)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.catalog, "_items", spy)
    again = Store(store_dir, durable=False)
    try:
        dbs = again._catalog.dbs
        # Opening walks the queues, the deleted queues and the outgoing states,
        # never the messages (nor the incoming streams or the message history).
        assert walked == [dbs.queues, dbs.doomed, dbs.outgoing]
        assert counters(again, "q") == (51, 50, 5000)
    finally:
        again.close()
