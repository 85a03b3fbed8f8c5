"""Replies to values: what the SDK returns for each kind of reply, and peek paging.

Pure functions over ``wire.client_frames`` values, shared by the blocking and
the trio client; a reply of the wrong kind is a protocol error
(``ConnectionLost``), never an ``AttributeError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wire import client_frames as cf

from ._errors import ConnectionLost, QueueError
from ._message import Message, OutgoingInfo, QueueInfo, Status

if TYPE_CHECKING:
    from ._transaction import TransactionState

__all__ = [
    "PeekPages",
    "message_id",
    "message_or_none",
    "ok_value",
    "outgoing_changed",
    "outgoing_list",
    "queue_list",
    "status",
    "unexpected",
]


def unexpected(reply: cf.ServerReply, wanted: str) -> QueueError:
    """The error for a reply of the wrong kind (a daemon bug or a version mismatch)."""
    name = type(reply).__name__
    return ConnectionLost(f"protocol error: the queue manager answered {name}, not {wanted}")


def ok_value(reply: cf.ServerReply) -> int:
    """The value of an ``Ok`` reply."""
    if type(reply) is cf.Ok:
        return reply.value
    raise unexpected(reply, "Ok")


def message_id(reply: cf.ServerReply) -> str:
    """The message id of a ``Sent`` reply."""
    if type(reply) is cf.Sent:
        return reply.message_id
    raise unexpected(reply, "Sent")


def message_or_none(reply: cf.ServerReply, state: TransactionState | None = None) -> Message | None:
    """The result of a receive or peek reply (in the transaction ``state``, checked again)."""
    if type(reply) is cf.MessageReply:
        message: Message | None = Message.from_wire(reply.message)
    elif type(reply) is cf.NoMessage:
        message = None
    else:
        raise unexpected(reply, "MessageReply or NoMessage")
    if state is not None:
        state.check()
    return message


def queue_list(reply: cf.ServerReply) -> list[QueueInfo]:
    """The queues of a ``QueueList`` reply."""
    if type(reply) is not cf.QueueList:
        raise unexpected(reply, "QueueList")
    return [QueueInfo.from_wire(q) for q in reply.queues]


def outgoing_list(reply: cf.ServerReply) -> list[OutgoingInfo]:
    """The outgoing queues of an ``OutgoingList`` reply."""
    if type(reply) is not cf.OutgoingList:
        raise unexpected(reply, "OutgoingList")
    return [OutgoingInfo.from_wire(o) for o in reply.outgoing]


def outgoing_changed(reply: cf.ServerReply) -> tuple[OutgoingInfo, int]:
    """The queue a ``ControlOutgoing`` changed, and how many messages a purge removed."""
    if type(reply) is not cf.OutgoingList:
        raise unexpected(reply, "OutgoingList")
    if len(reply.outgoing) != 1:
        count = len(reply.outgoing)
        msg = f"protocol error: the queue manager answered with {count} outgoing queues, not 1"
        raise ConnectionLost(msg)
    return OutgoingInfo.from_wire(reply.outgoing[0]), reply.purged


def status(reply: cf.ServerReply) -> Status:
    """The status of a ``StatusInfo`` reply."""
    if type(reply) is not cf.StatusInfo:
        raise unexpected(reply, "StatusInfo")
    return Status.from_wire(reply)


class PeekPages:
    """The ``PeekRange`` requests of one ``peek_range()`` call, and what they found.

    The daemon answers at most about 4 MB of messages per request: ask for
    :meth:`next_request` until it is None, giving every reply to :meth:`add`.
    """

    __slots__ = ("_after", "_done", "_max", "_queue", "found")

    def __init__(self, queue: str, after: int, max_count: int) -> None:
        self._queue = queue
        self._after = after
        self._max = max_count
        self._done = False
        #: The messages found so far, in lookup-id order.
        self.found: list[Message] = []

    def next_request(self) -> cf.PeekRange | None:
        """The next request to make, or None once ``max`` messages or all of them are found."""
        left = self._max - len(self.found)
        if self._done or left <= 0:
            return None
        return cf.PeekRange(queue=self._queue, after=self._after, max_count=left)

    def add(self, reply: cf.ServerReply) -> None:
        """Take the reply to the last request."""
        if type(reply) is not cf.MessageList:
            raise unexpected(reply, "MessageList")
        if not reply.messages:
            self._done = True
            return
        self.found.extend(Message.from_wire(m) for m in reply.messages)
        self._after = self.found[-1].lookup_id
