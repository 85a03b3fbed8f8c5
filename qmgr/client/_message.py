"""What the SDK returns: messages, queues, outgoing queues and the queue manager's status.

These are plain frozen values converted from the client protocol's frames:
times become timezone-aware :class:`~datetime.datetime` objects in UTC, the
protocol's "infinite" time limits become ``None``, and an absent correlation
id is ``None`` rather than empty bytes.
"""

from __future__ import annotations

import datetime as _dt
import enum
import uuid
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, TypeVar

from wire import MessageProperties, format_message_id
from wire import client as cf
from wire.client import Delivery

from ._common import ReadThrough
from ._levels import class_name

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "Delivery",
    "IncomingInfo",
    "Message",
    "OutgoingInfo",
    "QueueInfo",
    "QueueKind",
    "Status",
]

_UTC = _dt.UTC
_INFINITE = 0xFFFFFFFF
_fromtimestamp = _dt.datetime.fromtimestamp

T = TypeVar("T")
_Info = TypeVar("_Info", bound="DataclassInstance")


class QueueKind(enum.StrEnum):
    """What a queue is for."""

    NORMAL = "normal"  #: an application queue
    JOURNAL = "journal"  #: ``NAME;journal``: copies of messages received from NAME
    DEADLETTER = "deadletter"  #: ``system$;deadletter``: dead non-transactional messages
    DEADXACT = "deadxact"  #: ``system$;deadxact``: dead transactional messages
    SUBQUEUE = "subqueue"  #: ``NAME;retry``, ``NAME;poison``: where poison handling moves messages


_KINDS = {
    int(cf.QueueKind.NORMAL): QueueKind.NORMAL,
    int(cf.QueueKind.JOURNAL): QueueKind.JOURNAL,
    int(cf.QueueKind.DEADLETTER): QueueKind.DEADLETTER,
    int(cf.QueueKind.DEADXACT): QueueKind.DEADXACT,
    int(cf.QueueKind.SUBQUEUE): QueueKind.SUBQUEUE,
}
_DELIVERIES = {int(d): d for d in Delivery}


class _Field(ReadThrough[T]):
    """A read-only attribute of :class:`Message`: a field of its ``properties``."""

    via = "properties"


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Message:
    """A message as received or peeked: where it was, and the message itself.

    Attributes:
        queue: the name of the queue it was read from.
        lookup_id: the message's position in its queue; stable for its whole
            life there (an aborted receive puts it back under the same id) and
            increasing in arrival order.
        arrived_time: when it arrived in the queue (UTC).
        properties: the message as the queue manager keeps it
            (``wire.MessageProperties``); the other attributes read it.
        abort_count: how many transactions that received it aborted since it
            entered this queue (PROPID_M_ABORT_COUNT; 0 from a queue manager
            before protocol version 4).
        move_count: how often it moved between a queue and its subqueues in
            its lifetime (PROPID_M_MOVE_COUNT).
        last_move_time: when it last moved (UTC; PROPID_M_LAST_MOVE_TIME), or
            ``None`` if it never did.
    """

    queue: str
    lookup_id: int
    arrived_time: _dt.datetime
    properties: MessageProperties
    abort_count: int = 0
    move_count: int = 0
    last_move_time: _dt.datetime | None = None

    @classmethod
    def from_wire(cls, data: cf.QueuedMessage) -> Message:
        """Convert the protocol's value."""
        counters = data.counters  # None from a queue manager before protocol version 4
        moved = 0.0 if counters is None else counters.last_move_time
        return cls(
            queue=data.queue,
            lookup_id=data.lookup_id,
            arrived_time=_fromtimestamp(data.arrived_time, _UTC),
            # A message of a page is a view into the whole page: it gets bytes of its own.
            properties=data.message.own_bytes(),
            abort_count=0 if counters is None else counters.abort_count,
            move_count=0 if counters is None else counters.move_count,
            last_move_time=_fromtimestamp(moved, _UTC) if moved > 0 else None,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.queue, self.lookup_id, self.properties) == (
            other.queue,
            other.lookup_id,
            other.properties,
        )

    def __hash__(self) -> int:
        return hash((self.queue, self.lookup_id))

    def __repr__(self) -> str:
        return (
            f"Message(queue={self.queue!r}, lookup_id={self.lookup_id}, id={self.id!r}, "
            f"label={self.label!r}, body={self.properties.body_preview(64)})"
        )

    # What the message's properties hold, as they are (the rest below converts).
    body = _Field[bytes]("The message body.")
    label = _Field[str]("The label (at most 250 characters).")
    id = _Field[str](
        'The message id, ``"{source QM GUID}\\ordinal"`` as MSMQ writes it.', "message_id"
    )
    app_specific = _Field[int]("The application-defined 32-bit value.")
    priority = _Field[int]("0 (lowest) to 7; transactional messages always have 0.")
    message_class = _Field[int](
        "MQMSG_CLASS_* (0 for a normal message; see :class:`MessageClass`)."
    )
    source_qm = _Field[uuid.UUID]("The GUID of the queue manager that sent it.")
    acknowledge = _Field[int]("The MQMSG_ACKNOWLEDGMENT_* bits the sender asked for.")
    journal = _Field[int]("The sender's MQMSG_JOURNAL level.")
    admin_queue = _Field[str]('Where acknowledgments go ("" for none).')
    response_queue = _Field[str]('Where the sender wants responses ("" for none).')
    transactional = _Field[bool]("True if it was sent in a transaction.")
    destination = _Field[str]("The format name the sender addressed.")

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (raises ``UnicodeDecodeError`` if it is not)."""
        return self.properties.body.decode("utf-8")

    @property
    def correlation_id(self) -> bytes | None:
        """The 20-byte correlation id, or ``None`` if unset."""
        return self.properties.correlation_id or None

    @property
    def class_name(self) -> str:
        """The class's name (``NACK_RECEIVE_TIMEOUT``), or its number in hex."""
        return class_name(self.properties.message_class)

    @property
    def acknowledged_id(self) -> str | None:
        """For an acknowledgment (or a dead-letter copy's report), the id of the
        message it is about (its correlation id, ``"{guid}\\ordinal"``); else None."""
        value = self.properties.message_class
        correlation = self.properties.correlation_id
        is_ack = value in (0x0002, 0x4000) or value & 0x8000
        if not is_ack or len(correlation) != 20:
            return None
        # The GUID is in the [MS-DTYP] packet form, as Windows writes it.
        source = uuid.UUID(bytes_le=correlation[:16])
        return format_message_id(source, int.from_bytes(correlation[16:], "little"))

    @property
    def sent_time(self) -> _dt.datetime:
        """When the sender sent it (UTC)."""
        return _fromtimestamp(self.properties.sent_time, _UTC)

    @property
    def delivery(self) -> Delivery:
        """Express or recoverable."""
        return _DELIVERIES.get(self.properties.delivery, Delivery.RECOVERABLE)

    @property
    def time_to_reach_queue(self) -> int | None:
        """Seconds the message had to reach its queue, or ``None`` for no limit."""
        value = self.properties.time_to_reach_queue
        return None if value == _INFINITE else value

    @property
    def time_to_be_received(self) -> int | None:
        """Seconds the message had to be received, or ``None`` for no limit."""
        value = self.properties.time_to_be_received
        return None if value == _INFINITE else value


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
        retry_count: with poison handling (``NAME;retry``, ``NAME;poison``), how
            many aborted receives a message may have before it moves to
            ``;retry`` (WCF's ReceiveRetryCount); ``None`` when poison handling
            is off (or the queue manager is older than protocol version 4).
        retry_cycles: trips through ``;retry`` before ``;poison`` (MaxRetryCycles).
        retry_delay: seconds a message waits in ``;retry`` (RetryCycleDelay).
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
    retry_count: int | None = None
    retry_cycles: int | None = None
    retry_delay: float | None = None

    @property
    def poison_handling(self) -> bool:
        """True if the queue moves its poison messages (it has retry settings)."""
        return self.retry_count is not None

    @classmethod
    def from_wire(cls, data: cf.QueueInfo) -> QueueInfo:
        """Convert the protocol's queue value."""
        retry = data.retry
        return _from_wire(
            cls,
            data,
            kind=_KINDS.get(data.kind, QueueKind.NORMAL),
            created_at=_fromtimestamp(data.created_at, _UTC),
            retry_count=None if retry is None else retry.retry_count,
            retry_cycles=None if retry is None else retry.retry_cycles,
            retry_delay=None if retry is None else retry.retry_delay,
        )


def _time_or_none(value: float | None) -> _dt.datetime | None:
    return None if value is None else _fromtimestamp(value, _UTC)


#: Each converted class's field names (``dataclasses.fields`` is slow to ask each time).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _from_wire(cls: type[_Info], data: object, **converted: object) -> _Info:
    """A ``cls`` whose fields are ``data``'s fields of the same names, but for
    the ``converted`` ones (whose wire types differ)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    kept = {name: getattr(data, name) for name in names if name not in converted}
    return cls(**kept, **converted)


class _Sequenced:
    """What has an exactly-once sequence id, in two fields: :attr:`sequence` shows it."""

    __slots__ = ()

    sequence_timestamp: int
    sequence_ordinal: int

    @property
    def sequence(self) -> str:
        """The sequence id as ``"timestamp:ordinal"``."""
        return f"{self.sequence_timestamp}:{self.sequence_ordinal}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingInfo(_Sequenced):
    """An outgoing queue: the messages this queue manager holds for one remote queue.

    Attributes:
        destination: the remote queue's format name
            (``DIRECT=TCP:10.0.0.5:1901\\private$\\orders``); give it to
            :meth:`QueueManager.pause_outgoing` and the like.
        next_hop: ``HOST:PORT`` the messages go to: the destination's queue
            manager, or the router configured for it in ``[routes]``.
        state: ``"connected"``, ``"connecting"``, ``"waiting"`` (to retry
            after a failure), ``"paused"`` or ``"idle"`` (nothing to send).
        next_attempt: while ``"waiting"``, when the next connection attempt
            is due (UTC); else ``None``.
        waiting: messages not yet sent.
        unacknowledged: messages sent but not yet acknowledged, by the
            destination (transactional: OrderAck) or by the next hop (SessionAck).
        sequence_timestamp: with ``sequence_ordinal``, the current
            exactly-once sequence id.
        sequence_ordinal: see ``sequence_timestamp``.
        next_number: the sequence number the next new transactional message gets.
        last_order_ack: when the destination last acknowledged transactional
            messages (UTC), or ``None`` if it never has.
        last_error: why the last connection attempt or session failed ("" if none).
    """

    destination: str
    next_hop: str
    state: str
    next_attempt: _dt.datetime | None
    waiting: int
    unacknowledged: int
    sequence_timestamp: int
    sequence_ordinal: int
    next_number: int
    last_order_ack: _dt.datetime | None
    last_error: str

    @classmethod
    def from_wire(cls, data: cf.OutgoingInfo) -> OutgoingInfo:
        """Convert the protocol's outgoing-queue value."""
        return _from_wire(
            cls,
            data,
            next_attempt=_time_or_none(data.next_attempt),
            last_order_ack=_time_or_none(data.last_order_ack),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingInfo(_Sequenced):
    """An incoming transactional sequence: what one source queue manager sent to
    one queue from one of its outgoing queues.

    Exactly-once delivery keeps, per (source queue manager, queue, sequence
    timestamp), the last sequence id and number accepted; duplicates and
    out-of-order packets are rejected (and acknowledged again) by them. A
    source that sends to one queue under two names has two outgoing queues,
    with two timestamps: two entries.

    Attributes:
        source_qm: the GUID of the sending queue manager.
        queue: the destination queue's name on this queue manager.
        sequence_timestamp: with ``sequence_ordinal``, the sequence id.
        sequence_ordinal: see ``sequence_timestamp``.
        last_number: the last sequence number accepted.
        reject_count: packets rejected (duplicates, out of order) since the
            last accepted one.
        last_access: when the last packet of the sequence arrived (UTC).
    """

    source_qm: uuid.UUID
    queue: str
    sequence_timestamp: int
    sequence_ordinal: int
    last_number: int
    reject_count: int
    last_access: _dt.datetime

    @classmethod
    def from_wire(cls, data: cf.IncomingInfo) -> IncomingInfo:
        """Convert the protocol's incoming-sequence value."""
        return _from_wire(cls, data, last_access=_fromtimestamp(data.last_access, _UTC))


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
        commits: transactions (and single-message operations) committed since the start.
        aborts: transactions aborted since the start, for any reason.
        batches: synced writes since the start (concurrent commits share them).
        uncommitted_bytes: bytes of messages held by open transactions now.
        erasing: deleted or purged queues whose messages are still being
            erased in the background.
        queues: every queue with its counters, by name.
        outgoing: every outgoing queue (messages on their way to other
            queue managers), by destination.
        incoming: every incoming transactional sequence.
    """

    qm_name: str
    qm_guid: uuid.UUID
    server_version: str
    started_at: _dt.datetime
    connections: int
    open_transactions: int
    commits: int
    aborts: int
    batches: int
    uncommitted_bytes: int
    erasing: int
    queues: tuple[QueueInfo, ...]
    outgoing: tuple[OutgoingInfo, ...] = ()
    incoming: tuple[IncomingInfo, ...] = ()

    @property
    def uptime(self) -> _dt.timedelta:
        """How long the daemon has been running (by this machine's clock)."""
        return max(_dt.datetime.now(_UTC) - self.started_at, _dt.timedelta(0))

    @classmethod
    def from_wire(cls, data: cf.StatusInfo) -> Status:
        """Convert the protocol's status value."""
        return _from_wire(
            cls,
            data,
            started_at=_fromtimestamp(data.started_at, _UTC),
            queues=tuple(QueueInfo.from_wire(q) for q in data.queues),
            outgoing=tuple(OutgoingInfo.from_wire(o) for o in data.outgoing),
            incoming=tuple(IncomingInfo.from_wire(i) for i in data.incoming),
        )
