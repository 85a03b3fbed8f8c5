"""Preparing a restored data directory (``qmgr.server.restored``) on real stores:
the result, and each refusal with nothing changed."""

from __future__ import annotations

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


def test_the_store_is_renewed_in_one_write(data_dir: Path) -> None:
    result = renew_after_restore(load_config(data_dir=str(data_dir)), now=NOW)
    assert (result.outgoing, result.retired, result.streams) == (0, 0, 1)
    with storage.Store(data_dir) as store:
        [state] = store.incoming_states()
        assert state.resync
        assert store.ordinal_limit == result.ordinal_limit


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
