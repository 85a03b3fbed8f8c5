"""What a client session needs from the daemon, in one small object.

A session and its request handlers depend on these and nothing else of the
daemon, so they can be built and tested with any of them replaced (the unit
tests drive a session over memory streams with a real core, committer and
store). :class:`PeeringControl` is what they see of the peering adapter,
which satisfies it without importing this package's sessions.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from qmgr.core.budget import MemoryBudget
from qmgr.core.engine import QueueManagerCore
from wire import client as cf

from ..committer import Committer
from ..signals import QueueSignals, Wakeup
from .authorization import Authorization
from .handover import Handover

__all__ = ["ConnectionLimits", "OutgoingAction", "PeeringControl", "Services"]


class OutgoingAction(enum.IntEnum):
    """What ``qmgr outgoing`` asks of an outgoing queue."""

    PAUSE = 1
    RESUME = 2
    PURGE = 3


class PeeringControl(Protocol):
    """What client requests may see and change of the delivery between queue managers."""

    def outgoing_infos(self) -> tuple[cf.OutgoingInfo, ...]:
        """Every outgoing queue, for status and ``qmgr outgoing list``."""
        ...

    def incoming_infos(self) -> tuple[cf.IncomingInfo, ...]:
        """Every incoming transactional sequence, for status."""
        ...

    def next_hops(self) -> dict[int, str]:
        """The next hop (``host:port``) of each outgoing queue, by queue id."""
        ...

    def routing(self, destination: str) -> cf.RoutingInfo:
        """Whether this queue manager is a router, its aliases and routes, and for
        ``destination`` (a format name or ``HOST[:PORT]``; "" for none) the entry
        that matched and the state of each next hop.

        Raises:
            InvalidName: ``destination`` is neither.
        """
        ...

    async def control(
        self, action: OutgoingAction, destination: str
    ) -> tuple[cf.OutgoingInfo, int]:
        """Pause, resume or purge the outgoing queue of ``destination`` (a format
        name such as ``DIRECT=TCP:10.0.0.5\\private$\\orders``, or the outgoing
        queue's name as listed).

        Returns:
            The queue afterwards, and how many messages a purge removed (0 otherwise).

        Raises:
            QueueNotFound: no outgoing queue for that destination.
            InvalidName: not a format name of a remote queue.
        """
        ...


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
    #: Bytes of large replies (over ``MAX_FRAME_BODY``) being written, for all
    #: connections together.
    replies: MemoryBudget
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
    #: Delivery between queue managers (outgoing queues, incoming sequences).
    peering: PeeringControl | None = None
    #: Queue permissions and tokens (None: every client may do everything).
    authorization: Authorization | None = None
    #: Told the peer address of each failed authentication (slows that address down).
    authentication_failed: Callable[[str], None] = lambda peer: None
    #: Set once the daemon is stopping: requests are refused.
    stopping: bool = False
    #: Receives outside a transaction that a sender's write may hand a message.
    handover: Handover = field(init=False)
    #: Long whole-list replies are encoded in a worker thread, one at a time (each
    #: takes seconds and a hundred MB at its peak for tens of thousands of queues).
    list_encoder: trio.CapacityLimiter = field(init=False)

    def __post_init__(self) -> None:
        self.handover = Handover(self.core, self.signals.event)
        self.signals.line = self.handover.wake
        self.list_encoder = trio.CapacityLimiter(1)

    def wake_maintenance(self) -> None:
        """Tell the background work there may be something to do."""
        self.maintenance.set()
