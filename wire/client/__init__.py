"""qmgr's client protocol: the frames spoken between the daemon and the SDK.

Used across the repository as ``from wire import client as cf``; every name
below is part of its public surface (``__all__``).

Theory of operation
-------------------
A connection is a stream of frames in both directions: a 12-byte header
(body length, kind, flags, request id; see :mod:`wire.client.framing`) and a
body whose layout depends on the kind (:mod:`wire.client.layouts` defines every
one as a construct ``Struct`` and :mod:`wire.client.layout_codec` converts
values to them and back; :mod:`wire.client.fast_codec` encodes the hot ones by
hand). A message inside a frame is laid out as :mod:`wire.message_layout`
documents. The frame values are in :mod:`wire.client.values` (version 2) and in
one module per later addition; :mod:`wire.client.frames` names them all and
their kinds, :mod:`wire.client.constants` the versions, limits, kinds and
error codes.

The rules:

* A connection opens with :class:`Hello` (magic ``b"QMGR"`` and the range of
  protocol versions the client speaks); the daemon answers :class:`HelloOk`
  with the version chosen, or :class:`ErrorReply` with ``UNSUPPORTED_VERSION``.
  The requests of global (two-phase) transactions and queue ranges
  (``TWO_PHASE_REQUESTS``, see :mod:`wire.client.two_phase`) came with version 3
  (``TWO_PHASE_VERSION``); on a connection that negotiated less the daemon
  refuses them, and a client does not send them. Tracing a message
  (:mod:`wire.client.trace`) and distribution lists (:mod:`wire.client.lists`;
  together ``OUTCOMES_REQUESTS``) came with version 4 (``OUTCOMES_VERSION``),
  the same way. Those of poison handling and subqueues (``POISON_REQUESTS``,
  see :mod:`wire.client.poison`) came with version 5 (``POISON_VERSION``), with
  trailers added to some existing frames (:mod:`wire.client.trailers`), sent
  only on connections of version 5. Queue permissions (``SECURITY_REQUESTS``,
  see :mod:`wire.client.permissions`) came with version 6 (``SECURITY_VERSION``),
  routing information (``ROUTING_REQUESTS``, see :mod:`wire.client.routing`)
  with version 7 (``ROUTING_VERSION``), and cancelling a waiting receive
  (``CANCEL_REQUESTS``, see :mod:`wire.client.cancel`) with version 8
  (``CANCEL_VERSION``). Version 9 (``LARGE_LISTS_VERSION``) lets whole-list
  replies be larger; version 10 (``QUOTA_VERSION``) lets ``SetQueueProperties``
  change a queue's quota, in a trailer that a daemon refuses on a connection
  of an earlier version as it refuses a request of a later one.
* Every request gets exactly one reply with the same request id, a typed
  reply or an :class:`ErrorReply` with a stable :class:`ErrorCode` and a
  message that says what was wrong, with two exceptions that make
  pipelining cheap: a :class:`Begin` or :class:`BeginGlobal` with a
  client-chosen id and a :class:`Send` inside a transaction are answered
  only if they fail. A transaction in which such a request failed can only
  abort: its :class:`Commit` (or :class:`Prepare`) is answered with the error.
  A :class:`CancelReceive` is never answered: the receive it names is.
* Replies may arrive out of request order (a blocked receive does not hold
  up the requests behind it).
* An :class:`ErrorReply` with request id 0 is about the connection itself
  (a malformed frame, a limit reached, shutdown); the daemon closes the
  connection after sending it.
"""

from __future__ import annotations

from ..message_layout import CORRELATION_ID_SIZE as CORRELATION_ID_SIZE
from ..message_layout import INFINITE_SECONDS as INFINITE_SECONDS
from ..message_layout import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from ..message_layout import MAX_MESSAGE_BODY as MAX_MESSAGE_BODY
from ..message_layout import encode_message_parts as encode_message_parts
from ..message_layout import format_message_id as format_message_id
from ..message_properties import MessageProperties as MessageProperties
from ..rights import Right as Right
from ..rights import parse_rights as parse_rights
from ..rights import rights_names as rights_names
from .cancel import CANCEL_REQUESTS as CANCEL_REQUESTS
from .cancel import CancelReceive as CancelReceive
from .constants import CANCEL_VERSION as CANCEL_VERSION
from .constants import CLIENT_TX_ID_LIMIT as CLIENT_TX_ID_LIMIT
from .constants import HEADER_SIZE as HEADER_SIZE
from .constants import HELLO_MAGIC as HELLO_MAGIC
from .constants import INFINITE_TIMEOUT_MS as INFINITE_TIMEOUT_MS
from .constants import LARGE_LISTS_VERSION as LARGE_LISTS_VERSION
from .constants import LIST_REPLY_KINDS as LIST_REPLY_KINDS
from .constants import MAX_FRAME_BODY as MAX_FRAME_BODY
from .constants import MAX_LIST_FRAME_BODY as MAX_LIST_FRAME_BODY
from .constants import MIN_PROTOCOL_VERSION as MIN_PROTOCOL_VERSION
from .constants import OUTCOMES_VERSION as OUTCOMES_VERSION
from .constants import POISON_VERSION as POISON_VERSION
from .constants import PROTOCOL_VERSION as PROTOCOL_VERSION
from .constants import QUOTA_VERSION as QUOTA_VERSION
from .constants import ROUTING_VERSION as ROUTING_VERSION
from .constants import SECURITY_VERSION as SECURITY_VERSION
from .constants import TWO_PHASE_VERSION as TWO_PHASE_VERSION
from .constants import Delivery as Delivery
from .constants import ErrorCode as ErrorCode
from .constants import FrameKind as FrameKind
from .constants import QueueKind as QueueKind
from .fast_codec import append_send_frame as append_send_frame
from .fast_codec import counters_record as counters_record
from .fast_codec import encode_message_reply as encode_message_reply
from .fast_codec import encode_ok as encode_ok
from .fast_codec import encode_tx_request as encode_tx_request
from .fast_codec import queued_message_parts as queued_message_parts
from .frames import CLASS_OF as CLASS_OF
from .frames import ClientRequest as ClientRequest
from .frames import Frame as Frame
from .frames import FrameValue as FrameValue
from .frames import ServerReply as ServerReply
from .frames import is_request as is_request
from .framing import ClientFrameDecoder as ClientFrameDecoder
from .framing import FrameTooLarge as FrameTooLarge
from .framing import decode_body as decode_body
from .framing import encode_frame as encode_frame
from .framing import max_reply_body as max_reply_body
from .layout_codec import decode_body_with_layout as decode_body_with_layout
from .layout_codec import encode_body_with_layout as encode_body_with_layout
from .layouts import MESSAGE_LAYOUT as MESSAGE_LAYOUT
from .lists import ChangeList as ChangeList
from .lists import CreateList as CreateList
from .lists import DeleteList as DeleteList
from .lists import GetLists as GetLists
from .lists import ListInfo as ListInfo
from .lists import ListInfoList as ListInfoList
from .permissions import SECURITY_REQUESTS as SECURITY_REQUESTS
from .permissions import AclEntry as AclEntry
from .permissions import Authenticate as Authenticate
from .permissions import ChangePermissions as ChangePermissions
from .permissions import GetPermissions as GetPermissions
from .permissions import Permissions as Permissions
from .poison import POISON_REQUESTS as POISON_REQUESTS
from .poison import MessageCounters as MessageCounters
from .poison import Moved as Moved
from .poison import MoveMessages as MoveMessages
from .poison import PoisonHandling as PoisonHandling
from .poison import RetrySettings as RetrySettings
from .poison import SetQueueProperties as SetQueueProperties
from .routing import ROUTING_REQUESTS as ROUTING_REQUESTS
from .routing import GetRouting as GetRouting
from .routing import HopInfo as HopInfo
from .routing import RouteEntry as RouteEntry
from .routing import RoutingInfo as RoutingInfo
from .trace import MAX_TRACE_FINDINGS as MAX_TRACE_FINDINGS
from .trace import OUTCOMES_REQUESTS as OUTCOMES_REQUESTS
from .trace import TraceFinding as TraceFinding
from .trace import TraceMessage as TraceMessage
from .trace import TraceReport as TraceReport
from .two_phase import MAX_RESOLVE_XIDS as MAX_RESOLVE_XIDS
from .two_phase import MAX_XID_BYTES as MAX_XID_BYTES
from .two_phase import TWO_PHASE_REQUESTS as TWO_PHASE_REQUESTS
from .two_phase import BeginGlobal as BeginGlobal
from .two_phase import ListTransactions as ListTransactions
from .two_phase import MeasureRange as MeasureRange
from .two_phase import Prepare as Prepare
from .two_phase import RangeInfo as RangeInfo
from .two_phase import RemoveThrough as RemoveThrough
from .two_phase import Resolution as Resolution
from .two_phase import Resolutions as Resolutions
from .two_phase import Resolve as Resolve
from .two_phase import TransactionInfo as TransactionInfo
from .two_phase import TransactionList as TransactionList
from .two_phase import TransactionState as TransactionState
from .two_phase import xid_error as xid_error
from .values import Abort as Abort
from .values import Begin as Begin
from .values import Commit as Commit
from .values import ControlOutgoing as ControlOutgoing
from .values import CreateQueue as CreateQueue
from .values import DeleteQueue as DeleteQueue
from .values import ErrorReply as ErrorReply
from .values import GetStatus as GetStatus
from .values import Hello as Hello
from .values import HelloOk as HelloOk
from .values import IncomingInfo as IncomingInfo
from .values import ListOutgoing as ListOutgoing
from .values import ListQueues as ListQueues
from .values import MessageList as MessageList
from .values import MessageReply as MessageReply
from .values import NoMessage as NoMessage
from .values import Ok as Ok
from .values import OutgoingInfo as OutgoingInfo
from .values import OutgoingList as OutgoingList
from .values import PeekRange as PeekRange
from .values import PurgeQueue as PurgeQueue
from .values import QueuedMessage as QueuedMessage
from .values import QueueInfo as QueueInfo
from .values import QueueList as QueueList
from .values import Receive as Receive
from .values import Send as Send
from .values import Sent as Sent
from .values import StatusInfo as StatusInfo

__all__ = [
    "CANCEL_REQUESTS",
    "CANCEL_VERSION",
    "CLASS_OF",
    "CLIENT_TX_ID_LIMIT",
    "CORRELATION_ID_SIZE",
    "HEADER_SIZE",
    "HELLO_MAGIC",
    "INFINITE_SECONDS",
    "INFINITE_TIMEOUT_MS",
    "LARGE_LISTS_VERSION",
    "LIST_REPLY_KINDS",
    "MAX_FRAME_BODY",
    "MAX_LABEL_CHARS",
    "MAX_LIST_FRAME_BODY",
    "MAX_MESSAGE_BODY",
    "MAX_RESOLVE_XIDS",
    "MAX_TRACE_FINDINGS",
    "MAX_XID_BYTES",
    "MESSAGE_LAYOUT",
    "MIN_PROTOCOL_VERSION",
    "OUTCOMES_REQUESTS",
    "OUTCOMES_VERSION",
    "POISON_REQUESTS",
    "POISON_VERSION",
    "PROTOCOL_VERSION",
    "QUOTA_VERSION",
    "ROUTING_REQUESTS",
    "ROUTING_VERSION",
    "SECURITY_REQUESTS",
    "SECURITY_VERSION",
    "TWO_PHASE_REQUESTS",
    "TWO_PHASE_VERSION",
    "Abort",
    "AclEntry",
    "Authenticate",
    "Begin",
    "BeginGlobal",
    "CancelReceive",
    "ChangeList",
    "ChangePermissions",
    "ClientFrameDecoder",
    "ClientRequest",
    "Commit",
    "ControlOutgoing",
    "CreateList",
    "CreateQueue",
    "DeleteList",
    "DeleteQueue",
    "Delivery",
    "ErrorCode",
    "ErrorReply",
    "Frame",
    "FrameKind",
    "FrameTooLarge",
    "FrameValue",
    "GetLists",
    "GetPermissions",
    "GetRouting",
    "GetStatus",
    "Hello",
    "HelloOk",
    "HopInfo",
    "IncomingInfo",
    "ListInfo",
    "ListInfoList",
    "ListOutgoing",
    "ListQueues",
    "ListTransactions",
    "MeasureRange",
    "MessageCounters",
    "MessageList",
    "MessageProperties",
    "MessageReply",
    "MoveMessages",
    "Moved",
    "NoMessage",
    "Ok",
    "OutgoingInfo",
    "OutgoingList",
    "PeekRange",
    "Permissions",
    "PoisonHandling",
    "Prepare",
    "PurgeQueue",
    "QueueInfo",
    "QueueKind",
    "QueueList",
    "QueuedMessage",
    "RangeInfo",
    "Receive",
    "RemoveThrough",
    "Resolution",
    "Resolutions",
    "Resolve",
    "RetrySettings",
    "Right",
    "RouteEntry",
    "RoutingInfo",
    "Send",
    "Sent",
    "ServerReply",
    "SetQueueProperties",
    "StatusInfo",
    "TraceFinding",
    "TraceMessage",
    "TraceReport",
    "TransactionInfo",
    "TransactionList",
    "TransactionState",
    "append_send_frame",
    "counters_record",
    "decode_body",
    "decode_body_with_layout",
    "encode_body_with_layout",
    "encode_frame",
    "encode_message_parts",
    "encode_message_reply",
    "encode_ok",
    "encode_tx_request",
    "format_message_id",
    "is_request",
    "max_reply_body",
    "parse_rights",
    "queued_message_parts",
    "rights_names",
    "xid_error",
]
