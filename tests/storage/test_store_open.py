"""Opening, closing and reopening a store: the directory lock, the schema
check, corrupt files, settings, the ballast file, and what opening reads."""

from __future__ import annotations

import gc
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import pytest
from conftest import (
    BODY,
    KIB,
    Reopener,
    StoreOpener,
    append,
    ballast_in_place,
    commit_ok,
    counters,
    create_queue,
    fill,
    lookups,
    payloads,
    raw_lmdb,
    unit,
)

import storage._catalog
from storage import (
    SCHEMA_VERSION,
    InvalidRecord,
    SchemaMismatch,
    SetSetting,
    Store,
    StoreClosed,
    StoreCorrupt,
    StoreLocked,
)
from storage._keys import (
    DB_META,
    DB_QUEUES,
    META_NEXT_QUEUE_ID,
    META_ORDINAL_LIMIT,
    META_QM_GUID,
    META_SCHEMA_VERSION,
    counters_key,
    message_key,
    setting_key,
    u32,
)


def put_raw(path: Path, db_name: bytes | None, key: bytes, value: bytes) -> None:
    """Write one key of a closed store directly."""
    with raw_lmdb(path) as env:
        db = env.open_db(db_name)
        with env.begin(write=True) as txn:
            txn.put(key, value, db=db)


def delete_raw(path: Path, db_name: bytes | None, key: bytes) -> None:
    """Delete one key of a closed store directly."""
    with raw_lmdb(path) as env:
        db = env.open_db(db_name)
        with env.begin(write=True) as txn:
            assert txn.delete(key, db=db)


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


def test_new_store_directory_and_files_are_private(store: Store) -> None:
    assert stat.S_IMODE(store.path.stat().st_mode) & 0o077 == 0
    for name in ("data.mdb", "store.lock"):
        assert stat.S_IMODE((store.path / name).stat().st_mode) & 0o077 == 0, name


@pytest.mark.parametrize(("found", "relation"), [(SCHEMA_VERSION + 1, "newer"), (1, "older")])
def test_other_schema_version_is_refused_and_releases_the_directory(
    open_store: StoreOpener, store_dir: Path, found: int, relation: str
) -> None:
    open_store().close()
    put_raw(store_dir, DB_META, META_SCHEMA_VERSION, u32(found))
    with pytest.raises(SchemaMismatch, match=relation) as caught:
        open_store()
    assert (caught.value.found, caught.value.supported) == (found, SCHEMA_VERSION)
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


def test_a_file_that_is_not_lmdb_is_corrupt(open_store: StoreOpener, store_dir: Path) -> None:
    store_dir.mkdir()
    (store_dir / "data.mdb").write_bytes(b"this is not an LMDB file" * 1000)
    with pytest.raises(StoreCorrupt):
        open_store()
    # The failed open released the directory lock.
    with pytest.raises(StoreCorrupt):
        open_store()


def test_closed_store_raises_store_closed(store: Store) -> None:
    queue = create_queue(store, "q")
    [lookup_id] = fill(store, queue, 1)
    store.close()
    store.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: store.get_queue("q"),
        lambda: store.list_queues(),
        lambda: store.read_message(queue.queue_id, lookup_id),
        lambda: store.read_range(queue.queue_id),
        lambda: store.first_fifo(queue.queue_id, start=1, skip=()),
        lambda: store.first_by_priority(queue.queue_id, start=(0, 1), skip=()),
        lambda: store.commit([unit(append(queue))], now=1.0),
        lambda: store.get_setting("k"),
        lambda: store.map_size,
    ]
    for call in calls:
        with pytest.raises(StoreClosed):
            call()


def test_second_open_of_one_directory_is_refused_until_closed(
    store: Store, open_store: StoreOpener
) -> None:
    with pytest.raises(StoreLocked):
        open_store()
    store.close()
    open_store().close()


def test_dropping_an_unclosed_store_releases_the_directory(
    store_dir: Path, open_store: StoreOpener
) -> None:
    dropped = Store(store_dir, durable=False)
    create_queue(dropped, "q")
    del dropped
    gc.collect()
    assert open_store().get_queue("q") is not None


def test_settings_are_stored_replaced_and_kept(store: Store, reopen: Reopener) -> None:
    assert store.get_setting("missing") is None
    commit_ok(store, unit(SetSetting("name", "qm-日本")))
    commit_ok(store, unit(SetSetting("name", "qm-ünï"), SetSetting("other", "")))
    assert store.get_setting("name") == "qm-ünï"
    assert store.get_setting("other") == ""
    assert reopen(store).get_setting("name") == "qm-ünï"


@pytest.mark.parametrize("key", ["", "k" * 600])
def test_empty_or_too_long_setting_key_is_invalid_record(store: Store, key: str) -> None:
    [outcome] = store.commit([unit(SetSetting(key, "x"))], now=1.0)
    assert isinstance(outcome.error, InvalidRecord)
    with pytest.raises(InvalidRecord):
        store.get_setting(key)


def test_setting_that_is_not_utf8_is_corrupt(store: Store, reopen: Reopener) -> None:
    path = store.path
    store.close()
    put_raw(path, DB_META, setting_key("name"), b"\xff\xfe")
    with pytest.raises(StoreCorrupt, match="UTF-8"):
        reopen(store).get_setting("name")


def test_durable_store_commits_survive_reopen(open_store: StoreOpener, reopen: Reopener) -> None:
    store = open_store(durable=True)
    queue = create_queue(store, "q")
    fill(store, queue, 2)
    assert lookups(reopen(store, durable=True), queue) == [1, 2]


@pytest.mark.parametrize(
    "options",
    [
        {"initial_map_size": 0},
        {"initial_map_size": 1 << 20, "max_map_size": 1 << 10},
        {"reserve_size": -1},
    ],
)
def test_bad_sizes_are_value_errors(store_dir: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Store(store_dir, **options)
    assert not store_dir.exists()


def test_ballast_file_holds_the_reserve_and_is_restored(
    open_store: StoreOpener, store_dir: Path
) -> None:
    store = open_store(reserve_size=100 * KIB)
    ballast = store_dir / "reserve"
    assert store.has_ballast
    assert ballast.stat().st_blocks * 512 >= 100 * KIB
    ballast.unlink()
    assert not ballast_in_place(store)
    assert store.restore_ballast()
    assert ballast_in_place(store)
    assert ballast.stat().st_blocks * 512 >= 100 * KIB


def test_no_ballast_without_a_reserve(store: Store) -> None:
    assert store.has_ballast
    assert store.restore_ballast()
    assert not (store.path / "reserve").exists()


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
    original = storage._catalog._items

    def spy(txn: lmdb.Transaction, db: object) -> object:
        walked.append(db)
        return original(txn, db)  # type: ignore[arg-type]

    monkeypatch.setattr(storage._catalog, "_items", spy)
    again = Store(store_dir, durable=False)
    try:
        dbs = again._catalog.dbs
        # Opening walks the queues, the deleted queues and the outgoing states,
        # never the messages (nor the incoming streams or the message history).
        assert walked == [dbs.queues, dbs.doomed, dbs.outgoing]
        assert counters(again, "q") == (51, 50, 5000)
    finally:
        again.close()
