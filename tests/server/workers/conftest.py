"""Fixtures of the workers' tests: a core over a real store, and a running committer.

``qm`` is the core's own test harness (``core.harness.CoreHarness``): a core
over a real store in the test's directory, with the queues a test sets up
written at once. ``committer`` runs over that store, writing on the event
loop (no thread, so that ``autojump_clock`` jumps over every pause),
``signals`` remembers which queues' readers were woken, and ``fail_batches``
makes the store's next batches fail whole, as an I/O error would. ``wall``
is unix time that moves with trio's clock, starting at the harness's
``WALL`` (the send time of its messages) or at ``time.time()``.

Every test that pauses names ``autojump_clock`` itself: pytest-trio runs a
test under a mock clock only when the test function asks for it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from core.harness import WALL, CoreHarness
from server.committer_kit import running_committer

import storage
from qmgr.server.committer import Committer
from qmgr.server.signals import QueueSignals


class RecordingSignals(QueueSignals):
    """Queue signals that remember every queue whose readers were woken."""

    def __init__(self) -> None:
        super().__init__()
        self.woken: set[int] = set()

    def notify(self, queue_ids: Iterable[int]) -> None:
        queue_ids = tuple(queue_ids)
        self.woken.update(queue_ids)
        super().notify(queue_ids)


class TrioWall:
    """Unix time ``origin`` plus trio's clock: under ``autojump_clock`` (which
    starts at 0) wall time that starts at ``origin`` and moves with it."""

    def __init__(self, origin: float) -> None:
        self.origin = origin

    def __call__(self) -> float:
        return self.origin + trio.current_time()


@pytest.fixture
def qm(tmp_path: Path) -> Iterator[CoreHarness]:
    """A core over a fresh store, with the system queues and ``q`` (transactional)."""
    harness = CoreHarness(tmp_path / "store")
    harness.create("q", transactional=True)
    yield harness
    harness.close()


@pytest.fixture
async def committer(qm: CoreHarness) -> AsyncIterator[Committer]:
    """The committer over ``qm``'s store, running."""
    async with running_committer(qm.store) as running:
        yield running


@pytest.fixture
def signals() -> RecordingSignals:
    return RecordingSignals()


@pytest.fixture
def wall() -> TrioWall:
    """Unix time from the harness's ``WALL`` on, moving with trio's clock."""
    return TrioWall(WALL)


@pytest.fixture
def real_wall() -> TrioWall:
    """Unix time from now on, moving with trio's clock (the store stamps what it
    writes with ``time.time()``: retry due times, for one)."""
    return TrioWall(time.time())


@pytest.fixture
def fail_batches(qm: CoreHarness, monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``fail_batches(n)``: the store's next ``n`` batches fail whole (nothing written)."""
    left = [0]
    committing = qm.store.committing

    def failing(units: Any, *, now: float) -> Any:
        if left[0]:
            left[0] -= 1
            raise storage.StoreError("I/O error (simulated)")
        return committing(units, now=now)

    monkeypatch.setattr(qm.store, "committing", failing)

    def fail(count: int) -> None:
        left[0] = count

    return fail
