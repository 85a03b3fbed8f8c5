"""The committer: batches, where they are written, and an outcome for every unit.

These tests use a real store; the writer runs on its thread where the test
says so. They use trio's real clock: the writer thread's results arrive from
outside the event loop, which a mock clock cannot jump over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from server.committer_kit import running_committer

import storage
from qmgr.core.errors import ShuttingDown
from qmgr.server import committer as committer_module
from qmgr.server.committer import Committer
from qmgr.server.writer import Writer
from storage import AppendMessage, CreateQueue, Store, Unit, UnitOutcome


@pytest.fixture
def store(store: Store) -> Store:
    """The server tests' store (``conftest.py``), with a transactional queue ``q``."""
    store.commit([Unit((CreateQueue("q", "q", transactional=True),))], now=0.0)
    return store


def append(store: Store, body: bytes = b"x") -> Unit:
    queue = store.get_queue("q")
    assert queue is not None
    return Unit((AppendMessage(queue.queue_id, body, 0, len(body)),))


class Spy:
    """Counts the batches the store plans, and can make the next one fail."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batches: list[int] = []
        self.fail_with: BaseException | None = None
        committing = store.committing

        def spy(units: Any, *, now: float) -> Any:
            self.batches.append(len(units))
            if self.fail_with is not None:
                error, self.fail_with = self.fail_with, None
                raise error
            return committing(units, now=now)

        monkeypatch.setattr(store, "committing", spy)


@pytest.fixture
def handed_over(monkeypatch: pytest.MonkeyPatch) -> list[storage.Plan]:
    """The plans handed to the writer during the test (a unit written by its
    submitter on its own task is not)."""
    plans: list[storage.Plan] = []
    apply = Writer.apply

    async def spy(self: Writer, plan: storage.Plan) -> storage.StoreError | None:
        plans.append(plan)
        return await apply(self, plan)

    monkeypatch.setattr(Writer, "apply", spy)
    return plans


@pytest.fixture
def active_for_5s(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections heard from in the last 5 s count as active, however slow the machine."""
    monkeypatch.setattr(committer_module, "QUIET_SECONDS", 5.0)


async def test_a_lone_submitter_writes_at_once_on_its_own_task(
    store: Store, handed_over: list[storage.Plan]
) -> None:
    async with running_committer(store, thread=True) as committer:
        for _ in range(3):
            outcome = await committer.submit(append(store), source=1)
            assert outcome.error is None
        # Written by the submitter on its own task, not handed to the thread.
        assert handed_over == []
        # The daemon's own work (source 0) always goes through the batches, so
        # that a loop of erase steps lets the clients' requests in between.
        outcome = await committer.submit(append(store))
        assert outcome.error is None
        assert len(handed_over) == 1
    assert committer.batches == 4
    queue = store.get_queue("q")
    assert queue is not None
    assert queue.depth == 4


@pytest.mark.parametrize(
    ("interval", "inline"),
    [
        # Its reads come a second apart: not expected before this write ends.
        pytest.param(1.0, True, id="paced"),
        # Its reads come 0.1 ms apart: expected now, so the unit waits to share a batch.
        pytest.param(0.0001, False, id="in-a-loop"),
    ],
)
@pytest.mark.usefixtures("active_for_5s")
async def test_a_commit_waits_only_for_the_connections_expected_before_it_would_end(
    store: Store, handed_over: list[storage.Plan], interval: float, inline: bool
) -> None:
    async with running_committer(store, thread=False) as committer:
        # Another connection, heard from 1 ms ago, and the time before that.
        now = trio.current_time()
        committer.note_read(2, now - 0.001 - interval)
        committer.note_read(2, now - 0.001)
        committer.note_read(1, now)
        outcome = await committer.submit(append(store), source=1)
        assert outcome.error is None
    assert len(handed_over) == (0 if inline else 1)


@pytest.mark.parametrize(
    ("interval", "batches"),
    [
        # Its requests come 10 s apart (a producer at a steady pace): not waited
        # for, its next unit goes in a batch of its own.
        pytest.param(10.0, [1, 1], id="paced"),
        # They come at once: waited for, its next unit shares the batch.
        pytest.param(0.0, [2], id="in-a-loop"),
    ],
)
@pytest.mark.usefixtures("active_for_5s")
async def test_a_batch_waits_only_for_the_connections_expected_in_time(
    store: Store, monkeypatch: pytest.MonkeyPatch, interval: float, batches: list[int]
) -> None:
    # A long gathering, so that waiting shows as a shared batch.
    monkeypatch.setattr(committer_module, "GATHER_LIMIT", 0.2)
    monkeypatch.setattr(committer_module, "GATHER_SHARE", 1e9)
    async with running_committer(store, thread=False) as committer:
        # A first write, whose duration the gathering takes its share of.
        assert (await committer.submit(append(store))).error is None
        # Connection 2's last two reads, ``interval`` apart.
        first = trio.current_time()
        committer.note_read(2, first)
        committer.note_read(2, first + interval)
        spy = Spy(store, monkeypatch)

        async def connection_2() -> None:
            await trio.sleep(0.01)
            committer.note_read(2, trio.current_time())
            assert (await committer.submit(append(store), source=2)).error is None

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(connection_2)
                # Written at once if connection 2 is not expected before it ends,
                # else gathered with connection 2's next unit.
                committer.note_read(1, trio.current_time())
                assert (await committer.submit(append(store), source=1)).error is None
    assert spy.batches == batches


async def commit_of_a_consumer(
    committer: Committer, store: Store, *, receive_before: bool
) -> float:
    """Connection 2 commits, and 0.2 s later commits again (its units' pace),
    after a receive read 0.1 ms before that commit's read if ``receive_before``;
    returns when the second commit was read."""
    committer.note_read(2, trio.current_time())
    assert (await committer.submit(append(store), source=2)).error is None
    await trio.sleep(0.2)
    read = trio.current_time()
    if receive_before:
        committer.note_read(2, read - 0.0001)
    assert (await committer.submit(append(store), source=2)).error is None
    committer.note_read(2, read)  # the commit's read, noted once it is answered
    return read


@pytest.mark.usefixtures("active_for_5s")
async def test_a_connection_that_reads_twice_in_a_transaction_is_expected_at_its_pace_of_units(
    store: Store, handed_over: list[storage.Plan]
) -> None:
    # A consumer: a receive, then the commit 0.1 ms later, then a wait for the
    # next message. Its reads are 0.1 ms apart, but its commits 0.2 s apart: a
    # producer's commit after the consumer's does not wait for it.
    async with running_committer(store, thread=False) as committer:
        await commit_of_a_consumer(committer, store, receive_before=True)
        committer.note_read(1, trio.current_time())
        assert (await committer.submit(append(store), source=1)).error is None
    # Every unit was written at once by its submitter.
    assert handed_over == []


@pytest.mark.usefixtures("active_for_5s")
async def test_the_receive_after_a_commit_is_expected_at_the_pace_of_units_too(
    store: Store, handed_over: list[storage.Plan]
) -> None:
    # A consumer that is behind: its next receive finds a message at once,
    # right after its commit. That read's interval does not say when it commits
    # next either: a producer's commit, once that interval has passed, does not
    # wait for it.
    async with running_committer(store, thread=False) as committer:
        commit_read = await commit_of_a_consumer(committer, store, receive_before=False)
        receive_read = trio.current_time()
        committer.note_read(2, receive_read)
        # Past the time the pace of its reads would expect it (that of its
        # units: 0.2 s on).
        await trio.sleep(2 * (receive_read - commit_read) + 0.01)
        committer.note_read(1, trio.current_time())
        assert (await committer.submit(append(store), source=1)).error is None
    assert handed_over == []


@pytest.mark.parametrize("thread", [True, False])
async def test_concurrent_submitters_share_batches(
    store: Store, monkeypatch: pytest.MonkeyPatch, thread: bool
) -> None:
    spy = Spy(store, monkeypatch)
    results: list[UnitOutcome] = []
    async with running_committer(store, thread=thread) as committer:

        async def client(source: int) -> None:
            for _ in range(10):
                committer.note_read(source, trio.current_time())
                results.append(await committer.submit(append(store), source=source))

        async with trio.open_nursery() as nursery:
            for source in range(1, 9):
                nursery.start_soon(client, source)
    assert len(results) == 80
    assert all(outcome.error is None for outcome in results)
    assert committer.units == 80
    # Eight clients at once share syncs instead of taking one each.
    assert committer.batches < 80
    assert max(spy.batches) >= 4


@pytest.mark.parametrize(
    ("failure", "seen", "says"),
    [
        pytest.param(
            storage.StoreFull("disk full (simulated)"), storage.StoreFull, "disk full", id="store"
        ),
        pytest.param(
            RuntimeError("a bug in the write path"), storage.StoreError, "internal error", id="bug"
        ),
    ],
)
async def test_a_failed_batch_fails_every_unit_in_it_and_the_committer_goes_on(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    failure: BaseException,
    seen: type[storage.StoreError],
    says: str,
) -> None:
    """The store's own errors and unexpected ones alike: every unit gets an outcome."""
    spy = Spy(store, monkeypatch)
    failures: list[BaseException] = []
    with trio.fail_after(10):
        async with running_committer(store, thread=True) as committer:

            async def client(source: int) -> None:
                committer.note_read(source, trio.current_time())
                try:
                    await committer.submit(append(store), source=source)
                except seen as exc:
                    failures.append(exc)

            spy.fail_with = failure
            for source in range(1, 5):  # all four are busy: their units queue together
                committer.note_read(source, trio.current_time())
            async with trio.open_nursery() as nursery:
                for source in range(1, 5):
                    nursery.start_soon(client, source)
            assert len(failures) == 4
            assert says in str(failures[0])
            assert (await committer.submit(append(store))).error is None
        # ...and stopping did not hang.


async def test_a_cancelled_submitter_still_learns_the_outcome(store: Store) -> None:
    seen: list[UnitOutcome] = []
    async with running_committer(store, thread=True) as committer:

        async def submitter(source: int) -> None:
            committer.note_read(source, trio.current_time())
            seen.append(await committer.submit(append(store), source=source))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(submitter, 1)
            nursery.start_soon(submitter, 2)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    # Once handed over, a unit is written and its submitter is told, cancelled or not.
    assert len(seen) == 2
    queue = store.get_queue("q")
    assert queue is not None
    assert queue.depth == 2


async def test_a_stopped_committer_refuses_new_units(store: Store) -> None:
    async with running_committer(store, thread=False) as committer:
        pass
    with pytest.raises(ShuttingDown):
        await committer.submit(append(store))


async def test_units_a_full_store_refuses_are_logged_at_once_then_once_a_minute(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    small = Store(tmp_path / "small", initial_map_size=1 << 20, max_map_size=2 << 20)
    with small:
        small.commit([Unit((CreateQueue("q", "q", transactional=True),))], now=0.0)
        body = b"x" * 60_000
        with structlog.testing.capture_logs() as logs:
            async with running_committer(small) as committer:
                refused = 0
                for _ in range(100):
                    if (await committer.submit(append(small, body))).error is not None:
                        refused += 1
                assert refused > 10  # the store filled, and refused the rest
                warned = [e for e in logs if e["event"] == "store_full"]
                assert [(e["log_level"], e["refused"]) for e in warned] == [("warning", 1)]
                assert "store.max_map_size" in warned[0]["error"]
                await trio.sleep(committer_module.FULL_LOG_SECONDS)
                assert (await committer.submit(append(small, body))).error is not None
        warned = [e for e in logs if e["event"] == "store_full"]
        assert [e["refused"] for e in warned] == [1, refused]  # the ones since, and the new one
