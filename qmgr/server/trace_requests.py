"""The client session's handler of ``TraceMessage`` (``qmgr trace``).

The core's :class:`~qmgr.core.trace.Tracer` says what to look for and what it
means; this handler runs the store's scan in bounded steps on the event loop
(:data:`SCAN_VISITS` records per step, with a checkpoint between steps, so a
trace of a large store never holds up the other clients for long) and
answers with what was found.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog
import trio

from qmgr.core.permissions import Principal
from qmgr.core.trace import MAX_FINDINGS, Tracer, parse_message_id
from wire import client as cf

from .services import Services

__all__ = ["SCAN_VISITS", "TraceRequests"]

#: Stored records looked at per step of a trace's scan.
SCAN_VISITS: Final = 20_000


class TraceRequests(abc.ABC):
    """The trace request handler of a client session."""

    services: Services
    log: structlog.typing.FilteringBoundLogger
    _principal: Principal | None

    @abc.abstractmethod
    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply."""

    def trace_handlers(self) -> dict[type[Any], Callable[[int, Any], Awaitable[None] | None]]:
        """The handler of each trace request class."""
        return {cf.TraceMessage: self._trace}

    async def _trace(self, request_id: int, request: cf.TraceMessage) -> None:
        services = self.services
        store = services.core.store
        source_qm, ordinal = parse_message_id(request.message_id)  # InvalidArgument
        tracer = Tracer(store)
        select = tracer.select(tracer.key(source_qm, ordinal))
        left = tracer.queues()
        scanned: list[tuple[int, int, bytes]] = []
        while left and len(scanned) < MAX_FINDINGS:
            found, left = store.scan_messages(
                left, select=select, limit=MAX_FINDINGS - len(scanned), visits=SCAN_VISITS
            )
            scanned.extend(found)
            await trio.lowlevel.checkpoint()
        peering = services.peering
        hops = peering.next_hops() if peering is not None else {}
        authorization = services.authorization
        visible = None if authorization is None else authorization.traceable(self._principal)
        findings = tracer.findings(source_qm, ordinal, scanned, hops, visible=visible)
        findings = findings[: cf.MAX_TRACE_FINDINGS]
        self.log.info("message_traced", message_id=request.message_id, findings=len(findings))
        self.reply(
            request_id,
            cf.TraceReport(
                qm_name=services.qm_name,
                findings=tuple(
                    cf.TraceFinding(
                        kind=f.kind,
                        place=f.place,
                        time=f.time,
                        message_class=f.message_class,
                        detail=f.detail,
                        next_hop=f.next_hop,
                    )
                    for f in findings
                ),
            ),
        )
