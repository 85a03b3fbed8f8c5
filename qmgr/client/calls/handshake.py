"""The handshake: Hello, and with a token, Authenticate."""

from __future__ import annotations

import uuid

from wire import client as cf

from .._common import default_client_name
from .._exceptions import QueueError
from .._protocol import ClientProtocol, Flow, W
from .permissions import authenticate

__all__ = ["MAX_CLIENT_NAME", "handshake"]

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
        raise proto.handshake_error(exc) from None
    identity = proto.welcome(reply)
    if token is not None:
        yield from authenticate(proto, token)
    return identity
