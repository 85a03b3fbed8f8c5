"""The peering adapter's hub: builds its parts, runs them, and answers for them.

Theory of operation
-------------------
:class:`Peering` is what the daemon knows of delivery between queue
managers. It builds the parts of the package, hands each what it needs
(none of them knows the hub), runs their tasks, and routes between them
the few events that concern more than one:

* the events of every connection (it is their
  :class:`~.connection.ConnectionEvents`): user packets go to the receiving
  side (:meth:`.incoming.Incoming.arrived`); the session acknowledgments of
  what a connection sent (:meth:`Peering.acked`) go to the outgoing queue or
  the FinalAck courier that sent it; an opening wakes the courier; an end
  (:meth:`Peering.connection_ended`) is no one's return path, no courier's
  flight, and is logged;
* :class:`~.outgoing.OutgoingQueues`: the outgoing queues, their links,
  forgets and resend timers;
* :class:`~.incoming.Incoming`: the receiver, the core's arrivals and the
  OrderAcks (it hands the OrderAcks it finds for us to the outgoing queues
  and the FinalAcks to :mod:`.final_acks`, through the hub: its
  :class:`~.incoming.IncomingRoutes`);
* :class:`~.accept.PeerPort`: the listener's handler;
* the FinalAck courier (``qmgr.server.workers.final_ack_courier``), the
  settling of the FinalAcks that arrive, and the watch that keeps a session
  up for them while copies await them (:mod:`.final_acks`).

It also answers the client requests about peering (``PeeringControl``:
status, pause, resume, purge).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import structlog
import trio

import storage
import wire
from qmgr.config import Config
from qmgr.core.confirmation import Confirmations
from qmgr.core.names import LocalIdentity
from qmgr.core.outcomes import Outcomes
from qmgr.protocol import Accepted, Role, SessionSettings
from qmgr.protocol.ping import PingResponder
from wire import client as cf

from ..client.services import OutgoingAction
from ..committer import Committer
from ..settings import from_config
from ..signals import QueueSignals
from ..tls import TlsContexts
from ..workers.final_ack_courier import FinalAckCourier, FinalAckTag
from .accept import PeerPort
from .aliases import check_aliases
from .connection import ConnectionContext, PeerConnection
from .final_acks import ConfirmationWatch, FinalAckArrivals
from .identity import PeerIdentities
from .incoming import Incoming
from .link import Link
from .outgoing import OutgoingQueues
from .outgoing_queue import EntryTag, OutgoingQueue
from .parts import PeeringParts
from .ping import serve_pings

__all__ = ["PeerPermissions", "Peering"]


class PeerPermissions(Protocol):
    """The queue permissions, as far as messages from peers are concerned."""

    @property
    def enabled(self) -> bool:
        """Whether permissions are checked at all (``auth.required``)."""
        ...

    def refuses_peer(self, identity: str | None) -> Callable[[storage.QueueRecord], bool]:
        """Whether a queue's list refuses messages from peer ``identity``."""
        ...

    def refuses_unknown_client(self) -> Callable[[storage.QueueRecord], bool]:
        """Whether a queue's list refuses a message of a client not known here."""
        ...


class Peering:
    """Everything between this queue manager and its peers (see the module docstring).

    Args:
        wall: unix time (the tests make it follow trio's clock).
        message_ids: gives the message ids of the OrderAcks and FinalAcks it
            sends: this queue manager's message-id ordinals, which no restart
            gives twice (a count from 1 without, for tests).
    """

    def __init__(
        self,
        *,
        config: Config,
        store: storage.Store,
        committer: Committer,
        signals: QueueSignals,
        identity: LocalIdentity,
        outcomes: Outcomes,
        confirmations: Confirmations,
        log: structlog.typing.FilteringBoundLogger,
        tls: TlsContexts | None = None,
        wall: Callable[[], float] = time.time,
        message_ids: Callable[[], int] | None = None,
    ) -> None:
        self.log = log.bind(component="peering")
        #: The daemon's parts, as every part of the adapter gets them.
        self.parts = PeeringParts(
            config, store, committer, signals, identity, outcomes, confirmations, self.log, wall
        )
        #: Mutual TLS with peers (``peer_server``/``peer_client`` None: plain TCP).
        self.tls = tls if tls is not None else TlsContexts(None, None, None)
        #: Queue permissions, for messages from peers (set by the daemon).
        self.authorization: PeerPermissions | None = None
        #: Which queue manager GUID each peer identity (mutual TLS) speaks for.
        self.identities = PeerIdentities(
            store, pinned=config.tls_pinned, relays=config.tls_relays, log=self.log
        )
        self.local_qm: uuid.UUID = store.qm_guid
        settings = from_config(SessionSettings, config)
        #: What arrives: the receiver, the core's arrivals, the OrderAcks we send.
        self.incoming = Incoming(self.parts, self, message_ids=message_ids)
        self.context = ConnectionContext(self.parts, self.tls, self.identities, settings, self)
        #: Every open connection, both directions.
        self.connections = self.context.connections
        #: What we send: the outgoing queues and the links to their next hops.
        self.outgoing_queues = OutgoingQueues(self.parts, self.context)
        #: Settles the FinalAcks that arrive about our messages.
        self.final_ack_arrivals = FinalAckArrivals(self.parts, self.outgoing_queues.by_stamp)
        #: Keeps the links up that our FinalAcks come back through.
        self.confirmation_watch = ConfirmationWatch(
            store, self.outgoing_queues.queues, self.log, wall=self.parts.wall, committer=committer
        )
        #: Sends our FinalAcks.
        self.final_acks = FinalAckCourier(
            store, committer, self._final_ack_paths, self.log, message_ids=message_ids
        )
        #: The peer port's handler.
        self.port = PeerPort(self.context)
        signals.listeners.append(self.outgoing_queues.queues_changed)

    @property
    def outgoing(self) -> dict[int, OutgoingQueue]:
        """Every outgoing queue, by queue id."""
        return self.outgoing_queues.queues

    @property
    def links(self) -> dict[tuple[str, int], Link]:
        """The link to each next hop."""
        return self.outgoing_queues.links

    async def run(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve peers and deliver outgoing queues until cancelled."""
        async with trio.open_nursery() as nursery:
            self.identities.attach(nursery, self.parts.committer)
            await nursery.start(self.outgoing_queues.run)
            self.confirmation_watch.restore(self.outgoing.values())
            nursery.start_soon(self.incoming.run)
            nursery.start_soon(self.final_acks.run)
            nursery.start_soon(self.confirmation_watch.run)
            nursery.start_soon(trio.serve_listeners, self.port.serve, listeners)
            nursery.start_soon(check_aliases, self.context)
            task_status.started()

    async def serve_pings(self, sockets: list[trio.socket.SocketType]) -> None:
        """Answer MSMQ pings on the UDP ``sockets`` (``peers.ping``) until cancelled."""
        responder = PingResponder(self.parts.store.qm_guid)
        await serve_pings(sockets, responder, self.port.refusal, self.parts.log)

    # ------------------------------------------------------------------ connections

    def denied(
        self, connection: PeerConnection, packet: wire.UserMessage
    ) -> Callable[[storage.QueueRecord], bool] | None:
        """Whether a queue's permissions refuse ``packet`` from ``connection``'s peer
        (``peer:<identity>``; ``peer:anonymous`` without mutual TLS), or None.

        A message of this queue manager's own (one of its clients sent it to a
        name of this queue manager it does not know as its own, and it came back
        over a session with itself or through a router) has the rights of
        ``everyone``: the client that sent it is not known here, and neither this
        queue manager nor the router that brought it lends it theirs. Over a
        session with itself, another queue manager's message (forwarded by this
        router to a hop that turned out to be itself) has the rights of an
        anonymous peer, since the peer that brought it is not known there."""
        authorization = self.authorization
        if authorization is None or not authorization.enabled:
            return None
        if packet.user.source_qm == self.local_qm:
            # Sent by one of this queue manager's clients to a name of its own it
            # does not know as such, back over a session with itself or through a
            # router: judged as the client it came from could be, not as a peer.
            return authorization.refuses_unknown_client()
        if connection.itself:
            return authorization.refuses_peer(None)
        return authorization.refuses_peer(connection.identity)

    def acked(self, connection: PeerConnection, tags: tuple[object, ...]) -> None:
        """The peer acknowledged these transmissions (session level; a recoverable
        one once the peer stored it)."""
        for tag in tags:
            if isinstance(tag, EntryTag):
                self.outgoing_queues.session_acked(tag.queue, tag.lookup_id)
            elif isinstance(tag, FinalAckTag):
                self.final_acks.acked(connection, tag)

    def arrived(
        self, connection: PeerConnection, packet: wire.UserMessage, recoverable: int | None
    ) -> None:
        """A user packet arrived on ``connection``: for the receiving side."""
        self.incoming.arrived(connection, packet, recoverable)

    def rolled_back(self, accepted: Sequence[Accepted]) -> None:
        """A write of arrived messages failed (or never happened): nothing of it counts."""
        self.incoming.rolled_back(accepted)

    def opened(self, connection: PeerConnection) -> None:
        """A session opened: acknowledgments for its peer go there, and FinalAcks
        for it may be waiting."""
        if connection.remote_qm is not None:
            self.incoming.receiver.return_paths.session_opened(connection, connection.remote_qm)
            self._check_twin(connection)
        self.final_acks.wake()

    def _check_twin(self, connection: PeerConnection) -> None:
        """Warn when another session that this queue manager accepted is open with
        the same GUID: two queue managers started from copies of one data
        directory share it, and each takes the other's messages for resends
        (they are dropped: see docs/operations.md, backups). A queue manager
        that restarted while its old session is not closed yet looks the same,
        until that session times out."""
        if connection.role is not Role.ACCEPTOR or connection.itself:
            return
        for other in self.connections:
            if (
                other is not connection
                and other.role is Role.ACCEPTOR
                and not other.itself
                and other.remote_qm == connection.remote_qm
                and other.opened.is_set()
                and not other.closing
            ):
                connection.log.warning(
                    "peer_guid_twice",
                    other_peer=other.peer,
                    advice=(
                        "two queue managers with this GUID (copies of one data directory?) "
                        "lose each other's messages; or one restarted and its old session "
                        "is not closed yet"
                    ),
                )
                return

    def order_ack_arrived(self, ack: wire.OrderAck, came_from: uuid.UUID | None) -> None:
        """An OrderAck for one of our sequences arrived on a session of ``came_from``."""
        self.outgoing_queues.order_ack_arrived(ack, came_from)

    def hop_of(self, name: str) -> uuid.UUID | None:
        """The GUID of the queue manager at the next hop of the outgoing queue
        ``name`` (None: no such queue, or no session with its hop yet)."""
        record = self.parts.store.get_queue(name)
        queue = None if record is None else self.outgoing.get(record.queue_id)
        return None if queue is None or queue.link is None else queue.link.hop_qm()

    def send_kept_final_ack(self, connection: PeerConnection, key: bytes, data: bytes) -> None:
        """Send a stored FinalAck of another queue manager on ``connection``."""
        self.final_acks.send_kept(connection, key, data)

    def relayed_setting(self, name: str, until: float) -> storage.Operation | None:
        """The operation keeping a relayed deadline for after a restart, or None."""
        return self.confirmation_watch.relayed_setting(name, until)

    def relayed_to_confirm(self, queue_id: int, until: float, name: str) -> None:
        """A relayed message awaits its FinalAck through the outgoing queue
        ``queue_id`` (``name``) until ``until``: the queue keeps a session for it."""
        self.confirmation_watch.relayed(queue_id, until, name)

    def final_ack_arrived(
        self, connection: PeerConnection, ack: wire.FinalAck, recoverable: int | None
    ) -> None:
        """A FinalAck about one of our messages arrived on ``connection``."""
        self.final_ack_arrivals.arrived(connection, ack, recoverable)

    def connection_ended(self, connection: PeerConnection) -> None:
        """A connection closed (either side, any reason)."""
        self.connections.discard(connection)
        self.final_acks.connection_ended(connection)
        self.incoming.connection_ended(connection)
        level = "info" if connection.opened.is_set() and not connection.not_stored else "warning"
        getattr(connection.log, level)("peer_session_closed", reason=connection.close_reason)

    def _final_ack_paths(self) -> Mapping[bytes, PeerConnection]:
        """The connection that reaches each source queue manager now: an open
        session whose handshake named it, else the one its messages last came in
        on (``ReturnPaths.routes``, as for the acknowledgments passed on)."""
        return self.incoming.receiver.return_paths.routes()

    # ------------------------------------------------------------------ control and status

    def outgoing_infos(self) -> tuple[cf.OutgoingInfo, ...]:
        """Every outgoing queue, by destination."""
        return self.outgoing_queues.infos()

    def incoming_infos(self) -> tuple[cf.IncomingInfo, ...]:
        """Every incoming transactional stream."""
        return self.incoming.infos()

    def next_hops(self) -> dict[int, str]:
        """The next hop (``host:port``) of each outgoing queue, by queue id."""
        return self.outgoing_queues.next_hops()

    def outgoing_by_id(self) -> list[tuple[int, cf.OutgoingInfo]]:
        """Every outgoing queue's store id and its state (for the metrics)."""
        return [(queue.queue_id, queue.info()) for queue in self.outgoing.values()]

    def linked_outgoing(self) -> frozenset[int]:
        """The store ids of the outgoing queues with a session open with their
        next hop (paused ones included: their state says paused)."""
        return frozenset(
            queue.queue_id
            for queue in self.outgoing.values()
            if queue.link is not None and queue.link.describe()[0] == "connected"
        )

    def refused_by_class(self) -> dict[int, int]:
        """Messages refused at arrival since the start, by message class (a copy)."""
        return dict(self.incoming.refused)

    def refused_not_kept(self) -> int:
        """Messages refused at arrival and not kept in a dead-letter queue, since the start."""
        return self.incoming.refused_not_kept

    def acknowledgments_dropped(self) -> int:
        """OrderAcks and FinalAcks for other queue managers not passed on, since the start."""
        return self.incoming.receiver.unroutable

    def relayed_resends_dropped(self) -> int:
        """Resends of messages held here for relaying, acknowledged and dropped
        (neither stored nor forwarded again), since the start."""
        return self.incoming.receiver.relayed_duplicates

    def sessions(self) -> int:
        """Peer sessions open now, both directions."""
        return sum(1 for connection in self.connections if connection.opened.is_set())

    def routing(self, destination: str) -> cf.RoutingInfo:
        """How this queue manager routes, and which next hop ``destination`` takes
        (see ``PeeringControl``)."""
        return self.outgoing_queues.routing(destination)

    def find(self, destination: str) -> OutgoingQueue:
        """The outgoing queue of a destination format name (or its listed name).

        Raises:
            InvalidName, QueueNotFound
        """
        return self.outgoing_queues.find(destination)

    async def control(
        self, action: OutgoingAction, destination: str
    ) -> tuple[cf.OutgoingInfo, int]:
        """Pause, resume or purge an outgoing queue (see ``PeeringControl``)."""
        queue = self.find(destination)
        purged = 0
        if action is OutgoingAction.PURGE:
            purged = await queue.purge()
        else:
            await queue.set_paused(action is OutgoingAction.PAUSE)
        return queue.info(), purged
