"""The client protocol's frame values, kinds, error codes and limits.

Every frame is one of the frozen values below (those of global transactions
and queue ranges are defined in ``_client_global``, those of poison handling
and subqueues in ``_client_poison``); ``_client_layouts`` and
``_client_fast`` turn them into bytes and back, ``_client_decoder`` frames
them on a stream. The rules of the protocol are in ``wire.client_frames``.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Final, TypeAlias

from ._client_global import MAX_RESOLVE_XIDS as MAX_RESOLVE_XIDS
from ._client_global import TWO_PHASE_REQUESTS as TWO_PHASE_REQUESTS
from ._client_global import BeginGlobal as BeginGlobal
from ._client_global import ListTransactions as ListTransactions
from ._client_global import MeasureRange as MeasureRange
from ._client_global import Prepare as Prepare
from ._client_global import RangeInfo as RangeInfo
from ._client_global import RemoveThrough as RemoveThrough
from ._client_global import Resolution as Resolution
from ._client_global import Resolutions as Resolutions
from ._client_global import Resolve as Resolve
from ._client_global import TransactionInfo as TransactionInfo
from ._client_global import TransactionList as TransactionList
from ._client_global import TransactionState as TransactionState
from ._client_lists import ChangeList as ChangeList
from ._client_lists import CreateList as CreateList
from ._client_lists import DeleteList as DeleteList
from ._client_lists import GetLists as GetLists
from ._client_lists import ListInfo as ListInfo
from ._client_lists import ListInfoList as ListInfoList
from ._client_permissions import SECURITY_REQUESTS as SECURITY_REQUESTS
from ._client_permissions import AclEntry as AclEntry
from ._client_permissions import Authenticate as Authenticate
from ._client_permissions import ChangePermissions as ChangePermissions
from ._client_permissions import GetPermissions as GetPermissions
from ._client_permissions import Permissions as Permissions
from ._client_poison import POISON_REQUESTS as POISON_REQUESTS
from ._client_poison import MessageCounters as MessageCounters
from ._client_poison import Moved as Moved
from ._client_poison import MoveMessages as MoveMessages
from ._client_poison import PoisonHandling as PoisonHandling
from ._client_poison import RetrySettings as RetrySettings
from ._client_poison import SetQueueProperties as SetQueueProperties
from ._client_trace import MAX_TRACE_FINDINGS as MAX_TRACE_FINDINGS
from ._client_trace import OUTCOMES_REQUESTS as OUTCOMES_REQUESTS
from ._client_trace import TraceFinding as TraceFinding
from ._client_trace import TraceMessage as TraceMessage
from ._client_trace import TraceReport as TraceReport
from ._message import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from ._message import MAX_MESSAGE_BODY as MAX_MESSAGE_BODY
from ._message import MessageProperties

#: Protocol versions this package speaks.
PROTOCOL_VERSION: Final = 6
MIN_PROTOCOL_VERSION: Final = 2
#: The first version with global (two-phase) transactions, ``RemoveThrough`` and
#: ``MeasureRange`` (the requests in ``TWO_PHASE_REQUESTS``): a daemon answers
#: them only on a connection that negotiated at least this version.
TWO_PHASE_VERSION: Final = 3
#: The first version with the requests of delivery outcomes (``OUTCOMES_REQUESTS``:
#: tracing a message, distribution lists).
OUTCOMES_VERSION: Final = 4
#: The first version with poison handling and subqueues (``POISON_REQUESTS``,
#: and the trailers ``_client_trailers`` describes).
POISON_VERSION: Final = 5
#: The first version with token authentication and queue permissions (``SECURITY_REQUESTS``).
SECURITY_VERSION: Final = 6
#: First bytes of every Hello body.
HELLO_MAGIC: Final = b"QMGR"
#: Size of the fixed frame header.
HEADER_SIZE: Final = 12
#: Largest frame body: one maximal message plus room for its properties.
MAX_FRAME_BODY: Final = MAX_MESSAGE_BODY + 64 * 1024
#: Transaction ids a client may choose lie below this; the daemon's own lie at or above.
CLIENT_TX_ID_LIMIT: Final = 1 << 63
#: Timeout value meaning "wait forever".
INFINITE_TIMEOUT_MS: Final = 0xFFFFFFFF


class FrameKind(enum.IntEnum):
    """Frame kinds. Requests are below 0x80, replies at or above."""

    HELLO = 0x01
    CREATE_QUEUE = 0x02
    DELETE_QUEUE = 0x03
    PURGE_QUEUE = 0x04
    LIST_QUEUES = 0x05
    GET_STATUS = 0x06
    BEGIN = 0x07
    COMMIT = 0x08
    ABORT = 0x09
    SEND = 0x0A
    RECEIVE = 0x0B
    PEEK_RANGE = 0x0C
    LIST_OUTGOING = 0x0D
    CONTROL_OUTGOING = 0x0E
    BEGIN_GLOBAL = 0x0F
    PREPARE = 0x10
    RESOLVE = 0x11
    LIST_TRANSACTIONS = 0x12
    REMOVE_THROUGH = 0x13
    MEASURE_RANGE = 0x14
    SET_QUEUE_PROPERTIES = 0x19
    MOVE_MESSAGES = 0x1A
    GET_PERMISSIONS = 0x1B
    CHANGE_PERMISSIONS = 0x1C
    AUTHENTICATE = 0x1E
    CREATE_LIST = 0x15
    CHANGE_LIST = 0x16
    DELETE_LIST = 0x17
    GET_LISTS = 0x18
    TRACE_MESSAGE = 0x1D

    HELLO_OK = 0x80
    OK = 0x81
    SENT = 0x82
    MESSAGE = 0x83
    NO_MESSAGE = 0x84
    MESSAGE_LIST = 0x85
    QUEUE_LIST = 0x86
    STATUS_INFO = 0x87
    OUTGOING_LIST = 0x88
    RESOLUTIONS = 0x89
    TRANSACTION_LIST = 0x8A
    RANGE_INFO = 0x8B
    MOVED = 0x8E
    PERMISSIONS = 0x8F
    LIST_INFO_LIST = 0x8C
    TRACE_REPORT = 0x90
    ERROR = 0xFF


class ErrorCode(enum.IntEnum):
    """Stable error codes carried by :class:`ErrorReply`; the SDK maps each to an exception."""

    BAD_REQUEST = 1  #: the frame was malformed or not allowed here; the connection closes
    UNSUPPORTED_VERSION = 2  #: no protocol version in common
    QUEUE_NOT_FOUND = 3  #: no queue has that name
    QUEUE_EXISTS = 4  #: a queue with that name already exists
    INVALID_NAME = 5  #: the queue or format name is not valid
    MESSAGE_TOO_LARGE = 6  #: the body is over 4 MB
    QUOTA_EXCEEDED = 7  #: the queue's byte quota would be exceeded
    TRANSACTION_USAGE = 8  #: transactional and non-transactional use mixed (as MSMQ forbids)
    TRANSACTION_NOT_FOUND = 9  #: the transaction id is unknown or already ended
    TRANSACTION_ABORTED = 10  #: the transaction was aborted (timeout, failure); nothing applied
    TRANSACTION_TOO_LARGE = 11  #: the transaction holds more than the daemon allows
    STORE_FULL = 12  #: the disk (or the configured store limit) is full
    ACCESS_DENIED = 13  #: the operation is not allowed on this queue (system queues)
    INVALID_ARGUMENT = 14  #: a property value is out of range
    NOT_SUPPORTED = 15  #: valid, but not available on this queue manager
    SHUTTING_DOWN = 16  #: the daemon is stopping
    INTERNAL = 17  #: an unexpected failure inside the daemon; nothing was applied
    LIMIT_EXCEEDED = 18  #: a limit protecting the daemon was reached (the message says which)
    TRANSACTION_COMMITTED = 19  #: an abort of a global transaction that was committed


class Delivery(enum.IntEnum):
    """MQMSG_DELIVERY_* (mq.h)."""

    EXPRESS = 0
    RECOVERABLE = 1


class QueueKind(enum.IntEnum):
    """What a queue is for."""

    NORMAL = 0
    JOURNAL = 1
    DEADLETTER = 2
    DEADXACT = 3
    #: ``NAME;retry`` and ``NAME;poison`` (daemons of version 5; 4 is not used here)
    SUBQUEUE = 5


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
    """An incoming transactional sequence: one source queue manager's stream to one queue."""

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


ClientRequest: TypeAlias = (
    Hello
    | CreateQueue
    | DeleteQueue
    | PurgeQueue
    | ListQueues
    | GetStatus
    | Begin
    | Commit
    | Abort
    | Send
    | Receive
    | PeekRange
    | ListOutgoing
    | ControlOutgoing
    | BeginGlobal
    | Prepare
    | Resolve
    | ListTransactions
    | RemoveThrough
    | MeasureRange
    | SetQueueProperties
    | MoveMessages
    | GetPermissions
    | ChangePermissions
    | Authenticate
    | TraceMessage
    | CreateList
    | ChangeList
    | DeleteList
    | GetLists
)
ServerReply: TypeAlias = (
    HelloOk
    | Ok
    | Sent
    | MessageReply
    | NoMessage
    | MessageList
    | QueueList
    | StatusInfo
    | OutgoingList
    | Resolutions
    | TransactionList
    | RangeInfo
    | Moved
    | Permissions
    | TraceReport
    | ListInfoList
    | ErrorReply
)
FrameValue: TypeAlias = ClientRequest | ServerReply


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One decoded frame: the request id and its value."""

    request_id: int
    value: FrameValue


#: The kind of every frame value's class.
KIND_OF: Final[dict[type[FrameValue], FrameKind]] = {
    Hello: FrameKind.HELLO,
    CreateQueue: FrameKind.CREATE_QUEUE,
    DeleteQueue: FrameKind.DELETE_QUEUE,
    PurgeQueue: FrameKind.PURGE_QUEUE,
    ListQueues: FrameKind.LIST_QUEUES,
    GetStatus: FrameKind.GET_STATUS,
    Begin: FrameKind.BEGIN,
    Commit: FrameKind.COMMIT,
    Abort: FrameKind.ABORT,
    Send: FrameKind.SEND,
    Receive: FrameKind.RECEIVE,
    PeekRange: FrameKind.PEEK_RANGE,
    ListOutgoing: FrameKind.LIST_OUTGOING,
    ControlOutgoing: FrameKind.CONTROL_OUTGOING,
    BeginGlobal: FrameKind.BEGIN_GLOBAL,
    Prepare: FrameKind.PREPARE,
    Resolve: FrameKind.RESOLVE,
    ListTransactions: FrameKind.LIST_TRANSACTIONS,
    RemoveThrough: FrameKind.REMOVE_THROUGH,
    MeasureRange: FrameKind.MEASURE_RANGE,
    SetQueueProperties: FrameKind.SET_QUEUE_PROPERTIES,
    MoveMessages: FrameKind.MOVE_MESSAGES,
    GetPermissions: FrameKind.GET_PERMISSIONS,
    ChangePermissions: FrameKind.CHANGE_PERMISSIONS,
    Authenticate: FrameKind.AUTHENTICATE,
    TraceMessage: FrameKind.TRACE_MESSAGE,
    CreateList: FrameKind.CREATE_LIST,
    ChangeList: FrameKind.CHANGE_LIST,
    DeleteList: FrameKind.DELETE_LIST,
    GetLists: FrameKind.GET_LISTS,
    HelloOk: FrameKind.HELLO_OK,
    Ok: FrameKind.OK,
    Sent: FrameKind.SENT,
    MessageReply: FrameKind.MESSAGE,
    NoMessage: FrameKind.NO_MESSAGE,
    MessageList: FrameKind.MESSAGE_LIST,
    QueueList: FrameKind.QUEUE_LIST,
    StatusInfo: FrameKind.STATUS_INFO,
    OutgoingList: FrameKind.OUTGOING_LIST,
    Resolutions: FrameKind.RESOLUTIONS,
    TransactionList: FrameKind.TRANSACTION_LIST,
    RangeInfo: FrameKind.RANGE_INFO,
    Moved: FrameKind.MOVED,
    Permissions: FrameKind.PERMISSIONS,
    TraceReport: FrameKind.TRACE_REPORT,
    ListInfoList: FrameKind.LIST_INFO_LIST,
    ErrorReply: FrameKind.ERROR,
}
#: The value class of every frame kind.
CLASS_OF: Final[dict[FrameKind, type[FrameValue]]] = {kind: cls for cls, kind in KIND_OF.items()}


def is_request(value: FrameValue) -> bool:
    """True for frames a client sends, False for the daemon's replies."""
    return KIND_OF[type(value)] < 0x80
