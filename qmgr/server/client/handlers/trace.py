"""The request ``TraceMessage`` (``qmgr trace``): where a message is, and what became of it.

The core's :class:`~qmgr.core.trace.Tracer` says what to look for and what it
means; this handler runs the store's scan in bounded steps on the event loop
(:data:`SCAN_VISITS` records per step, with a checkpoint between steps, so a
trace of a large store never holds up the other clients for long) and
answers with what was found: everything to an administrator, the queues it
may peek to anyone else (``Authorization.traceable``).
"""

from __future__ import annotations

import dataclasses
from typing import Final

import trio

from qmgr.core.trace import MAX_FINDINGS, Tracer, parse_message_id
from wire import client as cf

from ..needs import OPEN
from ..registry import Registry
from ..request_context import RequestContext

__all__ = ["HANDLERS", "SCAN_VISITS"]

HANDLERS: Final = Registry()

#: Stored records looked at per step of a trace's scan.
SCAN_VISITS: Final = 20_000


@HANDLERS.handles(cf.TraceMessage, need=OPEN)
async def trace(ctx: RequestContext, request_id: int, request: cf.TraceMessage) -> None:
    """Find a message, its copies and the acknowledgments about it."""
    services = ctx.services
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
    visible = None if authorization is None else authorization.traceable(ctx.principal)
    findings = tracer.findings(source_qm, ordinal, scanned, hops, visible=visible)
    findings = findings[: cf.MAX_TRACE_FINDINGS]
    ctx.log.info("message_traced", message_id=request.message_id, findings=len(findings))
    # A finding has the fields of the protocol's TraceFinding, one for one.
    reported = tuple(cf.TraceFinding(**dataclasses.asdict(finding)) for finding in findings)
    ctx.reply(request_id, cf.TraceReport(qm_name=services.qm_name, findings=reported))
