"""Fixtures of the daemon's adapter tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.certs import init_ca


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A deployment CA in the test's directory (``ca.crt``, ``ca.key``): its folder."""
    init_ca(tmp_path / "pki")
    return tmp_path / "pki"
