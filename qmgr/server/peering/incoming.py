"""The receiving side of the peering adapter: carries out what the receiver decides.

Theory of operation
-------------------
Every user packet that arrives on a peer connection comes to
:meth:`Incoming.arrived`. The decisions are made elsewhere, and this module
only carries them out, in this order:

1. the sans-IO :class:`~qmgr.protocol.Receiver` says what the packet is
   (``arrive``): an OrderAck for one of our sequences (handed to the
   sending side), a FinalAck about one of our messages (settled by
   :mod:`.final_acks`, through the hub), an acknowledgment to pass on along a
   return path (another destination's FinalAck is stored first, and forgotten
   once the next hop has it: :mod:`.relayed_acks`), another destination's FinalAck to
   keep (stored, then acknowledged, for the FinalAck courier to pass on when
   its source is reachable again), or a message;
2. for a message, the core decides its destination
   (:class:`qmgr.core.arrivals.Arrivals`: a queue here, or another queue
   manager, and then whether the outgoing queue still holds a copy of it:
   ``Arrivals.held``, read from the store's index of relayed entries) and
   the receiver accepts it or drops it (``accept``): a dropped duplicate,
   or a relayed resend whose copy is held, counts in the SessionAck once the
   writes before it are persisted, with nothing written or forwarded;
3. an accepted message is stored: the core's operations (the append, or
   the refusal with its dead-letter copy and reports, or the relay), plus
   what the receiver asked (``storage.RememberMessageIds``, or the stream's
   new state as ``storage.RecordIncoming``), in the connection's next write;
4. once that write is persisted, the receiver hears it, the packet counts in
   the connection's SessionAck, the queues it reached wake their readers,
   and a refusal is logged (``message_rejected``); transactional, its
   stream's OrderAck is armed, and the OrderAck task sends what is due along
   the return paths. If the write fails, the receiver rolls the run back.

Durability before acknowledgment and exactly-once are the receiver's rules
(see ``qmgr.protocol.receiver``); the order above is what keeps them here:
nothing is acknowledged before the write that holds it is persisted.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Protocol

import trio

import storage
import wire
from qmgr.core.arrivals import Arrival, Arrivals
from qmgr.protocol import (
    Accepted,
    ArrivalKind,
    Dropped,
    FinalAckArrived,
    FinalAckToKeep,
    OrderAckArrived,
    PassOn,
    Receiver,
    ReturnPaths,
    StreamState,
)
from qmgr.protocol.return_paths import MAX_STREAM_PATHS
from wire import client as cf

from ..signals import touched_queues
from .connection import PeerConnection
from .parts import PeeringParts
from .relayed_acks import RelayedFinalAcks

__all__ = ["RELAYED_SOURCE", "Incoming", "IncomingRoutes"]

#: Store setting prefix of a relayed source: ``relayed-source:<GUID hex>`` for
#: each queue manager whose transactional messages this router relayed.
RELAYED_SOURCE: Final = "relayed-source:"


class IncomingRoutes(Protocol):
    """Where the receiving side hands what is not its own (the hub)."""

    def order_ack_arrived(self, ack: wire.OrderAck, came_from: uuid.UUID | None) -> None:
        """An OrderAck for one of our sequences, on a session of ``came_from``: for
        the sending side."""
        ...

    def final_ack_arrived(
        self, connection: PeerConnection, ack: wire.FinalAck, recoverable: int | None
    ) -> None:
        """A FinalAck about one of our messages: to settle its copy."""
        ...

    def denied(
        self, connection: PeerConnection, packet: wire.UserMessage
    ) -> Callable[[storage.QueueRecord], bool] | None:
        """Whether a queue's permissions refuse ``packet`` from ``connection``
        (None: no check)."""
        ...

    def hop_of(self, name: str) -> uuid.UUID | None:
        """The GUID of the queue manager at the next hop of the outgoing queue
        ``name`` (None: no such queue, or no session with its hop yet)."""
        ...

    def send_kept_final_ack(self, connection: PeerConnection, key: bytes, data: bytes) -> None:
        """Send a stored FinalAck (``key``) of another queue manager on
        ``connection``, as it came (``data``), to forget once the peer has it."""
        ...

    def relayed_setting(self, name: str, until: float) -> storage.Operation | None:
        """The operation that keeps, with a relayed message awaiting its FinalAck
        until ``until`` through the outgoing queue ``name``, that deadline for
        after a restart (None: the store has one late enough)."""
        ...

    def relayed_to_confirm(self, queue_id: int, until: float, name: str) -> None:
        """A relayed message whose FinalAck its source awaits until ``until``
        (unix seconds) is stored in the outgoing queue ``queue_id`` (``name``)."""
        ...


class Incoming:
    """What arrives from peers, carried out (see the module docstring).

    Args:
        parts: the daemon's parts (the ``peers`` settings: history, OrderAck
            delays, refusals kept).
        routes: where OrderAcks and FinalAcks for us go, and who may send to
            which queue.
        message_ids: gives each OrderAck's message id (this queue manager's
            message-id ordinals; a count from 1 without).
    """

    def __init__(
        self,
        parts: PeeringParts,
        routes: IncomingRoutes,
        *,
        message_ids: Callable[[], int] | None = None,
    ) -> None:
        self.parts = parts
        self.routes = routes
        config = parts.config
        store = parts.store
        #: The core's decisions about where arriving messages go.
        self.arrivals = Arrivals(
            store,
            parts.identity,
            parts.outcomes,
            max_rejected_bytes=config.peer_max_rejected_bytes,
            router=config.peer_router,
            confirmation_delay=parts.confirmations.delay,
        )
        now = parts.wall()
        # The receiver's timers run on trio's clock; the store and status speak
        # unix time. This offset converts between the two.
        self._wall_offset = now - _clock()
        states = store.incoming_states()
        streams = {
            (state.queue_key, state.source_qm, state.sequence_timestamp): StreamState(
                sequence_id=state.sequence_id,
                last_number=state.last_number,
                reject_count=state.reject_count,
                last_access=state.last_access - self._wall_offset,
                resync=state.resync,
            )
            for state in states
        }
        #: The exactly-once decisions, the return paths and the OrderAcks.
        self.receiver: Receiver[PeerConnection] = Receiver(
            store.qm_guid,
            streams=streams,
            history=store.message_history(),
            wall=now,
            history_size=config.peer_history_size,
            history_seconds=config.peer_history_seconds,
            order_ack_delay=config.peer_order_ack_delay,
            max_order_ack_delay=config.peer_order_ack_max_delay,
            message_ids=message_ids,
            return_paths=ReturnPaths(
                router=config.peer_router,
                closing=lambda connection: connection.closing,
                vias=_vias(states),
                hop_of=routes.hop_of,
                relayed_sources=[
                    bytes.fromhex(key[len(RELAYED_SOURCE) :])
                    for key, _ in store.settings(RELAYED_SOURCE, limit=MAX_STREAM_PATHS)
                ],
            ),
        )
        self._order_ack_wake = trio.Event()
        #: Other queue managers' FinalAcks, passed on or kept.
        self.relayed_final_acks = RelayedFinalAcks(
            store, routes.send_kept_final_ack, self._not_kept
        )
        #: Messages refused at arrival (kept in a dead-letter queue, or not) since the start.
        self.dead_lettered = 0
        #: The same, by message class (for the metrics).
        self.refused: dict[int, int] = {}
        #: Of those, the ones not kept (``peers.max_rejected_bytes`` reached).
        self.refused_not_kept = 0

    # ------------------------------------------------------------------ arrivals

    def arrived(
        self, connection: PeerConnection, packet: wire.UserMessage, recoverable: int | None
    ) -> None:
        """A user packet arrived on ``connection`` (``recoverable``: its number for
        the SessionAck bitmap, once it is persisted)."""
        arrival = self.receiver.arrive(packet, connection, hop=connection.remote_qm)
        if arrival is ArrivalKind.MESSAGE:
            self._message(connection, packet, recoverable)
        elif isinstance(arrival, FinalAckArrived):
            self.routes.final_ack_arrived(connection, arrival.ack, recoverable)
        elif isinstance(arrival, FinalAckToKeep):
            # Its source is unreachable now: kept, and acknowledged once stored,
            # for the courier to pass on when the source has a session here.
            self.relayed_final_acks.keep(connection, arrival.ack, recoverable)
        elif isinstance(arrival, PassOn) and arrival.ack is not None:
            # Stored, acknowledged, then sent: forgotten once the next hop has it.
            self.relayed_final_acks.pass_on(
                connection, arrival.ack, arrival.data, arrival.path, recoverable
            )
        else:
            if isinstance(arrival, OrderAckArrived):
                self.routes.order_ack_arrived(arrival.ack, connection.remote_qm)
            elif arrival is ArrivalKind.NOT_FROM_HOP:
                self.parts.log.warning(
                    "order_ack_refused",
                    peer=connection.peer,
                    from_qm=str(connection.remote_qm),
                    source_qm=str(packet.user.destination_qm),
                    reason="it acknowledges a stream relayed here, and came from another "
                    "queue manager than the one the stream was relayed to",
                )
            elif isinstance(arrival, PassOn):
                arrival.path.send_user_packet(arrival.data, recoverable=arrival.recoverable)
            else:  # for another queue manager, and not passed on: it announces again
                self.parts.log.debug(
                    "acknowledgment_dropped",
                    peer=connection.peer,
                    destination_qm=str(packet.user.destination_qm),
                    hops=packet.user.hop_count,
                )
            connection.acknowledge(recoverable)

    def _not_kept(self, connection: PeerConnection, ack: wire.FinalAck, reason: str) -> None:
        """A FinalAck to keep found no room."""
        self.receiver.unroutable += 1
        self.parts.log.warning(
            "final_ack_not_kept",
            peer=connection.peer,
            source_qm=str(ack.acked_source_qm),
            reason=reason,
        )

    def _message(
        self, connection: PeerConnection, packet: wire.UserMessage, recoverable: int | None
    ) -> None:
        now, wall = trio.current_time(), self.parts.wall()
        arrivals = self.arrivals
        queue_key, remote = arrivals.destination(packet, here=connection.itself)
        relay, held = None, False
        if remote is not None:
            # A resend of what the outgoing queue still holds (the store's index)
            # is dropped: not even built again.
            held = arrivals.held(packet, remote)
            if not held:
                relay = arrivals.relay(packet, remote, wall=wall)
        decision = self.receiver.accept(
            packet,
            queue_key=queue_key,
            relayed=remote is not None,
            refused=relay is not None and relay.refusal is not None,
            held=held,
            now=now,
            wall=wall,
            relayed_to=None if remote is None else remote.outgoing_name,
        )
        if decision is Dropped.REJECTED:
            # Out of order or already stored: it still counts in the session,
            # and the OrderAck re-announces what is persisted.
            connection.acknowledge(recoverable)
            self._order_ack_wake.set()
            return
        if decision is Dropped.DUPLICATE or decision is Dropped.HELD:
            if decision is Dropped.HELD:
                self.parts.log.debug(
                    "relayed_resend_dropped",
                    peer=connection.peer,
                    source_qm=str(packet.user.source_qm),
                    message_id=packet.user.message_id,
                )
            # Its first copy may still be on its way to the disk: it counts in a
            # SessionAck only after what was written before it.
            connection.persister.store((), lambda _: connection.acknowledge(recoverable))
            return
        if remote is not None:
            assert relay is not None  # a copy held is never accepted
            arrival = relay
        else:
            denied = self.routes.denied(connection, packet)
            arrival = arrivals.to_queue(packet, queue_key, wall=wall, denied=denied)
        ops = arrival.ops
        if decision.remember:
            ops = (*ops, storage.RememberMessageIds((decision.remember,), decision.forget))
        if decision.relayed_source:
            key = RELAYED_SOURCE + decision.relayed_source.hex()
            ops = (*ops, storage.SetSetting(key, ""))
        if arrival.confirm_by is not None and arrival.relay_to is not None:
            setting = self.routes.relayed_setting(
                arrival.relay_to.outgoing_name, arrival.confirm_by
            )
            if setting is not None:
                ops = (*ops, setting)
        stream, state = decision.stream, decision.state
        record = None
        if stream is not None and state is not None:
            # The stream's timestamp is its state's (sequence_id >> 32): the
            # record's key takes it from there.
            record = storage.RecordIncoming(
                stream[1],
                stream[0],
                state.sequence_id,
                state.last_number,
                state.reject_count,
                state.last_access,
                follows=decision.follows,
                via=_via(connection, packet),
            )

        def persisted(results: list[storage.Result]) -> None:
            self.receiver.persisted(decision, now=trio.current_time(), wall=self.parts.wall())
            if stream is not None:
                self._order_ack_wake.set()
            connection.acknowledge(recoverable)
            self._stored(packet, arrival, results, decision)

        connection.persister.store(ops, persisted, accepted=decision, stream=stream, record=record)

    def _stored(
        self,
        packet: wire.UserMessage,
        arrival: Arrival,
        results: list[storage.Result],
        decision: Accepted,
    ) -> None:
        """Wake the readers of the queues an arrival reached; log a refusal."""
        parts = self.parts
        woken = list(touched_queues(parts.store, arrival.ops))
        refusal = arrival.refusal
        for result in results:
            if isinstance(result, storage.Fallback):
                refusal = wire.MessageClass.NACK_Q_EXCEED_QUOTA
                result = result.result
            if isinstance(result, storage.Appended):
                woken.append(result.queue_id)
                if arrival.confirm_by is not None and arrival.relay_to is not None:
                    self.routes.relayed_to_confirm(
                        result.queue_id, arrival.confirm_by, arrival.relay_to.outgoing_name
                    )
        if woken:
            parts.signals.notify(woken)
        if refusal is not None:
            self.dead_lettered += 1
            self.refused[refusal] = self.refused.get(refusal, 0) + 1
            if arrival.no_room:
                self.refused_not_kept += 1
            header = decision.header
            parts.log.warning(
                "message_rejected",
                message_id=wire.format_message_id(packet.user.source_qm, packet.user.message_id),
                source_qm=str(packet.user.source_qm),
                queue=arrival.queue_key or wire.queue_text(packet.user.destination),
                sequence=None if header is None else header.sequence_number,
                message_class=_class_name(refusal),
                kept=arrival.kept,
            )

    def rolled_back(self, accepted: Sequence[Accepted]) -> None:
        """A write of arrived messages failed: nothing of it counts."""
        self.receiver.rolled_back(accepted)

    def connection_ended(self, connection: PeerConnection) -> None:
        """``connection`` is no return path any more (and stores nothing more)."""
        self.receiver.return_paths.path_closed(connection)
        self.relayed_final_acks.connection_ended(connection)

    # ------------------------------------------------------------------ OrderAcks

    async def run(self) -> None:
        """Send the OrderAcks as they fall due, until cancelled."""
        receiver = self.receiver
        while True:
            deadline = receiver.next_deadline()
            self._order_ack_wake = trio.Event()
            if deadline is None or deadline > trio.current_time():
                with trio.move_on_at(math.inf if deadline is None else deadline):
                    await self._order_ack_wake.wait()
            for path, data in receiver.order_acks(trio.current_time(), self.parts.wall()):
                path.send_user_packet(data)

    # ------------------------------------------------------------------ status

    def infos(self) -> tuple[cf.IncomingInfo, ...]:
        """Every incoming transactional stream (one per source outgoing queue:
        a source may have several to one queue, under several names)."""
        out = []
        for (queue_key, source, _), state in self.receiver.streams():
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


def _via(connection: PeerConnection, packet: wire.UserMessage) -> bytes | None:
    """The router a message came through (the GUID bytes of the queue manager
    whose session brought it, when that is not its source), else None."""
    hop = connection.remote_qm
    return None if hop is None or hop == packet.user.source_qm else hop.bytes


def _vias(states: Iterable[storage.IncomingState]) -> dict[bytes, bytes]:
    """The router each source's messages last came through, by source GUID
    bytes, from the streams' stored states (of a source's streams that came
    through a router, the latest says), the least recent first."""
    latest: dict[bytes, storage.IncomingState] = {}
    for state in states:
        known = latest.get(state.source_qm)
        if state.via is not None and (known is None or state.last_access >= known.last_access):
            latest[state.source_qm] = state
    ordered = sorted(latest.values(), key=lambda state: state.last_access)
    return {state.source_qm: state.via for state in ordered if state.via is not None}
