"""The client requests of queue permissions: reading and changing a queue's list.

Part of ``RequestHandlers`` (a base class of it). ``GetPermissions`` needs
get-properties on the queue and ``ChangePermissions`` change-permissions
(both checked by ``Authorization`` before the handler runs); a change is
one store write and an info event ``permissions_changed`` with the
principal, the entry and the rights granted and revoked.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

import storage
from qmgr.core.errors import InvalidArgument, from_store_error
from qmgr.core.permissions import Acl, Right, rights_names
from storage import QueueRecord
from wire import client as cf

from .authorization import Authorization
from .services import Services

__all__ = ["PermissionRequests"]


class PermissionRequests(abc.ABC):
    """Handlers of GetPermissions and ChangePermissions."""

    services: Services
    log: structlog.typing.FilteringBoundLogger
    conn_id: int

    @abc.abstractmethod
    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply."""

    def permission_handlers(
        self,
    ) -> dict[type[Any], Callable[[int, Any], Awaitable[None] | None]]:
        """The handler of each permissions request."""
        return {
            cf.GetPermissions: self._get_permissions,
            cf.ChangePermissions: self._change_permissions,
        }

    def _authorization(self) -> Authorization:
        authorization = self.services.authorization
        if authorization is None:
            msg = "this queue manager keeps no queue permissions"
            raise InvalidArgument(msg)
        return authorization

    def _get_permissions(self, request_id: int, request: cf.GetPermissions) -> None:
        record = self.services.core.queue(request.queue)
        self.reply(request_id, _permissions(record, self._authorization().acl_of(record)))

    async def _change_permissions(self, request_id: int, request: cf.ChangePermissions) -> None:
        authorization = self._authorization()
        entry = request.entry.strip()
        if not entry or len(entry) > 256:
            msg = f"an entry is a principal, group:NAME, peer:NAME or everyone, not {entry!r}"
            raise InvalidArgument(msg)
        if (request.grant | request.revoke) & ~Right.FULL:
            msg = f"unknown rights bits {(request.grant | request.revoke) & ~Right.FULL:#x}"
            raise InvalidArgument(msg)
        record = self.services.core.queue(request.queue)
        grant, revoke = Right(request.grant), Right(request.revoke)
        acl, write = authorization.changed_acl(record, entry, grant, revoke)
        try:
            outcome = await self.services.committer.submit(
                storage.Unit((write,)), source=self.conn_id
            )
        except storage.StoreError as exc:
            raise from_store_error(exc) from exc
        if outcome.error is not None:
            raise from_store_error(outcome.error)
        authorization.written(write)
        self.log.info(
            "permissions_changed",
            queue=record.name,
            entry=entry,
            granted=rights_names(grant),
            revoked=rights_names(revoke),
        )
        self.reply(request_id, _permissions(record, acl))


def _permissions(record: QueueRecord, acl: Acl) -> cf.Permissions:
    entries = tuple(
        cf.AclEntry(name=name, rights=int(rights)) for name, rights in sorted(acl.entries.items())
    )
    return cf.Permissions(queue=record.display_name, entries=entries)
