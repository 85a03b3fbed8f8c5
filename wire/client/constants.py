"""The client protocol's numbers: versions, limits, frame kinds and error codes.

A frame's header carries its :class:`FrameKind`; an :class:`ErrorReply`
carries an :class:`ErrorCode`. The versions say which requests a connection
may use (see the rules in :mod:`wire.client`).
"""

from __future__ import annotations

import enum
from typing import Final

from ..message_layout import MAX_MESSAGE_BODY

__all__ = [
    "CANCEL_VERSION",
    "CLIENT_TX_ID_LIMIT",
    "HEADER_SIZE",
    "HELLO_MAGIC",
    "INFINITE_TIMEOUT_MS",
    "LARGE_LISTS_VERSION",
    "LIST_REPLY_KINDS",
    "MAX_FRAME_BODY",
    "MAX_LIST_FRAME_BODY",
    "MIN_PROTOCOL_VERSION",
    "OUTCOMES_VERSION",
    "POISON_VERSION",
    "PROTOCOL_VERSION",
    "QUOTA_VERSION",
    "ROUTING_VERSION",
    "SECURITY_VERSION",
    "TWO_PHASE_VERSION",
    "Delivery",
    "ErrorCode",
    "FrameKind",
    "QueueKind",
]

#: Protocol versions this package speaks.
PROTOCOL_VERSION: Final = 10
MIN_PROTOCOL_VERSION: Final = 2
#: The first version with global (two-phase) transactions, ``RemoveThrough`` and
#: ``MeasureRange`` (the requests in ``TWO_PHASE_REQUESTS``): a daemon answers
#: them only on a connection that negotiated at least this version.
TWO_PHASE_VERSION: Final = 3
#: The first version with the requests of delivery outcomes (``OUTCOMES_REQUESTS``:
#: tracing a message, distribution lists).
OUTCOMES_VERSION: Final = 4
#: The first version with poison handling and subqueues (``POISON_REQUESTS``,
#: and the trailers :mod:`wire.client.trailers` describes).
POISON_VERSION: Final = 5
#: The first version with token authentication and queue permissions (``SECURITY_REQUESTS``).
SECURITY_VERSION: Final = 6
#: The first version with routing information (``ROUTING_REQUESTS``).
ROUTING_VERSION: Final = 7
#: The first version in which a client may cancel a waiting receive (``CANCEL_REQUESTS``).
CANCEL_VERSION: Final = 8
#: The first version in which the whole-list replies (``LIST_REPLY_KINDS``) may
#: be up to ``MAX_LIST_FRAME_BODY``: the status and queue list of a queue manager
#: with tens of thousands of queues or incoming sequences.
LARGE_LISTS_VERSION: Final = 9
#: The first version in which ``SetQueueProperties`` may change a queue's quota
#: (its trailer, see :mod:`wire.client.poison`): a daemon refuses one that
#: carries it on a connection that negotiated less.
QUOTA_VERSION: Final = 10
#: First bytes of every Hello body.
HELLO_MAGIC: Final = b"QMGR"
#: Size of the fixed frame header.
HEADER_SIZE: Final = 12
#: Largest frame body: one maximal message plus room for its properties.
MAX_FRAME_BODY: Final = MAX_MESSAGE_BODY + 64 * 1024
#: Largest body of a whole-list reply from ``LARGE_LISTS_VERSION`` on.
MAX_LIST_FRAME_BODY: Final = 64 * 1024 * 1024
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
    GET_ROUTING = 0x1F
    CANCEL_RECEIVE = 0x20

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
    ROUTING_INFO = 0x91
    ERROR = 0xFF


#: The replies that carry a whole list (queues, status, outgoing queues,
#: distribution lists) and may be up to ``MAX_LIST_FRAME_BODY`` from
#: ``LARGE_LISTS_VERSION`` on.
LIST_REPLY_KINDS: Final = frozenset(
    (FrameKind.QUEUE_LIST, FrameKind.STATUS_INFO, FrameKind.OUTGOING_LIST, FrameKind.LIST_INFO_LIST)
)


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
