"""Fixtures of the client tests: a scripted daemon on a real port.

The sample values the daemon answers with, and the tests compare with, are those of
the wire tests (``tests/wire/wire_samples.py``): their folder joins ``sys.path``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent / "wire"))

from fake_daemon import FakeDaemon


@pytest.fixture
def fake_daemon() -> Iterator[FakeDaemon]:
    """A :class:`FakeDaemon` with two outgoing queues and one incoming sequence."""
    with contextlib.closing(FakeDaemon()) as daemon:
        yield daemon
