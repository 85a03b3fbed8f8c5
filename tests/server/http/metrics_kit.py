"""Stand-ins for the daemon's parts the metrics collector reads, around a real
store and core: a committer with a few write times, peering with the outgoing
queues it is given, and the :class:`MetricsSources` of a daemon with nothing open.

Tests import them with ``from metrics_kit import ...`` (from ``tests/server/http``)
or ``from server.http.metrics_kit import ...``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import storage
from qmgr import __version__
from qmgr.core.engine import QueueManagerCore
from qmgr.server.client.authorization import AccessTally
from qmgr.server.http.sources import MetricsSources
from qmgr.server.timings import Durations
from wire import MessageClass
from wire import client as cf


class Committer:
    """Seven write batches, four write times noted."""

    batches = 7

    def __init__(self) -> None:
        self.write_times = Durations((0.001, 0.01))
        for seconds in (0.0005, 0.001, 0.002, 0.5):
            self.write_times.note(seconds)


class Peering:
    """The outgoing queues it is given, those ``linked`` (else the connected ones)
    with a session open; two classes of messages refused; three acknowledgments
    dropped."""

    def __init__(
        self, outgoing: list[tuple[int, cf.OutgoingInfo]], linked: frozenset[int] | None = None
    ) -> None:
        self.outgoing = outgoing
        self.linked = linked

    def outgoing_by_id(self) -> list[tuple[int, cf.OutgoingInfo]]:
        return self.outgoing

    def linked_outgoing(self) -> frozenset[int]:
        if self.linked is not None:
            return self.linked
        return frozenset(i for i, info in self.outgoing if info.state == "connected")

    def refused_by_class(self) -> Mapping[int, int]:
        return {MessageClass.NACK_BAD_DST_Q: 2, MessageClass.NACK_ACCESS_DENIED: 1}

    def relayed_resends_dropped(self) -> int:
        return 5

    def acknowledgments_dropped(self) -> int:
        return 3

    def refused_not_kept(self) -> int:
        return 1


def sources_of(
    store: storage.Store,
    directory: Path,
    *,
    core: QueueManagerCore | None = None,
    outgoing: list[tuple[int, cf.OutgoingInfo]] | None = None,
    linked: frozenset[int] | None = None,
    tally: AccessTally | None = None,
    connections: Callable[[], Mapping[str, int]] = dict,
) -> MetricsSources:
    """What a daemon around ``store`` would hand the collector: by default with
    nothing open and a fresh tally of refusals."""
    return MetricsSources(
        name="qm",
        version=__version__,
        store=store,
        core=QueueManagerCore(store) if core is None else core,
        committer=Committer(),
        tally=AccessTally() if tally is None else tally,
        peering=Peering([] if outgoing is None else outgoing, linked),
        connections=connections,
        data_dir=directory,
    )


def outgoing_info(
    state: str, waiting: int, unacknowledged: int, *, host: str = "10.0.0.5"
) -> cf.OutgoingInfo:
    """An outgoing queue to ``orders`` at ``host`` as the peering side describes it."""
    return cf.OutgoingInfo(
        destination=f"DIRECT=TCP:{host}\\private$\\orders",
        next_hop=f"{host}:1801",
        state=state,
        next_attempt=None,
        waiting=waiting,
        unacknowledged=unacknowledged,
        sequence_timestamp=1,
        sequence_ordinal=1,
        next_number=1,
        last_order_ack=None,
        last_error="",
    )
