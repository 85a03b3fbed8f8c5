"""The client requests run without a connection: the operations the HTTP API offers.

Theory of operation
-------------------
The client requests' handlers (``handlers``, one table: ``REQUESTS``) are
the queue manager's operations. The HTTP API (``qmgr.server.http.api``)
runs the same handlers, with the same needs, rather than doing again what
they do: :meth:`Operations.run` makes a :class:`~.request_context.RequestContext`
for one request, with the caller's principal and log, runs the request's
handler on it, and returns the reply the handler made, decoded (a handler
that answers with encoded bytes, a peek for one, is read back with the
client protocol's decoder). A handler's error (the core's
``QueueManagerError``) goes to the caller as it is; :func:`error_code` says
its code in the client protocol.

What the handler logs (``queue_purged``, ``messages_moved``,
``outgoing_paused``, ``transactions_committed``...) goes to the caller's
log, so an action over HTTP is the same event, with the principal bound, as
the same action over the client port.

Authorization is the caller's, with :meth:`Operations.need` (the need the
table declares for the request) and ``Authorization.denial``, before
:meth:`Operations.run`, as the session does. Requests that wait (a receive
with a timeout) or that open a transaction are not for this path: a context
lives for one request, and holds no nursery and no transactions after it.
"""

from __future__ import annotations

from typing import Any, Final

import structlog

from qmgr.core.errors import InternalError, ShuttingDown
from qmgr.core.permissions import Principal
from wire import client as cf

from .error_codes import error_code
from .handlers import REQUESTS
from .needs import Need
from .request_context import RequestContext
from .services import OutgoingAction, Services

__all__ = ["Operations", "OutgoingAction", "error_code"]

#: The request id a context made here answers (replies are not framed for a stream).
_REQUEST_ID: Final = 1
#: The committer's source of these writes: none of the client connections (0:
#: written in the batches, never inline on the caller's task).
_SOURCE: Final = 0


class Operations:
    """Runs client requests for callers without a connection (see the module docstring)."""

    def __init__(self, services: Services) -> None:
        self.services = services

    @staticmethod
    def need(request: type[Any]) -> Need:
        """The need the request table declares for the request class ``request``.

        Raises:
            KeyError: no handler serves it.
        """
        return REQUESTS[request].need

    async def run(
        self,
        request: cf.ClientRequest,
        *,
        principal: Principal | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> cf.ServerReply:
        """Run ``request``'s handler as ``principal`` and return its reply.

        Raises:
            QueueManagerError: the handler's error (ShuttingDown once the
                queue manager is stopping).
        """
        services = self.services
        if services.stopping:
            msg = "the queue manager is shutting down"
            raise ShuttingDown(msg)
        replies: list[cf.ServerReply] = []

        def reply(request_id: int, value: cf.ServerReply) -> None:
            replies.append(value)

        def reply_bytes(frame: bytes) -> None:
            kind = int.from_bytes(frame[4:6], "little")
            replies.append(cf.decode_body(kind, bytes(frame[cf.HEADER_SIZE :])))  # type: ignore[arg-type]

        ctx = RequestContext(
            services,
            conn_id=_SOURCE,
            log=log,
            reply=reply,
            reply_bytes=reply_bytes,
            flush=_nothing,
            principal=principal,
            version=cf.PROTOCOL_VERSION,
        )
        pending = REQUESTS[type(request)].handler(ctx, _REQUEST_ID, request)
        if pending is not None:
            await pending
        if not replies:
            msg = f"{type(request).__name__} answered nothing"
            raise InternalError(msg)
        return replies[-1]


async def _nothing() -> None:
    """A context made here has no stream to flush."""
