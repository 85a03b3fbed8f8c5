"""Fixtures of the client tests: a scripted daemon on a real port."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from fake_daemon import FakeDaemon


@pytest.fixture
def fake_daemon() -> Iterator[FakeDaemon]:
    """A :class:`FakeDaemon` with two outgoing queues and one incoming sequence."""
    with contextlib.closing(FakeDaemon()) as daemon:
        yield daemon
