"""The metrics: what the daemon already counts, read when Prometheus scrapes.

Theory of operation
-------------------
Nothing here runs between scrapes, and nothing is added to the path of a
message: :class:`QueueManagerCollector` reads, at each scrape, the values
the daemon keeps for its own work and for ``qmgr status``:

* each queue's record (``storage``'s catalog, in memory): its depth and
  bytes, and its next lookup id, which every append takes and never gives
  back, so that ``next_lookup_id - 1``, less the lookup ids its restores
  skipped (``MetricsSources.added``), is the number of messages ever added
  to the queue and that less its depth the number removed (received,
  expired, purged, moved away), both exact and kept across restarts; its
  held messages (``core.holds``); its oldest message's arrival, one cursor
  seek per queue with messages, in one read transaction;
* dead-letter copies by class: the store counts them as their writes
  commit (``storage.CountedAppend``, made by ``core.outcomes``), in
  memory since the daemon started;
* the committer's batches (each one synced write) and the time each took
  (``qmgr.server.timings``, noted once per batch), the core's tally of
  commits and aborts, its open and prepared transactions and the bytes they
  hold;
* the ports' connections, the authorization's tally of denials and failed
  authentications, the peering side's outgoing queues (their state, as
  ``qmgr outgoing list`` shows it) and its refusals of arriving messages by
  class;
* the number of FinalAcks the store holds to send (one read of its size);
* the store's pages in use and its limit (``Store.usage``), and the free
  space of its file system.

Families with a series per queue or per outgoing queue can have tens of
thousands of series. They are read in one go on the event loop
(:meth:`QueueManagerCollector.snapshot`: immutable queue records, held
counts, the oldest arrivals, the outgoing queues' states) and written from
that snapshot as :class:`~.exposition.SeriesFamily` text
(:meth:`QueueManagerCollector.series`), which the exposition does on a
worker thread, without the per-sample work of ``prometheus_client``'s
generic writer: the per-queue families' lines are kept from one scrape to
the next with their values left out (``_Templates``), and a scrape fills
each family's with one ``%`` of a list of numbers. The daemon-wide
families are ordinary ``prometheus_client`` families (``collect``), written
by it with the process collector's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

import storage
import wire
from qmgr.core.final_acks import MAX_KEPT_FINAL_ACKS
from qmgr.core.names import DEADLETTER, DEADXACT
from qmgr.core.outcomes import DEAD_LETTERS
from storage import QueueKind
from wire import client as cf

from .exposition import SeriesFamily, label_text
from .sources import MetricsSources, store_limit

__all__ = [
    "QUEUE_FAMILIES",
    "QueueManagerCollector",
    "Readings",
    "class_name",
]


@dataclass(frozen=True, slots=True)
class Readings:
    """What the per-queue families of one scrape show, read at once."""

    #: Every queue but the outgoing ones (immutable records).
    records: list[storage.QueueRecord]
    #: Held messages by queue id (queues without any are absent).
    held: dict[int, int]
    #: When the first message of each queue that has one became visible.
    arrivals: dict[int, float]
    #: Every outgoing queue's store id and state.
    outgoing: list[tuple[int, cf.OutgoingInfo]]
    #: The store ids of the outgoing queues with a session open with their next hop.
    linked: frozenset[int]
    #: Copies with a deadline awaiting confirmation, by outgoing queue id (none: absent).
    awaiting: dict[int, int]
    #: Unix time of the reading.
    now: float


#: The families with a series per queue, in the order of their columns in
#: ``QueueManagerCollector._queue_series``: name (a counter's without
#: ``_total``), type, help.
QUEUE_FAMILIES: Final[tuple[tuple[str, Literal["gauge", "counter"], str], ...]] = (
    ("qmgr_queue_messages", "gauge", "Messages in the queue (held by transactions included)."),
    ("qmgr_queue_bytes", "gauge", "Bytes of the messages in the queue."),
    (
        "qmgr_queue_locked_messages",
        "gauge",
        "Messages of the queue held by open or prepared transactions.",
    ),
    (
        "qmgr_queue_oldest_message_age_seconds",
        "gauge",
        "Seconds since the queue's first message became visible (0: empty).",
    ),
    ("qmgr_queue_messages_added", "counter", "Messages added to the queue since it was created."),
    (
        "qmgr_queue_messages_removed",
        "counter",
        "Messages that left the queue since it was created (received, expired, purged, moved).",
    ),
)


@dataclass(frozen=True, slots=True)
class _Templates:
    """The sample lines of the per-queue families for one list of queues, each
    value a ``%s``: a scrape fills a family's with one ``%`` of its values, one
    string operation for tens of thousands of series. It is the size of the
    families' text, and is made again when a queue is created or deleted."""

    queue_ids: tuple[int, ...]
    texts: tuple[str, ...]

    @classmethod
    def of(cls, queue_ids: tuple[int, ...], labels: Mapping[int, str]) -> _Templates:
        """The templates of the queues ``queue_ids``, in that order, with their
        label texts (``%`` already doubled)."""
        ordered = [labels[queue_id] for queue_id in queue_ids]
        texts = []
        for name, kind, _ in QUEUE_FAMILIES:
            sample = f"{name}_total" if kind == "counter" else name
            texts.append("".join([f"{sample}{label} %s\n" for label in ordered]))
        return cls(queue_ids, tuple(texts))


def _age(now: float, arrived: float) -> float:
    """Seconds from ``arrived`` to ``now``, to the millisecond, never negative."""
    return round(max(0.0, now - arrived), 3)


#: The negative acknowledgment classes: the labels of the refusal and
#: dead-letter counters, each exported from the start (at 0 until it happens).
_NACKS: Final = tuple(int(c) for c in wire.MessageClass if c.name.startswith("NACK_"))
#: The queues the dead-letter counter is exported for from the start.
_DEAD_LETTER_QUEUES: Final = (DEADLETTER, DEADXACT)


def class_name(value: int) -> str:
    """A message class as its name (``NACK_BAD_DST_Q``), or in hex if unknown."""
    try:
        return wire.MessageClass(value).name
    except ValueError:
        return f"0x{value:04x}"


class QueueManagerCollector(Collector):
    """Reads the daemon's counters at scrape time (see the module docstring)."""

    def __init__(self, sources: MetricsSources) -> None:
        self.sources = sources
        # The per-queue families' lines without their values, kept from one
        # scrape to the next while the queues stay the same (see _Templates).
        self._queue_templates: _Templates | None = None
        # Each queue's label text, by store id, kept likewise (``%`` doubled).
        self._queue_labels: dict[int, str] = {}
        # The label text of each outgoing queue (a next hop may change), kept
        # likewise: rebuilt from what exists at each scrape.
        self._outgoing_labels: dict[tuple[int, str], str] = {}

    # ------------------------------------------------------------------ per queue

    def snapshot(self) -> Readings:
        """What the per-queue families show, read now (on the event loop's
        thread: the store's reads and the core's state are its own)."""
        sources = self.sources
        store = sources.store
        every = store.queue_records()
        records = [q for q in every if q.kind is not QueueKind.OUTGOING]
        awaited = store.awaited_confirmations()
        awaiting = {q.queue_id: awaited[q.name] for q in every if q.name in awaited}
        outgoing = sources.peering.outgoing_by_id()
        with_messages = [q.queue_id for q in records if q.depth]
        with_messages.extend(queue_id for queue_id, _ in outgoing)
        return Readings(
            records=records,
            held=sources.core.holds.counts(),
            arrivals=store.oldest_arrivals(sorted(with_messages)),
            outgoing=outgoing,
            linked=sources.peering.linked_outgoing(),
            awaiting=awaiting,
            now=sources.wall(),
        )

    def series(self, readings: Readings) -> list[SeriesFamily]:
        """The families with a series per queue and per outgoing queue, written
        from ``readings`` (any thread: it reads nothing else; one at a time)."""
        return [*self._queue_series(readings), *self._outgoing_series(readings)]

    def _queue_series(self, readings: Readings) -> list[SeriesFamily]:
        records = readings.records
        queue_ids = tuple(record.queue_id for record in records)
        templates = self._queue_templates
        if templates is None or templates.queue_ids != queue_ids:
            # The queues changed (one was created or deleted): their lines again,
            # from the label texts kept (a queue's name never changes).
            known = self._queue_labels
            labels = {
                record.queue_id: known.get(record.queue_id)
                or label_text(("queue",), (record.name,)).replace("%", "%%")
                for record in records
            }
            self._queue_labels = labels
            templates = self._queue_templates = _Templates.of(queue_ids, labels)
        arrivals = readings.arrivals
        now = readings.now
        held = readings.held
        depths = [record.depth for record in records]
        added = [self.sources.added(record) for record in records]
        values: tuple[list[int] | list[float], ...] = (
            depths,
            [record.bytes for record in records],
            [held.get(queue_id, 0) for queue_id in queue_ids],
            [
                0.0 if (arrived := arrivals.get(queue_id)) is None else _age(now, arrived)
                for queue_id in queue_ids
            ],
            added,
            [ever - depth for ever, depth in zip(added, depths, strict=True)],
        )
        return [
            SeriesFamily(name, kind, documentation, template % tuple(column))
            for (name, kind, documentation), template, column in zip(
                QUEUE_FAMILIES, templates.texts, values, strict=True
            )
        ]

    def _outgoing_series(self, readings: Readings) -> list[SeriesFamily]:
        arrivals = readings.arrivals
        now = readings.now
        cached = self._outgoing_labels
        labels: dict[tuple[int, str], str] = {}
        messages: list[str] = []
        unacknowledged: list[str] = []
        ages: list[str] = []
        up: list[str] = []
        paused: list[str] = []
        confirming: list[str] = []
        linked = readings.linked
        awaiting = readings.awaiting
        for queue_id, info in readings.outgoing:
            key = (queue_id, info.next_hop)
            text = cached.get(key)
            if text is None:
                text = label_text(("destination", "next_hop"), (info.destination, info.next_hop))
            labels[key] = text
            arrived = arrivals.get(queue_id)
            age = 0.0 if arrived is None else _age(now, arrived)
            link = 1 if queue_id in linked else 0
            messages.append(f"qmgr_outgoing_messages{text} {info.waiting + info.unacknowledged}\n")
            unacknowledged.append(
                f"qmgr_outgoing_unacknowledged_messages{text} {info.unacknowledged}\n"
            )
            ages.append(f"qmgr_outgoing_oldest_message_age_seconds{text} {age}\n")
            up.append(f"qmgr_peer_link_up{text} {link}\n")
            paused.append(f"qmgr_outgoing_paused{text} {int(info.state == 'paused')}\n")
            confirming.append(
                f"qmgr_outgoing_awaiting_confirmation{text} {awaiting.get(queue_id, 0)}\n"
            )
        self._outgoing_labels = labels
        return [
            SeriesFamily(
                "qmgr_outgoing_messages",
                "gauge",
                "Messages waiting in an outgoing queue for their destination "
                "(sent and not yet acknowledged included).",
                "".join(messages),
            ),
            SeriesFamily(
                "qmgr_outgoing_unacknowledged_messages",
                "gauge",
                "Messages sent from an outgoing queue and not yet acknowledged.",
                "".join(unacknowledged),
            ),
            SeriesFamily(
                "qmgr_outgoing_oldest_message_age_seconds",
                "gauge",
                "Seconds since the outgoing queue's first message was stored (0: empty).",
                "".join(ages),
            ),
            SeriesFamily(
                "qmgr_peer_link_up",
                "gauge",
                "1 while a session with the outgoing queue's next hop is open, else 0.",
                "".join(up),
            ),
            SeriesFamily(
                "qmgr_outgoing_paused",
                "gauge",
                "1 while the outgoing queue is paused (qmgr outgoing pause), else 0.",
                "".join(paused),
            ),
            SeriesFamily(
                "qmgr_outgoing_awaiting_confirmation",
                "gauge",
                "Copies of messages sent through the outgoing queue that await their "
                "destination's confirmation (a FinalAck) before a deadline; the queue "
                "keeps a session with its next hop while there are any.",
                "".join(confirming),
            ),
        ]

    # ------------------------------------------------------------------ daemon-wide

    def collect(self) -> Iterable[Metric]:
        """The daemon-wide families (``prometheus_client``'s collector interface)."""
        sources = self.sources
        core = sources.core
        yield _gauge(
            "qmgr_build_info",
            "This queue manager: its version, name and GUID (always 1).",
            1,
            version=sources.version,
            name=sources.name,
            guid=str(sources.store.qm_guid),
        )
        yield from self._dead_letters()
        yield CounterMetricFamily(
            "qmgr_commits", "Transactions committed since the start.", core.tally.commits
        )
        yield CounterMetricFamily(
            "qmgr_aborts", "Transactions aborted since the start.", core.tally.aborts
        )
        yield CounterMetricFamily(
            "qmgr_log_write_failures",
            "Writes of log lines to standard error that failed since the start "
            "(a full disk, a closed pipe): their lines were dropped.",
            sources.log_write_failures(),
        )
        committer = sources.committer
        yield CounterMetricFamily(
            "qmgr_synced_writes",
            "Write transactions synced to disk since the start (each holds a batch of commits).",
            committer.batches,
        )
        times = committer.write_times
        buckets = times.cumulative()
        yield HistogramMetricFamily(
            "qmgr_sync_seconds",
            "Seconds to plan, write and sync one batch.",
            buckets=[(_bound(bound), count) for bound, count in buckets],
            sum_value=times.sum,
        )
        connections = GaugeMetricFamily(
            "qmgr_connections", "Open connections, by port.", labels=["kind"]
        )
        for kind, count in sorted(sources.connections().items()):
            connections.add_metric([kind], count)
        yield connections
        yield GaugeMetricFamily(
            "qmgr_open_transactions", "Transactions open now.", value=len(core.transactions)
        )
        yield GaugeMetricFamily(
            "qmgr_prepared_transactions",
            "Prepared (two-phase) transactions in doubt, waiting to be committed or aborted.",
            value=core.two_phase.prepared_count,
        )
        oldest = core.two_phase.oldest_prepared()
        yield GaugeMetricFamily(
            "qmgr_prepared_transaction_oldest_age_seconds",
            "Seconds the transaction in doubt the longest has been prepared (0: none is).",
            value=0.0 if oldest is None else round(max(0.0, sources.wall() - oldest), 3),
        )
        yield GaugeMetricFamily(
            "qmgr_uncommitted_bytes",
            "Bytes of messages held in memory by open transactions.",
            value=core.uncommitted.in_use,
        )
        rejected = CounterMetricFamily(
            "qmgr_incoming_rejected",
            "Messages from other queue managers refused at arrival, by class.",
            labels=["class"],
        )
        refused = dict.fromkeys(_NACKS, 0) | dict(sources.peering.refused_by_class())
        for value, count in sorted(refused.items()):
            rejected.add_metric([class_name(value)], count)
        yield rejected
        yield CounterMetricFamily(
            "qmgr_incoming_rejected_not_kept",
            "Messages from other queue managers refused at arrival and not kept in a "
            "dead-letter queue (its allowance, peers.max_rejected_bytes, was used up) since "
            "the start: the sender was told, nothing here holds them.",
            value=sources.peering.refused_not_kept(),
        )
        yield CounterMetricFamily(
            "qmgr_acknowledgments_dropped",
            "OrderAcks and FinalAcks for other queue managers that were not passed on "
            "(no open path to them, or come round again) since the start.",
            value=sources.peering.acknowledgments_dropped(),
        )
        yield CounterMetricFamily(
            "qmgr_relayed_resends_dropped",
            "Resends of messages this router still held for relaying, acknowledged "
            "without being stored or forwarded again, since the start.",
            value=sources.peering.relayed_resends_dropped(),
        )
        yield GaugeMetricFamily(
            "qmgr_final_acks_waiting",
            "FinalAcks stored until the next hop on their way back has them: this queue "
            "manager's own, and at a router other queue managers' it passes on or keeps "
            f"(past {MAX_KEPT_FINAL_ACKS:,} a router keeps no more).",
            value=sources.store.final_ack_count(),
        )
        yield CounterMetricFamily(
            "qmgr_access_denied",
            "Requests refused for want of a right since the start.",
            sources.tally.denied,
        )
        yield CounterMetricFamily(
            "qmgr_authentication_failures",
            "Tokens, client certificates and TLS handshakes refused since the start.",
            sources.tally.authentication_failures,
        )
        yield from self._space()

    def _dead_letters(self) -> Iterable[Metric]:
        sources = self.sources
        family = CounterMetricFamily(
            "qmgr_dead_letters",
            "Messages written to a dead-letter queue since the start, by queue and class.",
            labels=["queue", "class"],
        )
        # Every class of the two system dead-letter queues is there from the start, at
        # 0: a series born at its first value hides that increase from increase().
        found = {(queue, class_name(value)): 0 for queue in _DEAD_LETTER_QUEUES for value in _NACKS}
        for key, count in sources.store.counts().items():
            if key[0] != DEAD_LETTERS:
                continue
            _, queue_id, value = key
            assert isinstance(queue_id, int)
            assert isinstance(value, int)
            record = sources.store.get_queue_by_id(queue_id)
            if record is not None:
                found[(record.name, class_name(value))] = count
        for (queue, name), count in sorted(found.items()):
            family.add_metric([queue, name], count)
        yield family

    def _space(self) -> Iterable[Metric]:
        sources = self.sources
        usage = sources.store.usage()
        free = sources.disk_free(sources.data_dir)
        limit = store_limit(usage, free)
        yield GaugeMetricFamily(
            "qmgr_store_used_bytes",
            "Bytes of the store's pages in use (pages freed and not yet reused excluded).",
            value=usage.used_bytes,
        )
        yield GaugeMetricFamily(
            "qmgr_store_limit_bytes",
            "Bytes the store may use for new messages: store.max_map_size less the room "
            "kept for removals, or its file and the free disk space if less.",
            value=limit,
        )
        yield GaugeMetricFamily(
            "qmgr_disk_free_bytes",
            "Free bytes on the file system of the data directory.",
            value=free,
        )


def _gauge(
    family_name: str, documentation: str, value: float, /, **labels: str
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(family_name, documentation, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _bound(seconds: float) -> str:
    return "+Inf" if math.isinf(seconds) else repr(seconds)
