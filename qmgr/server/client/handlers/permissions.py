"""The requests of queue permissions: GetPermissions and ChangePermissions.

``GetPermissions`` needs get-properties on the queue and ``ChangePermissions``
change-permissions (declared with the handlers, checked by ``Authorization``
before they run). A change is one store write and an info event
``permissions_changed`` with the principal, the entry and the rights granted
and revoked. Without permissions kept (no ``Authorization``) both are
``INVALID_ARGUMENT``.
"""

from __future__ import annotations

from typing import Final

import storage
from qmgr.core import names
from qmgr.core.errors import InvalidArgument
from qmgr.core.permissions import Acl, Right, acl_entry, rights_names
from storage import QueueRecord
from wire import client as cf
from wire import quoted

from ..authorization import Authorization
from ..needs import QueueRight
from ..registry import Registry
from ..request_context import RequestContext, required

__all__ = ["HANDLERS"]

HANDLERS: Final = Registry()

#: A queue's list governs the queue, its journal and its subqueues.
_GOVERNED_SUFFIXES: Final = ("", names.JOURNAL_SUFFIX, *names.SUBQUEUE_SUFFIXES)


def _authorization(ctx: RequestContext) -> Authorization:
    msg = "this queue manager keeps no queue permissions"
    return required(ctx.services.authorization, InvalidArgument(msg))


@HANDLERS.handles(cf.GetPermissions, need=QueueRight("queue", Right.GET_PROPERTIES))
def get_permissions(ctx: RequestContext, request_id: int, request: cf.GetPermissions) -> None:
    """A queue's list."""
    record = ctx.services.core.queue(request.queue)
    ctx.reply(request_id, _permissions(record, _authorization(ctx).acl_of(record)))


@HANDLERS.handles(cf.ChangePermissions, need=QueueRight("queue", Right.CHANGE_PERMISSIONS))
async def change_permissions(
    ctx: RequestContext, request_id: int, request: cf.ChangePermissions
) -> None:
    """Grant and revoke rights of one entry of a queue's list."""
    authorization = _authorization(ctx)
    unknown = (request.grant | request.revoke) & ~int(Right.FULL)
    if unknown:
        msg = f"unknown rights bits {unknown:#x}"
        raise InvalidArgument(msg)
    record = ctx.services.core.queue(request.queue)
    governing = authorization.governing(record)
    if governing.queue_id != record.queue_id:
        msg = (
            f"{quoted(record.display_name)} takes the permissions of its queue "
            f"{quoted(governing.display_name)}: change them there"
        )
        raise InvalidArgument(msg)
    entry = request.entry.strip()
    if entry not in authorization.acl_of(record).entries:  # (one stored as typed stays so)
        try:
            entry = acl_entry(request.entry)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    grant, revoke = Right(request.grant), Right(request.revoke)
    acl, write = authorization.changed_acl(record, entry, grant, revoke)
    await ctx.write_checked(storage.Unit((write,)))
    authorization.written(write)
    # Receives already waiting on the queues the list governs check their right
    # again, and stop if it is gone.
    store = ctx.services.core.store
    governed = (store.get_queue(record.name + suffix) for suffix in _GOVERNED_SUFFIXES)
    ctx.services.signals.notify([q.queue_id for q in governed if q is not None], everyone=True)
    ctx.log.info(
        "permissions_changed",
        queue=record.name,
        entry=entry,
        granted=rights_names(grant),
        revoked=rights_names(revoke),
    )
    ctx.reply(request_id, _permissions(record, acl))


def _permissions(record: QueueRecord, acl: Acl) -> cf.Permissions:
    entries = tuple(
        cf.AclEntry(name=name, rights=int(rights)) for name, rights in sorted(acl.entries.items())
    )
    return cf.Permissions(queue=record.display_name, entries=entries)
