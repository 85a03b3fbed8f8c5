"""Delivery between queue managers: outgoing queues, links, arrivals and acknowledgments.

Theory of operation
-------------------
:class:`Peering` is the trio adapter that runs the sans-IO machines of
``qmgr.protocol`` against the store and the network. It owns:

* one :class:`OutgoingQueue` per outgoing queue in the store (an
  :class:`~qmgr.protocol.OutgoingSequence` plus the payloads of the entries
  it has loaded: entries are loaded from the store in chunks as the link
  drains them, so neither memory nor start-up time grows with the backlog);
* one :class:`~qmgr.server.peer_link.Link` per next hop (the destination
  itself, or the router that ``[routes]`` names): it connects when its
  queues have work, with capped exponential backoff between attempts, and
  runs a :class:`~qmgr.server.peer_connection.PeerConnection` as initiator;
* the peer listener: connections from addresses outside
  ``peers.accept_from`` are closed at once and logged; the others run a
  :class:`PeerConnection` as acceptor;
* the receiver's state: :class:`~qmgr.protocol.IncomingSequences` (the
  exactly-once acceptance rule per stream, and the OrderAcks), and the
  history of non-transactional message ids that filters resent duplicates.

Durability before acknowledgment. An arrived message counts in a SessionAck
(``PeerConnection.persisted``) and in an OrderAck
(``IncomingSequences.persisted``) only after the unit that stores it, with
the stream's new state (``storage.RecordIncoming``), is synced. A sender
forgets an entry only after the acknowledgment that covers it, in one
``storage.ForgetOutgoing``; the store rolls the sequence in that same write
when the queue empties, and hands the new sequence back to the machine.

Acknowledgments travel back on the connection the message came in on: an
OrderAck is addressed to the source queue manager's ``order_queue$`` with
its GUID, and a router that sees one for another queue manager passes it
on along the connection that queue manager's messages arrived on.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

import storage
import wire
from qmgr.config import Config
from qmgr.core.arrivals import Arrival, Arrivals
from qmgr.core.confirmation import Confirmations
from qmgr.core.errors import InvalidName, QueueNotFound
from qmgr.core.names import LocalIdentity, parse_format_name
from qmgr.core.outcomes import Outcomes, touched_queues
from qmgr.core.outgoing import RemoteDestination
from qmgr.protocol import IncomingSequences, SessionSettings, StreamState
from wire import client as cf

from .committer import Committer
from .final_ack_courier import FinalAckCourier, FinalAckTag
from .message_history import MessageHistory
from .outgoing_queue import OutgoingQueue
from .peer_accept import peer_admission, serve_peer
from .peer_connection import PeerConnection
from .peer_identity import PeerIdentities
from .peer_link import Link
from .services import OutgoingAction
from .signals import QueueSignals
from .tls import TlsContexts

if TYPE_CHECKING:
    from qmgr.protocol import StreamKey

    from .authorization import Authorization

__all__ = ["Peering"]

_U32_MAX: Final = 0xFFFFFFFF


class Peering:
    """Everything between this queue manager and its peers."""

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
    ) -> None:
        self.config = config
        #: Mutual TLS with peers (``peer_server``/``peer_client`` None: plain TCP).
        self.tls = tls if tls is not None else TlsContexts(None, None, None)
        self.store = store
        self.committer = committer
        self.signals = signals
        self.identity = identity
        self.log = log.bind(component="peering")
        #: Queue permissions, for messages from peers (set by the daemon).
        self.authorization: Authorization | None = None
        #: Which queue manager GUID each peer identity (mutual TLS) speaks for.
        self.identities = PeerIdentities(
            store, pinned=config.tls_pinned, relays=config.tls_relays, log=self.log
        )
        self.local_qm: uuid.UUID = store.qm_guid
        self.max_packet_size = config.peer_max_packet_size
        self.settings = SessionSettings(
            window_size=config.peer_window,
            ack_timeout=config.peer_ack_timeout,
            recoverable_ack_timeout=config.peer_recoverable_ack_timeout,
            init_timeout=config.peer_init_timeout,
            idle_timeout=config.peer_idle_timeout,
        )
        self.arrivals = Arrivals(
            store, identity, outcomes, max_rejected_bytes=config.peer_max_rejected_bytes
        )
        self.outcomes = outcomes
        self.confirmations = confirmations
        #: Sends our FinalAcks, settles the ones that arrive.
        self.final_acks = FinalAckCourier(self, confirmations, self.log)
        self.outgoing: dict[int, OutgoingQueue] = {}
        #: Outgoing queues by their sequence timestamp (which names them in an OrderAck).
        self.by_stamp: dict[int, OutgoingQueue] = {}
        self.links: dict[tuple[str, int], Link] = {}
        self.connections: set[PeerConnection] = set()
        #: Accepted connections whose session is not open yet, and their budgets.
        self.admission = peer_admission(config)
        #: The connection each source queue manager's messages last arrived on.
        self.return_paths: dict[bytes, PeerConnection] = {}
        now = time.time()
        # The sequence machines run on trio's clock; the store and status speak
        # unix time. This offset converts between the two.
        self._wall_offset = now - _clock()
        persisted: dict[StreamKey, StreamState] = {
            (state.queue_key, state.source_qm): StreamState(
                sequence_id=state.sequence_id,
                last_number=state.last_number,
                reject_count=state.reject_count,
                last_access=state.last_access - self._wall_offset,
            )
            for state in store.incoming_states()
        }
        self.incoming = IncomingSequences(
            persisted,
            order_ack_delay=config.peer_order_ack_delay,
            max_order_ack_delay=config.peer_order_ack_max_delay,
        )
        self.history = MessageHistory(
            store.message_history(),
            size=config.peer_history_size,
            seconds=config.peer_history_seconds,
            now=now,
        )
        self._ack_ids = itertools.count(1)
        self._order_ack_wake = trio.Event()
        self._timer_wake = trio.Event()
        self._forget_wake = trio.Event()
        self._forgetting: list[OutgoingQueue] = []
        self._nursery: trio.Nursery | None = None
        #: Arrivals since the start: received, rejected by the exactly-once
        #: rule, dropped as duplicates, dead-lettered.
        self.received = 0
        self.rejected = 0
        self.duplicates = 0
        self.dead_lettered = 0
        for record in store.list_queues():
            if record.kind is storage.QueueKind.OUTGOING:
                self._add_queue(record, at_start=True)
        signals.listeners.append(self.queues_changed)

    # ------------------------------------------------------------------ running

    async def run(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve peers and deliver outgoing queues until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.identities.attach(nursery, self.committer)
            for link in self.links.values():
                nursery.start_soon(link.run)
            nursery.start_soon(self._order_acks)
            nursery.start_soon(self._timers)
            nursery.start_soon(self._forgetter)
            nursery.start_soon(self.final_acks.run)
            nursery.start_soon(trio.serve_listeners, functools.partial(serve_peer, self), listeners)
            task_status.started()

    def _add_queue(
        self, record: storage.QueueRecord, *, at_start: bool = False
    ) -> OutgoingQueue | None:
        try:
            destination = RemoteDestination.from_outgoing_name(record.name)
        except ValueError:
            self.log.exception("outgoing_queue_unreadable", queue=record.name)
            return None
        state = self.store.outgoing_state(record.queue_id)
        if state is None:
            self.log.error("outgoing_state_missing", queue=record.name)
            return None
        hop = self.config.routes.get(destination.endpoint, destination.endpoint)
        queue = OutgoingQueue(self, record, destination, state, hop, at_start=at_start)
        self.outgoing[record.queue_id] = queue
        self.by_stamp[state.sequence_timestamp] = queue
        link = self.links.get(hop)
        if link is None:
            link = self.links[hop] = Link(self, hop)
            if self._nursery is not None:
                self._nursery.start_soon(link.run)
        link.queues.append(queue)
        queue.link = link
        return queue

    def queues_changed(self, queue_ids: Iterable[int]) -> None:
        """Messages were appended to (or removed from) these queues (a commit)."""
        for queue_id in queue_ids:
            queue = self.outgoing.get(queue_id)
            if queue is None:
                record = self.store.get_queue_by_id(queue_id)
                if record is None or record.kind is not storage.QueueKind.OUTGOING:
                    continue
                queue = self._add_queue(record)
                if queue is None:
                    continue
            queue.fill()
            queue.wake()

    # ------------------------------------------------------------------ peer connections

    def denied(self, connection: PeerConnection) -> Callable[[storage.QueueRecord], bool] | None:
        """Whether a queue's permissions refuse messages from ``connection``'s peer
        (``peer:<identity>``; ``peer:anonymous`` without mutual TLS), or None."""
        authorization = self.authorization
        if authorization is None or not authorization.enabled:
            return None
        return authorization.refuses_peer(connection.identity)

    def connection_ended(self, connection: PeerConnection) -> None:
        """A connection closed (either side, any reason)."""
        self.connections.discard(connection)
        self.final_acks.connection_ended(connection)
        for key, path in list(self.return_paths.items()):
            if path is connection:
                del self.return_paths[key]
        level = "info" if connection.opened.is_set() else "warning"
        getattr(connection.log, level)("peer_session_closed", reason=connection.close_reason)

    # ------------------------------------------------------------------ arrivals

    def delivered(
        self, connection: PeerConnection, packet: wire.UserMessage, recoverable: int | None
    ) -> None:
        """A user packet arrived on ``connection`` (``recoverable``: its number
        for the SessionAck bitmap, once it is durable)."""
        kind = wire.classify_packet(packet)
        if kind is wire.PacketKind.ORDER_ACK:
            self._order_ack_arrived(packet)
            self._processed(connection, recoverable)
            return
        if kind is wire.PacketKind.FINAL_ACK:
            self.final_acks.arrived(connection, packet, recoverable)
            return
        user = packet.user
        self.received += 1
        self.return_paths[user.source_qm.bytes] = connection
        queue_key, remote = self.arrivals.destination(packet)
        if remote is not None:
            arrival = self.arrivals.relay(packet, remote, wall=time.time())
            self._store_plain(connection, packet, recoverable, arrival, history=False)
            return
        if packet.transaction is not None:
            self._arrived_transactional(connection, packet, recoverable, queue_key)
        else:
            self._store_plain(
                connection,
                packet,
                recoverable,
                self.arrivals.local(
                    packet, queue_key, wall=time.time(), denied=self.denied(connection)
                ),
            )

    def _processed(self, connection: PeerConnection, recoverable: int | None) -> None:
        if recoverable is not None:
            connection.persisted(recoverable)

    def _arrived_transactional(
        self,
        connection: PeerConnection,
        packet: wire.UserMessage,
        recoverable: int | None,
        queue_key: str | None,
    ) -> None:
        header = packet.transaction
        assert header is not None
        source = packet.user.source_qm.bytes
        stream_name = queue_key or wire.queue_text(packet.user.destination)
        key: StreamKey = (stream_name, source)
        if not self.incoming.offer(key, header, trio.current_time()):
            # A duplicate or out of order: dropped, but it still counts in the
            # session, and the OrderAck timer re-announces what is accepted.
            self.rejected += 1
            self._processed(connection, recoverable)
            self._order_ack_wake.set()
            return
        arrival = self.arrivals.local(
            packet, queue_key, wall=time.time(), denied=self.denied(connection)
        )
        state = self.incoming.accepted_state(key)
        assert state is not None
        record = storage.RecordIncoming(
            source, stream_name, state.sequence_id, state.last_number, 0, time.time()
        )

        def stored(results: list[storage.Result]) -> None:
            self.incoming.persisted(
                key, header.sequence_id, header.sequence_number, trio.current_time()
            )
            self._order_ack_wake.set()
            self._processed(connection, recoverable)
            self._after_store(packet, arrival, results, sequence=header.sequence_number)

        connection.accept(arrival.ops, stored, stream=key, stream_state=record)

    def _store_plain(
        self,
        connection: PeerConnection,
        packet: wire.UserMessage,
        recoverable: int | None,
        arrival: Arrival,
        *,
        history: bool = True,
    ) -> None:
        ops = arrival.ops
        hkey = b""
        if history:
            user = packet.user
            # One message id may reach several queues here (a multiple-element
            # name, a distribution list): each copy is its own, so the key names
            # the destination too. The bare id is a key written before that.
            bare = user.source_qm.bytes + (user.message_id & _U32_MAX).to_bytes(4, "big")
            destination = arrival.queue_key or wire.queue_text(user.destination)
            hkey = bare + zlib.crc32(destination.lower().encode()).to_bytes(4, "big")
            if hkey in self.history or bare in self.history:
                self.duplicates += 1
                # Its first copy may still be on its way to the disk: the
                # duplicate counts in a SessionAck only after what was written
                # before it.
                connection.accept((), lambda _: self._processed(connection, recoverable))
                return
            self.history.add_pending(hkey)
            forget = self.history.evictions(time.time())
            ops = (*ops, storage.RememberMessageIds((hkey,), forget))

        def stored(results: list[storage.Result]) -> None:
            if hkey:
                self.history.stored(hkey, time.time())
            self._processed(connection, recoverable)
            self._after_store(packet, arrival, results)

        connection.accept(ops, stored)

    def _after_store(
        self,
        packet: wire.UserMessage,
        arrival: Arrival,
        results: list[storage.Result],
        *,
        sequence: int | None = None,
    ) -> None:
        woken = list(touched_queues(self.store, arrival.ops))
        rejection = arrival.rejection
        for result in results:
            if isinstance(result, storage.Fallback):
                rejection = wire.MessageClass.NACK_Q_EXCEED_QUOTA
                result = result.result
            if isinstance(result, storage.Appended):
                woken.append(result.queue_id)
        if woken:
            self.signals.notify(woken)
        if rejection is not None:
            self.dead_lettered += 1
            self.log.warning(
                "message_rejected",
                message_id=wire.format_message_id(packet.user.source_qm, packet.user.message_id),
                source_qm=str(packet.user.source_qm),
                queue=arrival.queue_key or wire.queue_text(packet.user.destination),
                sequence=sequence,
                message_class=_class_name(rejection),
                kept=arrival.kept,
            )

    def run_failed(self, streams: Iterable[Any]) -> None:
        """A run of arrived messages could not be stored: nothing of it counts."""
        for key in streams:
            self.incoming.rolled_back(key)

    # ------------------------------------------------------------------ acknowledgments

    def acked(self, tags: Iterable[Any], connection: PeerConnection | None = None) -> None:
        """The peer acknowledged these transmissions (session level; a recoverable
        one once the peer stored it)."""
        for tag in tags:
            if tag is None:
                continue
            if isinstance(tag, FinalAckTag):
                self.final_acks.acked(connection, tag)
                continue
            queue, lookup_id = tag
            ids = queue.machine.session_acked(lookup_id, persisted=True)
            if ids:
                self.forget(queue, ids)

    def _order_ack_arrived(self, packet: wire.UserMessage) -> None:
        ack = wire.OrderAck.from_message(packet)
        target_qm = packet.user.destination_qm
        if target_qm != wire.NULL_GUID and target_qm != self.local_qm:
            # For another queue manager whose messages we relayed: pass it back.
            path = self.return_paths.get(target_qm.bytes)
            if path is not None:
                path.send_user_packet(wire.build_packet(dataclasses.replace(packet, session=None)))
            return
        queue = self.by_stamp.get(ack.sequence_id.timestamp)
        if queue is None:
            self.log.debug("order_ack_unknown_sequence", sequence=str(ack.sequence_id))
            return
        ids = queue.machine.order_ack(ack.sequence_id, ack.sequence_number, trio.current_time())
        queue.last_order_ack = time.time()
        self.wake_timers()  # progress restarts the resend timer
        if ids:
            self.forget(queue, ids)

    def forget(self, queue: OutgoingQueue, lookup_ids: Iterable[int]) -> None:
        """Remove acknowledged entries from an outgoing queue (written in the background)."""
        queue.to_forget.extend(lookup_ids)
        if queue not in self._forgetting:
            self._forgetting.append(queue)
        self._forget_wake.set()

    async def _forgetter(self) -> None:
        while True:
            if not self._forgetting:
                self._forget_wake = trio.Event()
                await self._forget_wake.wait()
                continue
            queues, self._forgetting = self._forgetting, []
            async with trio.open_nursery() as nursery:
                for queue in queues:
                    if queue.purging or not queue.to_forget:
                        # A purge reports its removals before any later forget
                        # (the sequence machine needs that order); it calls
                        # forget() again when it is done.
                        continue
                    ids = tuple(queue.to_forget)
                    queue.to_forget.clear()
                    queue.machine.forget_started(ids)
                    nursery.start_soon(self._forget_one, queue, ids)

    async def _forget_one(self, queue: OutgoingQueue, ids: tuple[int, ...]) -> None:
        forget = storage.ForgetOutgoing(queue.queue_id, ids)
        unit = storage.Unit((forget, *queue.delivery_reports(ids)))
        try:
            outcome = await self.committer.submit(unit)
        except Exception as exc:
            self.log.exception("outgoing_forget_failed", queue=queue.name, error=str(exc))
            queue.machine.forget_failed(ids)
            self.forget(queue, ids)
            await trio.sleep(1.0)
            return
        result = outcome.results[0]
        if isinstance(result, storage.Forgotten):
            queue.forgotten(ids, result.state)
            if len(unit.ops) > 1:
                self.signals.notify(touched_queues(self.store, unit.ops[1:]))
        elif isinstance(result, storage.Failed) and isinstance(result.error, storage.QueueMissing):
            self._drop_queue(queue)
        else:
            self.log.error("outgoing_forget_failed", queue=queue.name, error=str(outcome.error))
            queue.machine.forget_failed(ids)

    def _drop_queue(self, queue: OutgoingQueue) -> None:
        self.outgoing.pop(queue.queue_id, None)
        self.by_stamp.pop(queue.sequence_timestamp, None)
        if queue.link is not None and queue in queue.link.queues:
            queue.link.queues.remove(queue)

    async def _order_acks(self) -> None:
        incoming = self.incoming
        while True:
            deadline = incoming.next_deadline()
            self._order_ack_wake = trio.Event()
            if deadline is None or deadline > trio.current_time():
                with trio.move_on_at(math.inf if deadline is None else deadline):
                    await self._order_ack_wake.wait()
            for due in incoming.due(trio.current_time()):
                path = self.return_paths.get(due.key[1])
                if path is None:
                    continue  # re-announced when the sender resends
                ack = wire.OrderAck(
                    source_qm=self.local_qm,
                    destination=wire.ORDER_QUEUE,
                    destination_qm=uuid.UUID(bytes=due.key[1]),
                    message_id=next(self._ack_ids) & _U32_MAX,
                    sent_time=int(time.time()),
                    sequence_id=due.sequence_id,
                    sequence_number=due.number,
                    previous_sequence_number=max(0, due.number - 1),
                )
                path.send_user_packet(wire.build_packet(ack))

    def wake_timers(self) -> None:
        """An outgoing sequence armed a timer."""
        self._timer_wake.set()

    async def _timers(self) -> None:
        while True:
            deadlines = [
                deadline
                for queue in self.outgoing.values()
                if (deadline := queue.machine.next_deadline()) is not None
            ]
            self._timer_wake = trio.Event()
            with trio.move_on_at(min(deadlines, default=math.inf)):
                await self._timer_wake.wait()
            now = trio.current_time()
            for queue in list(self.outgoing.values()):
                deadline = queue.machine.next_deadline()
                if deadline is not None and deadline <= now:
                    queue.machine.timer(now)
                    queue.wake()

    # ------------------------------------------------------------------ control and status

    def outgoing_infos(self) -> tuple[cf.OutgoingInfo, ...]:
        """Every outgoing queue, by destination."""
        queues = sorted(self.outgoing.values(), key=lambda queue: queue.name)
        return tuple(queue.info() for queue in queues)

    def next_hops(self) -> dict[int, str]:
        """The next hop (``host:port``) of each outgoing queue, by queue id."""
        return {
            queue.queue_id: f"{queue.hop[0]}:{queue.hop[1]}" for queue in self.outgoing.values()
        }

    def incoming_infos(self) -> tuple[cf.IncomingInfo, ...]:
        """Every incoming transactional stream."""
        out = []
        for (queue_key, source), state in self.incoming.streams():
            sequence = wire.TxSequenceId.from_value(state.sequence_id)
            out.append(
                cf.IncomingInfo(
                    source_qm=uuid.UUID(bytes=source),
                    queue=queue_key,
                    sequence_timestamp=sequence.timestamp,
                    sequence_ordinal=sequence.ordinal,
                    last_number=state.last_number,
                    reject_count=state.reject_count,
                    last_access=state.last_access + self._wall_offset,
                )
            )
        return tuple(out)

    def find(self, destination: str) -> OutgoingQueue:
        """The outgoing queue of a destination format name (or its listed name).

        Raises:
            InvalidName, QueueNotFound
        """
        text = destination.strip()
        for queue in self.outgoing.values():
            if text.lower() in (queue.name, queue.destination.display_name.lower()):
                return queue
        parsed = parse_format_name(text, self.identity)
        if parsed.is_multiple or parsed.elements[0].is_local:
            msg = f"{destination!r} is not a queue on another queue manager"
            raise InvalidName(msg)
        name = RemoteDestination.from_address(parsed.elements[0]).outgoing_name
        for queue in self.outgoing.values():
            if queue.name == name:
                return queue
        msg = f"there is no outgoing queue for {destination!r}"
        raise QueueNotFound(msg)

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


def _clock() -> float:
    """trio's clock inside a run; the monotonic clock outside one (tests)."""
    try:
        return trio.current_time()
    except RuntimeError:
        return time.monotonic()


def _class_name(value: int) -> str:
    try:
        return wire.MessageClass(value).name
    except ValueError:
        return hex(value)
