"""The store's files before LMDB maps them (``storage.data_files``): a new
``data.mdb`` is made whole or not at all."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

from storage.data_files import check_data_file, create_data_file
from storage.errors import StoreCorrupt, StoreError


def test_a_new_data_file_is_whole_and_its_scratch_gone(tmp_path: Path) -> None:
    create_data_file(tmp_path, 1 << 20)
    data = tmp_path / "data.mdb"
    assert data.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.mdb"]
    check_data_file(data)  # its meta pages are LMDB's, and it is as long as they say
    env = lmdb.open(str(tmp_path), subdir=True, map_size=1 << 20, lock=False)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()


def test_what_a_start_cut_short_left_is_cleared_and_no_empty_file_is_made(
    tmp_path: Path,
) -> None:
    """A crash between LMDB's creating the file and the rename leaves only the
    scratch directory: the next start makes the file afresh (nothing in it was
    ever acknowledged)."""
    scratch = tmp_path / "new-store"
    scratch.mkdir()
    (scratch / "data.mdb").write_bytes(b"")  # as a crash before LMDB's first write leaves it
    assert not (tmp_path / "data.mdb").exists()
    create_data_file(tmp_path, 1 << 20)
    assert not scratch.exists()
    assert (tmp_path / "data.mdb").stat().st_size > 0


def test_an_existing_data_file_is_left_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "data.mdb").write_bytes(b"")
    create_data_file(tmp_path, 1 << 20)
    assert (tmp_path / "data.mdb").stat().st_size == 0  # not replaced: refused when opened
    with pytest.raises(StoreCorrupt, match="is empty"):
        check_data_file(tmp_path / "data.mdb")


def test_a_data_file_that_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "new-store").write_bytes(b"in the way")  # the scratch directory cannot be made
    with pytest.raises(StoreError, match=f"create store {tmp_path}"):
        create_data_file(tmp_path, 1 << 20)
    assert not (tmp_path / "data.mdb").exists()
