"""The errors of ``qmgr.certs``: one base class, and files that exist already named."""

from __future__ import annotations

from pathlib import Path

from qmgr.certs import CaNotFoundError, CertsError, ExistingFilesError


def test_every_error_is_a_certs_error() -> None:
    assert issubclass(CaNotFoundError, CertsError)
    assert issubclass(ExistingFilesError, CertsError)


def test_files_that_exist_already_are_named_in_the_message() -> None:
    one = ExistingFilesError([Path("pki/qm-a.crt")])
    assert str(one) == "pki/qm-a.crt exists already, not replaced"
    assert one.paths == (Path("pki/qm-a.crt"),)
    two = ExistingFilesError([Path("pki/ca.key"), Path("pki/ca.crt")])
    assert str(two) == "pki/ca.key and pki/ca.crt exist already, not replaced"
    assert two.paths == (Path("pki/ca.key"), Path("pki/ca.crt"))
