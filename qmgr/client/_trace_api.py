"""Tracing one message: ``qm.trace(message_id)`` and what it returns.

A queue manager answers what it knows about a message id: where the message
is (a queue, a journal, a dead-letter queue, an outgoing queue on its way to
another queue manager), the copy it keeps for the confirmation process, the
FinalAck it owes the message's source, and the acknowledgments about it
waiting in its queues. ``qmgr trace`` follows ``next_hop`` from one queue
manager to the next.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wire import client_frames as cf

from . import _common as common
from ._levels import class_name
from ._replies import unexpected

if TYPE_CHECKING:
    from ._protocol import ClientProtocol

__all__ = ["AsyncQueueManagerTrace", "QueueManagerTrace", "TraceFinding", "TraceReport"]


@dataclass(frozen=True, slots=True)
class TraceFinding:
    """One thing a queue manager knows about the traced message.

    Attributes:
        kind: ``queue`` (waiting to be received), ``journal`` (received, copy
            in the queue's journal), ``dead-letter``, ``system-journal`` (the
            source's copy of a confirmed message), ``outgoing`` (on its way to
            another queue manager), ``relaying``, ``awaiting-confirmation``
            (the source's copy until its FinalAck or deadline), ``final-ack``
            (the fate a destination reports to the source), ``acknowledgment``
            (a report about it waiting in an admin queue), ``correlated``.
        place: a queue's name, or a destination.
        time: when it got there (None if unknown).
        message_class: the class it carries (0: a normal message).
        class_name: that class's name.
        detail: what else is known, for people.
        next_hop: for a message on its way, ``host:port`` of the queue
            manager (its peer port) to ask next; "" otherwise.
    """

    kind: str
    place: str
    time: _dt.datetime | None
    message_class: int
    class_name: str
    detail: str
    next_hop: str


@dataclass(frozen=True, slots=True)
class TraceReport:
    """What one queue manager knows about a message."""

    qm_name: str
    findings: tuple[TraceFinding, ...]


def _report(reply: cf.ServerReply) -> TraceReport:
    if type(reply) is not cf.TraceReport:
        raise unexpected(reply, "TraceReport")
    return TraceReport(
        qm_name=reply.qm_name,
        findings=tuple(
            TraceFinding(
                kind=f.kind,
                place=f.place,
                time=_dt.datetime.fromtimestamp(f.time, _dt.UTC) if f.time > 0 else None,
                message_class=f.message_class,
                class_name=class_name(f.message_class),
                detail=f.detail,
                next_hop=f.next_hop,
            )
            for f in reply.findings
        ),
    )


def _require(version: int, address: str) -> None:
    common.require_version(version, cf.OUTCOMES_VERSION, address, "trace()")


class QueueManagerTrace:
    """The trace method of ``QueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        def _call(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    def trace(self, message_id: str) -> TraceReport:
        """What this queue manager knows about the message ``message_id``
        (``{source QM GUID}\\ordinal``, as ``send()`` returned it).

        The daemon searches its store (every queue, without recording anything
        beforehand), so a trace costs in proportion to the messages stored.

        Raises:
            InvalidArgument: not a message id; NotSupported: the daemon is too old.
        """
        _require(self._proto.version, self._proto.address)
        return _report(self._call(cf.TraceMessage(message_id=message_id)))


class AsyncQueueManagerTrace:
    """The trace method of ``AsyncQueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        async def _request(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    async def trace(self, message_id: str) -> TraceReport:
        """What this queue manager knows about a message; see ``QueueManager.trace``."""
        _require(self._proto.version, self._proto.address)
        return _report(await self._request(cf.TraceMessage(message_id=message_id)))
