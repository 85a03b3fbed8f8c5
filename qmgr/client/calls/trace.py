"""Tracing one message: ``qm.trace(message_id)`` and what it returns.

A queue manager answers what it knows about a message id: where the message
is (a queue, a journal, a dead-letter queue, an outgoing queue on its way to
another queue manager), the copy it keeps for the confirmation process, the
FinalAck it owes the message's source, and the acknowledgments about it
waiting in its queues. ``qmgr trace`` follows ``next_hop`` from one queue
manager to the next. The request needs the protocol's ``OUTCOMES_VERSION``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from wire import client as cf

from .._levels import class_name
from .._protocol import ClientProtocol, Flow, W
from .._replies import expect

__all__ = ["TraceFinding", "TraceReport", "trace"]


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


def _finding(found: cf.TraceFinding) -> TraceFinding:
    return TraceFinding(
        kind=found.kind,
        place=found.place,
        time=_dt.datetime.fromtimestamp(found.time, _dt.UTC) if found.time > 0 else None,
        message_class=found.message_class,
        class_name=class_name(found.message_class),
        detail=found.detail,
        next_hop=found.next_hop,
    )


def trace(proto: ClientProtocol[W], message_id: str) -> Flow[W, TraceReport]:
    """``trace()``."""
    proto.require(cf.OUTCOMES_VERSION, "trace()")
    report = expect((yield proto.call(cf.TraceMessage(message_id=message_id))), cf.TraceReport)
    return TraceReport(report.qm_name, tuple(_finding(f) for f in report.findings))
