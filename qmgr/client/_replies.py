"""Replies to values: what the SDK returns for each kind of reply.

Pure functions over ``wire.client`` values, shared by every call of
both clients; a reply of the wrong kind is a protocol error
(``ConnectionLost``), never an ``AttributeError``. The calls of one concern
(``calls/``) convert their own replies with :func:`expect`.
"""

from __future__ import annotations

from typing import Final, TypeVar

from wire import client as cf
from wire.client import Resolution

from ._exceptions import ConnectionLost, QueueError
from ._message import Message, OutgoingInfo, QueueInfo, Status

__all__ = [
    "expect",
    "message_id",
    "message_or_none",
    "ok_value",
    "outgoing_changed",
    "outgoing_list",
    "queue_list",
    "resolutions",
    "status",
    "unexpected",
]

R = TypeVar("R")

_RESOLUTIONS: Final = {int(r): r for r in Resolution}


def unexpected(reply: object, wanted: str) -> QueueError:
    """The error for a reply of the wrong kind (a daemon bug or a version mismatch)."""
    name = type(reply).__name__
    return ConnectionLost(f"protocol error: the queue manager answered {name}, not {wanted}")


def expect(reply: cf.ServerReply, kind: type[R]) -> R:
    """``reply``, once it is sure to be a ``kind``.

    Raises:
        ConnectionLost: it is another kind of reply (a protocol error).
    """
    if type(reply) is not kind:
        raise unexpected(reply, kind.__name__)
    return reply


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


def message_or_none(reply: cf.ServerReply) -> Message | None:
    """The message of a receive or peek reply, or None for ``NoMessage``."""
    if type(reply) is cf.MessageReply:
        return Message.from_wire(reply.message)
    if type(reply) is cf.NoMessage:
        return None
    raise unexpected(reply, "MessageReply or NoMessage")


def queue_list(reply: cf.ServerReply) -> list[QueueInfo]:
    """The queues of a ``QueueList`` reply."""
    return [QueueInfo.from_wire(q) for q in expect(reply, cf.QueueList).queues]


def outgoing_list(reply: cf.ServerReply) -> list[OutgoingInfo]:
    """The outgoing queues of an ``OutgoingList`` reply."""
    return [OutgoingInfo.from_wire(o) for o in expect(reply, cf.OutgoingList).outgoing]


def outgoing_changed(reply: cf.ServerReply) -> tuple[OutgoingInfo, int]:
    """The queue a ``ControlOutgoing`` changed, and how many messages a purge removed."""
    listed = expect(reply, cf.OutgoingList)
    if len(listed.outgoing) != 1:
        count = len(listed.outgoing)
        msg = f"protocol error: the queue manager answered with {count} outgoing queues, not 1"
        raise ConnectionLost(msg)
    return OutgoingInfo.from_wire(listed.outgoing[0]), listed.purged


def status(reply: cf.ServerReply) -> Status:
    """The status of a ``StatusInfo`` reply."""
    return Status.from_wire(expect(reply, cf.StatusInfo))


def resolutions(reply: cf.ServerReply, count: int) -> list[Resolution]:
    """The resolutions of a ``Resolutions`` reply to a Resolve of ``count`` xids."""
    outcomes = expect(reply, cf.Resolutions).outcomes
    found = [_RESOLUTIONS.get(value) for value in outcomes]
    if len(found) != count or None in found:
        msg = (
            f"protocol error: the queue manager answered {outcomes!r} "
            f"to the resolution of {count} transactions"
        )
        raise ConnectionLost(msg)
    return found  # type: ignore[return-value]
