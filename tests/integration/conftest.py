"""Fixtures of the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from pki import Pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    """A certificate authority of this test's own, issuing as asked."""
    return Pki(tmp_path / "pki")
