"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from authorization_kit import Deployment, started_deployment
from pki import Pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    """A certificate authority of this test's own, issuing as asked."""
    return Pki(tmp_path / "pki")


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The authorization matrix's four queue managers (:mod:`authorization_kit`),
    started once for its test modules."""
    with started_deployment(tmp_path_factory.mktemp("matrix")) as found:
        yield found
