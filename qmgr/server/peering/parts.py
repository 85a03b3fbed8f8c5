"""The daemon's parts that the peering adapter works with, in one value.

The hub takes them from the daemon and hands the same :class:`PeeringParts`
to each part of the package that needs them (the outgoing and incoming
sides, each outgoing queue, the links, the peer port, the settling of
FinalAcks), so that none of them knows the hub, and none repeats the list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

import storage
from qmgr.config import Config
from qmgr.core.confirmation import Confirmations
from qmgr.core.names import LocalIdentity
from qmgr.core.outcomes import Outcomes

from ..committer import Committer
from ..signals import QueueSignals

__all__ = ["PeeringParts"]


@dataclass(frozen=True, slots=True)
class PeeringParts:
    """The daemon's parts the peering adapter uses.

    Attributes:
        config: the configuration (``peers``, ``routes``, ``tls``, ``listen``).
        store: read directly; written only through ``committer``.
        committer: writes every unit.
        signals: wakes the readers of the queues a unit touched.
        identity: this queue manager's names (which addresses are local).
        outcomes: the core's reports (acknowledgments, dead-letter copies).
        confirmations: the core's copies awaiting confirmation.
        log: the peering log (``component=peering``).
        wall: unix time (the tests make it follow trio's clock).
    """

    config: Config
    store: storage.Store
    committer: Committer
    signals: QueueSignals
    identity: LocalIdentity
    outcomes: Outcomes
    confirmations: Confirmations
    log: structlog.typing.FilteringBoundLogger
    wall: Callable[[], float]
