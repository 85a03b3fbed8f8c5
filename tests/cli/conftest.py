"""Fixtures of the command-line tests.

The commands run in-process with click's runner. They talk to a scripted
daemon on a real port (:class:`fake_daemon.FakeDaemon`, shared with the SDK's
tests, beside which it lives in ``tests/client``, answering with the sample values
of ``tests/wire/wire_samples.py``), or, where a command needs
a real queue manager, to the session's ``shared_daemon``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent / "client"))
sys.path.append(str(Path(__file__).resolve().parent.parent / "wire"))

from fake_daemon import FakeDaemon


@pytest.fixture
def fake_daemon() -> Iterator[FakeDaemon]:
    """A :class:`FakeDaemon` with two outgoing queues and one incoming sequence."""
    with contextlib.closing(FakeDaemon()) as daemon:
        yield daemon
