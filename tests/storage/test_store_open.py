"""Opening, closing and reopening a store; schema and corruption checks; settings."""

from __future__ import annotations

import errno
import uuid
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest

import storage
from storage import (
    CommitUnit,
    MessageRecord,
    NewMessage,
    SchemaMismatch,
    Store,
    StoreClosed,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
)
from storage._errors import translate_lmdb_error, translate_os_error
from storage._keys import DB_META, META_SCHEMA_VERSION, u32


def message(body: bytes = b"x" * 256) -> MessageRecord:
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
        destination="orders",
    )


def test_reopen_keeps_guid_queues_messages_and_counters(tmp_path: Path) -> None:
    with Store(tmp_path / "qm", durable=False) as store:
        guid = store.qm_guid
        queue = store.create_queue(name="orders", display_name="Orders", quota=10_000, now=5.0)
        outcome = store.commit_batch(
            [CommitUnit(sends=[NewMessage(queue_id=queue.queue_id, record=message())] * 3)], now=6.0
        )[0]
        store.set_setting("qm_name", "alpha")
        before = store.list_queues()
    assert guid != uuid.UUID(int=0)

    with Store(tmp_path / "qm", durable=False) as store:
        assert store.qm_guid == guid
        assert store.list_queues() == before
        assert store.get_setting("qm_name") == "alpha"
        stored = store.read_range(queue.queue_id)
        assert [(s.lookup_id, s.record) for s in outcome.sends] == stored
        reopened = store.get_queue("orders")
        assert reopened is not None
        assert (reopened.depth, reopened.bytes, reopened.next_lookup_id) == (3, 768, 4)


def test_new_stores_get_different_guids(tmp_path: Path) -> None:
    with Store(tmp_path / "a", durable=False) as a, Store(tmp_path / "b", durable=False) as b:
        assert a.qm_guid != b.qm_guid
        assert a.path == tmp_path / "a"


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    Store(tmp_path, durable=False).close()
    with lmdb.open(str(tmp_path), max_dbs=16) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            txn.put(META_SCHEMA_VERSION, u32(2), db=meta)
    with pytest.raises(SchemaMismatch) as caught:
        Store(tmp_path, durable=False)
    assert (caught.value.found, caught.value.supported) == (2, 1)
    # The failed open released the directory.
    with lmdb.open(str(tmp_path), max_dbs=16) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            txn.put(META_SCHEMA_VERSION, u32(1), db=meta)
    Store(tmp_path, durable=False).close()


def test_garbage_meta_is_corrupt(tmp_path: Path) -> None:
    Store(tmp_path, durable=False).close()
    with lmdb.open(str(tmp_path), max_dbs=16) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            txn.put(META_SCHEMA_VERSION, b"\x01", db=meta)
    with pytest.raises(StoreCorrupt):
        Store(tmp_path, durable=False)


def test_not_an_lmdb_file_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "data.mdb").write_bytes(b"this is not an LMDB file" * 1000)
    with pytest.raises(StoreCorrupt):
        Store(tmp_path, durable=False)


def test_closed_store_raises_store_closed(tmp_path: Path) -> None:
    store = Store(tmp_path, durable=False)
    queue = store.create_queue(name="q", display_name="q", now=0.0)
    store.close()
    store.close()  # idempotent
    calls: list[Callable[[], object]] = [
        lambda: store.get_queue("q"),
        lambda: store.get_queue_by_id(queue.queue_id),
        lambda: store.list_queues(),
        lambda: store.read_message(queue.queue_id, 1),
        lambda: store.read_range(queue.queue_id),
        lambda: store.first_available(queue.queue_id),
        lambda: store.first_available(queue.queue_id, by_priority=True),
        lambda: store.commit_batch([CommitUnit()], now=0.0),
        lambda: store.create_queue(name="r", display_name="r", now=0.0),
        lambda: store.delete_queue("q"),
        lambda: store.purge_queue(queue.queue_id),
        lambda: store.get_setting("k"),
        lambda: store.set_setting("k", "v"),
        lambda: store.map_size,
    ]
    for call in calls:
        with pytest.raises(StoreClosed):
            call()


def test_second_open_of_one_directory_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False):
        with pytest.raises(StoreLocked):
            Store(tmp_path, durable=False)
    Store(tmp_path, durable=False).close()


def test_dropping_an_unclosed_store_releases_the_directory(tmp_path: Path) -> None:
    store = Store(tmp_path, durable=False)
    store.create_queue(name="q", display_name="q", now=0.0)
    del store
    with Store(tmp_path, durable=False) as again:
        assert again.get_queue("q") is not None


def test_settings(tmp_path: Path) -> None:
    with Store(tmp_path, durable=False) as store:
        assert store.get_setting("missing") is None
        store.set_setting("name", "qm-日本")
        store.set_setting("name", "qm-ünï")
        assert store.get_setting("name") == "qm-ünï"
        with pytest.raises(storage.InvalidRecord):
            store.set_setting("", "x")
        with pytest.raises(storage.InvalidRecord):
            store.get_setting("k" * 600)


def test_durable_store_opens_and_commits(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        queue = store.create_queue(name="q", display_name="q", now=0.0)
        outcome = store.commit_batch(
            [CommitUnit(sends=[NewMessage(queue_id=queue.queue_id, record=message())])], now=1.0
        )
        assert outcome[0].error is None


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Store("/nonexistent-never-created", initial_map_size=0)
    with pytest.raises(ValueError):
        Store("/nonexistent-never-created", initial_map_size=1 << 20, max_map_size=1 << 10)


def test_error_translation() -> None:
    disk = lmdb.DiskError("mdb_txn_commit", errno.ENOSPC)
    assert isinstance(translate_lmdb_error(disk, "commit"), StoreFull)
    quota = lmdb.Error("mdb_txn_commit", errno.EDQUOT)
    quota.code = errno.EDQUOT  # type: ignore[misc]
    assert isinstance(translate_lmdb_error(quota, "commit"), StoreFull)
    for corrupt in (
        lmdb.CorruptedError("x"),
        lmdb.PageNotFoundError("x"),
        lmdb.InvalidError("x"),
        lmdb.VersionMismatchError("x"),
    ):
        assert isinstance(translate_lmdb_error(corrupt, "read"), StoreCorrupt)
    other = translate_lmdb_error(lmdb.ReadersFullError("too many readers"), "read")
    assert type(other) is StoreError
    assert "too many readers" in str(other)
    assert isinstance(translate_os_error(OSError(errno.ENOSPC, "full"), "open"), StoreFull)
    assert isinstance(translate_os_error(OSError(errno.EDQUOT, "quota"), "open"), StoreFull)
    assert type(translate_os_error(OSError(errno.EACCES, "denied"), "open")) is StoreError


def _open_seconds(path: Path) -> float:
    import time

    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        Store(path).close()
        best = min(best, time.perf_counter() - started)
    return best


def test_opening_does_not_read_the_messages(tmp_path: Path) -> None:
    empty, full = tmp_path / "empty", tmp_path / "full"
    for path, batches in ((empty, 0), (full, 500)):
        with Store(path, durable=False) as store:
            queue = store.create_queue(name="q", display_name="q", transactional=True, now=1.0)
            unit = CommitUnit(
                sends=tuple(
                    NewMessage(queue_id=queue.queue_id, record=message()) for _ in range(100)
                )
            )
            for _ in range(batches):
                store.commit_batch([unit], now=1.0)
    with Store(full) as store:
        assert store.get_queue("q").depth == 50_000  # type: ignore[union-attr]
    # 50,000 messages (about 20 MB) open as fast as none: start-up reads only
    # the meta record and the queue records.
    assert _open_seconds(full) < 3 * _open_seconds(empty) + 0.005
