"""What a client session needs from the daemon, in one small object.

A session depends on these and nothing else of the daemon, so it can be
built and tested with any of them replaced (the unit tests drive a session
over memory streams with a real core, committer and store).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from qmgr.core.budget import MemoryBudget
from qmgr.core.engine import QueueManagerCore
from wire import client_frames as cf

from .committer import Committer
from .signals import QueueSignals, Wakeup

__all__ = ["ConnectionLimits", "Services"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLimits:
    """Bounds on one client connection (seconds and counts)."""

    #: A new connection must complete its Hello within this.
    hello_timeout: float = 10.0
    #: A frame that has begun must arrive whole within this.
    frame_timeout: float = 30.0
    #: A connection with no open transaction and no waiting receive that
    #: sends nothing for this long is closed.
    idle_timeout: float = 600.0
    #: Open transactions per connection.
    max_transactions: int = 256
    #: Receives waiting for a message per connection.
    max_waiting_receives: int = 1024
    #: Messages in one PeekRange reply (fewer if the frame fills up first).
    max_peek_range: int = 10_000


@dataclass(slots=True, kw_only=True, eq=False)
class Services:
    """The daemon's parts a session uses."""

    core: QueueManagerCore
    committer: Committer
    signals: QueueSignals
    #: Bytes of frames being received, for all connections together.
    frames: MemoryBudget
    limits: ConnectionLimits
    qm_name: str
    qm_guid: uuid.UUID
    server_version: str
    #: Identity, counters and queues, for GetStatus.
    status: Callable[[], cf.StatusInfo]
    #: Every queue with its counters, for ListQueues.
    queue_infos: Callable[[], tuple[cf.QueueInfo, ...]]
    #: Wakes the background work (erasing, message-id reservations).
    maintenance: Wakeup
    #: Set once the daemon is stopping: requests are refused.
    stopping: bool = False

    def wake_maintenance(self) -> None:
        """Tell the background work there may be something to do."""
        self.maintenance.set()
