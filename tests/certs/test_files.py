"""Reading and atomic writing (``qmgr.certs.files``): the modes of what ``init_ca`` and
``issue`` write, a failed write leaving nothing behind, and the functions called directly."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from qmgr.certs import (
    CaPaths,
    CertsError,
    ExistingFilesError,
    IssuedPaths,
    issue,
)
from qmgr.certs.files import make_private_directory, read_file, refuse_existing, write_atomically

from .certs_kit import QM_HOST, mode


def test_files_and_modes(tmp_path: Path, ca: CaPaths, qm: IssuedPaths) -> None:
    directory = tmp_path / "ca"
    assert mode(directory) == 0o700
    assert mode(ca.key) == mode(qm.key) == 0o600
    assert not mode(ca.cert) & (stat.S_IWGRP | stat.S_IWOTH)
    assert sorted(os.listdir(directory)) == ["ca.crt", "ca.key", "qm1.crt", "qm1.key"]
    assert qm.ca_cert == ca.cert
    assert qm.key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_a_failed_write_leaves_no_temporary_file(ca: CaPaths) -> None:
    (ca.cert.parent / "qm1.crt").mkdir()
    with pytest.raises(CertsError, match=r"cannot write .*qm1\.crt"):
        issue(ca.cert.parent, "qm1", hosts=[QM_HOST], force=True)
    assert sorted(os.listdir(ca.cert.parent)) == ["ca.crt", "ca.key", "qm1.crt", "qm1.key"]


# --------------------------------------------------------------------------
# The functions called directly
# --------------------------------------------------------------------------


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def test_read_file_names_what_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "there").write_bytes(b"contents")
    assert read_file(tmp_path / "there") == b"contents"
    with pytest.raises(CertsError, match=r"missing: no such file$"):
        read_file(tmp_path / "missing")
    with pytest.raises(CertsError, match=r"^\S+: Is a directory$"):
        read_file(tmp_path)


def test_refuse_existing_names_only_the_files_that_exist(tmp_path: Path) -> None:
    there, also, absent = tmp_path / "a.key", tmp_path / "a.crt", tmp_path / "b.crt"
    refuse_existing([there, also, absent], force=False)  # none exists yet
    there.write_bytes(b"")
    with pytest.raises(ExistingFilesError, match=r"a\.key exists already, not replaced") as one:
        refuse_existing([there, absent], force=False)
    assert one.value.paths == (there,)
    also.write_bytes(b"")
    with pytest.raises(ExistingFilesError, match=r"a\.key and .*a\.crt exist already") as two:
        refuse_existing([there, absent, also], force=False)
    assert two.value.paths == (there, also)
    refuse_existing([there, also], force=True)


def test_make_private_directory(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"
    make_private_directory(directory)
    assert mode(directory) == 0o700
    make_private_directory(directory)  # already there
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(CertsError, match=r"cannot create .*file/sub: Not a directory"):
        make_private_directory(tmp_path / "file" / "sub")


def test_write_atomically_replaces_the_file_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "x.crt"
    write_atomically(path, b"first")
    assert path.read_bytes() == b"first"
    assert mode(path) == 0o644 & ~current_umask()
    write_atomically(path, b"second", private=True)
    assert path.read_bytes() == b"second"
    assert mode(path) == 0o600  # a new file, not the old one rewritten
    write_atomically(path, b"")
    assert path.read_bytes() == b""
    assert os.listdir(tmp_path) == ["x.crt"]


def test_write_atomically_leaves_nothing_when_it_fails(tmp_path: Path) -> None:
    with pytest.raises(CertsError, match=r"cannot write .*missing/x\.key: No such file"):
        write_atomically(tmp_path / "missing" / "x.key", b"key", private=True)
    (tmp_path / "x.key").mkdir()
    with pytest.raises(CertsError, match=r"cannot write .*x\.key: Is a directory"):
        write_atomically(tmp_path / "x.key", b"key", private=True)
    assert os.listdir(tmp_path) == ["x.key"]
    assert os.listdir(tmp_path / "x.key") == []
