"""The expirer (``qmgr.server.workers.expirer``) over a real store and committer: what
it removes and reports, whom it wakes, how long it pauses, the outgoing entries it
hands on, and what a failed write leaves."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import structlog
import trio
import trio.testing
from core.harness import FULL, WALL, CoreHarness, classes

import storage
from qmgr.core.outcomes import JOURNAL_DEADLETTER
from qmgr.server.committer import Committer
from qmgr.server.workers import expirer
from qmgr.server.workers.expirer import FAILED_PAUSE_SECONDS, POLL_SECONDS, Expirer
from qmgr.server.workers.worker import HandBack, Written
from qmgr.server.writer import Writer
from wire import MessageClass

from .conftest import RecordingSignals, TrioWall


@pytest.fixture
def worker(
    qm: CoreHarness, committer: Committer, signals: RecordingSignals, wall: TrioWall
) -> Expirer:
    qm.create("admin")
    return Expirer(core=qm.core, committer=committer, signals=signals, wall=wall)


async def test_a_due_message_leaves_with_its_reports_and_their_readers_wake(
    qm: CoreHarness, worker: Expirer, signals: RecordingSignals
) -> None:
    qm.send_tx("q", b"late", time_to_be_received=30, acknowledge=FULL, admin_queue="admin")
    qm.send_tx("q", b"no limit")
    with structlog.testing.capture_logs() as logs:
        assert await worker.expire(WALL + 29.9) == (False, 0)
        assert await worker.expire(WALL + 30) == (False, 0)
    assert qm.bodies("q") == [b"no limit"]
    assert classes(qm, "admin")[-1] == MessageClass.NACK_RECEIVE_TIMEOUT
    assert qm.core.queue("admin").queue_id in signals.woken
    assert worker.expired == 1
    assert [(log["event"], log["count"], log["queues"]) for log in logs] == [
        ("messages_expired", 1, {"q": 1})  # which queue's messages expired, for the record
    ]


async def test_it_pauses_until_the_next_deadline_but_no_longer_than_a_poll(
    qm: CoreHarness, worker: Expirer, autojump_clock: trio.testing.MockClock
) -> None:
    assert await worker.step() == POLL_SECONDS  # nothing to expire
    qm.send_tx("q", b"soon", time_to_be_received=1)
    assert await worker.step() == pytest.approx(1.0)
    qm.send_tx("q", b"later", time_to_be_received=100)
    await trio.sleep(1.5)
    assert await worker.step() == POLL_SECONDS  # "soon" expired; "later" is far
    assert qm.bodies("q") == [b"later"]


async def test_a_long_backlog_goes_in_steps_with_no_pause(
    qm: CoreHarness,
    worker: Expirer,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    monkeypatch.setattr(expirer, "STEP", 2)
    for body in (b"1", b"2", b"3", b"4", b"5"):
        qm.send_tx("q", body, time_to_be_received=1)
    await trio.sleep(2.0)
    assert [await worker.step() for _ in range(3)] == [0.0, 0.0, POLL_SECONDS]
    assert qm.visible("q") == []
    assert worker.expired == 5


async def test_a_message_a_transaction_holds_stays_until_the_transaction_ends(
    qm: CoreHarness, worker: Expirer
) -> None:
    qm.send_tx("q", b"held", time_to_be_received=5)
    tx = qm.begin()
    assert qm.take("q", tx) is not None
    assert await worker.expire(WALL + 10) == (False, 1)
    assert worker.expired == 0
    qm.core.abort(tx)
    assert await worker.expire(WALL + 10) == (False, 0)
    assert qm.visible("q") == []


async def test_due_outgoing_entries_go_to_the_peering_side(
    qm: CoreHarness, committer: Committer, signals: RecordingSignals
) -> None:
    handed: list[storage.DueMessage] = []

    async def outgoing(due: Sequence[storage.DueMessage]) -> int:
        handed.extend(due)
        return len(due)

    worker = Expirer(core=qm.core, committer=committer, signals=signals, outgoing=outgoing)
    qm.send("DIRECT=TCP:10.9.9.9:1801\\private$\\far", b"x", time_to_reach_queue=5)
    assert await worker.expire(WALL + 5) == (False, 0)
    [entry] = handed
    assert entry.deadline == WALL + 5
    assert worker.expired == 1


async def test_messages_that_expire_together_keep_their_order_in_the_dead_letter_queue(
    qm: CoreHarness, worker: Expirer
) -> None:
    sent = [f"m{i}".encode() for i in range(24)]
    tx = qm.begin()
    for body in sent[:12]:
        qm.prepare("q", body, tx=tx, time_to_be_received=5, journal=JOURNAL_DEADLETTER)
    assert qm.commit(tx) == [None]
    for body in sent[12:]:
        qm.send_tx("q", body, time_to_be_received=5, journal=JOURNAL_DEADLETTER)
    assert await worker.expire(WALL + 10) == (False, 0)
    assert qm.bodies("system$;deadxact") == sent


async def test_a_step_the_store_refuses_whole_pauses_and_is_logged_once(
    qm: CoreHarness,
    worker: Expirer,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    monkeypatch.setattr(expirer, "STEP", 2)
    full = storage.StoreFull("commit: the file system holding the store has 0 bytes free")

    async def store_full(unit: storage.Unit, hand_back: HandBack | None = None) -> Written:
        outcome = storage.UnitOutcome.failed(unit, full)
        if hand_back is not None:
            hand_back(outcome)
        return Written(outcome)

    for body in (b"1", b"2", b"3"):
        qm.send_tx("q", body, time_to_be_received=1, journal=JOURNAL_DEADLETTER)
    await trio.sleep(2.0)
    with monkeypatch.context() as refusing:
        refusing.setattr(worker, "submit", store_full)
        with structlog.testing.capture_logs() as logs:
            assert await worker.step() == FAILED_PAUSE_SECONDS  # not at once again
    assert [(log["event"], log["count"]) for log in logs] == [("message_expiry_failed", 2)]
    assert len(qm.visible("q")) == 3
    # Room again: they go.
    await trio.sleep(FAILED_PAUSE_SECONDS)
    for _ in range(3):
        await trio.sleep(await worker.step())
    assert sorted(qm.bodies("system$;deadxact")) == [b"1", b"2", b"3"]
    assert qm.visible("q") == []


async def test_a_failed_write_leaves_the_message_receivable(
    qm: CoreHarness, worker: Expirer, fail_batches: Callable[[int], None]
) -> None:
    qm.send_tx("q", b"late", time_to_be_received=5)
    fail_batches(1)
    with structlog.testing.capture_logs() as logs:
        assert await worker.expire(WALL + 10) == (False, 0)
    assert worker.expired == 0
    assert [log["event"] for log in logs] == ["commit_batch_failed"]  # the committer's
    assert qm.take("q") is not None  # released, not held


async def test_running_it_expires_a_message_about_when_it_is_due(
    qm: CoreHarness, worker: Expirer, autojump_clock: trio.testing.MockClock
) -> None:
    qm.send_tx("q", b"late", time_to_be_received=3)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run)
        await trio.sleep(2.9)
        assert len(qm.visible("q")) == 1
        await trio.sleep(POLL_SECONDS + 0.2)
        assert qm.visible("q") == []
        nursery.cancel_scope.cancel()


async def test_it_stops_with_the_committer_and_releases_what_it_held(
    qm: CoreHarness, signals: RecordingSignals
) -> None:
    stopped = Committer(qm.store, Writer(qm.store, thread=False))
    worker = Expirer(core=qm.core, committer=stopped, signals=signals, wall=lambda: WALL + 10)
    qm.send_tx("q", b"late", time_to_be_received=5)
    with trio.fail_after(5):
        await worker.run()
    assert qm.take("q") is not None


async def test_an_unreadable_entry_is_forgotten_without_a_warning(
    qm: CoreHarness, worker: Expirer
) -> None:
    qm.send_tx("q", b"late", time_to_be_received=5)
    queue_id = qm.core.queue("q").queue_id
    garbage = storage.AppendMessage(queue_id, b"not a message", 0, 13, deadline=WALL + 5)
    assert qm.write(storage.Unit((garbage,))).error is None
    with structlog.testing.capture_logs() as logs:
        assert await worker.expire(WALL + 10) == (False, 0)
    assert worker.expired == 1
    assert [log["event"] for log in logs] == ["messages_expired"]
    assert qm.store.due_messages(before=WALL + 10, limit=10) == []  # its entry is gone too
