"""The console's rate readings, sampled from start-up (``qmgr.server.http.sources``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
import trio
import trio.testing
from metrics_kit import sources_of

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.server.http.rates import SAMPLE_SECONDS, RateHistory
from qmgr.server.http.sources import lookup_skipped, rate_reading, sample_rates

NOW = 1_700_000_000.0


@pytest.fixture
def core(tmp_path: Path) -> Iterator[QueueManagerCore]:
    with storage.Store(tmp_path / "s", initial_map_size=1 << 22, durable=False) as store:
        engine = QueueManagerCore(store)
        units = [*engine.queues.system_queue_units(NOW), engine.queues.create("orders", wall=NOW)]
        for outcome in store.commit(units, now=NOW):
            assert outcome.error is None, outcome.error
        yield engine


def test_a_reading_counts_every_queue_but_the_outgoing_ones(
    core: QueueManagerCore, tmp_path: Path
) -> None:
    reading = rate_reading(sources_of(core.store, tmp_path, core=core), now=5.0)
    records = [q for q in core.store.queue_records() if q.kind is not storage.QueueKind.OUTGOING]
    assert reading.at == 5.0
    assert sorted(reading.queues) == sorted(q.queue_id for q in records)
    assert (reading.added, reading.removed, reading.commits) == (0, 0, core.tally.commits)


def test_messages_added_do_not_count_the_lookup_ids_a_restore_skipped(
    core: QueueManagerCore, tmp_path: Path
) -> None:
    """``qmgr restored`` moves each queue's next lookup id 2**40 on: the counters of
    messages added and removed stay exact (a Prometheus counter must not jump)."""
    store = core.store
    orders = store.get_queue("orders")
    assert orders is not None
    message = storage.AppendMessage(orders.queue_id, b"x", 0, 1)
    [outcome] = store.commit([storage.Unit((message,))], now=NOW)
    assert outcome.error is None
    [outcome] = store.commit([storage.Unit((storage.RenewAfterRestore(NOW),))], now=NOW)
    assert outcome.error is None
    restored = sources_of(store, tmp_path, core=core)
    restored = dataclasses.replace(restored, lookup_skipped=lookup_skipped(store))
    reading = rate_reading(restored, now=5.0)
    assert (reading.added, reading.removed) == (1, 0)
    renewed = store.get_queue("orders")
    assert renewed is not None
    assert renewed.next_lookup_id == 2 + storage.LOOKUP_JUMP
    assert restored.added(renewed) == 1


async def test_the_sampler_reads_at_once_then_every_interval(
    core: QueueManagerCore, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    history = RateHistory()
    sources = sources_of(core.store, tmp_path, core=core)
    with trio.move_on_after(2.5 * SAMPLE_SECONDS):
        await sample_rates(sources, history, structlog.get_logger("test"))
    # Readings at 0, 10 and 20 s: two intervals, and each queue's rates.
    assert [round(p.at - history.points()[0].at) for p in history.points()] == [0, 10]
    assert history.queue_rates(next(iter(rate_reading(sources, 0.0).queues))) == (0.0, 0.0)


async def test_a_reading_that_fails_is_a_gap_and_sampling_goes_on(
    core: QueueManagerCore, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    history = RateHistory()
    sources = sources_of(core.store, tmp_path, core=core)
    readings = [0]

    def clock() -> float:
        readings[0] += 1
        if readings[0] == 2:
            raise OSError("the store is closed")
        return trio.current_time()

    with structlog.testing.capture_logs() as logs, trio.move_on_after(3.5 * SAMPLE_SECONDS):
        await sample_rates(sources, history, structlog.get_logger("test"), clock=clock)
    assert [e["event"] for e in logs] == ["console_reading_failed"]
    assert len(history.points()) == 2  # readings at 0, 20 and 30 s
