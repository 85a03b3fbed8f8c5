"""The qmgr client SDK: blocking and trio clients for the queue manager.

Blocking::

    from qmgr.client import connect

    with connect("127.0.0.1:1802") as qm:
        qm.create_queue("orders", transactional=True)
        with qm.begin() as tx:                      # commits on normal exit
            tx.send("orders", b"order 1", label="first")
            tx.send("orders", "order 2")             # str bodies are sent as UTF-8
        msg = qm.receive("orders", timeout=5.0)     # None if nothing came in 5 s
        if msg is not None:
            print(msg.lookup_id, msg.label, msg.body)

trio::

    from qmgr.client import open_client

    async with open_client("127.0.0.1:1802") as qm:
        await qm.create_queue("shipped", transactional=True)
        async with qm.begin() as tx:
            msg = await tx.receive("orders", timeout=None)  # waits: never None
            assert msg is not None
            await tx.send("shipped", msg.body)

Two-phase commit: a transaction begun with an xid can be prepared, and then
committed or aborted by that xid from any connection, all of a batch at once::

    with connect() as qm:
        for part in ("batch-7:part-1", "batch-7:part-2"):
            tx = qm.begin(xid=part)
            tx.send("orders", f"order of {part}")
            tx.prepare()                            # stored, in doubt, until resolved
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
be reached or goes away raises :class:`ConnectionLost`, and one that is
stopping answers what it is asked then (a waiting receive too) with
:class:`ShuttingDown` before it closes the connection: a client that connects
again after a ``ConnectionLost`` should after a ``ShuttingDown`` too (it says
the request was not carried out, where a ``ConnectionLost`` cannot say).

How the SDK is built
--------------------
Three layers, each importing only the ones below it (no module imports a
module above it, not even for typing):

1. Sans-IO values and rules: ``_exceptions``, ``_common`` (addresses, limits,
   timeouts, version checks, the queue manager's identity both clients show),
   ``_levels``, ``_message`` (the values the SDK returns), ``_codec`` (the
   hot paths: packing sends and receives, splitting the reply stream),
   ``_replies`` (replies to values), ``_transaction`` (what a transaction may
   do next, and what its end raises).
2. The protocol, sans-IO: ``_protocol.ClientProtocol`` (the state of one
   connection: ids, packing, routing replies, pipelining, breaking) and
   ``calls/``, one module per concern (the handshake, queues, messages,
   transactions, global transactions, poison handling, distribution lists,
   outgoing queues, permissions, trace). Every public method that is not a
   hot path is a *call* there: a generator (``_protocol.Flow``) that checks
   the arguments and the protocol version, packs each request it needs, is
   sent each reply (or thrown the error met getting it) and returns the
   method's result. Request building, validation and reply conversion all
   live in this layer.
3. The I/O and the facades, thin as httpx's and redis-py's: ``_blocking_io``
   (a socket, plain or TLS) under ``_blocking``/``_blocking_admin``
   (``connect``, ``QueueManager``, ``Transaction``), and ``_trio_io`` (a
   trio stream) under ``_trio``/``_trio_admin`` (``open_client``,
   ``AsyncQueueManager``, ``AsyncTransaction``). A facade method is one
   delegation: ``return self._conn.run(queues.delete_queue, name)``; the hot
   paths (send, receive, pipelined sends, begin) ask ``ClientProtocol`` to
   pack the request, have the connection exchange it and the protocol
   convert the reply. What the blocking and the trio side repeat is what
   differs by I/O: the loop that drives a call (``run``), the hot paths'
   exchanges, and the ends of ``with``/``async with`` blocks.

Why this shape: the logic of a call used to be written twice, once per
client, in per-concern mixin pairs that imported their hosts back (an import
cycle through every concern). A call written once as a generator is tested
without sockets (``tests/client/calls``), and both clients drive it the same
way, as httpx's two clients drive one auth flow. The mixin pairs are gone:
each client's methods are in its own class, in sections by concern, so one
file shows one client's API. Only ``QueueManager``'s documentation is too
long for one module of at most 600 lines, so each ``QueueManager`` has one
base class (``*_admin``) holding the calls that the ``qmgr`` command's
management subcommands make (``tx``, poison handling and moves, ``dl``,
``outgoing``, ``permissions``, ``trace``); the trio client does the same so
that the two read alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._blocking import QueueManager, Transaction, connect
from ._codec import SendOptions
from ._exceptions import (
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
from ._message import (
    Delivery,
    IncomingInfo,
    Message,
    OutgoingInfo,
    QueueInfo,
    QueueKind,
    Status,
)
from ._tls_context import tls_context
from .calls.lists import DistributionList
from .calls.messages import RangeInfo
from .calls.poison import MoveResult
from .calls.routing import Hop, Route, Routing
from .calls.trace import TraceFinding, TraceReport
from .calls.two_phase import Resolution, TransactionInfo, TransactionStatus

if TYPE_CHECKING:
    from ._trio import AsyncQueueManager, AsyncTransaction, open_client

_TRIO_NAMES = frozenset({"AsyncQueueManager", "AsyncTransaction", "open_client"})


def __getattr__(name: str) -> Any:
    # The trio client is imported on first use, so that blocking programs
    # (and the qmgr command) do not pay for importing trio.
    if name in _TRIO_NAMES:
        from ._trio import AsyncQueueManager, AsyncTransaction, open_client

        trio_names = {
            "AsyncQueueManager": AsyncQueueManager,
            "AsyncTransaction": AsyncTransaction,
            "open_client": open_client,
        }
        globals().update(trio_names)
        return trio_names[name]
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
    "Hop",
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
    "Route",
    "Routing",
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
