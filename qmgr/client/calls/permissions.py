"""Queue permissions: ``permissions()``, ``grant()``, ``revoke()``; and authenticating with a token.

A queue's access control list maps entries to rights. An entry is a user
(a client certificate's common name), ``group:NAME``, ``peer:NAME`` (a peer
queue manager's certificate name; ``peer:*`` every peer) or ``everyone``.
Rights are the words ``send``, ``receive`` (which includes peek), ``peek``,
``purge``, ``delete``, ``set-properties``, ``get-properties``,
``change-permissions`` and ``full``. The queue manager checks them when it
requires authentication (``auth.required``).
"""

from __future__ import annotations

from wire import client as cf

from .._exceptions import InvalidArgument
from .._protocol import ClientProtocol, Flow, W
from .._replies import expect, ok_value

__all__ = ["authenticate", "grant", "permissions", "revoke"]


def _ask(proto: ClientProtocol[W], request: cf.ClientRequest) -> Flow[W, cf.ServerReply]:
    proto.require(cf.SECURITY_VERSION, "tokens and queue permissions")
    return (yield proto.call(request))


def _acl(reply: cf.ServerReply) -> dict[str, list[str]]:
    entries = expect(reply, cf.Permissions).entries
    return {e.name: cf.rights_names(cf.Right(e.rights)) for e in entries}


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


def permissions(proto: ClientProtocol[W], queue: str) -> Flow[W, dict[str, list[str]]]:
    """``permissions()``: entry -> its rights (words)."""
    return _acl((yield from _ask(proto, cf.GetPermissions(queue=queue))))


def grant(
    proto: ClientProtocol[W], queue: str, entry: str, *rights: str
) -> Flow[W, dict[str, list[str]]]:
    """``grant()``: the list afterwards.

    Raises:
        InvalidArgument: no right, or an unknown one (nothing is sent).
    """
    if not rights:
        msg = "grant() needs at least one right"
        raise InvalidArgument(msg)
    return _acl((yield from _ask(proto, _change(queue, entry, rights, ()))))


def revoke(
    proto: ClientProtocol[W], queue: str, entry: str, *rights: str
) -> Flow[W, dict[str, list[str]]]:
    """``revoke()`` (every right if none are named): the list afterwards."""
    return _acl((yield from _ask(proto, _change(queue, entry, (), rights))))


def authenticate(proto: ClientProtocol[W], token: str) -> Flow[W, None]:
    """Authenticate the connection with ``token`` (right after the Hello)."""
    ok_value((yield from _ask(proto, cf.Authenticate(token=token))))
