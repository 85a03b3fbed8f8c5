"""qmgr's client protocol: the frames spoken between the daemon and the SDK.

Theory of operation
-------------------
A connection is a stream of frames in both directions: a 12-byte header
(body length, kind, flags, request id; see ``_client_decoder``) and a body
whose layout depends on the kind (``_client_layouts`` defines every one as a
construct ``Struct``; ``_client_fast`` encodes the hot ones by hand). A
message inside a frame is laid out as ``wire.MessageProperties`` documents.

The rules:

* A connection opens with :class:`Hello` (magic ``b"QMGR"`` and the range of
  protocol versions the client speaks); the daemon answers :class:`HelloOk`
  with the version chosen, or :class:`ErrorReply` with ``UNSUPPORTED_VERSION``.
  The requests of global (two-phase) transactions and queue ranges
  (``TWO_PHASE_REQUESTS``, see ``_client_global``) came with version 3
  (``TWO_PHASE_VERSION``); on a connection that negotiated less the daemon
  refuses them, and a client does not send them. Tracing a message
  and distribution lists (``OUTCOMES_REQUESTS``) came with version 4
  (``OUTCOMES_VERSION``), the same way. Those of poison handling and
  subqueues (``POISON_REQUESTS``, see ``_client_poison``) came with
  version 5 (``POISON_VERSION``), with trailers added to some existing
  frames (``_client_trailers``), sent only on connections of version 5.
  Queue permissions (``SECURITY_REQUESTS``, see ``_client_permissions``)
  came with version 6 (``SECURITY_VERSION``).
* Every request gets exactly one reply with the same request id, a typed
  reply or an :class:`ErrorReply` with a stable :class:`ErrorCode` and a
  message that says what was wrong, with two exceptions that make
  pipelining cheap: a :class:`Begin` or :class:`BeginGlobal` with a
  client-chosen id and a :class:`Send` inside a transaction are answered
  only if they fail. A transaction in which such a request failed can only
  abort: its :class:`Commit` (or :class:`Prepare`) is answered with the error.
* Replies may arrive out of request order (a blocked receive does not hold
  up the requests behind it).
* An :class:`ErrorReply` with request id 0 is about the connection itself
  (a malformed frame, a limit reached, shutdown); the daemon closes the
  connection after sending it.
"""

from __future__ import annotations

from ._client_decoder import ClientFrameDecoder as ClientFrameDecoder
from ._client_decoder import decode_body as decode_body
from ._client_decoder import encode_frame as encode_frame
from ._client_fast import append_send_frame as append_send_frame
from ._client_fast import counters_record as counters_record
from ._client_fast import encode_message_reply as encode_message_reply
from ._client_fast import encode_ok as encode_ok
from ._client_fast import encode_tx_request as encode_tx_request
from ._client_fast import queued_message_parts as queued_message_parts
from ._client_layouts import MESSAGE_LAYOUT as MESSAGE_LAYOUT
from ._client_layouts import decode_body_with_layout as decode_body_with_layout
from ._client_layouts import encode_body_with_layout as encode_body_with_layout
from ._client_values import CLIENT_TX_ID_LIMIT as CLIENT_TX_ID_LIMIT
from ._client_values import HEADER_SIZE as HEADER_SIZE
from ._client_values import HELLO_MAGIC as HELLO_MAGIC
from ._client_values import INFINITE_TIMEOUT_MS as INFINITE_TIMEOUT_MS
from ._client_values import MAX_FRAME_BODY as MAX_FRAME_BODY
from ._client_values import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from ._client_values import MAX_MESSAGE_BODY as MAX_MESSAGE_BODY
from ._client_values import MAX_RESOLVE_XIDS as MAX_RESOLVE_XIDS
from ._client_values import MAX_TRACE_FINDINGS as MAX_TRACE_FINDINGS
from ._client_values import MIN_PROTOCOL_VERSION as MIN_PROTOCOL_VERSION
from ._client_values import OUTCOMES_REQUESTS as OUTCOMES_REQUESTS
from ._client_values import OUTCOMES_VERSION as OUTCOMES_VERSION
from ._client_values import POISON_REQUESTS as POISON_REQUESTS
from ._client_values import POISON_VERSION as POISON_VERSION
from ._client_values import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._client_values import SECURITY_REQUESTS as SECURITY_REQUESTS
from ._client_values import SECURITY_VERSION as SECURITY_VERSION
from ._client_values import TWO_PHASE_REQUESTS as TWO_PHASE_REQUESTS
from ._client_values import TWO_PHASE_VERSION as TWO_PHASE_VERSION
from ._client_values import Abort as Abort
from ._client_values import AclEntry as AclEntry
from ._client_values import Authenticate as Authenticate
from ._client_values import Begin as Begin
from ._client_values import BeginGlobal as BeginGlobal
from ._client_values import ChangeList as ChangeList
from ._client_values import ChangePermissions as ChangePermissions
from ._client_values import ClientRequest as ClientRequest
from ._client_values import Commit as Commit
from ._client_values import ControlOutgoing as ControlOutgoing
from ._client_values import CreateList as CreateList
from ._client_values import CreateQueue as CreateQueue
from ._client_values import DeleteList as DeleteList
from ._client_values import DeleteQueue as DeleteQueue
from ._client_values import Delivery as Delivery
from ._client_values import ErrorCode as ErrorCode
from ._client_values import ErrorReply as ErrorReply
from ._client_values import Frame as Frame
from ._client_values import FrameKind as FrameKind
from ._client_values import FrameValue as FrameValue
from ._client_values import GetLists as GetLists
from ._client_values import GetPermissions as GetPermissions
from ._client_values import GetStatus as GetStatus
from ._client_values import Hello as Hello
from ._client_values import HelloOk as HelloOk
from ._client_values import IncomingInfo as IncomingInfo
from ._client_values import ListInfo as ListInfo
from ._client_values import ListInfoList as ListInfoList
from ._client_values import ListOutgoing as ListOutgoing
from ._client_values import ListQueues as ListQueues
from ._client_values import ListTransactions as ListTransactions
from ._client_values import MeasureRange as MeasureRange
from ._client_values import MessageCounters as MessageCounters
from ._client_values import MessageList as MessageList
from ._client_values import MessageReply as MessageReply
from ._client_values import Moved as Moved
from ._client_values import MoveMessages as MoveMessages
from ._client_values import NoMessage as NoMessage
from ._client_values import Ok as Ok
from ._client_values import OutgoingInfo as OutgoingInfo
from ._client_values import OutgoingList as OutgoingList
from ._client_values import PeekRange as PeekRange
from ._client_values import Permissions as Permissions
from ._client_values import PoisonHandling as PoisonHandling
from ._client_values import Prepare as Prepare
from ._client_values import PurgeQueue as PurgeQueue
from ._client_values import QueuedMessage as QueuedMessage
from ._client_values import QueueInfo as QueueInfo
from ._client_values import QueueKind as QueueKind
from ._client_values import QueueList as QueueList
from ._client_values import RangeInfo as RangeInfo
from ._client_values import Receive as Receive
from ._client_values import RemoveThrough as RemoveThrough
from ._client_values import Resolution as Resolution
from ._client_values import Resolutions as Resolutions
from ._client_values import Resolve as Resolve
from ._client_values import RetrySettings as RetrySettings
from ._client_values import Send as Send
from ._client_values import Sent as Sent
from ._client_values import ServerReply as ServerReply
from ._client_values import SetQueueProperties as SetQueueProperties
from ._client_values import StatusInfo as StatusInfo
from ._client_values import TraceFinding as TraceFinding
from ._client_values import TraceMessage as TraceMessage
from ._client_values import TraceReport as TraceReport
from ._client_values import TransactionInfo as TransactionInfo
from ._client_values import TransactionList as TransactionList
from ._client_values import TransactionState as TransactionState
from ._client_values import is_request as is_request
from ._message import CORRELATION_ID_SIZE as CORRELATION_ID_SIZE
from ._message import INFINITE_SECONDS as INFINITE_SECONDS
from ._message import MessageProperties as MessageProperties
from ._message import encode_message_parts as encode_message_parts
from ._message import format_message_id as format_message_id
from .rights import Right as Right
from .rights import parse_rights as parse_rights
from .rights import rights_names as rights_names
