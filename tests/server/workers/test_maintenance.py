"""Maintenance (``qmgr.server.workers.maintenance``) over a real store and committer:
idle transactions aborted, purged messages erased in steps (with message-id
reservations first, and the ballast put back), and outcomes of global transactions
pruned; what each does when a write fails, and how long each pauses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from core.harness import NEG_RECEIVE, WALL, CoreHarness, classes

import storage
from qmgr.core import two_phase
from qmgr.core.engine import QueueManagerCore
from qmgr.core.errors import InternalError
from qmgr.core.transactions import Transaction
from qmgr.server.committer import Committer
from qmgr.server.signals import Wakeup
from qmgr.server.workers.maintenance import (
    ERASE_RETRY_MAX_SECONDS,
    PRUNE_INTERVAL,
    READER_CHECK_INTERVAL,
    RETRY_SECONDS,
    Eraser,
    IdleSweeper,
    Maintenance,
    OutcomePruner,
    StaleReaders,
)
from qmgr.server.workers.worker import UNTIL_WOKEN
from wire import MessageClass

from .conftest import RecordingSignals, TrioWall


@dataclass
class Owner:
    """A connection that owns transactions and ends them itself (aborted, as a
    session does)."""

    core: QueueManagerCore
    ended: list[tuple[Transaction, str]] = field(default_factory=list)

    def end_transaction(self, tx: Transaction, reason: str) -> None:
        self.ended.append((tx, reason))
        self.core.abort(tx, reason)


@pytest.fixture
def eraser(qm: CoreHarness, committer: Committer, signals: RecordingSignals) -> Eraser:
    return Eraser(qm.store, qm.core, 2, Wakeup(), committer=committer, signals=signals)


def fill_and_purge(qm: CoreHarness, count: int) -> None:
    qm.create("admin")
    for index in range(count):
        qm.send_tx("q", b"%d" % index, acknowledge=NEG_RECEIVE, admin_queue="admin")
    qm.purge("q")


# ---------------------------------------------------------------------- idle transactions


async def test_an_idle_transaction_is_ended_by_its_owner_after_the_timeout(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    autojump_clock: trio.testing.MockClock,
) -> None:
    sweeper = IdleSweeper(qm.core, 5.0, committer=committer, signals=signals)
    owner = Owner(qm.core)
    tx = qm.core.begin(owner, client_id=1, now=trio.current_time())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sweeper.run)
        await trio.sleep(5.0)
        assert owner.ended == []
        await trio.sleep(1.5)  # swept once a second at most
        nursery.cancel_scope.cancel()
    assert owner.ended == [(tx, "idle timeout: no activity for more than 5 s")]


async def test_an_idle_transaction_without_such_an_owner_is_aborted_and_readers_woken(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    autojump_clock: trio.testing.MockClock,
) -> None:
    sweeper = IdleSweeper(qm.core, 0.1, committer=committer, signals=signals)
    qm.send_tx("q", b"held")
    tx = qm.core.begin(object(), client_id=1, now=trio.current_time())
    assert qm.core.take(qm.core.queue("q"), tx=tx, now=trio.current_time()) is not None
    await trio.sleep(0.2)
    assert await sweeper.step() == 0.05  # a quarter of the timeout
    assert tx.abort_reason == "idle timeout: no activity for more than 0.1 s"
    assert qm.core.queue("q").queue_id in signals.woken
    assert qm.take("q") is not None


# ---------------------------------------------------------------------- erasing


async def test_purged_messages_are_erased_in_steps_with_their_reports(
    qm: CoreHarness, eraser: Eraser, committer: Committer, signals: RecordingSignals
) -> None:
    fill_and_purge(qm, 5)
    assert await eraser.step() == UNTIL_WOKEN
    assert list(qm.store.queues_to_erase()) == []
    assert committer.batches == 3  # two messages a step
    assert classes(qm, "admin") == [MessageClass.NACK_Q_PURGED] * 5
    assert qm.core.queue("admin").queue_id in signals.woken


async def test_messages_an_open_transaction_holds_are_looked_at_again(
    qm: CoreHarness, eraser: Eraser
) -> None:
    qm.send_tx("q", b"held")
    qm.send_tx("q", b"free")
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    qm.purge("q")
    assert await eraser.step() == RETRY_SECONDS
    assert len(list(qm.store.queues_to_erase())) == 1
    qm.core.abort(tx)
    assert await eraser.step() == UNTIL_WOKEN
    assert list(qm.store.queues_to_erase()) == []


async def test_a_failed_erase_step_is_tried_again_later(
    qm: CoreHarness,
    eraser: Eraser,
    fail_batches: Callable[[int], None],
    autojump_clock: trio.testing.MockClock,
) -> None:
    fill_and_purge(qm, 1)
    fail_batches(1)
    with structlog.testing.capture_logs() as logs:
        assert await eraser.step() == RETRY_SECONDS
    assert "erase_failed" in [log["event"] for log in logs]
    assert await eraser.step() == pytest.approx(RETRY_SECONDS)  # woken early: not yet
    assert list(qm.store.queues_to_erase()) != []
    await trio.sleep(RETRY_SECONDS)
    assert await eraser.step() == UNTIL_WOKEN
    assert list(qm.store.queues_to_erase()) == []


async def test_erase_steps_failing_in_a_row_pause_longer_and_their_ballast_wakes_nothing(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A store at the process's file size limit: every erase step fails, and
    # each gives the ballast up on its way (the store does so while writing it).
    wakeup = Wakeup()
    eraser = Eraser(qm.store, qm.core, 2, wakeup, committer=committer, signals=signals)
    fill_and_purge(qm, 1)
    failing = [8]
    committing = qm.store.committing

    def full(units: Any, *, now: float) -> Any:
        if failing[0]:
            failing[0] -= 1
            qm.store.on_ballast_released()
            raise storage.StoreFull("commit: the store file reached the file size limit")
        return committing(units, now=now)

    monkeypatch.setattr(qm.store, "committing", full)
    pauses = []
    for _ in range(8):
        pause = await eraser.step()
        assert not wakeup._event.is_set()  # its own ballast woke nothing
        qm.store.on_ballast_released()  # another writer's, between steps, does
        assert wakeup._event.is_set()
        await wakeup.wait(0)
        pauses.append(pause)
        await trio.sleep(pause)
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert pauses[-1] == ERASE_RETRY_MAX_SECONDS
    assert await eraser.step() == UNTIL_WOKEN  # written: erased
    assert list(qm.store.queues_to_erase()) == []
    qm.store.on_ballast_released()  # another writer's
    assert wakeup._event.is_set()


async def test_a_wake_up_starts_erasing(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    autojump_clock: trio.testing.MockClock,
) -> None:
    wakeup = Wakeup()
    eraser = Eraser(qm.store, qm.core, 2, wakeup, committer=committer, signals=signals)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(eraser.run)
        await trio.sleep(3600.0)
        fill_and_purge(qm, 3)
        wakeup.set()  # what a session does after a purge
        await trio.testing.wait_all_tasks_blocked()
        assert list(qm.store.queues_to_erase()) == []
        nursery.cancel_scope.cancel()


async def test_message_ids_are_reserved_before_erasing(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    fail_batches: Callable[[int], None],
) -> None:
    restarted = QueueManagerCore(qm.store)  # no reservation written since its start
    assert restarted.reservation_wanted
    eraser = Eraser(qm.store, restarted, 2, Wakeup(), committer=committer, signals=signals)
    fail_batches(2)
    with structlog.testing.capture_logs() as logs:
        assert await eraser.step() == RETRY_SECONDS
        assert await eraser.step() == RETRY_SECONDS  # failing still: not logged again
    failed = [log for log in logs if log["event"] == "message_id_reservation_failed"]
    assert [log["error"] for log in failed] == ["store error: I/O error (simulated)"]
    assert restarted.reservation_wanted
    # Until it is written, a send that finds no id free says why.
    with pytest.raises(InternalError, match="no message id is free: reserving more failed"):
        restarted.ordinals.take()
    limit = qm.store.ordinal_limit
    assert await eraser.step() == UNTIL_WOKEN
    assert not restarted.reservation_wanted
    assert qm.store.ordinal_limit > limit


async def test_a_reservation_that_failed_at_start_up_is_not_reported_again(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    fail_batches: Callable[[int], None],
) -> None:
    restarted = QueueManagerCore(qm.store)
    unit = restarted.ordinal_reservation()
    assert unit is not None
    # What the daemon's start-up does, and logs, when its first write fails.
    assert restarted.ordinals_reserved(unit, None, storage.StoreError("disk full")) is not None
    eraser = Eraser(qm.store, restarted, 2, Wakeup(), committer=committer, signals=signals)
    fail_batches(1)
    with structlog.testing.capture_logs() as logs:
        assert await eraser.step() == RETRY_SECONDS
        assert await eraser.step() == UNTIL_WOKEN  # written this time
    assert "message_id_reservation_failed" not in [log["event"] for log in logs]
    assert not restarted.ordinals.failing


async def test_the_ballast_is_put_back_once_there_is_room(
    qm: CoreHarness, eraser: Eraser, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.Store, "has_ballast", property(lambda store: False))
    room = [False]
    monkeypatch.setattr(qm.store, "restore_ballast", lambda: room[0])
    assert await eraser.step() == RETRY_SECONDS  # the disk is still full
    room[0] = True
    assert await eraser.step() == UNTIL_WOKEN


async def test_a_write_that_gives_up_the_ballast_wakes_the_eraser(
    qm: CoreHarness, committer: Committer, signals: RecordingSignals
) -> None:
    wakeup = Wakeup()
    Eraser(qm.store, qm.core, 2, wakeup, committer=committer, signals=signals)
    qm.store.on_ballast_released()
    with trio.fail_after(5):  # set: returns at once
        await wakeup.wait()


# ---------------------------------------------------------------------- outcomes


def record_outcomes(qm: CoreHarness, **resolved_at: float) -> None:
    qm.write(
        storage.Unit(
            tuple(storage.RecordOutcome(xid, True, when) for xid, when in resolved_at.items())
        )
    )


async def test_outcomes_past_their_retention_are_pruned_in_steps(
    qm: CoreHarness, committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(two_phase, "PRUNE_STEP", 1)
    old = WALL - qm.core.two_phase.retention - 1
    record_outcomes(qm, x1=old, x2=old, x3=WALL)
    pruner = OutcomePruner(qm.core, committer=committer, signals=None)
    with structlog.testing.capture_logs() as logs:
        assert await pruner.prune(WALL) == 2
    assert [outcome.xid for outcome in qm.store.outcomes()] == ["x3"]
    assert committer.batches == 2  # one a step
    assert [(log["event"], log["count"]) for log in logs] == [("outcomes_pruned", 2)]


async def test_pruning_stops_at_a_failed_step_and_runs_every_interval(
    qm: CoreHarness,
    committer: Committer,
    fail_batches: Callable[[int], None],
    autojump_clock: trio.testing.MockClock,
) -> None:
    pruner = OutcomePruner(qm.core, committer=committer, signals=None, wall=TrioWall(WALL))
    fail_batches(1)
    with structlog.testing.capture_logs() as logs:
        assert await pruner.prune(WALL) == 0
    assert [log["event"] for log in logs][-1] == "outcome_pruning_failed"
    assert await pruner.step() == PRUNE_INTERVAL


async def test_stale_readers_are_freed_and_said(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = StaleReaders(qm.store, committer=committer, signals=signals)
    broken = storage.StoreError("check the readers: lock file unreadable")
    answers: list[int | storage.StoreError] = [2, 0, broken, broken, 0, broken]

    def answer() -> int:
        given = answers.pop(0)
        if isinstance(given, storage.StoreError):
            raise given
        return given

    monkeypatch.setattr(qm.store, "clear_stale_readers", answer)
    with structlog.testing.capture_logs() as logs:
        for _ in range(6):
            assert await worker.step() == READER_CHECK_INTERVAL
    assert [log["event"] for log in logs] == [
        "stale_store_readers_freed",
        "store_reader_check_failed",  # once while it fails
        "store_reader_check_failed",  # again after a look that worked
    ]
    assert logs[0]["count"] == 2


async def test_maintenance_runs_the_four(
    qm: CoreHarness,
    committer: Committer,
    signals: RecordingSignals,
    autojump_clock: trio.testing.MockClock,
) -> None:
    maintenance = Maintenance(
        store=qm.store,
        core=qm.core,
        committer=committer,
        signals=signals,
        wakeup=Wakeup(),
        erase_step=2,
        idle_timeout=1.0,
    )
    fill_and_purge(qm, 3)
    owner = Owner(qm.core)
    qm.core.begin(owner, client_id=1, now=trio.current_time())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(maintenance.run)
        await trio.sleep(2.0)
        nursery.cancel_scope.cancel()
    assert list(qm.store.queues_to_erase()) == []  # erased at start-up
    assert len(owner.ended) == 1
