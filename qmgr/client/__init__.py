"""The qmgr client SDK: blocking and trio clients for the queue manager.

Blocking::

    from qmgr.client import connect

    with connect("127.0.0.1:1802") as qm:
        qm.create_queue("orders", transactional=True)
        with qm.begin() as tx:                      # commits on normal exit
            tx.send("orders", b"order 1", label="first")
            tx.send("orders", "order 2")             # str bodies are sent as UTF-8
        msg = qm.receive("orders", timeout=5.0)     # None if nothing came in 5 s
        print(msg.lookup_id, msg.label, msg.body)

trio::

    from qmgr.client import open_client

    async with open_client("127.0.0.1:1802") as qm:
        async with qm.begin() as tx:
            msg = await tx.receive("orders", timeout=None)
            await tx.send("shipped", msg.body)

Two-phase commit: a transaction begun with an xid can be prepared, and then
committed or aborted by that xid from any connection, all of a batch at once::

    with connect() as qm:
        tx = qm.begin(xid="batch-7:part-1")
        tx.send("orders", b"order 1")
        tx.prepare()                                # stored, in doubt, until resolved
    with connect() as coordinator:
        coordinator.commit_prepared_all(["batch-7:part-1", "batch-7:part-2"])

Poison handling: a queue created with retry settings moves a message whose
receiving transactions keep aborting to ``NAME;retry``, then ``NAME;poison``::

    with connect() as qm:
        qm.create_queue("orders", transactional=True, retry_count=3, retry_delay=60)
        poisoned = qm.peek("orders;poison")         # abort_count, move_count, ...
        qm.move("orders;poison", "orders", all=True)  # after the fix: try them again

Every failure raises a subclass of :class:`QueueError` whose message says
what was wrong (:class:`QueueNotFound`, :class:`TransactionUsageError`,
:class:`MessageTooLarge`, :class:`QuotaExceeded`, ...); a daemon that cannot
be reached or goes away raises :class:`ConnectionLost`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._blocking import QueueManager, Transaction, connect
from ._codec import SendOptions
from ._errors import (
    AccessDenied,
    ConnectionLost,
    InternalError,
    InvalidArgument,
    InvalidName,
    LimitExceeded,
    MessageTooLarge,
    NotSupported,
    ProtocolViolation,
    QueueError,
    QueueExists,
    QueueNotFound,
    QuotaExceeded,
    ShuttingDown,
    StoreFull,
    TransactionAborted,
    TransactionCommitted,
    TransactionNotFound,
    TransactionTooLarge,
    TransactionUsageError,
    UnsupportedVersion,
    error_from_reply,
)
from ._levels import Acknowledge, Journal, MessageClass
from ._lists_api import DistributionList
from ._message import (
    Delivery,
    IncomingInfo,
    Message,
    OutgoingInfo,
    QueueInfo,
    QueueKind,
    Status,
)
from ._poison_api import MoveResult
from ._tls import tls_context
from ._trace_api import TraceFinding, TraceReport
from ._two_phase import RangeInfo, Resolution, TransactionInfo, TransactionStatus

if TYPE_CHECKING:
    from ._trio import AsyncQueueManager, AsyncTransaction, open_client

_TRIO_NAMES = frozenset({"AsyncQueueManager", "AsyncTransaction", "open_client"})


def __getattr__(name: str) -> Any:
    # The trio client is imported on first use, so that blocking programs
    # (and the qmgr command) do not pay for importing trio.
    if name in _TRIO_NAMES:
        from . import _trio

        value = getattr(_trio, name)
        globals()[name] = value
        return value
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "AccessDenied",
    "Acknowledge",
    "AsyncQueueManager",
    "AsyncTransaction",
    "ConnectionLost",
    "Delivery",
    "DistributionList",
    "IncomingInfo",
    "InternalError",
    "InvalidArgument",
    "InvalidName",
    "Journal",
    "LimitExceeded",
    "Message",
    "MessageClass",
    "MessageTooLarge",
    "MoveResult",
    "NotSupported",
    "OutgoingInfo",
    "ProtocolViolation",
    "QueueError",
    "QueueExists",
    "QueueInfo",
    "QueueKind",
    "QueueManager",
    "QueueNotFound",
    "QuotaExceeded",
    "RangeInfo",
    "Resolution",
    "SendOptions",
    "ShuttingDown",
    "Status",
    "StoreFull",
    "TraceFinding",
    "TraceReport",
    "Transaction",
    "TransactionAborted",
    "TransactionCommitted",
    "TransactionInfo",
    "TransactionNotFound",
    "TransactionStatus",
    "TransactionTooLarge",
    "TransactionUsageError",
    "UnsupportedVersion",
    "connect",
    "error_from_reply",
    "open_client",
    "tls_context",
]
