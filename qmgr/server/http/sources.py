"""What the HTTP listener reads of the daemon, and the console's rate readings.

Theory of operation
-------------------
The listener's libraries (Hypercorn, Starlette, ``prometheus_client``)
are imported at its first connection (``port``), so that a daemon nobody
scrapes or browses does not carry them. What must exist from the start
lives here, and imports none of them:

* :class:`MetricsSources`, the daemon's parts the metrics, the JSON API
  and the console read (the store, the core, the committer, the tally, the
  peering side, the connections);
* :func:`sample_rates`, the task that takes a :class:`~.rates.Reading`
  of the counters every :data:`~.rates.SAMPLE_SECONDS` into the
  console's :class:`~.rates.RateHistory` from the moment the
  daemon serves, so that the overview's chart covers the last 15 minutes
  even when the console is first opened later.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog
import trio

import storage
from qmgr.core.engine import QueueManagerCore
from storage import QueueKind
from wire import client as cf

from ..client.authorization import AccessTally
from ..timings import Durations
from .rates import SAMPLE_SECONDS, RateHistory, Reading

__all__ = [
    "Batches",
    "MetricsSources",
    "PeeringReadings",
    "rate_reading",
    "sample_rates",
    "store_limit",
]


class PeeringReadings(Protocol):
    """What the metrics read of the peering side."""

    def outgoing_by_id(self) -> list[tuple[int, cf.OutgoingInfo]]:
        """Every outgoing queue's store id and state."""
        ...

    def linked_outgoing(self) -> frozenset[int]:
        """The store ids of the outgoing queues with a session open with their next hop."""
        ...

    def refused_by_class(self) -> Mapping[int, int]:
        """Messages refused at arrival since the start, by message class."""
        ...

    def refused_not_kept(self) -> int:
        """Messages refused at arrival and not kept in a dead-letter queue, since the start."""
        ...

    def acknowledgments_dropped(self) -> int:
        """OrderAcks and FinalAcks for other queue managers not passed on, since the start."""
        ...

    def relayed_resends_dropped(self) -> int:
        """Resends of messages held here for relaying, dropped, since the start."""
        ...


class Batches(Protocol):
    """What the metrics read of the committer."""

    @property
    def batches(self) -> int:
        """Batches written, each one synced write transaction."""
        ...

    @property
    def write_times(self) -> Durations:
        """How long each batch took to write and sync."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsSources:
    """The daemon's parts the collector reads (see the module docstring)."""

    name: str
    version: str
    store: storage.Store
    core: QueueManagerCore
    committer: Batches
    #: The authorization's tally of refusals (a fresh one when nothing is checked).
    tally: AccessTally
    peering: PeeringReadings
    #: Open connections by kind (``client``, ``peer``, ``http``).
    connections: Callable[[], Mapping[str, int]]
    #: The directory of the store, whose file system's free space is reported.
    data_dir: Path
    #: Unix time.
    wall: Callable[[], float] = time.time
    #: Free bytes for an unprivileged user on the file system of a path.
    disk_free: Callable[[Path], int] = field(default=lambda path: _disk_free(path))
    #: Writes of log lines that failed since the start (``qmgr.logs.LogStream``).
    log_write_failures: Callable[[], int] = lambda: 0
    #: Lookup ids the restores of the store skipped, by queue id (``qmgr restored``
    #: moves each queue's next lookup id on): read when the daemon starts, since
    #: a restore is made while it is stopped.
    lookup_skipped: Mapping[int, int] = field(default_factory=dict)

    def added(self, record: storage.QueueRecord) -> int:
        """Messages ever added to the queue of ``record``."""
        return record.next_lookup_id - 1 - self.lookup_skipped.get(record.queue_id, 0)


def lookup_skipped(store: storage.Store) -> dict[int, int]:
    """The lookup ids each queue's restores skipped (``storage.LOOKUP_SKIPPED``)."""
    skipped: dict[int, int] = {}
    for key, value in store.settings(storage.LOOKUP_SKIPPED):
        try:
            skipped[int(key[len(storage.LOOKUP_SKIPPED) :])] = int(value)
        except ValueError:
            continue  # not one this release wrote: no count to take off
    return skipped


def store_limit(usage: storage.Usage, disk_free: int) -> int:
    """Bytes the store may use for new messages: ``store.max_map_size`` less the
    room kept for removals, but never more than ``data.mdb`` can grow to on its
    disk (its size and the free space), which is the whole limit when no
    maximum is set. A map limit larger than the disk is no limit: the disk
    fills first, and a ratio to the map limit would never show it."""
    room = usage.file_bytes + disk_free
    return room if usage.limit_bytes is None else min(usage.limit_bytes, room)


def _disk_free(path: Path) -> int:
    """Free bytes for an unprivileged user on the file system of ``path``."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def rate_reading(sources: MetricsSources, now: float) -> Reading:
    """The counters the console's rates come from, at ``now``: each queue's
    messages ever added and removed (outgoing queues left out) and the commits."""
    queues: dict[int, tuple[int, int]] = {}
    added = removed = 0
    for record in sources.store.queue_records():
        if record.kind is QueueKind.OUTGOING:
            continue
        ever = sources.added(record)
        gone = max(0, ever - record.depth)
        queues[record.queue_id] = (ever, gone)
        added += ever
        removed += gone
    return Reading(now, added, removed, sources.core.tally.commits, queues)


async def sample_rates(
    sources: MetricsSources,
    history: RateHistory,
    log: structlog.typing.FilteringBoundLogger,
    clock: Callable[[], float] = trio.current_time,
) -> None:
    """Add a reading to ``history`` every :data:`~.rates.SAMPLE_SECONDS`
    (a task of the listener's, for as long as it serves)."""
    while True:
        try:
            history.add(rate_reading(sources, clock()))
        except Exception:  # a reading missed is a gap in the chart, nothing more
            log.exception("console_reading_failed")
        await trio.sleep(SAMPLE_SECONDS)
