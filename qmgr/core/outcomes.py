"""What a message's fate produces: acknowledgments, dead-letter and journal copies.

Theory of operation
-------------------
Every way a message leaves a queue here, or is refused on its way in, has a
*class* ([MS-MQMQ] §2.2.18.1.6): ACK_REACH_QUEUE when it arrives in its
destination queue, ACK_RECEIVE when a receive takes it, and a NACK class
that says why otherwise (NACK_RECEIVE_TIMEOUT, NACK_Q_PURGED,
NACK_Q_DELETED, the rejections at arrival of reference §16, ...).
:meth:`Outcomes.reports` turns a message and its class into the store
operations that report it, which the caller puts *in the same unit* as the
change itself, so that a report is written exactly when its cause is:

* **the acknowledgment** (reference §16, [MS-MQQB] §3.1.7.15), when the
  message's acknowledgment level asks for that class
  (:func:`acknowledgment_wanted`): a message to its admin queue with the
  class, the original label, the original message id as its correlation
  id, the original destination as its response queue, the original body
  for a NACK, no timers, no acknowledgment or journal level of its own (so
  acknowledgments never beget acknowledgments). For a local admin queue it
  is transactional when that queue is; to another queue manager it goes as
  MSMQ sends it, not transactional but recoverable (stored at every hop, a
  resent copy dropped by the receiver's message-id history), so a
  transactional admin queue there refuses it. A local admin queue takes it
  whatever its quota says (``AppendMessage.exempt``); one that no longer
  exists makes it a dead-letter message with NACK_BAD_DST_Q. An
  acknowledgment is written with the rights of the queue manager that sent
  the message, as MSMQ writes its own: a local client was checked when it
  named the admin queue; for a message from another queue manager, a local
  admin queue whose permissions refuse that queue manager
  (:attr:`Outcomes.refuses_acknowledgment`, set by the daemon) does not get
  it, and it is kept in the dead-letter queue with NACK_ACCESS_DENIED.
* **the source's copies**, for a message that this queue manager sent:
  with MQMSG_DEADLETTER, a NACK puts a copy carrying the class in
  ``system$;deadxact`` (transactional) or ``system$;deadletter``; with
  MQMSG_JOURNAL, the ACK_RECEIVE of a transactional message puts a copy in
  the system journal ``system$;journal``. A non-transactional message from
  another queue manager that dies here with MQMSG_DEADLETTER is kept in
  this queue manager's ``system$;deadletter`` (it died here, reference
  §19.7); a transactional one is reported to its source by FinalAck.

Every dead-letter copy is a ``storage.CountedAppend`` under
``(DEAD_LETTERS, queue id, class)``: the store counts them by class as their
writes commit, which is what monitoring reports (``qmgr_dead_letters_total``).

Nothing here writes, waits, logs or reads a clock: ``wall`` (unix seconds)
is an argument, and message ids come from the caller's allocator.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from storage import (
    TIMED_MESSAGE_VERSION,
    AppendMessage,
    AppendOutgoing,
    CountedAppend,
    Operation,
    QueueKind,
    QueueRecord,
    Store,
    message_note,
    message_payload,
)
from wire import INFINITE as INFINITE_SECONDS
from wire import AckFlags, MessageClass, MessageProperties, with_message_class

from . import names
from .addressing import Addressing
from .errors import QueueManagerError
from .final_acks import final_ack_op
from .outgoing import EntryOrigin, RemoteDestination
from .sends import fitted_for_wire

__all__ = [
    "DEAD_LETTERS",
    "DESTINATION_KINDS",
    "JOURNAL_DEADLETTER",
    "JOURNAL_JOURNAL",
    "NACK_BIT",
    "RECEIVE_BIT",
    "SENT_TIME_SLACK",
    "Outcomes",
    "acknowledgment_wanted",
    "asks_acknowledgment",
    "correlation_of",
    "deadline_after",
    "deadline_of",
    "record_wants_report",
    "wants_report",
]

#: MQMSG_ACKNOWLEDGMENT_* bits (``wire.AckFlags``), as plain ints: tested per message.
ACK_POS_ARRIVAL: Final = int(AckFlags.POSITIVE_ARRIVAL)
ACK_POS_RECEIVE: Final = int(AckFlags.POSITIVE_RECEIVE)
ACK_NEG_ARRIVAL: Final = int(AckFlags.NEGATIVE_ARRIVAL)
ACK_NEG_RECEIVE: Final = int(AckFlags.NEGATIVE_RECEIVE)
#: Queues that hold messages in their destination (an application queue and
#: its subqueues; journal and system queues hold copies): a message leaving
#: one reports its fate, and a receive from one is journaled.
DESTINATION_KINDS: Final = (QueueKind.NORMAL, QueueKind.SUBQUEUE)
#: The first element of the key a dead-letter copy is counted under in the
#: store (``storage.CountedAppend``): ``(DEAD_LETTERS, queue id, class)``.
DEAD_LETTERS: Final = "dead_letter"
#: MQMSG_DEADLETTER and MQMSG_JOURNAL.
JOURNAL_DEADLETTER: Final = 0x01
JOURNAL_JOURNAL: Final = 0x02
#: The NACK bit and the receive bit of a class (mq.h's layout).
NACK_BIT: Final = 0x8000
RECEIVE_BIT: Final = 0x4000
# Offsets of the acknowledgment and journal bytes in an encoded message
# (wire/message_layout.py): read without decoding it.
_ACKNOWLEDGE_OFFSET: Final = 26
_JOURNAL_OFFSET: Final = 27


def acknowledgment_wanted(acknowledge: int, message_class: int) -> bool:
    """True if a message with acknowledgment level ``acknowledge`` asks for an
    acknowledgment of class ``message_class``."""
    if message_class == MessageClass.ACK_REACH_QUEUE:
        return bool(acknowledge & ACK_POS_ARRIVAL)
    if message_class == MessageClass.ACK_RECEIVE:
        return bool(acknowledge & ACK_POS_RECEIVE)
    if message_class & NACK_BIT:
        wanted = ACK_NEG_RECEIVE if message_class & RECEIVE_BIT else ACK_NEG_ARRIVAL
        return bool(acknowledge & wanted)
    return False


def asks_acknowledgment(message: MessageProperties, message_class: int) -> bool:
    """True if ``message`` names an admin queue and asks for an acknowledgment of
    class ``message_class``."""
    return bool(message.admin_queue) and acknowledgment_wanted(message.acknowledge, message_class)


def wants_report(payload: bytes | memoryview) -> bool:
    """True if an encoded message asks for any report of its fate (an
    acknowledgment level or a journal level); cheap enough for every receive."""
    return bool(payload[_ACKNOWLEDGE_OFFSET] | payload[_JOURNAL_OFFSET])


def record_wants_report(record: bytes | memoryview) -> bool:
    """True if a stored message asks for a report of its fate: an acknowledgment
    or journal level, or a note (a FinalAck its source asked for by FA alone)."""
    if record[0] == TIMED_MESSAGE_VERSION and record[3] and message_note(record):
        return True  # (a relay id is not a note)
    return wants_report(message_payload(record))


def correlation_of(message: MessageProperties) -> bytes:
    """The 20 bytes of a message's id, as an acknowledgment's correlation id:
    the source queue manager's GUID in the [MS-DTYP] packet form (Data1-3
    little-endian, as on the wire) then the ordinal (u32, little-endian)."""
    return message.source_qm.bytes_le + message.ordinal.to_bytes(4, "little")


def deadline_of(message: MessageProperties, *, reach_only: bool = False) -> float | None:
    """When a message expires (unix seconds), or None: its send time plus its
    time to be received, or with ``reach_only`` (a message still on its way)
    plus the smaller of that and its time to reach the queue."""
    seconds = message.time_to_be_received
    if reach_only:
        seconds = min(seconds, message.time_to_reach_queue)
    return deadline_after(message.sent_time, seconds)


#: Seconds added to an arriving message's send time when its time limits are
#: judged at its destination (or a router): the packet carries it in whole
#: seconds, cut down (as MSMQ's does), so the message was sent up to a second
#: after it says, and judged by the time it says, it would expire up to a
#: second before its source's own deadline. The message keeps the time it
#: says. The source waits as long for its confirmation (``confirmation``).
SENT_TIME_SLACK: Final = 1.0


def deadline_after(sent_time: float, seconds: int) -> float | None:
    """``sent_time`` plus ``seconds`` (unix seconds, never 0), or None when the
    seconds are MSMQ's infinite."""
    if seconds >= INFINITE_SECONDS:
        return None
    deadline = sent_time + seconds
    return deadline if deadline > 0 else 1e-3


class Outcomes:
    """Builds the operations that report what became of a message."""

    __slots__ = ("_addressing", "_guid", "_next_ordinal", "_store", "refuses_acknowledgment")

    def __init__(
        self,
        store: Store,
        addressing: Addressing,
        *,
        guid: uuid.UUID,
        next_ordinal: Callable[[], int],
    ) -> None:
        self._store = store
        self._addressing = addressing
        self._guid = guid
        self._next_ordinal = next_ordinal
        #: Whether a local admin queue's permissions refuse an acknowledgment of a
        #: message from another queue manager (None: permissions are not checked).
        self.refuses_acknowledgment: Callable[[MessageProperties, QueueRecord], bool] | None = None

    def is_ours(self, message: MessageProperties) -> bool:
        """True if this queue manager sent ``message``."""
        return message.source_qm == self._guid

    def reports(
        self,
        message: MessageProperties,
        message_class: int,
        *,
        wall: float,
        dead_letter: bool = True,
        note: bytes = b"",
    ) -> list[Operation]:
        """The operations reporting that ``message`` met ``message_class``.

        Args:
            dead_letter: False when the caller keeps the message in a
                dead-letter queue itself (a rejection at arrival).
            note: the sequence fields of a transactional message from another
                queue manager that asked for a FinalAck (its record's note,
                ``confirmation.final_ack_note``): a departure or refusal then
                records the FinalAck for its source.
        """
        ops: list[Operation] = []
        if asks_acknowledgment(message, message_class):
            ops.append(self.acknowledgment(message, message_class, wall=wall))
        if dead_letter and self.dead_letters_here(message, message_class):
            ops.append(self.dead_letter(message, message_class))
        elif self.is_ours(message):
            if (
                message_class == MessageClass.ACK_RECEIVE
                and message.transactional
                and message.journal & JOURNAL_JOURNAL
            ):
                ops.append(self.system_journal(message))
        elif message.transactional:
            nack = bool(message_class & NACK_BIT)
            if note and (nack or message_class == MessageClass.ACK_RECEIVE):
                ops.append(final_ack_op(message, note, message_class))
        return ops

    def dead_letters_here(self, message: MessageProperties, message_class: int) -> bool:
        """True if meeting ``message_class`` (a NACK) keeps a copy of ``message`` in
        a dead-letter queue here: it asked for one (MQMSG_DEADLETTER), and it is
        this queue manager's, or not transactional (a transactional one of
        another queue manager is its source's to keep, told by FinalAck)."""
        if not (message_class & NACK_BIT and message.journal & JOURNAL_DEADLETTER):
            return False
        return self.is_ours(message) or not message.transactional

    def receipts(self, receives: Iterable[tuple[int, int]], *, wall: float) -> list[Operation]:
        """The reports of messages received (ACK_RECEIVE): for each of ``receives``
        (``(queue_id, lookup_id)`` of messages in application queues, still
        stored) that asked for one."""
        ops: list[Operation] = []
        for queue_id, lookup_id in sorted(receives):
            # A message purged while held is still received by this commit.
            record = self._store.read_message(queue_id, lookup_id, purged=True)
            if record is not None and record_wants_report(record):
                ops.extend(self.stored_reports(record, MessageClass.ACK_RECEIVE, wall=wall))
        return ops

    def stored_reports(
        self, record: bytes | memoryview, message_class: int, *, wall: float
    ) -> list[Operation]:
        """:meth:`reports` for a stored message (the store's record: the message
        and its note), which leaves its queue with ``message_class``."""
        message = MessageProperties.from_bytes(message_payload(record))
        return self.reports(message, message_class, wall=wall, note=message_note(record))

    def reports_on_receive(self, queue_id: int) -> bool:
        """True if receiving from the queue reports its messages' fate (see
        :data:`DESTINATION_KINDS`)."""
        record = self._store.get_queue_by_id(queue_id)
        return record is not None and record.kind in DESTINATION_KINDS

    def arrival_reports(
        self, message: MessageProperties, queues: Sequence[object], *, wall: float
    ) -> list[AppendMessage | AppendOutgoing]:
        """What a send reports when its commit puts it in local queues (``queues``
        holds its targets: records of local queues, or remote destinations): an
        ACK_REACH_QUEUE per local queue, if asked; and with MQMSG_JOURNAL, a
        non-transactional message, delivered then, is copied to the system journal."""
        local = sum(1 for target in queues if isinstance(target, QueueRecord))
        if not local:
            return []
        reports: list[AppendMessage | AppendOutgoing] = []
        if asks_acknowledgment(message, MessageClass.ACK_REACH_QUEUE):
            ack_class = MessageClass.ACK_REACH_QUEUE
            reports.extend(self.acknowledgment(message, ack_class, wall=wall) for _ in range(local))
        if not message.transactional and message.journal & JOURNAL_JOURNAL:
            reports.append(self.system_journal(message))
        return reports

    def refusal(
        self, message: MessageProperties, message_class: int, *, wall: float
    ) -> list[AppendMessage | AppendOutgoing]:
        """A copy of ``message`` refused by a queue here at its send (seed 000):
        kept in the dead-letter queue with ``message_class``, and the
        acknowledgment it asked for."""
        ops: list[AppendMessage | AppendOutgoing] = [self.dead_letter(message, message_class)]
        if asks_acknowledgment(message, message_class):
            ops.append(self.acknowledgment(message, message_class, wall=wall))
        return ops

    def acknowledgment(
        self, message: MessageProperties, message_class: int, *, wall: float
    ) -> AppendMessage | AppendOutgoing:
        """The operation that delivers an acknowledgment of ``message`` to its admin queue."""
        try:
            [target] = self._addressing.destinations(message.admin_queue)
        except (QueueManagerError, ValueError):
            target = None
        if isinstance(target, RemoteDestination):
            # As MSMQ sends them: not transactional (admin queues are not), but
            # recoverable, so the peer's message-id history drops a resent copy.
            ack = self._ack(message, message_class, wall=wall, transactional=False)
            ack = ack.replace(delivery=1) if ack.delivery != 1 else ack
            # The original may have been local only: its label or body may not fit a packet.
            ack = fitted_for_wire(ack)
            return target.append_entry(
                EntryOrigin.LOCAL, ack.raw, ack.body_size, transactional=False, recoverable=True
            )
        if isinstance(target, QueueRecord) and target.kind is QueueKind.NORMAL:
            refusal = self._acknowledgment_refusal(message, target)
            if refusal is None:
                ack = self._ack(
                    message, message_class, wall=wall, transactional=target.transactional
                )
                return AppendMessage(
                    target.queue_id, ack.raw, ack.priority, ack.body_size, exempt=True
                )
        else:
            # The admin queue is gone (or never was a queue that takes messages).
            refusal = MessageClass.NACK_BAD_DST_Q
        ack = self._ack(message, message_class, wall=wall, transactional=False)
        return self.dead_letter(ack, refusal)

    def _acknowledgment_refusal(
        self, message: MessageProperties, target: QueueRecord
    ) -> int | None:
        """Why an acknowledgment of ``message`` may not go into ``target``, its
        local admin queue, where permissions are checked (None: it may):
        NACK_ACCESS_DENIED when the queue's permissions refuse the message's
        source queue manager; for a message of ours, NACK_BAD_DST_Q when the
        queue was created after the message was sent (the queue whose right
        was checked at the send is gone; this one may be another principal's)."""
        refuses = self.refuses_acknowledgment
        if refuses is None:
            return None
        if not self.is_ours(message):
            return MessageClass.NACK_ACCESS_DENIED if refuses(message, target) else None
        return MessageClass.NACK_BAD_DST_Q if target.created_at > message.sent_time else None

    def _ack(
        self, message: MessageProperties, message_class: int, *, wall: float, transactional: bool
    ) -> MessageProperties:
        return MessageProperties(
            body=message.body if message_class & NACK_BIT else b"",
            label=message.label,
            destination=message.admin_queue,
            correlation_id=correlation_of(message),
            priority=0 if transactional else message.priority,
            delivery=1 if transactional else message.delivery,
            response_queue=message.destination,
            message_class=message_class,
            sent_time=wall,
            source_qm=self._guid,
            ordinal=self._next_ordinal(),
            transactional=transactional,
        )

    def dead_letter(self, message: MessageProperties, message_class: int) -> AppendMessage:
        """A copy of ``message`` with ``message_class`` in this queue manager's
        ``system$;deadxact`` (a transactional message) or ``system$;deadletter``."""
        key = names.DEADXACT if message.transactional else names.DEADLETTER
        record = self._store.get_queue(key)
        assert record is not None, "the system queues are created at start-up"
        dead = with_message_class(message, message_class)
        # Counted by class as it is written: what monitoring shows of dead letters.
        return CountedAppend(
            record.queue_id,
            dead.raw,
            dead.priority,
            dead.body_size,
            exempt=True,
            key=(DEAD_LETTERS, record.queue_id, message_class),
        )

    def system_journal(self, message: MessageProperties) -> AppendMessage:
        """A copy of ``message`` in this queue manager's ``system$;journal``."""
        record = self._store.get_queue(names.SYSTEM_JOURNAL)
        assert record is not None, "the system queues are created at start-up"
        return AppendMessage(
            record.queue_id, message.raw, message.priority, message.body_size, exempt=True
        )
