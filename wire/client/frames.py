"""Every frame value of the client protocol, and the kind each one is sent as.

:data:`ClientRequest` and :data:`ServerReply` are the unions of the values of
:mod:`wire.client.values` and of the modules of later versions;
:data:`KIND_OF` and :data:`CLASS_OF` map value classes to frame kinds and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

from .cancel import CancelReceive
from .constants import FrameKind
from .lists import ChangeList, CreateList, DeleteList, GetLists, ListInfoList
from .permissions import Authenticate, ChangePermissions, GetPermissions, Permissions
from .poison import Moved, MoveMessages, SetQueueProperties
from .routing import GetRouting, RoutingInfo
from .trace import TraceMessage, TraceReport
from .two_phase import (
    BeginGlobal,
    ListTransactions,
    MeasureRange,
    Prepare,
    RangeInfo,
    RemoveThrough,
    Resolutions,
    Resolve,
    TransactionList,
)
from .values import (
    Abort,
    Begin,
    Commit,
    ControlOutgoing,
    CreateQueue,
    DeleteQueue,
    ErrorReply,
    GetStatus,
    Hello,
    HelloOk,
    ListOutgoing,
    ListQueues,
    MessageList,
    MessageReply,
    NoMessage,
    Ok,
    OutgoingList,
    PeekRange,
    PurgeQueue,
    QueueList,
    Receive,
    Send,
    Sent,
    StatusInfo,
)

__all__ = [
    "CLASS_OF",
    "KIND_OF",
    "ClientRequest",
    "Frame",
    "FrameValue",
    "ServerReply",
    "is_request",
]

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
    | GetRouting
    | CancelReceive
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
    | RoutingInfo
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
    GetRouting: FrameKind.GET_ROUTING,
    CancelReceive: FrameKind.CANCEL_RECEIVE,
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
    RoutingInfo: FrameKind.ROUTING_INFO,
    ListInfoList: FrameKind.LIST_INFO_LIST,
    ErrorReply: FrameKind.ERROR,
}
#: The value class of every frame kind.
CLASS_OF: Final[dict[FrameKind, type[FrameValue]]] = {kind: cls for cls, kind in KIND_OF.items()}


def is_request(value: FrameValue) -> bool:
    """True for frames a client sends, False for the daemon's replies."""
    return KIND_OF[type(value)] < 0x80
