"""What becomes of a message that arrives from another queue manager.

Theory of operation
-------------------
The peering layer decodes a UserMessage and asks :class:`Arrivals` where it
goes; the answer is a list of store operations (written by the daemon's
committer, in one write transaction with the run of messages it belongs to)
and, for a message this queue manager must refuse, the MSMQ class that says
why ([MS-MQQB] §3.1.5.8, reference §16). Nothing here writes, waits or
logs.

* Addressed to a queue here (a direct name that names this queue manager):
  the message is appended to that queue. A refusal at arrival is never a
  silent drop and never stalls the sender's stream: the message is kept in
  this queue manager's dead-letter queue with the class that says why
  (``system$;deadxact`` for a transactional message, ``system$;deadletter``
  for another), and the transactional stream still advances past it:

  ============================================  ===============================
  condition                                     class
  ============================================  ===============================
  no such queue (or a system or journal queue)  NACK_BAD_DST_Q
  transactional message, queue not              NACK_NOT_TRANSACTIONAL_Q
  non-transactional message, queue is           NACK_NOT_TRANSACTIONAL_MSG
  the queue's quota is full                     NACK_Q_EXCEED_QUOTA
  ============================================  ===============================

  The quota is judged when the run is written (``storage.Attempt``: the
  append, or else the dead-letter copy), by the quota the queue has then; a
  message for a queue that had none as it arrived is taken whatever quota
  the queue was given meanwhile (``AppendMessage.exempt``). What refusals may keep is bounded
  (``max_rejected_bytes``): once the dead-letter queue holds that much, a
  refused message is still reported (its NACK) but not kept here
  (:attr:`Arrival.no_room`, and the adapter logs it), so a peer whose
  messages are refused cannot fill the store (a transactional one whose
  source runs the confirmation process is kept by its source, on the
  FinalAck's NACK). A transactional message with
  MQMSG_DEADLETTER refused for another reason than its queue's not being
  transactional is never kept here: its source keeps the dead-letter copy on
  the FinalAck's NACK, as MSMQ's does ([MS-MQQB] §3.1.5.7); one for a queue
  that is not transactional is kept here as well (seed 000), and its source
  keeps its own. Acknowledgment messages to admin
  queues and FinalAcks for these outcomes are the next layer's work; the
  outcome recorded here (class, queue, time) is what they will report.
* Which queue manager a message is for. A queue manager that is not a
  router (``router=False``, the default) takes every message that arrives on
  a peer session as its own: the host and port its sender wrote only chose
  the connection (they may be a port map, a NAT, a DNS alias), so only the
  queue path counts, and nothing is ever passed on. A router takes a message
  as its own when its host and port name this queue manager
  (:class:`~qmgr.core.names.LocalIdentity`, aliases included), and otherwise:
* Addressed to a queue on another queue manager (routers only): store and
  forward. The packet is kept whole in the outgoing queue for that
  destination, its hop count incremented and its TransactionHeader
  untouched; a message that would pass :data:`wire.MAX_HOPS` is refused with
  NACK_HOP_COUNT_EXCEEDED. The entry is appended with the message's *relay
  id* (:func:`relay_id`: its source, its sequence id and number if it is
  transactional, its message id if not, and its hop count), which the store
  indexes for as long as the entry is there; :meth:`Arrivals.held` reads
  that index, so that a resend of a message the outgoing queue still holds
  (a transactional source resends everything its destination has not
  acknowledged, for as long as the next hop is down) is known as such.
  Whether to drop it is the receiver's decision (``qmgr.protocol.receiver``).
  A relayed transactional message whose source awaits its FinalAck before a
  deadline carries that deadline (:attr:`Arrival.confirm_by`): the FinalAck
  comes back through this router, so the router keeps its session to the
  next hop up until then (``qmgr.server.peering.final_acks``).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

import wire
from storage import (
    RELAY_ID_SIZE,
    AppendMessage,
    Attempt,
    Operation,
    QueueKind,
    QueueRecord,
    Store,
    Together,
)
from wire import INFINITE, MAX_HOPS, MessageClass, MessageProperties, UserMessage

from . import names
from .addressing import arrival_address
from .confirmation import confirmation_deadline
from .final_acks import final_ack_note, wants_final_ack
from .outcomes import JOURNAL_DEADLETTER, SENT_TIME_SLACK, Outcomes, deadline_after
from .outgoing import EntryOrigin, RemoteDestination

__all__ = [
    "DESTINATION_CACHE_SIZE",
    "REJECTED_MESSAGE_COST",
    "Arrival",
    "Arrivals",
    "relay_id",
]

#: Destination names remembered; the cache starts afresh when full.
DESTINATION_CACHE_SIZE: Final = 4096
_RELAY_ID: Final = struct.Struct(">16sQIIB")
assert _RELAY_ID.size == RELAY_ID_SIZE


@dataclass(frozen=True, slots=True)
class Arrival:
    """Where an arriving message goes."""

    #: The store operations that keep it.
    ops: tuple[Operation, ...]
    #: The destination queue's key here (the key of its incoming stream), or
    #: None for a message relayed to another queue manager.
    queue_key: str | None
    #: Why it was refused (a NACK class), or None.
    refusal: int | None = None
    #: For a relayed message: where it goes next.
    relay_to: RemoteDestination | None = None
    #: For a refused message: whether a copy is kept in a dead-letter queue
    #: here. False when its source keeps the copy (a transactional one that
    #: asked for MQMSG_DEADLETTER, refused for another reason than its queue's
    #: not being transactional, or too late), when it did not ask for one
    #: (too late), and when that queue holds ``max_rejected_bytes`` already.
    kept: bool = True
    #: For a refused message: not kept for that last reason alone.
    no_room: bool = False
    #: For a relayed message whose source awaits its FinalAck before a
    #: deadline: that deadline (unix seconds, as the source counts it with this
    #: queue manager's ``XactDelayReceiveNack``), else None.
    confirm_by: float | None = None


#: What a kept refusal counts against ``max_rejected_bytes`` besides its body:
#: about what its record and index entries take in the store.
REJECTED_MESSAGE_COST: Final = 512


@dataclass(slots=True, eq=False)
class Arrivals:
    """Decides arrivals against ``store``'s queues (read only)."""

    _store: Store
    _identity: names.LocalIdentity
    _outcomes: Outcomes
    _: KW_ONLY
    #: Bytes the dead-letter queue may hold before refusals are no longer kept.
    max_rejected_bytes: int | None = None
    #: Whether messages for other queue managers are passed on.
    router: bool = False
    #: ``XactDelayReceiveNack`` (None: unset), for the deadline of a relayed
    #: message's confirmation (:attr:`Arrival.confirm_by`).
    confirmation_delay: float | None = None
    # Destination names already resolved: senders repeat themselves.
    _destinations: dict[str, tuple[str | None, RemoteDestination | None]] = field(
        default_factory=dict, init=False, repr=False
    )

    def destination(
        self, packet: UserMessage, *, here: bool = False
    ) -> tuple[str | None, RemoteDestination | None]:
        """The local queue key a packet is addressed to, or the remote destination.

        ``here``: the packet came over a session of this queue manager with
        itself (a next hop that turned out to be this queue manager: a hairpin
        NAT, a port map of its own port): it was sent to that hop because its
        address names it, so it is for a queue here, whatever host it names,
        as at a queue manager that is not a router (a router would send it to
        that hop again, round and round until its hop count ran out).

        Returns:
            ``(queue_key, None)`` for a queue here (the key may name no queue),
            ``(None, destination)`` for a queue elsewhere (on a router only),
            ``(None, None)`` when the address cannot be understood here.
        """
        queue = packet.user.destination
        if not isinstance(queue, wire.DirectQueue):
            return None, None
        name = wire.scrubbed(queue.name)  # an unpaired surrogate names no queue here
        if here and self.router:
            return self._resolve(name, router=False)
        found = self._destinations.get(name)
        if found is None:
            found = self._resolve(name)
            if len(self._destinations) >= DESTINATION_CACHE_SIZE:
                self._destinations.clear()
            self._destinations[name] = found
        return found

    def _resolve(
        self, name: str, *, router: bool | None = None
    ) -> tuple[str | None, RemoteDestination | None]:
        """:meth:`destination` of ``name``, judged as a router does if ``router``
        (None: as this queue manager is)."""
        router = self.router if router is None else router
        element = arrival_address(name, self._identity, router=router)
        if element is None:
            return None, None
        if element.is_local:
            return element.queue, None
        return None, RemoteDestination.from_address(element)

    def to_queue(
        self,
        packet: UserMessage,
        queue_key: str | None,
        *,
        wall: float,
        denied: Callable[[QueueRecord], bool] | None = None,
    ) -> Arrival:
        """The operations keeping a message addressed to a queue here, with the
        reports of its arrival (an ACK_REACH_QUEUE or the NACK of its refusal,
        if asked), at ``wall`` (unix seconds). ``denied`` says whether the
        queue's permissions refuse the sender (NACK_ACCESS_DENIED)."""
        transactional = packet.transaction is not None
        message = _message(packet)
        store = self._store
        record = None if queue_key is None else store.get_queue(queue_key)
        refusal: int | None = None
        deadline = deadline_after(message.sent_time + SENT_TIME_SLACK, message.time_to_be_received)
        if record is None or record.kind is not QueueKind.NORMAL:
            refusal = MessageClass.NACK_BAD_DST_Q
        elif denied is not None and denied(record):
            refusal = MessageClass.NACK_ACCESS_DENIED
        elif transactional and not record.transactional:
            refusal = MessageClass.NACK_NOT_TRANSACTIONAL_Q
        elif not transactional and record.transactional:
            refusal = MessageClass.NACK_NOT_TRANSACTIONAL_MSG
        elif _expired_in_transit(message, deadline, wall):
            refusal = MessageClass.NACK_REACH_QUEUE_TIMEOUT
        note = _note(packet, message)
        if refusal == MessageClass.NACK_REACH_QUEUE_TIMEOUT:
            # Too late: the source keeps a transactional one's dead-letter copy
            # (told by FinalAck); a plain one dies here, kept only if it asked.
            reports = self._outcomes.reports(message, refusal, wall=wall, note=note)
            kept = self._outcomes.dead_letters_here(message, refusal)
            return Arrival(tuple(reports), queue_key, refusal, kept=kept)
        if refusal is not None:
            ops, kept, no_room = self._refusal(message, refusal, wall, _refusal_note(packet))
            return Arrival(ops, queue_key, refusal, kept=kept, no_room=no_room)
        assert record is not None
        # A queue without a quota as the message arrives takes it even if it
        # was given one before the run is written: it arrived before the change.
        append: Operation = AppendMessage(
            record.queue_id,
            message.raw,
            message.priority,
            message.body_size,
            deadline=deadline,
            note=note,
            exempt=record.quota is None,
        )
        reports = self._outcomes.reports(message, MessageClass.ACK_REACH_QUEUE, wall=wall)
        if reports:
            append = Together((append, *reports))
        if record.quota is None:
            return Arrival((append,), queue_key)
        quota = MessageClass.NACK_Q_EXCEED_QUOTA
        fallback, kept, no_room = self._refusal(message, quota, wall, _refusal_note(packet))
        otherwise = fallback[0] if len(fallback) == 1 else Together(fallback)
        # ``kept`` and ``no_room`` say what the fallback does, if the write takes it.
        return Arrival((Attempt(append, otherwise),), queue_key, kept=kept, no_room=no_room)

    def relay(self, packet: UserMessage, destination: RemoteDestination, *, wall: float) -> Arrival:
        """The operations passing a message on to another queue manager."""
        hops = packet.user.hop_count + 1
        if hops > MAX_HOPS:
            refusal = MessageClass.NACK_HOP_COUNT_EXCEEDED
            message = _message(packet)
            ops, kept, no_room = self._refusal(message, refusal, wall, _refusal_note(packet))
            return Arrival(ops, None, refusal, kept=kept, no_room=no_room)
        forwarded = dataclasses.replace(
            packet, user=dataclasses.replace(packet.user, hop_count=hops), session=None
        )
        transactional = packet.transaction is not None
        op = destination.append_entry(
            EntryOrigin.RELAYED,
            wire.build_packet(forwarded),
            len(packet.properties.body),
            transactional=transactional,
            recoverable=packet.is_recoverable,
            # A plain message expires at this hop as at its source (its
            # dead-letter copy here if it asked); a transactional one is its
            # source's to account for (MQQB §3.1.5.8.2, reference §15.7).
            deadline=None
            if transactional
            else deadline_after(
                packet.user.sent_time + SENT_TIME_SLACK,
                min(packet.base.time_to_reach_queue, packet.user.time_to_be_received),
            ),
            relay=relay_id(packet),
        )
        return Arrival((op,), None, relay_to=destination, confirm_by=self._confirm_by(packet))

    def _confirm_by(self, packet: UserMessage) -> float | None:
        """When the source of a relayed message gives up waiting for its FinalAck,
        or None (it awaits none, or without a deadline)."""
        header = packet.transaction
        if header is None or packet.user.time_to_be_received >= INFINITE:
            return None
        message = _message(packet)
        if not wants_final_ack(message, header):
            return None
        deadline = confirmation_deadline(message, self.confirmation_delay)
        return None if deadline is None else deadline + SENT_TIME_SLACK

    def held(self, packet: UserMessage, destination: RemoteDestination) -> bool:
        """Whether the outgoing queue for ``destination`` still holds an entry relaying
        this message (one appended by :meth:`relay` with the same :func:`relay_id`,
        committed, neither forgotten nor purged since). One seek in the store's
        index, none when that queue does not exist or is empty."""
        record = self._store.get_queue(destination.outgoing_name)
        if record is None or record.kind is not QueueKind.OUTGOING:
            return False
        return self._store.relayed_entry(record.queue_id, relay_id(packet)) is not None

    def _refusal(
        self, message: MessageProperties, message_class: int, wall: float, note: bytes
    ) -> tuple[tuple[Operation, ...], bool, bool]:
        """A refused message kept in the dead-letter queue with ``message_class``
        while it has room for refusals, and the reports it asked for (a FinalAck
        at once, if its source asked); whether the copy is kept here, and
        whether it is not for want of room."""
        reports = self._outcomes.reports(
            message, message_class, wall=wall, dead_letter=False, note=note
        )
        confirmed = message.transactional and bool(message.journal & JOURNAL_DEADLETTER)
        if confirmed and message_class != MessageClass.NACK_NOT_TRANSACTIONAL_Q:
            # Its source runs the confirmation process and keeps the dead-letter
            # copy, told by the FinalAck among the reports ([MS-MQQB] §3.1.5.7).
            # (A message for a queue that is not transactional is kept where
            # that queue is too, seed 000. One of this queue manager's own,
            # come back to it, gets no FinalAck: its copy awaiting confirmation
            # settles at its deadline.)
            return tuple(reports), False, False
        copy = self._outcomes.dead_letter(message, message_class)
        limit = self.max_rejected_bytes
        if limit is not None and not self._room_for(copy.queue_id, copy.size, limit):
            # Not kept here; a confirmed one's source keeps its copy on the
            # FinalAck's NACK among the reports.
            return tuple(reports), False, True
        return (copy, *reports), True, False

    def _room_for(self, queue_id: int, size: int, limit: int) -> bool:
        """Whether a refused message of ``size`` bytes may still be kept in the
        dead-letter queue ``queue_id`` under ``limit``: each message counts
        ``REJECTED_MESSAGE_COST`` bytes besides its body, so that empty ones
        cannot be kept without end. The store's count is read as written, so
        the refusals of one run decided together may pass the limit by that
        run (at most a run's bytes, ``MAX_RUN_BYTES``, per peer connection)."""
        record = self._store.get_queue_by_id(queue_id)
        if record is None:
            return True
        held = record.bytes + record.depth * REJECTED_MESSAGE_COST
        return held + size + REJECTED_MESSAGE_COST <= limit


def relay_id(packet: UserMessage) -> bytes:
    """What names a relayed message among the entries of its outgoing queue
    (``storage.RELAY_ID_SIZE`` bytes): its source queue manager's GUID, then,
    for a transactional message, its TxSequenceID (u64), sequence number and
    previous sequence number (u32 each), all that the destination's
    exactly-once rule reads (the outgoing queue stands for the destination: a
    source that gives all its outgoing queues one sequence id, as Windows
    does, still names each message once; a resend whose previous number
    bridges a message the source gave up since is another relay, stored
    behind the stale copy, which the destination may refuse); for any other,
    eight zero bytes, its message id (u32) and four zero bytes; last, the hop
    count it arrived with (u8). The source's resends come the same way, with
    the same count; a copy that comes back round a loop of routers has more
    hops, and is another relay: it goes on round the loop to the hop limit,
    to be kept in a dead-letter queue there, as before."""
    header = packet.transaction
    user = packet.user
    hops = user.hop_count & 0xFF
    if header is None:
        return _RELAY_ID.pack(user.source_qm.bytes, 0, user.message_id, 0, hops)
    return _RELAY_ID.pack(
        user.source_qm.bytes,
        header.sequence_id.value,
        header.sequence_number,
        header.previous_sequence_number,
        hops,
    )


def _refusal_note(packet: UserMessage) -> bytes:
    """What a transactional message refused at arrival keeps for its FinalAck: a
    refusal always sends one ([MS-MQQB] §3.1.5.8.2, §3.1.5.8.8), unlike a
    departure from its queue (§3.1.7.2.2: only with FA, JN or JP)."""
    header = packet.transaction
    return b"" if header is None else final_ack_note(header)


def _expired_in_transit(message: MessageProperties, deadline: float | None, wall: float) -> bool:
    """True if a message arrives after its time to reach the queue (or to be received).

    A time to reach the queue of 0 is MSMQ's "try once": its source sends it
    only if its destination is waiting for it (and gives it up otherwise), and
    it is taken when it comes, whatever time it took on the wire."""
    reach = message.time_to_reach_queue
    if 0 < reach < INFINITE and message.sent_time + SENT_TIME_SLACK + reach < wall:
        return True
    return deadline is not None and deadline <= wall


def _note(packet: UserMessage, message: MessageProperties) -> bytes:
    """What a transactional message that asks for a FinalAck keeps for it."""
    header = packet.transaction
    if header is None or not wants_final_ack(message, header):
        return b""
    return final_ack_note(header)


def _message(packet: UserMessage) -> MessageProperties:
    """The message as this queue manager keeps it (its reply queues named as text)."""
    return wire.received_message(packet)
