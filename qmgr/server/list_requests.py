"""The client session's handlers of the distribution-list requests (``qmgr dl``).

The core's :class:`~qmgr.core.lists.ListAdmin` checks names and targets and
returns the units; these handlers write them through the committer and
answer once they are synced. Every change is a structlog event.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

import storage
from qmgr.core.errors import from_store_error
from wire import client as cf

from .services import Services

__all__ = ["ListRequests"]


class ListRequests(abc.ABC):
    """The distribution-list request handlers of a client session."""

    services: Services
    log: structlog.typing.FilteringBoundLogger
    conn_id: int

    @abc.abstractmethod
    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply."""

    def list_handlers(self) -> dict[type[Any], Callable[[int, Any], Awaitable[None] | None]]:
        """The handler of each distribution-list request class."""
        return {
            cf.CreateList: self._create_list,
            cf.ChangeList: self._change_list,
            cf.DeleteList: self._delete_list,
            cf.GetLists: self._get_lists,
        }

    async def _write_list(self, unit: storage.Unit) -> None:
        try:
            outcome = await self.services.committer.submit(unit, source=self.conn_id)
        except storage.StoreError as exc:
            raise from_store_error(exc) from exc
        if outcome.error is not None:
            raise from_store_error(outcome.error)

    async def _create_list(self, request_id: int, request: cf.CreateList) -> None:
        await self._write_list(self.services.core.lists.create(request.name, request.targets))
        self.log.info("list_created", list=request.name, targets=len(request.targets))
        self.reply(request_id, cf.Ok(value=len(request.targets)))

    async def _change_list(self, request_id: int, request: cf.ChangeList) -> None:
        lists = self.services.core.lists
        await self._write_list(lists.change(request.name, add=request.add, remove=request.remove))
        targets = len(lists.get(request.name).targets)
        self.log.info(
            "list_changed",
            list=request.name,
            added=len(request.add),
            removed=len(request.remove),
            targets=targets,
        )
        self.reply(request_id, cf.Ok(value=targets))

    async def _delete_list(self, request_id: int, request: cf.DeleteList) -> None:
        await self._write_list(self.services.core.lists.delete(request.name))
        self.log.info("list_deleted", list=request.name)
        self.reply(request_id, cf.Ok(value=0))

    def _get_lists(self, request_id: int, request: cf.GetLists) -> None:
        lists = self.services.core.lists
        found = [lists.get(request.name)] if request.name else lists.all()
        self.reply(
            request_id,
            cf.ListInfoList(
                lists=tuple(cf.ListInfo(name=f.display_name, targets=f.targets) for f in found)
            ),
        )
