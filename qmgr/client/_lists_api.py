"""Distribution lists in the SDK: ``qm.create_list()``, ``add_to_list()``, ...

A list is a named set of destinations kept by the queue manager; send to it
with ``qm.send("DL=name", ...)`` (alone or in a multiple-element name): one
copy per target, in the sender's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wire import client_frames as cf

from . import _common as common
from ._replies import ok_value, unexpected

if TYPE_CHECKING:
    from ._protocol import ClientProtocol

__all__ = ["AsyncQueueManagerLists", "DistributionList", "QueueManagerLists"]


@dataclass(frozen=True, slots=True)
class DistributionList:
    """A distribution list: its name and its targets (format names), in order."""

    name: str
    targets: tuple[str, ...]


def _lists(reply: cf.ServerReply) -> list[DistributionList]:
    if type(reply) is not cf.ListInfoList:
        raise unexpected(reply, "ListInfoList")
    return [DistributionList(info.name, info.targets) for info in reply.lists]


def _require(version: int, address: str, what: str) -> None:
    common.require_version(version, cf.OUTCOMES_VERSION, address, what)


class QueueManagerLists:
    """The distribution-list methods of ``QueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        def _call(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    def create_list(self, name: str, targets: Iterable[str] = ()) -> None:
        """Create the distribution list ``name`` with ``targets``: format names of
        single queues, here or on other queue managers (at most 1,000).

        Raises:
            QueueExists, InvalidName (a bad name, or a target that is a journal,
            system queue or list), InvalidArgument (too many targets)
        """
        self._lists_call("create_list()", cf.CreateList(name=name, targets=tuple(targets)))

    def add_to_list(self, name: str, *targets: str) -> int:
        """Add targets to the list (those it has already are not added twice);
        returns how many targets it has now.

        Raises:
            QueueNotFound (no such list), InvalidName, InvalidArgument
        """
        return ok_value(self._lists_call("add_to_list()", cf.ChangeList(name=name, add=targets)))

    def remove_from_list(self, name: str, *targets: str) -> int:
        """Remove targets from the list; returns how many it has now.

        Raises:
            QueueNotFound (no such list), InvalidName
        """
        request = cf.ChangeList(name=name, remove=targets)
        return ok_value(self._lists_call("remove_from_list()", request))

    def delete_list(self, name: str) -> None:
        """Delete the list (messages already sent to it are not affected).

        Raises:
            QueueNotFound, InvalidName
        """
        self._lists_call("delete_list()", cf.DeleteList(name=name))

    def lists(self) -> list[DistributionList]:
        """Every distribution list, by name."""
        return _lists(self._lists_call("lists()", cf.GetLists()))

    def get_list(self, name: str) -> DistributionList:
        """The list ``name``.

        Raises:
            QueueNotFound, InvalidName
        """
        [found] = _lists(self._lists_call("get_list()", cf.GetLists(name=name)))
        return found

    def _lists_call(self, what: str, request: cf.ClientRequest) -> cf.ServerReply:
        _require(self._proto.version, self._proto.address, what)
        return self._call(request)


class AsyncQueueManagerLists:
    """The distribution-list methods of ``AsyncQueueManager`` (see ``QueueManager``'s)."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        async def _request(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    async def create_list(self, name: str, targets: Iterable[str] = ()) -> None:
        """Create a distribution list; see ``QueueManager.create_list``."""
        await self._lists_call("create_list()", cf.CreateList(name=name, targets=tuple(targets)))

    async def add_to_list(self, name: str, *targets: str) -> int:
        """Add targets; see ``QueueManager.add_to_list``."""
        request = cf.ChangeList(name=name, add=targets)
        return ok_value(await self._lists_call("add_to_list()", request))

    async def remove_from_list(self, name: str, *targets: str) -> int:
        """Remove targets; see ``QueueManager.remove_from_list``."""
        request = cf.ChangeList(name=name, remove=targets)
        return ok_value(await self._lists_call("remove_from_list()", request))

    async def delete_list(self, name: str) -> None:
        """Delete a list; see ``QueueManager.delete_list``."""
        await self._lists_call("delete_list()", cf.DeleteList(name=name))

    async def lists(self) -> list[DistributionList]:
        """Every distribution list, by name."""
        return _lists(await self._lists_call("lists()", cf.GetLists()))

    async def get_list(self, name: str) -> DistributionList:
        """The list ``name``; see ``QueueManager.get_list``."""
        [found] = _lists(await self._lists_call("get_list()", cf.GetLists(name=name)))
        return found

    async def _lists_call(self, what: str, request: cf.ClientRequest) -> cf.ServerReply:
        _require(self._proto.version, self._proto.address, what)
        return await self._request(request)
