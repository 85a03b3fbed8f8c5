"""The workers' skeleton (``qmgr.server.workers.worker``): the loop of steps and
pauses, wake-ups, the end at ``ShuttingDown``, and how a worker's unit is written
and handed back."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import trio
import trio.testing
from core.harness import CoreHarness

import storage
from qmgr.core.errors import ShuttingDown
from qmgr.server.committer import Committer
from qmgr.server.workers.worker import UNTIL_WOKEN, Worker, submit_unit
from qmgr.server.writer import Writer

from .conftest import RecordingSignals


class Scripted(Worker):
    """Steps that note trio's clock and return the pauses given, then stop."""

    def __init__(self, committer: Committer, pauses: list[float]) -> None:
        super().__init__(committer=committer, signals=None)
        self.pauses = pauses
        self.steps: list[float] = []

    async def step(self) -> float:
        self.steps.append(trio.current_time())
        if not self.pauses:
            raise ShuttingDown("done")
        return self.pauses.pop(0)


def append(qm: CoreHarness, body: bytes = b"x") -> storage.Unit:
    queue_id = qm.core.queue("q").queue_id
    return storage.Unit((storage.AppendMessage(queue_id, body, 0, len(body)),))


async def test_a_worker_pauses_as_its_step_says_and_a_wake_up_ends_a_pause(
    committer: Committer, autojump_clock: trio.testing.MockClock
) -> None:
    worker = Scripted(committer, [0.0, 5.0, UNTIL_WOKEN, 2.0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run)
        await trio.sleep(100.0)
        assert worker.steps == [0.0, 0.0, 5.0]  # at once, after 5 s, then until woken
        worker.wake()
        await trio.sleep(10.0)
    # Woken at 100 s; 2 s later the script ends with ShuttingDown, and so does run().
    assert worker.steps == [0.0, 0.0, 5.0, 100.0, 102.0]


async def test_a_wake_up_during_a_step_is_not_lost(
    committer: Committer, autojump_clock: trio.testing.MockClock
) -> None:
    class WokenWhileBusy(Scripted):
        async def step(self) -> float:
            pause = await super().step()
            if len(self.steps) == 1:
                await trio.sleep(1.0)
                self.wake()  # while the step runs
            return pause

    worker = WokenWhileBusy(committer, [math.inf])
    with trio.fail_after(5):
        await worker.run()
    assert worker.steps == [0.0, 1.0]


async def test_a_step_that_continues_at_once_lets_other_tasks_in(
    committer: Committer, autojump_clock: trio.testing.MockClock
) -> None:
    worker = Scripted(committer, [0.0] * 100)
    seen: list[int] = []

    async def other() -> None:
        while True:
            seen.append(len(worker.steps))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        await worker.run()
        nursery.cancel_scope.cancel()
    assert len(worker.steps) == 101
    assert len(set(seen)) > 50  # it ran between the worker's steps


async def test_a_unit_is_written_handed_back_and_its_queues_woken(
    qm: CoreHarness, committer: Committer, signals: RecordingSignals
) -> None:
    unit = append(qm)
    handed: list[storage.UnitOutcome | BaseException] = []

    def hand_back(result: storage.UnitOutcome | BaseException) -> set[int]:
        handed.append(result)
        return {7}

    written = await submit_unit(committer, unit, hand_back=hand_back, signals=signals)
    assert written.batch_error is None
    assert written.error is None
    assert isinstance(written.outcome.results[0], storage.Appended)
    assert handed == [written.outcome]
    assert signals.woken == {7}
    assert qm.core.queue("q").depth == 1
    assert committer.batches == 1  # the daemon's own work goes through a batch


async def test_a_failed_batch_is_handed_back_and_returned_not_raised(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    fail_batches: Callable[[int], None],
) -> None:
    unit = storage.Unit((*append(qm).ops, *append(qm).ops))
    handed: list[storage.UnitOutcome | BaseException] = []
    fail_batches(1)
    written = await submit_unit(
        committer, unit, hand_back=lambda result: handed.append(result), signals=signals
    )
    assert isinstance(written.batch_error, storage.StoreError)
    assert handed == [written.batch_error]
    assert written.error is written.batch_error
    assert written.outcome == storage.UnitOutcome.failed(unit, written.batch_error)
    assert signals.woken == set()
    assert qm.core.queue("q").depth == 0


async def test_shutting_down_is_handed_back_then_raised(qm: CoreHarness) -> None:
    stopped = Committer(qm.store, Writer(qm.store, thread=False))  # never run
    handed: list[storage.UnitOutcome | BaseException] = []
    with pytest.raises(ShuttingDown):
        await submit_unit(stopped, append(qm), hand_back=handed.append)
    assert len(handed) == 1
    assert isinstance(handed[0], ShuttingDown)


async def test_a_worker_ends_when_the_committer_has_stopped(qm: CoreHarness) -> None:
    class Writing(Worker):
        async def step(self) -> float:
            await self.submit(append(qm))
            return 0.0

    stopped = Committer(qm.store, Writer(qm.store, thread=False))
    with trio.fail_after(5):
        await Writing(committer=stopped, signals=None).run()
