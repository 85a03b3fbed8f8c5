"""Fixtures of the daemon's adapter tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qmgr.certs import init_ca
from storage import Store


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A deployment CA in the test's directory (``ca.crt``, ``ca.key``): its folder."""
    init_ca(tmp_path / "pki")
    return tmp_path / "pki"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An empty, non-durable store in the test's directory (``store``), closed afterwards."""
    with Store(tmp_path / "store", initial_map_size=1 << 22, durable=False) as opened:
        yield opened
