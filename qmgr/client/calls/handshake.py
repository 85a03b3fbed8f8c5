"""The handshake: Hello, and with a token, Authenticate."""

from __future__ import annotations

import uuid

from wire import client as cf

from .._common import default_client_name
from .._exceptions import ConnectionLost, QueueError, error_from_reply
from .._protocol import ClientProtocol, Flow, W
from .permissions import authenticate

__all__ = ["MAX_CLIENT_NAME", "handshake", "handshake_error", "welcome"]

#: Characters of the client's name the daemon is told (the rest is cut).
MAX_CLIENT_NAME = 200


def handshake(
    proto: ClientProtocol[W], client_name: str | None, token: str | None
) -> Flow[W, tuple[str, uuid.UUID, str]]:
    """Say Hello as ``client_name`` (None: ``default_client_name()``), and with
    ``token`` authenticate; return the queue manager's name, GUID and version.

    Raises:
        ConnectionLost: the handshake failed, or the answer is not a qmgr daemon's.
        QueueError: the daemon refused the connection (its error, naming the address).
    """
    if client_name is None:
        client_name = default_client_name()
    try:
        reply = yield proto.call(cf.Hello(client_name=client_name[:MAX_CLIENT_NAME]))
    except QueueError as exc:
        raise handshake_error(proto, exc) from None
    identity = welcome(proto, reply)
    if token is not None:
        yield from authenticate(proto, token)
    return identity


def handshake_error(proto: ClientProtocol[W], exc: QueueError) -> QueueError:
    """What a failed handshake raises, given the error of the Hello request."""
    if isinstance(exc, ConnectionLost):
        msg = f"handshake with the queue manager at {proto.address} failed: {exc.message}"
        return ConnectionLost(msg)
    msg = f"the queue manager at {proto.address} refused the connection: {exc.message}"
    return error_from_reply(int(exc.code or 0), msg)


def welcome(proto: ClientProtocol[W], reply: cf.ServerReply) -> tuple[str, uuid.UUID, str]:
    """The queue manager's name, GUID and version from the answer to Hello (the
    connection learns the version it speaks).

    Raises:
        ConnectionLost: the answer is not a HelloOk (not a qmgr daemon).
    """
    if type(reply) is not cf.HelloOk:
        name = type(reply).__name__
        msg = f"{proto.address} answered {name} to Hello; is it a qmgr daemon?"
        raise ConnectionLost(msg)
    proto.version = reply.version
    return reply.qm_name, reply.qm_guid, reply.server_version
