"""The poison worker (``qmgr.server.workers.poison``) over a real store and committer:
it writes what aborts decided as soon as they wake it, returns messages from
``;retry`` when they are due, pauses until then (or looks again while transactions
hold them), logs each move, and releases what a failed write would have moved."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import structlog
import trio
import trio.testing
from core.harness import CoreHarness

import storage
from qmgr.server.committer import Committer
from qmgr.server.workers.poison import MAX_SLEEP, RETRY_SECONDS, PoisonWorker
from qmgr.server.workers.worker import UNTIL_WOKEN

from .conftest import RecordingSignals, TrioWall


def create(qm: CoreHarness, retry_count: int = 0, retry_delay: float = 10.0) -> None:
    settings = storage.PoisonSettings(
        retry_count=retry_count, retry_cycles=1, retry_delay=retry_delay
    )
    qm.create("p", transactional=True, poison=settings)
    qm.send_tx("p", b"bad")


def abort_receive(qm: CoreHarness, queue: str = "p") -> None:
    tx = qm.begin()
    assert qm.take(queue, tx) is not None
    qm.core.abort(tx)


@pytest.fixture
def worker(
    qm: CoreHarness, committer: Committer, signals: RecordingSignals, real_wall: TrioWall
) -> PoisonWorker:
    return PoisonWorker(core=qm.core, committer=committer, signals=signals, wall=real_wall)


async def test_a_message_goes_to_retry_comes_back_when_due_then_to_poison(
    qm: CoreHarness,
    worker: PoisonWorker,
    signals: RecordingSignals,
    autojump_clock: trio.testing.MockClock,
) -> None:
    create(qm)
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker.run)
            abort_receive(qm)  # wakes the worker
            await trio.sleep(1.0)
            assert qm.bodies("p;retry") == [b"bad"]
            assert qm.core.queue("p;retry").queue_id in signals.woken
            await trio.sleep(9.5)
            assert qm.bodies("p") == [b"bad"]  # back after the delay
            abort_receive(qm)  # its one retry cycle is spent
            await trio.sleep(1.0)
            assert qm.bodies("p;poison") == [b"bad"]
            nursery.cancel_scope.cancel()
    moves = [(log["event"], log["log_level"], log["to"]) for log in logs]
    assert moves == [
        ("message_moved_to_retry", "info", "p;retry"),
        ("message_returned_from_retry", "info", "p"),
        ("message_moved_to_poison", "warning", "p;poison"),
    ]


@pytest.mark.parametrize("in_transaction", [False, True], ids=["by-request", "in-transaction"])
async def test_a_message_moved_into_retry_by_request_comes_back_when_due(
    qm: CoreHarness,
    worker: PoisonWorker,
    committer: Committer,
    autojump_clock: trio.testing.MockClock,
    in_transaction: bool,
) -> None:
    create(qm, retry_delay=10.0)
    moves = qm.core.moves
    source, target = moves.move_queues("p", "p;retry")
    assert target is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run)
        await trio.testing.wait_all_tasks_blocked()  # nothing due: waiting until woken
        if in_transaction:
            tx = qm.begin()
            assert moves.move_one(source, target, lookup_id=0, tx=tx, now=0.0) is not None
            unit = qm.core.commit(tx)
            outcome = await committer.submit(unit)
            assert qm.core.commit_done(tx, unit, outcome)[1] is None
        else:
            held = moves.move_one(source, target, lookup_id=0, tx=None, now=0.0)
            assert held is not None
            assert held[1] is not None
            outcome = await committer.submit(held[1])
            assert moves.move_done(source.queue_id, [held[0]], outcome)[0] == 1
        assert qm.bodies("p;retry") == [b"bad"]
        await trio.sleep(9.5)
        assert qm.bodies("p;retry") == [b"bad"]  # not due yet
        await trio.sleep(1.0)
        assert qm.bodies("p") == [b"bad"]  # back after the queue's retry delay
        nursery.cancel_scope.cancel()


async def test_an_abort_below_the_retry_count_is_counted(
    qm: CoreHarness, worker: PoisonWorker
) -> None:
    create(qm, retry_count=2)
    abort_receive(qm)
    assert await worker.step() == UNTIL_WOKEN
    [(lookup_id, _)] = qm.visible("p")
    queue_id = qm.core.queue("p").queue_id
    assert qm.store.message_counters(queue_id, (lookup_id,))[lookup_id].abort_count == 1


async def test_it_pauses_until_the_next_return_but_at_most_max_sleep(
    qm: CoreHarness, worker: PoisonWorker, autojump_clock: trio.testing.MockClock
) -> None:
    create(qm, retry_delay=30.0)
    assert await worker.step() == UNTIL_WOKEN  # nothing waits in ;retry
    abort_receive(qm)
    assert await worker.step() == pytest.approx(30.0, abs=0.5)
    qm.create("slow", transactional=True, poison=storage.PoisonSettings(0, 1, 3600.0))
    await trio.sleep(30.5)
    qm.send_tx("slow", b"x")
    abort_receive(qm, "slow")
    assert await worker.step() == MAX_SLEEP  # "bad" came back; "x" is an hour away
    assert qm.bodies("p") == [b"bad"]


async def test_a_due_message_a_transaction_holds_is_looked_at_again_soon(
    qm: CoreHarness, worker: PoisonWorker, autojump_clock: trio.testing.MockClock
) -> None:
    create(qm, retry_delay=5.0)
    abort_receive(qm)
    await worker.step()
    tx = qm.begin()
    assert qm.take("p;retry", tx) is not None  # received from ;retry, in a transaction
    await trio.sleep(5.5)
    assert await worker.step() == RETRY_SECONDS
    qm.core.abort(tx)
    assert await worker.step() == UNTIL_WOKEN
    assert qm.bodies("p") == [b"bad"]


async def test_a_failed_write_releases_the_message_it_would_have_moved(
    qm: CoreHarness, worker: PoisonWorker, fail_batches: Callable[[int], None]
) -> None:
    create(qm)
    abort_receive(qm)
    fail_batches(1)
    with structlog.testing.capture_logs() as logs:
        await worker.step()
    assert "poison_handling_write_failed" in [log["event"] for log in logs]
    assert qm.bodies("p;retry") == []
    assert qm.take("p") is not None  # released, not held


async def test_a_move_skipped_with_its_unit_logs_why_the_unit_failed(
    qm: CoreHarness, worker: PoisonWorker
) -> None:
    create(qm)
    queue = qm.core.queue("p")
    move = storage.MoveMessage(queue.queue_id, 1, queue.queue_id, reason=storage.MoveReason.RETRY)
    with structlog.testing.capture_logs() as logs:
        worker._log_move(move, storage.SKIPPED, storage.StoreFull("the disk is full"))
        worker._log_move(move, storage.SKIPPED, None)
    assert [(log["event"], log["error"]) for log in logs] == [
        ("poison_move_failed", "the disk is full"),
        ("poison_move_failed", "Skipped"),
    ]
