"""The client protocol's core frame values: the requests and replies of version 2.

Every frame is a frozen value; those of global transactions and queue ranges
are in :mod:`wire.client.two_phase`, of distribution lists in
:mod:`wire.client.lists`, of tracing in :mod:`wire.client.trace`, of poison
handling and subqueues in :mod:`wire.client.poison`, and of authentication and
permissions in :mod:`wire.client.permissions`. :mod:`wire.client.frames` names
them all and gives each its :class:`~wire.client.constants.FrameKind`;
:mod:`wire.client.layout_codec` and :mod:`wire.client.fast_codec` turn them
into bytes and back, :mod:`wire.client.framing` frames them on a stream.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..message_properties import MessageProperties
from .constants import MAX_FRAME_BODY, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION
from .poison import MessageCounters, RetrySettings

# --------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Hello:
    """First frame from a client: the protocol versions it speaks."""

    min_version: int = MIN_PROTOCOL_VERSION
    max_version: int = PROTOCOL_VERSION
    client_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateQueue:
    """Create a local queue (and its journal queue)."""

    name: str
    transactional: bool = False
    journal: bool = False
    quota: int | None = None
    #: Poison handling (version 4; see ``SetQueueProperties``): any value given
    #: turns it on, with WCF's defaults for the others.
    retry_count: int | None = None
    retry_cycles: int | None = None
    retry_delay: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteQueue:
    """Delete a queue, its journal and their messages."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeQueue:
    """Delete every message in a queue."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListQueues:
    """Ask for every queue with its counters."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GetStatus:
    """Ask for the queue manager's identity, counters and queues."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Begin:
    """Open an internal transaction.

    ``tx_id`` 0 lets the daemon choose the id, which its ``Ok(value=id)``
    reply carries. A client may instead choose it (1..2**63-1, unused on this
    connection); then the Begin is answered only if it fails, so the
    transaction's first requests can follow it without waiting.
    """

    tx_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Commit:
    """Commit a transaction; the reply comes after the store has synced."""

    tx_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Abort:
    """Abort a transaction: discard its sends, return its received messages."""

    tx_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Send one message to ``message.destination``.

    Inside a transaction (``tx_id`` not 0) the send is answered only if it
    fails; the transaction's Commit reports it at the latest. Outside one,
    ``mode`` says how (0 automatic: a single-message transaction on a
    transactional queue; 1 explicitly non-transactional; 2 a single-message
    transaction) and the reply is :class:`Sent`. The daemon sets the
    message's identity, send time and class; what the client put there is
    ignored.
    """

    tx_id: int = 0
    mode: int = 0
    message: MessageProperties


@dataclass(frozen=True, slots=True, kw_only=True)
class Receive:
    """Receive (or with ``peek`` look at) one message, waiting up to ``timeout_ms``.

    ``lookup_id`` 0 means "the next message"; any other value names one message.
    """

    tx_id: int = 0
    queue: str
    timeout_ms: int = 0
    peek: bool = False
    lookup_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PeekRange:
    """Look at up to ``max_count`` visible messages with a LookupId above ``after``."""

    queue: str
    after: int = 0
    max_count: int = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOutgoing:
    """Ask for every outgoing queue (messages on their way to other queue managers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlOutgoing:
    """Pause (1), resume (2) or purge (3) the outgoing queue of ``destination``.

    ``destination`` is the remote queue's format name, or the outgoing
    queue's destination as :class:`OutgoingList` shows it. The reply is an
    :class:`OutgoingList` with that one queue as it is afterwards and, for a
    purge, how many messages were removed.
    """

    action: int
    destination: str


# --------------------------------------------------------------------------
# Replies
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HelloOk:
    """The daemon's answer to Hello."""

    version: int
    server_version: str
    qm_name: str
    qm_guid: uuid.UUID
    max_frame_body: int = MAX_FRAME_BODY


@dataclass(frozen=True, slots=True, kw_only=True)
class Ok:
    """Success; ``value`` carries a count or a transaction id where the request defines one."""

    value: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """A message sent outside a transaction is stored (and synced if recoverable)."""

    message_id: str
    queue: str
    lookup_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedMessage:
    """A message where a reader finds it: its queue, its place there, and the message."""

    queue: str
    lookup_id: int
    #: When it became visible in the queue, unix seconds.
    arrived_time: float
    message: MessageProperties
    #: Its abort and move counters (version 4 connections; None before).
    counters: MessageCounters | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReply:
    """One received or peeked message."""

    message: QueuedMessage


@dataclass(frozen=True, slots=True, kw_only=True)
class NoMessage:
    """No message became available within the timeout (or none has that LookupId)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageList:
    """Messages in LookupId order; fewer than asked when the frame limit was reached."""

    messages: tuple[QueuedMessage, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """A queue and its counters."""

    name: str
    format_name: str
    kind: int
    transactional: bool
    journal: bool
    quota: int | None
    depth: int
    bytes: int
    locked: int
    created_at: float
    #: Its poison handling, None if off (and always on connections before version 4).
    retry: RetrySettings | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueList:
    """Every queue."""

    queues: tuple[QueueInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingInfo:
    """An outgoing queue: the messages this queue manager holds for one remote queue."""

    #: The remote queue's format name, e.g. ``DIRECT=TCP:10.0.0.5:1901\private$\orders``.
    destination: str
    #: ``HOST:PORT`` the messages go to: the destination itself, or a router from ``[routes]``.
    next_hop: str
    #: ``connected``, ``connecting``, ``waiting`` (to retry), ``paused`` or ``idle``.
    state: str
    #: While ``waiting``: unix seconds of the next connection attempt.
    next_attempt: float | None
    #: Messages not yet sent.
    waiting: int
    #: Messages sent but not yet acknowledged (OrderAck by the destination, or
    #: SessionAck by the next hop).
    unacknowledged: int
    #: The current exactly-once sequence id is ``(sequence_timestamp, sequence_ordinal)``.
    sequence_timestamp: int
    sequence_ordinal: int
    #: The sequence number the next new transactional message gets.
    next_number: int
    #: Unix seconds of the last OrderAck received, or None.
    last_order_ack: float | None
    #: Why the last connection attempt or session failed ("" if none did).
    last_error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class IncomingInfo:
    """An incoming transactional sequence: one source queue manager's stream to one
    queue, from one of its outgoing queues (its sequence timestamp tells them apart)."""

    source_qm: uuid.UUID
    #: The destination queue's name on this queue manager.
    queue: str
    #: The sequence id is ``(sequence_timestamp, sequence_ordinal)``.
    sequence_timestamp: int
    sequence_ordinal: int
    #: The last sequence number accepted.
    last_number: int
    #: Duplicate or out-of-order packets rejected since the last accepted one.
    reject_count: int
    #: Unix seconds of the last packet of the sequence.
    last_access: float


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingList:
    """Outgoing queues, by destination; ``purged`` counts the messages a purge removed."""

    outgoing: tuple[OutgoingInfo, ...]
    purged: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusInfo:
    """Queue manager identity, activity counters, queues, and delivery between queue managers."""

    qm_name: str
    qm_guid: uuid.UUID
    server_version: str
    started_at: float
    connections: int
    open_transactions: int
    #: Transactions (and single-message operations) committed since the start.
    commits: int
    #: Transactions aborted since the start, for any reason.
    aborts: int
    #: Synced write batches since the start (commits share them).
    batches: int
    #: Bytes of message bodies held in memory by open transactions now.
    uncommitted_bytes: int
    #: Deleted or purged queues whose messages are still being erased.
    erasing: int
    queues: tuple[QueueInfo, ...]
    #: Every outgoing queue (empty when there is none, or peering is not running).
    outgoing: tuple[OutgoingInfo, ...] = ()
    #: Every incoming transactional sequence.
    incoming: tuple[IncomingInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReply:
    """A request failed; ``code`` says how, ``message`` says what was wrong."""

    code: int
    message: str
