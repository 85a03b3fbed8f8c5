"""Group commit: concurrent submitters share batches; a failed batch fails whole."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

import storage
from qmgr.server.committer import Committer
from storage import CommitOutcome, CommitUnit, Store


class CountingStore:
    """A real store that remembers how many units each batch carried."""

    def __init__(self, path: Path) -> None:
        self.store = Store(path, durable=False)
        self.batches: list[int] = []
        self.fail_next = False

    def commit_batch(self, units: Sequence[CommitUnit], *, now: float) -> list[CommitOutcome]:
        self.batches.append(len(units))
        if self.fail_next:
            self.fail_next = False
            raise storage.StoreFull("disk full (simulated)")
        return self.store.commit_batch(units, now=now)


@pytest.fixture
def counting(tmp_path: Path) -> CountingStore:
    return CountingStore(tmp_path / "store")


async def test_a_lone_submitter_commits_at_once(counting: CountingStore) -> None:
    committer = Committer(counting, others_may_join=lambda: False)  # type: ignore[arg-type]
    for _ in range(3):
        outcome = await committer.submit(CommitUnit())
        assert outcome.error is None
    assert counting.batches == [1, 1, 1]


async def test_concurrent_submitters_share_batches(counting: CountingStore) -> None:
    committer = Committer(counting)  # type: ignore[arg-type]
    results: list[CommitOutcome] = []

    async def client() -> None:
        for _ in range(5):
            results.append(await committer.submit(CommitUnit()))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(client)
    assert len(results) == 40
    assert sum(counting.batches) == 40
    # Eight tasks ready at once are written together, not one sync each.
    assert max(counting.batches) >= 4
    assert len(counting.batches) < 40


async def test_a_failed_batch_fails_every_unit_in_it(counting: CountingStore) -> None:
    committer = Committer(counting)  # type: ignore[arg-type]
    errors: list[BaseException] = []

    async def client() -> None:
        try:
            await committer.submit(CommitUnit())
        except storage.StoreFull as exc:
            errors.append(exc)

    counting.fail_next = True
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(client)
    assert counting.batches[0] == 3
    assert len(errors) == 3
    # The committer goes on working after a failed batch.
    assert (await committer.submit(CommitUnit())).error is None


async def test_a_cancelled_submitter_still_learns_the_outcome(counting: CountingStore) -> None:
    committer = Committer(counting)  # type: ignore[arg-type]
    seen: list[CommitOutcome] = []

    async def follower() -> None:
        seen.append(await committer.submit(CommitUnit()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follower)
        nursery.start_soon(follower)
        await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    # Once handed over, a unit is applied and its submitter is told, cancelled or not.
    assert len(seen) == 2
    assert sum(counting.batches) == 2
