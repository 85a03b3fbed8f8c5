"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from authorization_kit import Deployment, started_deployment
from helpers import DaemonProcess
from pki import Pki

from qmgr.client import QueueManager, connect


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


@pytest.fixture
def qm(shared_daemon: DaemonProcess) -> Iterator[QueueManager]:
    """A blocking client of the shared daemon (the blocking SDK's tests)."""
    with connect(shared_daemon.address, client_name="test") as client:
        yield client


@pytest.fixture
def txq(qm: QueueManager, queue_name: str) -> str:
    """A transactional queue of this test's own."""
    qm.create_queue(queue_name, transactional=True)
    return queue_name


@pytest.fixture
def plainq(qm: QueueManager, queue_name: str) -> str:
    """A non-transactional queue of this test's own."""
    qm.create_queue(queue_name)
    return queue_name
