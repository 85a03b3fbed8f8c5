"""The client requests' handlers, by concern, and the one table of them, :data:`REQUESTS`.

Each module declares its handlers on a ``Registry`` (see ``..registry``),
each with the need that authorizes it; this package merges them:

* ``messages``: Begin, Send, Receive, PeekRange, Commit, Abort;
* ``queues``: CreateQueue, DeleteQueue, PurgeQueue, ListQueues, GetStatus;
* ``two_phase``: BeginGlobal, Prepare, Resolve, ListTransactions,
  MeasureRange, RemoveThrough;
* ``poison``: SetQueueProperties, MoveMessages;
* ``trace``: TraceMessage;
* ``lists``: CreateList, ChangeList, DeleteList, GetLists;
* ``permissions``: GetPermissions, ChangePermissions;
* ``outgoing``: ListOutgoing, ControlOutgoing, GetRouting;

and ``replies`` makes what their replies carry of stored messages and queues.
Hello and Authenticate are not here: the connection's machine
(``qmgr.protocol.client_connection``) answers them.
"""

from __future__ import annotations

from typing import Final

from ..registry import Registry
from .lists import HANDLERS as _LISTS
from .messages import HANDLERS as _MESSAGES
from .outgoing import HANDLERS as _OUTGOING
from .permissions import HANDLERS as _PERMISSIONS
from .poison import HANDLERS as _POISON
from .queues import HANDLERS as _QUEUES
from .trace import HANDLERS as _TRACE
from .two_phase import HANDLERS as _TWO_PHASE

__all__ = ["REQUESTS"]

#: Every request a client may make: its handler and its need.
REQUESTS: Final = Registry.merged(
    _MESSAGES, _QUEUES, _TWO_PHASE, _POISON, _TRACE, _LISTS, _PERMISSIONS, _OUTGOING
)
