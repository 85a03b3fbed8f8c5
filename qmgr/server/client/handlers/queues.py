"""The requests of queue administration: CreateQueue, DeleteQueue, PurgeQueue, ListQueues,
GetStatus.

The core checks names and settings and returns the units
(``qmgr.core.queue_admin``); these handlers write them and answer once they
are synced. A new queue is written together with its list of permissions
(when the daemon keeps them), so a queue never exists without one; its
creator gets full control. Deleting and purging leave the messages to the
background work, which is woken to erase them.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Final

import storage
from qmgr.core.permissions import Right
from qmgr.core.poison import merge_settings
from wire import client as cf

from ..needs import OPEN, QueueRight
from ..registry import Registry
from ..request_context import RequestContext
from .replies import for_version

__all__ = ["HANDLERS"]

HANDLERS: Final = Registry()


@HANDLERS.handles(cf.CreateQueue, need=OPEN)
async def create_queue(ctx: RequestContext, request_id: int, request: cf.CreateQueue) -> None:
    """Create a queue (answered with its id)."""
    services = ctx.services
    core = services.core
    poison = merge_settings(
        None,
        retry_count=request.retry_count,
        retry_cycles=request.retry_cycles,
        retry_delay=request.retry_delay,
    )
    unit = core.queues.create(
        request.name,
        transactional=request.transactional,
        journal=request.journal,
        quota=request.quota,
        poison=poison,
        wall=time.time(),
    )
    authorization = services.authorization
    if authorization is not None:
        # The queue and its list are one write: a new queue is never without one.
        name = unit.ops[0].name  # type: ignore[attr-defined]
        acl = authorization.new_queue_acl(name, ctx.principal)
        unit = storage.Unit((*unit.ops, acl))
    record = core.queues.created(await ctx.write(unit))
    if authorization is not None:
        authorization.written(acl)
    ctx.log.info("queue_created", queue=record.name, transactional=record.transactional)
    ctx.reply(request_id, cf.Ok(value=record.queue_id))


@HANDLERS.handles(cf.DeleteQueue, need=QueueRight("name", Right.DELETE))
async def delete_queue(ctx: RequestContext, request_id: int, request: cf.DeleteQueue) -> None:
    """Delete a queue (answered with the number of messages it had)."""
    services = ctx.services
    record, unit = services.core.queues.delete(request.name)
    count, gone = services.core.queues.deleted(await ctx.write(unit))
    if services.authorization is not None:
        services.authorization.deleted(record)
    services.signals.notify(gone, everyone=True)  # each waiting reader says it is gone
    services.wake_maintenance()
    ctx.log.info("queue_deleted", queue=record.name, messages=count)
    ctx.reply(request_id, cf.Ok(value=count))


@HANDLERS.handles(cf.PurgeQueue, need=QueueRight("name", Right.PURGE))
async def purge_queue(ctx: RequestContext, request_id: int, request: cf.PurgeQueue) -> None:
    """Remove every message of a queue (answered with their number)."""
    services = ctx.services
    record, unit = services.core.queues.purge(request.name)
    count = services.core.queues.purged(await ctx.write(unit))
    services.wake_maintenance()
    ctx.log.info("queue_purged", queue=record.name, messages=count)
    ctx.reply(request_id, cf.Ok(value=count))


@HANDLERS.handles(cf.ListQueues, need=OPEN)
async def list_queues(ctx: RequestContext, request_id: int, request: cf.ListQueues) -> None:
    """Every queue with its counters."""
    queues = for_version(ctx, ctx.services.queue_infos())
    await ctx.reply_whole_list(request_id, cf.QueueList(queues=queues))


@HANDLERS.handles(cf.GetStatus, need=OPEN)
async def get_status(ctx: RequestContext, request_id: int, request: cf.GetStatus) -> None:
    """The queue manager's identity, activity counters and queues."""
    status = ctx.services.status()
    queues = for_version(ctx, status.queues)
    if queues is not status.queues:
        status = dataclasses.replace(status, queues=queues)
    await ctx.reply_whole_list(request_id, status)
