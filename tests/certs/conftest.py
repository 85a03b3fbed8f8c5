"""Fixtures of the tests of ``qmgr.certs``: a CA in the test's directory, and a queue
manager's and a client's certificates it issued (helpers are in ``certs_kit``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.certs import CaPaths, IssuedPaths, init_ca, issue

from .certs_kit import QM_ADDRESS, QM_HOST


@pytest.fixture
def ca(tmp_path: Path) -> CaPaths:
    return init_ca(tmp_path / "ca")


@pytest.fixture
def qm(ca: CaPaths) -> IssuedPaths:
    return issue(ca.cert.parent, "qm1", hosts=[QM_HOST, QM_ADDRESS])


@pytest.fixture
def alice(ca: CaPaths) -> IssuedPaths:
    return issue(ca.cert.parent, "alice", kind="client")
