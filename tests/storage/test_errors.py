"""The errors (``storage.errors``): every error is a StoreError, LMDB and OS
errors are translated, and a full disk (or a reached file size limit) is told
apart from a real I/O error on a failed write."""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path
from types import SimpleNamespace

import lmdb
import pytest

import storage
import storage.errors
from storage import StoreCorrupt, StoreError, StoreFull
from storage.errors import (
    DISK_NEARLY_FULL,
    translate_lmdb_error,
    translate_os_error,
    translate_write_error,
)

PLENTY = 1 << 40


def lmdb_error(cls: type[lmdb.Error], code: int) -> lmdb.Error:
    """An LMDB error carrying a return code, as LMDB itself raises them."""
    exc = cls("mdb_txn_commit", code)
    exc.code = code  # type: ignore[misc]
    return exc


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.mdb"
    path.write_bytes(b"\0" * 4096)
    return path


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The free space and RLIMIT_FSIZE the translation sees; plenty and unlimited
    unless a test changes them. ``asked`` counts the free space look-ups."""
    state = SimpleNamespace(free=PLENTY, limit=resource.RLIM_INFINITY, asked=0)

    def statvfs(path: object) -> SimpleNamespace:
        state.asked += 1
        return SimpleNamespace(f_bavail=state.free, f_frsize=1)

    def getrlimit(which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_FSIZE
        return state.limit, state.limit

    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(resource, "getrlimit", getrlimit)
    return state


# --------------------------------------------------------------------------- reads and opening


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG], ids=errno.errorcode.get)
def test_lmdb_space_errors_are_store_full(code: int) -> None:
    assert isinstance(translate_lmdb_error(lmdb_error(lmdb.Error, code), "commit"), StoreFull)


def test_lmdb_disk_and_map_full_errors_are_store_full() -> None:
    assert isinstance(translate_lmdb_error(lmdb.DiskError("x"), "commit"), StoreFull)
    assert isinstance(translate_lmdb_error(lmdb.MapFullError("x"), "commit"), StoreFull)


@pytest.mark.parametrize(
    "cls",
    [lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError, lmdb.VersionMismatchError],
)
def test_lmdb_corruption_errors_are_store_corrupt(cls: type[lmdb.Error]) -> None:
    assert isinstance(translate_lmdb_error(cls("x"), "read"), StoreCorrupt)


def test_other_lmdb_errors_are_plain_store_errors_that_say_what_happened() -> None:
    error = translate_lmdb_error(lmdb.ReadersFullError("too many readers"), "read_range")
    assert type(error) is StoreError
    assert "read_range" in str(error)
    assert "too many readers" in str(error)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.ENOSPC, StoreFull),
        (errno.EDQUOT, StoreFull),
        (errno.EFBIG, StoreFull),
        (errno.EACCES, StoreError),
        (errno.EIO, StoreError),
    ],
)
def test_os_errors_while_opening(code: int, expected: type[StoreError]) -> None:
    error = translate_os_error(OSError(code, os.strerror(code)), "open store")
    assert type(error) is expected
    assert str(error).startswith("open store: ")


# --------------------------------------------------------------------------- failed writes


@pytest.mark.parametrize(
    "code", [errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EFBIG], ids=errno.errorcode.get
)
def test_space_errors_on_a_nearly_full_file_system_are_store_full(
    disk: SimpleNamespace, data_file: Path, code: int
) -> None:
    disk.free = DISK_NEARLY_FULL - 1
    error = translate_write_error(lmdb_error(lmdb.Error, code), "commit", data_file)
    assert isinstance(error, StoreFull)
    assert f"{DISK_NEARLY_FULL - 1} bytes free" in str(error)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC, errno.EFBIG], ids=errno.errorcode.get)
def test_space_errors_at_the_file_size_limit_are_store_full(
    disk: SimpleNamespace, data_file: Path, code: int
) -> None:
    disk.limit = 4096 + DISK_NEARLY_FULL - 1
    error = translate_write_error(lmdb_error(lmdb.Error, code), "commit", data_file)
    assert isinstance(error, StoreFull)
    assert "file size limit" in str(error)


def test_eio_with_room_and_no_limit_is_an_io_error(disk: SimpleNamespace, data_file: Path) -> None:
    error = translate_write_error(lmdb_error(lmdb.Error, errno.EIO), "commit", data_file)
    assert type(error) is StoreError
    assert disk.asked == 1


def test_eio_below_the_file_size_limit_is_an_io_error(
    disk: SimpleNamespace, data_file: Path
) -> None:
    disk.limit = 4096 + DISK_NEARLY_FULL
    error = translate_write_error(lmdb_error(lmdb.Error, errno.EIO), "commit", data_file)
    assert type(error) is StoreError


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG], ids=errno.errorcode.get)
def test_errors_that_claim_a_full_disk_stay_store_full_with_room(
    disk: SimpleNamespace, data_file: Path, code: int
) -> None:
    error = translate_write_error(lmdb_error(lmdb.Error, code), "commit", data_file)
    assert isinstance(error, StoreFull)
    assert "bytes free" not in str(error)


def test_map_full_is_store_full_without_looking_at_the_disk(
    disk: SimpleNamespace, data_file: Path
) -> None:
    error = translate_write_error(lmdb.MapFullError("x"), "commit", data_file)
    assert isinstance(error, StoreFull)
    assert disk.asked == 0


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (lmdb.CorruptedError("x"), StoreCorrupt),
        (lmdb.ReadersFullError("x"), StoreError),
        (lmdb_error(lmdb.Error, errno.EACCES), StoreError),
    ],
)
def test_errors_unrelated_to_space_ignore_a_full_disk(
    disk: SimpleNamespace, data_file: Path, exc: lmdb.Error, expected: type[StoreError]
) -> None:
    disk.free = 0
    assert type(translate_write_error(exc, "commit", data_file)) is expected
    assert disk.asked == 0


def test_eio_when_the_file_system_cannot_be_asked_is_an_io_error(
    monkeypatch: pytest.MonkeyPatch, data_file: Path
) -> None:
    def broken(path: object) -> object:
        raise OSError(errno.EIO, "statvfs failed")

    monkeypatch.setattr(os, "statvfs", broken)
    error = translate_write_error(lmdb_error(lmdb.Error, errno.EIO), "commit", data_file)
    assert type(error) is StoreError


def test_eio_without_a_data_file_is_an_io_error(disk: SimpleNamespace, tmp_path: Path) -> None:
    disk.free = 0
    missing = tmp_path / "missing" / "data.mdb"
    error = translate_write_error(lmdb_error(lmdb.Error, errno.EIO), "commit", missing)
    assert type(error) is StoreError


def test_a_write_transaction_failing_with_eio_on_a_full_disk_is_store_full(
    disk: SimpleNamespace, tmp_path: Path
) -> None:
    from storage.environment import Environment

    env = Environment(
        tmp_path, initial_map_size=1 << 20, max_map_size=None, durable=False, reserve_size=0
    )
    try:

        def work(txn: object) -> None:
            raise lmdb_error(lmdb.Error, errno.EIO)

        with pytest.raises(StoreError) as roomy:
            env.write("commit", work)
        assert type(roomy.value) is StoreError
        disk.free = 0
        with pytest.raises(StoreFull, match="0 bytes free"):
            env.write("commit", work)
    finally:
        env.close()


def test_every_error_is_a_store_error() -> None:
    errors = [
        value
        for value in vars(storage.errors).values()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert len(errors) == 20
    for error in errors:
        assert issubclass(error, storage.StoreError), error
    exported = [value for value in vars(storage).values() if isinstance(value, type)]
    assert {value for value in exported if issubclass(value, Exception)} == set(errors)
    assert issubclass(storage.InvalidRecord, ValueError)
