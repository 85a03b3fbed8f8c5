"""Queue permissions in the SDK: ``qm.permissions()``, ``qm.grant()``, ``qm.revoke()``.

A queue's access control list maps entries to rights. An entry is a user
(a client certificate's common name), ``group:NAME``, ``peer:NAME`` (a peer
queue manager's certificate name; ``peer:*`` every peer) or ``everyone``.
Rights are the words ``send``, ``receive`` (which includes peek), ``peek``,
``purge``, ``delete``, ``set-properties``, ``get-properties``,
``change-permissions`` and ``full``. The queue manager checks them when it
requires authentication (``auth.required``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wire import client_frames as cf

from . import _common as common
from ._errors import InvalidArgument
from ._replies import ok_value, unexpected

if TYPE_CHECKING:
    from ._protocol import ClientProtocol

__all__ = ["AsyncQueueManagerPermissions", "QueueManagerPermissions"]


def _acl(reply: cf.ServerReply) -> dict[str, list[str]]:
    if type(reply) is not cf.Permissions:
        raise unexpected(reply, "Permissions")
    return {e.name: cf.rights_names(cf.Right(e.rights)) for e in reply.entries}


def _change(
    queue: str, entry: str, grant: tuple[str, ...], revoke: tuple[str, ...]
) -> cf.ChangePermissions:
    try:
        granted = cf.parse_rights(grant)
        revoked = cf.parse_rights(revoke) if revoke else cf.Right.FULL
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    if grant:
        return cf.ChangePermissions(queue=queue, entry=entry, grant=int(granted))
    return cf.ChangePermissions(queue=queue, entry=entry, revoke=int(revoked))


def _require(version: int, address: str) -> None:
    common.require_version(version, cf.SECURITY_VERSION, address, "tokens and queue permissions")


class QueueManagerPermissions:
    """The permission methods of ``QueueManager``."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        def _call(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    def permissions(self, queue: str) -> dict[str, list[str]]:
        """The access control list of ``queue``: entry -> its rights (words).

        Raises:
            QueueNotFound, AccessDenied (it needs get-properties on the queue)
        """
        return _acl(self._permissions_call(cf.GetPermissions(queue=queue)))

    def grant(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Give ``entry`` the ``rights`` on ``queue``; returns the list now.

        Raises:
            QueueNotFound, InvalidArgument (an unknown right), AccessDenied (it
            needs change-permissions on the queue)
        """
        if not rights:
            msg = "grant() needs at least one right"
            raise InvalidArgument(msg)
        return _acl(self._permissions_call(_change(queue, entry, rights, ())))

    def revoke(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Take ``rights`` (every right if none are named) from ``entry`` on ``queue``;
        returns the list now.

        Raises:
            QueueNotFound, InvalidArgument, AccessDenied
        """
        return _acl(self._permissions_call(_change(queue, entry, (), rights)))

    def _permissions_call(self, request: cf.ClientRequest) -> cf.ServerReply:
        _require(self._proto.version, self._proto.address)
        return self._call(request)

    def _authenticate(self, token: str) -> None:
        """Authenticate the connection with ``token`` (right after the Hello)."""
        ok_value(self._permissions_call(cf.Authenticate(token=token)))


class AsyncQueueManagerPermissions:
    """The permission methods of ``AsyncQueueManager`` (see ``QueueManager``'s)."""

    if TYPE_CHECKING:
        _proto: ClientProtocol[Any]

        async def _request(self, value: cf.ClientRequest) -> cf.ServerReply: ...

    async def permissions(self, queue: str) -> dict[str, list[str]]:
        """The access control list of ``queue``; see ``QueueManager.permissions``."""
        return _acl(await self._permissions_call(cf.GetPermissions(queue=queue)))

    async def grant(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Give ``entry`` rights; see ``QueueManager.grant``."""
        if not rights:
            msg = "grant() needs at least one right"
            raise InvalidArgument(msg)
        return _acl(await self._permissions_call(_change(queue, entry, rights, ())))

    async def revoke(self, queue: str, entry: str, *rights: str) -> dict[str, list[str]]:
        """Take rights from ``entry``; see ``QueueManager.revoke``."""
        return _acl(await self._permissions_call(_change(queue, entry, (), rights)))

    async def _permissions_call(self, request: cf.ClientRequest) -> cf.ServerReply:
        _require(self._proto.version, self._proto.address)
        return await self._request(request)

    async def _authenticate(self, token: str) -> None:
        """Authenticate the connection with ``token`` (right after the Hello)."""
        ok_value(await self._permissions_call(cf.Authenticate(token=token)))
