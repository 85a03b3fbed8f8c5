"""The requests of distribution lists (``qmgr dl``): CreateList, ChangeList, DeleteList,
GetLists.

The core's :class:`~qmgr.core.lists.ListAdmin` checks names and targets and
returns the units; these handlers write them and answer once they are
synced. Changing lists is an administrator's; reading them is open. Every
change is an info event.
"""

from __future__ import annotations

from typing import Final

from wire import client as cf

from ..needs import ADMINISTRATORS, OPEN
from ..registry import Registry
from ..request_context import RequestContext

__all__ = ["HANDLERS"]

HANDLERS: Final = Registry()


@HANDLERS.handles(cf.CreateList, need=ADMINISTRATORS)
async def create_list(ctx: RequestContext, request_id: int, request: cf.CreateList) -> None:
    """Create a list (answered with its number of targets)."""
    await ctx.write_checked(ctx.services.core.lists.create(request.name, request.targets))
    ctx.log.info("list_created", list=request.name, targets=len(request.targets))
    ctx.reply(request_id, cf.Ok(value=len(request.targets)))


@HANDLERS.handles(cf.ChangeList, need=ADMINISTRATORS)
async def change_list(ctx: RequestContext, request_id: int, request: cf.ChangeList) -> None:
    """Add and remove targets (answered with the number of targets afterwards)."""
    lists = ctx.services.core.lists
    await ctx.write_checked(lists.change(request.name, add=request.add, remove=request.remove))
    targets = len(lists.get(request.name).targets)
    ctx.log.info(
        "list_changed",
        list=request.name,
        added=len(request.add),
        removed=len(request.remove),
        targets=targets,
    )
    ctx.reply(request_id, cf.Ok(value=targets))


@HANDLERS.handles(cf.DeleteList, need=ADMINISTRATORS)
async def delete_list(ctx: RequestContext, request_id: int, request: cf.DeleteList) -> None:
    """Delete a list."""
    await ctx.write_checked(ctx.services.core.lists.delete(request.name))
    ctx.log.info("list_deleted", list=request.name)
    ctx.reply(request_id, cf.Ok(value=0))


@HANDLERS.handles(cf.GetLists, need=OPEN)
async def get_lists(ctx: RequestContext, request_id: int, request: cf.GetLists) -> None:
    """One list, or every list."""
    lists = ctx.services.core.lists
    found = [lists.get(request.name)] if request.name else lists.all()
    infos = tuple(cf.ListInfo(name=f.display_name, targets=f.targets) for f in found)
    await ctx.reply_whole_list(request_id, cf.ListInfoList(lists=infos))
