"""What authorizes a request: the needs the request tables declare.

Each entry of the client request table (``registry``), and each route of the
HTTP listener (``qmgr.server.http``), declares one of these next to its
handler; ``Authorization.denial`` checks it before the handler runs. From
the most open:

* :data:`OPEN`: every authenticated client (what a handler shows may still
  depend on the principal: listing in-doubt transactions, tracing);
* :class:`QueueRight`: a right on the queue a field of the request names
  (with another right when the request only peeks);
* :data:`SEND_RIGHTS`: send on every local queue a send puts a copy in, or
  names as its admin or response queue;
* :data:`MOVE_RIGHTS`: receive on the queue a move takes messages from, and
  send on the queue it puts them in, unless that is of the source's own
  family (a queue and its subqueues share one list); a move back out of a
  dead-letter queue names no target, and send is checked on each message's
  queue as the move finds it;
* :data:`PREPARER`: resolving prepared transactions is their preparer's;
* :data:`MONITORS`: reading the queue manager's metrics, for the principals
  and groups of ``auth.monitors`` (and administrators);
* :data:`ADMINISTRATORS`: administrators only (``auth.admins``).

An administrator may make every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

from qmgr.core.permissions import Right

__all__ = [
    "ADMINISTRATORS",
    "MONITORS",
    "MOVE_RIGHTS",
    "NEEDS",
    "OPEN",
    "PREPARER",
    "SEND_RIGHTS",
    "Administrators",
    "Monitors",
    "MoveRights",
    "Need",
    "Open",
    "Preparer",
    "QueueRight",
    "SendRights",
]


@dataclass(frozen=True, slots=True)
class Open:
    """Open to every authenticated client."""


@dataclass(frozen=True, slots=True)
class Administrators:
    """Administrators only: what concerns the whole queue manager."""


@dataclass(frozen=True, slots=True)
class Monitors:
    """The monitoring principals (``auth.monitors``) and administrators: the
    metrics, which name every queue and count what happens to them."""


@dataclass(frozen=True, slots=True)
class SendRights:
    """The send rule: send on every local queue the message goes to or names."""


@dataclass(frozen=True, slots=True)
class MoveRights:
    """The move rule (``MoveMessages``): receive on its ``source``, and send on its
    ``target`` unless that is of the source's family; with no target (dead
    letters back to their queues), send on each message's queue, asked of
    ``Authorization.denial`` again with that queue as the target."""


@dataclass(frozen=True, slots=True)
class Preparer:
    """The prepared-transaction rule: only their preparer (or an administrator)
    resolves the transactions the request's ``xids`` name."""


@dataclass(frozen=True, slots=True)
class QueueRight:
    """``right`` on the queue named by the request's ``field``; ``peek`` instead
    when the request only peeks (its ``peek`` flag is set)."""

    field: str
    right: Right
    peek: Right | None = None

    def of(self, request: object) -> tuple[str, Right]:
        """The queue ``request`` names and the right it needs on it."""
        if self.peek is not None and getattr(request, "peek", False):
            return getattr(request, self.field), self.peek
        return getattr(request, self.field), self.right


Need: TypeAlias = Open | Administrators | Monitors | SendRights | MoveRights | Preparer | QueueRight
#: The classes of :data:`Need`, for ``isinstance``.
NEEDS: Final = (Open, Administrators, Monitors, SendRights, MoveRights, Preparer, QueueRight)
OPEN: Final = Open()
ADMINISTRATORS: Final = Administrators()
MONITORS: Final = Monitors()
SEND_RIGHTS: Final = SendRights()
MOVE_RIGHTS: Final = MoveRights()
PREPARER: Final = Preparer()
