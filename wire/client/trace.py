"""The client protocol's frames for tracing one message (``qmgr trace``).

:class:`TraceMessage` asks a daemon what it knows about one message id; the
answer, :class:`TraceReport`, lists :class:`TraceFinding` values. These
requests are answered only on a connection that negotiated
``OUTCOMES_VERSION`` or later (see :mod:`wire.client.constants`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .lists import ChangeList, CreateList, DeleteList, GetLists

#: Most findings one TraceReport carries.
MAX_TRACE_FINDINGS: Final = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceMessage:
    """Ask what the queue manager knows about the message ``message_id``
    (``{source QM GUID}\\ordinal``). The reply is :class:`TraceReport`."""

    message_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceFinding:
    """One thing a queue manager knows about a traced message."""

    #: What it is: ``queue``, ``journal``, ``dead-letter``, ``system-journal``,
    #: ``outgoing``, ``relaying``, ``awaiting-confirmation``, ``final-ack``,
    #: ``acknowledgment``, ``correlated``.
    kind: str
    #: Where: a queue's name or a destination.
    place: str
    #: Unix seconds: when it got there (0 if unknown).
    time: float
    #: The class it carries (0: a normal message).
    message_class: int
    #: What else is known, for people.
    detail: str
    #: For a message on its way: ``host:port`` of the queue manager to ask next.
    next_hop: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceReport:
    """The answer to :class:`TraceMessage`: the daemon's name and GUID, and what it found."""

    qm_name: str
    findings: tuple[TraceFinding, ...]


#: The requests a daemon answers only on a connection of ``OUTCOMES_VERSION`` or later.
OUTCOMES_REQUESTS: Final[frozenset[type[object]]] = frozenset(
    {TraceMessage, CreateList, ChangeList, DeleteList, GetLists}
)
