"""Fixtures of the client-side tests (their helpers are in ``kit``).

``services`` is the daemon's parts over a fresh store with the committer
running; ``conn`` is a greeted session on them with its client;
``authorization`` turns queue permissions on for them (``kit.enable_permissions``).
A test that needs other limits, or several sessions, opens them with ``kit``.
The sample values of the client protocol are those of the wire tests
(``tests/wire/wire_samples.py``): their folder joins ``sys.path``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "wire"))

from kit import Connection, enable_permissions, open_services, open_session

from qmgr.server.client.authorization import Authorization
from qmgr.server.client.services import Services


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    """The daemon's parts a session uses, over a store in the test's directory."""
    async with open_services(tmp_path / "s") as opened:
        yield opened


@pytest.fixture
async def conn(services: Services) -> AsyncIterator[Connection]:
    """A greeted session on ``services``, and its client."""
    async with open_session(services) as opened:
        yield opened


@pytest.fixture
def authorization(services: Services) -> Authorization:
    """Queue permissions on ``services``: root administers, carol is in ops."""
    return enable_permissions(services)
