"""The client protocol's frame that cancels a waiting receive (version 8).

A receive or peek that finds no message waits on the daemon, up to its
timeout. :class:`CancelReceive` names such a request by its request id and
asks the daemon to stop waiting for it. It is not answered itself (unless
it is refused, as any request may be while the daemon stops: an error on
its own request id): the receive it names is, exactly once, as it would be at its timeout
(``NoMessage``), or with the message it had already taken (a receive
outside a transaction whose message is being written when the cancel comes
still gets it), or with its error. A request id that names no waiting
receive of the connection (answered already, or never sent) is ignored,
so a client may send it without knowing whether the reply is on its way.
This request is answered only on a connection that negotiated
``CANCEL_VERSION`` (8) or later.

Layout (little-endian)::

    CancelReceive  0x20  request_id u32
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["CANCEL_REQUESTS", "CancelReceive"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelReceive:
    """Stop the receive (or peek) of request ``request_id`` on this connection
    from waiting; it is answered as at its timeout, unless it has a message
    already. Never answered itself."""

    request_id: int


#: The requests a daemon answers only on a connection of ``CANCEL_VERSION`` or later.
CANCEL_REQUESTS: Final[frozenset[type[object]]] = frozenset({CancelReceive})
