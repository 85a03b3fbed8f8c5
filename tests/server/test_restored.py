"""Preparing a restored data directory (``qmgr.server.restored``) on real stores:
the result, and each refusal with nothing changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import lmdb
import pytest

import storage
from qmgr.config import load_config
from qmgr.server import StartupError
from qmgr.server.restored import renew_after_restore
from storage.keys import DB_INCOMING, incoming_key

NOW = 2_000_000_000.0


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "qm"
    with storage.Store(path) as store:
        record = storage.RecordIncoming(bytes(16), "orders", 7 << 32 | 1, 3, 0, 1.0)
        [outcome] = store.commit([storage.Unit((record,))], now=1.0)
        assert outcome.error is None
    return path


def test_the_store_is_renewed_in_one_write_once(data_dir: Path) -> None:
    config = load_config(data_dir=str(data_dir))
    restored = renew_after_restore(config, now=NOW)
    result = restored.renewed
    assert (result.outgoing, result.retired, result.streams, result.already) == (0, 0, 1, False)
    assert restored.in_doubt == ()
    with storage.Store(data_dir) as store:
        [state] = store.incoming_states()
        assert state.resync
        assert store.ordinal_limit == result.ordinal_limit
    # Run again before the queue manager started: nothing moves (another jump of
    # 2**31 would bring the ids back where the backup stood).
    again = renew_after_restore(config, now=NOW + 60).renewed
    assert again.already
    assert again.ordinal_limit == result.ordinal_limit


def test_each_restore_of_one_backup_moves_the_ids_by_an_amount_of_its_own(
    data_dir: Path, tmp_path: Path
) -> None:
    backup = tmp_path / "backup"
    shutil.copytree(data_dir, backup)
    limits = set()
    for attempt in range(3):  # the same backup restored again and again
        restored = tmp_path / f"restored-{attempt}"
        shutil.copytree(backup, restored)
        config = load_config(data_dir=str(restored))
        limits.add(renew_after_restore(config, now=NOW).renewed.ordinal_limit)
    assert len(limits) == 3


def test_transactions_in_doubt_are_named(data_dir: Path) -> None:
    with storage.Store(data_dir) as store:
        prepare = storage.PrepareTransaction("xid-1", (), (), created_at=1.0)
        [outcome] = store.commit([storage.Unit((prepare,))], now=1.0)
        assert outcome.error is None
    restored = renew_after_restore(load_config(data_dir=str(data_dir)), now=NOW)
    assert restored.in_doubt == ("xid-1",)


def test_a_store_that_cannot_be_read_is_refused_and_left_as_it_was(data_dir: Path) -> None:
    with lmdb.open(str(data_dir), max_dbs=32, subdir=True) as env:
        incoming = env.open_db(DB_INCOMING)
        with env.begin(write=True) as txn:
            txn.put(incoming_key(bytes(16), 9, "other"), b"\x07garbage", db=incoming)
    with pytest.raises(StartupError, match=f"the store in {data_dir} was not changed"):
        renew_after_restore(load_config(data_dir=str(data_dir)), now=NOW)
    with storage.Store(data_dir) as store:
        limit = store.ordinal_limit
    assert limit < storage.ORDINAL_JUMP


def test_a_directory_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    (tmp_path / "qm").mkdir()
    (tmp_path / "qm" / "data.mdb").write_bytes(b"")
    with pytest.raises(StartupError, match="cannot open the store"):
        renew_after_restore(load_config(data_dir=str(tmp_path / "qm")), now=NOW)
