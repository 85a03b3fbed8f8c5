"""What the metrics benchmarks hand the collector: a store and its core, with no daemon around.

``bench/metrics.py`` and ``bench/http_framework.py`` scrape a store directly;
the parts a running daemon would add (the committer's batches, the peering
adapter's outgoing queues and refusals) are stand-ins with nothing to show.
"""

from __future__ import annotations

from pathlib import Path

import storage
from qmgr import __version__
from qmgr.core.engine import QueueManagerCore
from qmgr.server.client.authorization import AccessTally
from qmgr.server.http.sources import MetricsSources
from qmgr.server.timings import Durations
from wire import client as cf


class _Committer:
    """No batch written yet."""

    batches = 0
    write_times = Durations()


class _NoPeering:
    """No outgoing queue, nothing refused."""

    def outgoing_by_id(self) -> list[tuple[int, cf.OutgoingInfo]]:
        return []

    def linked_outgoing(self) -> frozenset[int]:
        return frozenset()

    def refused_by_class(self) -> dict[int, int]:
        return {}

    def relayed_resends_dropped(self) -> int:
        return 0

    def acknowledgments_dropped(self) -> int:
        return 0

    def refused_not_kept(self) -> int:
        return 0


def standalone_sources(
    store: storage.Store,
    directory: Path,
    *,
    core: QueueManagerCore | None = None,
    tally: AccessTally | None = None,
) -> MetricsSources:
    """The collector's sources for ``store`` alone (named ``bench``)."""
    return MetricsSources(
        name="bench",
        version=__version__,
        store=store,
        core=QueueManagerCore(store) if core is None else core,
        committer=_Committer(),
        tally=AccessTally() if tally is None else tally,
        peering=_NoPeering(),
        connections=dict,
        data_dir=directory,
    )
