"""The requests of outgoing queues and routes: ListOutgoing and ControlOutgoing
(``qmgr outgoing``), GetRouting (``qmgr route``, ``qmgr status``).

They go to the peering adapter through ``Services.peering``
(:class:`~..services.PeeringControl`); without peering they are
``NOT_SUPPORTED``. Listing and routing are open to every client; pausing, resuming and
purging an outgoing queue is an administrator's, and each is an info event
(``outgoing_paused``, ``outgoing_resumed``, ``outgoing_purged``).
"""

from __future__ import annotations

from typing import Final

from qmgr.core.errors import InvalidArgument, NotSupported
from wire import client as cf

from ..needs import ADMINISTRATORS, OPEN
from ..registry import Registry
from ..request_context import RequestContext, required
from ..services import OutgoingAction, PeeringControl

__all__ = ["HANDLERS"]

HANDLERS: Final = Registry()

#: The event logged for each ``ControlOutgoing`` action.
_OUTGOING_EVENTS: Final = {
    OutgoingAction.PAUSE: "outgoing_paused",
    OutgoingAction.RESUME: "outgoing_resumed",
    OutgoingAction.PURGE: "outgoing_purged",
}


def _peering(ctx: RequestContext) -> PeeringControl:
    msg = "delivery to other queue managers (peering) is not running on this queue manager"
    return required(ctx.services.peering, NotSupported(msg))


@HANDLERS.handles(cf.ListOutgoing, need=OPEN)
async def list_outgoing(ctx: RequestContext, request_id: int, request: cf.ListOutgoing) -> None:
    """Every outgoing queue."""
    outgoing = cf.OutgoingList(outgoing=_peering(ctx).outgoing_infos())
    await ctx.reply_whole_list(request_id, outgoing)


@HANDLERS.handles(cf.GetRouting, need=OPEN)
def get_routing(ctx: RequestContext, request_id: int, request: cf.GetRouting) -> None:
    """The router flag, aliases and routes, and where a destination goes."""
    ctx.reply(request_id, _peering(ctx).routing(request.destination))


@HANDLERS.handles(cf.ControlOutgoing, need=ADMINISTRATORS)
async def control_outgoing(
    ctx: RequestContext, request_id: int, request: cf.ControlOutgoing
) -> None:
    """Pause, resume or purge one outgoing queue."""
    try:
        action = OutgoingAction(request.action)
    except ValueError:
        choices = ", ".join(f"{a.value} ({a.name.lower()})" for a in OutgoingAction)
        msg = f"outgoing queue action must be {choices}, not {request.action}"
        raise InvalidArgument(msg) from None
    info, purged = await _peering(ctx).control(action, request.destination)
    if action is OutgoingAction.PURGE:
        ctx.services.wake_maintenance()  # the purged entries are erased now, not at a later wake
        ctx.log.info(_OUTGOING_EVENTS[action], destination=info.destination, messages=purged)
    else:
        ctx.log.info(
            _OUTGOING_EVENTS[action],
            destination=info.destination,
            waiting=info.waiting,
            unacknowledged=info.unacknowledged,
        )
    ctx.reply(request_id, cf.OutgoingList(outgoing=(info,), purged=purged))
