"""What the SDK returns: messages, queues and the queue manager's status.

These are plain frozen values converted from the client protocol's frames:
times become timezone-aware :class:`~datetime.datetime` objects in UTC, the
protocol's "infinite" time limits become ``None``, and an absent correlation
id is ``None`` rather than empty bytes.
"""

from __future__ import annotations

import datetime as _dt
import enum
import uuid
from dataclasses import dataclass

from wire import client_frames as cf
from wire.client_frames import Delivery

__all__ = ["Delivery", "Message", "QueueInfo", "QueueKind", "Status"]

_UTC = _dt.UTC
_INFINITE = 0xFFFFFFFF
_fromtimestamp = _dt.datetime.fromtimestamp


class QueueKind(enum.StrEnum):
    """What a queue is for."""

    NORMAL = "normal"  #: an application queue
    JOURNAL = "journal"  #: ``NAME;journal``: copies of messages received from NAME
    DEADLETTER = "deadletter"  #: ``system$;deadletter``: dead non-transactional messages
    DEADXACT = "deadxact"  #: ``system$;deadxact``: dead transactional messages


_KINDS = {
    int(cf.QueueKind.NORMAL): QueueKind.NORMAL,
    int(cf.QueueKind.JOURNAL): QueueKind.JOURNAL,
    int(cf.QueueKind.DEADLETTER): QueueKind.DEADLETTER,
    int(cf.QueueKind.DEADXACT): QueueKind.DEADXACT,
}
_DELIVERIES = {int(d): d for d in Delivery}


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Message:
    """A message as received or peeked.

    Attributes:
        body: the message body.
        label: the label (at most 250 characters).
        id: the message id, ``"{source QM GUID}\\ordinal"`` as MSMQ writes it.
        lookup_id: the message's position in its queue; stable for its whole
            life there (an aborted receive puts it back under the same id) and
            increasing in arrival order.
        correlation_id: the 20-byte correlation id, or ``None`` if unset.
        app_specific: the application-defined 32-bit value.
        priority: 0 (lowest) to 7; transactional messages always have 0.
        message_class: MQMSG_CLASS_* (0 for a normal message).
        sent_time: when the sender sent it (UTC).
        arrived_time: when it arrived in the queue (UTC).
        source_qm: the GUID of the queue manager that sent it.
        queue: the name of the queue it was read from.
        delivery: express or recoverable.
        acknowledge: the MQMSG_ACKNOWLEDGMENT_* bits the sender asked for.
        journal: the sender's MQMSG_JOURNAL level.
        admin_queue: where acknowledgments go ("" for none).
        response_queue: where the sender wants responses ("" for none).
        time_to_reach_queue: seconds the message had to reach its queue, or
            ``None`` for no limit.
        time_to_be_received: seconds the message had to be received, or
            ``None`` for no limit.
        transactional: True if it was sent in a transaction.
        destination: the format name the sender addressed.
    """

    body: bytes
    label: str
    id: str
    lookup_id: int
    correlation_id: bytes | None
    app_specific: int
    priority: int
    message_class: int
    sent_time: _dt.datetime
    arrived_time: _dt.datetime
    source_qm: uuid.UUID
    queue: str
    delivery: Delivery
    acknowledge: int
    journal: int
    admin_queue: str
    response_queue: str
    time_to_reach_queue: int | None
    time_to_be_received: int | None
    transactional: bool
    destination: str

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 64 else self.body[:64] + b"..."
        return (
            f"Message(queue={self.queue!r}, lookup_id={self.lookup_id}, id={self.id!r}, "
            f"label={self.label!r}, body={body!r} ({len(self.body)} bytes))"
        )

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (raises ``UnicodeDecodeError`` if it is not)."""
        return self.body.decode("utf-8")

    @classmethod
    def from_wire(cls, data: cf.MessageData) -> Message:
        """Convert the protocol's message value."""
        ttrq = data.time_to_reach_queue
        ttbr = data.time_to_be_received
        return cls(
            body=data.body,
            label=data.label,
            id=data.message_id,
            lookup_id=data.lookup_id,
            correlation_id=data.correlation_id or None,
            app_specific=data.app_specific,
            priority=data.priority,
            message_class=data.message_class,
            sent_time=_fromtimestamp(data.sent_time, _UTC),
            arrived_time=_fromtimestamp(data.arrived_time, _UTC),
            source_qm=data.source_qm,
            queue=data.queue,
            delivery=_DELIVERIES.get(data.delivery, Delivery.RECOVERABLE),
            acknowledge=data.acknowledge,
            journal=data.journal,
            admin_queue=data.admin_queue,
            response_queue=data.response_queue,
            time_to_reach_queue=None if ttrq == _INFINITE else ttrq,
            time_to_be_received=None if ttbr == _INFINITE else ttbr,
            transactional=data.transactional,
            destination=data.destination,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """A queue and its counters.

    Attributes:
        name: the queue's name as it was created (``orders``,
            ``orders;journal``, ``system$;deadletter``).
        format_name: its path name (``.\\private$\\orders``).
        kind: normal, journal or one of the dead-letter queues.
        transactional: True if it accepts only transactional messages.
        journal: True if received messages are copied to its journal queue.
        quota: the byte quota, or ``None`` for none.
        depth: committed messages in the queue (locked ones included).
        bytes: the sum of their body sizes (what the quota counts).
        locked: messages held by open transactions (received, not yet committed).
        created_at: when the queue was created (UTC).
    """

    name: str
    format_name: str
    kind: QueueKind
    transactional: bool
    journal: bool
    quota: int | None
    depth: int
    bytes: int
    locked: int
    created_at: _dt.datetime

    @classmethod
    def from_wire(cls, data: cf.QueueInfo) -> QueueInfo:
        """Convert the protocol's queue value."""
        return cls(
            name=data.name,
            format_name=data.format_name,
            kind=_KINDS.get(data.kind, QueueKind.NORMAL),
            transactional=data.transactional,
            journal=data.journal,
            quota=data.quota,
            depth=data.depth,
            bytes=data.bytes,
            locked=data.locked,
            created_at=_fromtimestamp(data.created_at, _UTC),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """The queue manager's identity and health.

    Attributes:
        qm_name: the queue manager's name.
        qm_guid: its GUID (the source of every message id it makes).
        server_version: the daemon's version.
        started_at: when the daemon started (UTC).
        connections: client connections open now (this one included).
        open_transactions: transactions begun and not yet ended.
        queues: every queue with its counters, by name.
    """

    qm_name: str
    qm_guid: uuid.UUID
    server_version: str
    started_at: _dt.datetime
    connections: int
    open_transactions: int
    queues: tuple[QueueInfo, ...]

    @property
    def uptime(self) -> _dt.timedelta:
        """How long the daemon has been running (by this machine's clock)."""
        return max(_dt.datetime.now(_UTC) - self.started_at, _dt.timedelta(0))

    @classmethod
    def from_wire(cls, data: cf.StatusInfo) -> Status:
        """Convert the protocol's status value."""
        return cls(
            qm_name=data.qm_name,
            qm_guid=data.qm_guid,
            server_version=data.server_version,
            started_at=_fromtimestamp(data.started_at, _UTC),
            connections=data.connections,
            open_transactions=data.open_transactions,
            queues=tuple(QueueInfo.from_wire(q) for q in data.queues),
        )
