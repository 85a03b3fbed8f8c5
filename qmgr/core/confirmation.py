"""The transaction confirmation process: FinalAcks at the destination, copies at the source.

Theory of operation
-------------------
A transactional message sent to another queue manager with MQMSG_DEADLETTER
or MQMSG_JOURNAL asks to be *confirmed* (seed 003, [MS-MQQB] §3.1.5.7,
§3.1.7.2.2; its TransactionHeader carries FA):

* **At the source**, the commit that sends it also keeps a copy of it
  (``storage.AddConfirmation``, one per remote destination of the send) with
  a deadline: its time to be received plus ``XactDelayReceiveNack`` (unset:
  plus the smaller of its time to be received and its time to reach the
  queue; no deadline when it has no time to be received). The copy counts
  against the store's size like every message. When the OrderAck that
  covers the message arrives, the copy is marked *delivered*.
* **At the destination**, an arriving message that asks for it keeps its
  sequence fields in its record's note (:func:`final_ack_note`). When it
  leaves its queue (received, expired, purged, its queue deleted), or when it
  is refused at arrival, the same unit records a FinalAck for its source
  (``storage.RecordFinalAck``); the peering layer sends it, recoverable, on
  the connection that queue manager's messages come in on, and forgets it
  once the source's SessionAck says the source has stored its effect.
* **The source settles** the copy on the FinalAck (:meth:`Confirmations.settle`):
  ACK_RECEIVE puts it in ``system$;journal`` with MQMSG_JOURNAL; a NACK the
  destination gave when the message left its queue (a class with the
  receive bit, 0xC000..) or at arrival (0x8000..: a missing queue, access
  denied, too late, ...) puts it in ``system$;deadxact`` with that class and
  MQMSG_DEADLETTER, as MSMQ's source does ([MS-MQQB] §3.1.5.7); the
  destination keeps no copy of such a message but for NACK_NOT_TRANSACTIONAL_Q,
  which it keeps too (seed 000: in the dead-letter queue where that queue is).
* **The deadline** settles a copy no FinalAck settled
  (:meth:`Confirmations.expired`): with MQMSG_DEADLETTER it goes to
  ``system$;deadxact`` with NACK_RECEIVE_TIMEOUT_AT_SENDER (0xC003) if it
  was never delivered (no OrderAck covered it), NACK_RECEIVE_TIMEOUT (0xC002)
  if it was delivered and never confirmed. This settles the open question
  of reference §21.5 as mq.h's comment on 0xC003 reads; ``docs/operations.md``
  says so. With NEG_RECEIVE, the admin queue gets the 0xC003 NACK too (a
  delivered message's NACK comes from its destination).

Each settlement is one unit whose first operation deletes the copy and
fails if it is gone, so a FinalAck and the deadline racing each other
settle it once. A FinalAck that finds no copy (settled already, or a
repeat) changes nothing. Nor does one from another queue manager than the
one whose OrderAck covered the copy (the copy keeps its GUID:
``MarkDelivered(..., by=)``): only that queue manager has the message, and
another peer must not settle its copy.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Final

import wire
from storage import (
    MAX_CONFIRMATION_COPIES,
    AddConfirmation,
    Confirmation,
    MarkDelivered,
    Operation,
    SettleConfirmation,
    Store,
    Unit,
)
from wire import INFINITE, MessageClass, MessageProperties

from .errors import InvalidArgument
from .outcomes import (
    JOURNAL_DEADLETTER,
    JOURNAL_JOURNAL,
    NACK_BIT,
    SENT_TIME_SLACK,
    Outcomes,
    asks_acknowledgment,
)
from .outgoing import EntryOrigin, RemoteDestination, decode_entry, endpoint_of

__all__ = ["Confirmations", "confirmation_deadline", "wants_confirmation"]

_CONFIRMED: Final = JOURNAL_DEADLETTER | JOURNAL_JOURNAL


def wants_confirmation(message: MessageProperties) -> bool:
    """True if a transactional message asks for the confirmation process."""
    return message.transactional and bool(message.journal & _CONFIRMED)


def confirmation_deadline(message: MessageProperties, delay: float | None) -> float | None:
    """When the source gives up waiting for a confirmation (seed 003's table),
    never less than :data:`~.outcomes.SENT_TIME_SLACK` past the time to be
    received: the destination may hand the message out until a second past it
    (it counts from the whole seconds the packet says), and a copy reported
    unreceived must not be received after all."""
    ttbr = message.time_to_be_received
    if ttbr >= INFINITE:
        return None
    if delay is None:
        ttrq = message.time_to_reach_queue
        delay = float(min(ttbr, ttrq))
    return message.sent_time + ttbr + max(delay, SENT_TIME_SLACK)


class Confirmations:
    """The source's copies awaiting confirmation (decides; the caller writes)."""

    __slots__ = ("_outcomes", "_store", "delay")

    def __init__(self, store: Store, outcomes: Outcomes, *, delay: float | None) -> None:
        self._store = store
        self._outcomes = outcomes
        #: XactDelayReceiveNack: seconds added to the time to be received (None: MSMQ's rule).
        self.delay = delay

    def copies(
        self, message: MessageProperties, targets: Sequence[object]
    ) -> list[AddConfirmation]:
        """The copies a send keeps, one per remote destination, if it asks for them."""
        if not wants_confirmation(message):
            return []
        deadline = confirmation_deadline(message, self.delay)
        remote = [target for target in targets if isinstance(target, RemoteDestination)]
        if len(remote) > MAX_CONFIRMATION_COPIES:
            msg = (
                f"a message that asks for confirmation (MQMSG_DEADLETTER or MQMSG_JOURNAL) "
                f"reaches at most {MAX_CONFIRMATION_COPIES} other queue managers, "
                f"not {len(remote)}"
            )
            raise InvalidArgument(msg)
        return [
            AddConfirmation(
                Confirmation(
                    ordinal=message.ordinal,
                    index=index,
                    delivered=False,
                    last_class=0,
                    deadline=deadline,
                    destination=target.outgoing_name,
                    payload=message.raw,
                )
            )
            for index, target in enumerate(remote)
        ]

    @staticmethod
    def delivered(
        messages: Sequence[tuple[MessageProperties, str]], *, by: uuid.UUID | None = None
    ) -> MarkDelivered | None:
        """The operation noting that these ``(message, outgoing queue name)`` were
        covered by an OrderAck (those that ask for confirmation), from the queue
        manager ``by`` when known: only its FinalAck settles them. It goes with
        the forget of their outgoing entries (``MarkDelivered.with_forget``)."""
        copies = tuple(
            (message.ordinal, name) for message, name in messages if wants_confirmation(message)
        )
        if not copies:
            return None
        return MarkDelivered(copies, None if by is None else by.bytes, with_forget=True)

    def give_up(self, message: MessageProperties, destination: str) -> SettleConfirmation | None:
        """The operation settling the copy of ``message`` for ``destination`` (an
        outgoing queue's name) when the source gives the message up itself (its
        caller reports the outcome), or None if it has none."""
        if not wants_confirmation(message):
            return None
        for copy in self._store.confirmations(message.ordinal):
            if copy.destination == destination:
                return SettleConfirmation(copy.ordinal, copy.index)
        return None

    def given_up(
        self, payload: bytes | memoryview, destination: str, reason: int, *, wall: float
    ) -> list[Operation] | None:
        """What giving up an entry of the outgoing queue ``destination`` (its
        name) for ``reason`` writes besides removing it, for an entry whose
        message never reached its queue (expired there, unsendable):
        the negative acknowledgment to its admin queue if asked, its dead-letter
        copy if asked, and the settling of its copy awaiting confirmation.
        ``payload`` is the entry's (``outgoing.decode_entry``). None for a
        relayed transactional entry: its source reports it."""
        entry = decode_entry(payload)
        if entry.origin is not EntryOrigin.LOCAL:
            if entry.transactional:
                return None
            # A plain message passed on, given up here: its NACK and its
            # dead-letter copy here, as MSMQ's hop does (its source keeps none).
            try:
                packet = wire.parse_packet(bytes(entry.data))
                if not isinstance(packet, wire.UserMessage):
                    return []
                relayed = wire.received_message(packet)
            except wire.RemoteProtocolError:
                return []  # nothing it says can be reported: it just goes
            return list(self._outcomes.reports(relayed, reason, wall=wall))
        message = MessageProperties.from_bytes(entry.data)
        ops = list(self._outcomes.reports(message, reason, wall=wall))
        settle = self.give_up(message, destination)
        if settle is not None:
            ops.append(settle)
        return ops

    def settle(
        self,
        ordinal: int,
        message_class: int,
        *,
        wall: float,
        destination: str | None = None,
        endpoint: str = "",
        sender: uuid.UUID | None = None,
    ) -> Unit | None:
        """The unit settling a copy of the message ``ordinal`` on a FinalAck, or
        None if no copy waits for it (settled already: a repeat, or none that
        its sender may settle: :meth:`refused`).

        Args:
            destination: the outgoing queue (its name) the message went through
                to the queue manager that sent the FinalAck, when known: the
                FinalAck repeats the message's TxSequenceID, whose timestamp
                names that queue. Then that destination's copy is settled, or
                none (a repeat never settles another destination's copy).
            endpoint: ``host:port`` the FinalAck came from, when known (a session
                this queue manager opened). Without ``destination``: the copy for
                that endpoint, else one that was delivered (a FinalAck comes from
                where the message arrived), else the first.
            sender: the queue manager that sent the FinalAck: a copy that an
                OrderAck of another covered is not its to settle (another peer
                made the FinalAck up).
        """
        copies = self._candidates(ordinal, destination)
        if sender is not None:
            copies = [c for c in copies if c.acknowledged_by in (None, sender.bytes)]
        if not copies:
            return None
        matching = [c for c in copies if endpoint and endpoint_of(c.destination) == endpoint]
        delivered = [c for c in copies if c.delivered]
        copy = (matching or delivered or copies)[0]
        message = MessageProperties.from_bytes(copy.payload)
        ops: list[Operation] = [SettleConfirmation(copy.ordinal, copy.index)]
        outcomes = self._outcomes
        if message_class == MessageClass.ACK_RECEIVE:
            if message.journal & JOURNAL_JOURNAL:
                ops.append(outcomes.system_journal(message))
        elif _source_keeps(message_class) and message.journal & JOURNAL_DEADLETTER:
            ops.append(outcomes.dead_letter(message, message_class))
        return Unit(tuple(ops))

    def refused(self, ordinal: int, sender: uuid.UUID, *, destination: str | None = None) -> bool:
        """Whether copies of the message ``ordinal`` wait that a FinalAck from
        ``sender`` may not settle (an OrderAck of another queue manager covered
        them) and none it may: :meth:`settle` gave None for that reason."""
        copies = self._candidates(ordinal, destination)
        mine = [c for c in copies if c.acknowledged_by in (None, sender.bytes)]
        return bool(copies) and not mine

    def _candidates(self, ordinal: int, destination: str | None) -> list[Confirmation]:
        copies = self._store.confirmations(ordinal)
        if destination is not None:
            copies = [c for c in copies if c.destination == destination]
        return copies

    def expired(self, copy: Confirmation, *, wall: float) -> Unit:
        """The unit settling a copy whose deadline passed without a FinalAck."""
        message = MessageProperties.from_bytes(copy.payload)
        reason: int
        if not copy.delivered:
            reason = MessageClass.NACK_RECEIVE_TIMEOUT_AT_SENDER
        elif copy.last_class & NACK_BIT:
            reason = copy.last_class
        else:
            reason = MessageClass.NACK_RECEIVE_TIMEOUT
        ops: list[Operation] = [SettleConfirmation(copy.ordinal, copy.index)]
        outcomes = self._outcomes
        if message.journal & JOURNAL_DEADLETTER:
            ops.append(outcomes.dead_letter(message, reason))
        if reason == MessageClass.NACK_RECEIVE_TIMEOUT_AT_SENDER and asks_acknowledgment(
            message, reason
        ):
            ops.append(outcomes.acknowledgment(message, reason, wall=wall))
        return Unit(tuple(ops))


def _source_keeps(message_class: int) -> bool:
    """True for a NACK: the source keeps the dead-letter copy of a message that
    left its queue unread (0xC000..) or was refused at arrival (0x8000..), as
    MSMQ's source does on any negative FinalAck ([MS-MQQB] §3.1.5.7), whatever
    its destination kept (a Windows destination keeps none)."""
    return bool(message_class & NACK_BIT)
