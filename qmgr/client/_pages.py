"""Raw pages of ``peek_range``: the daemon's MessageList bytes, for readers that decode them.

A reader that turns messages into columns (the Spark data source builds
Arrow arrays) need not build a :class:`~qmgr.client.Message` per message
first: :func:`request_page` sends one ``PeekRange`` request and returns at
once, so the caller can work on the previous page while the queue manager
answers; :func:`page_body` waits for the reply and returns the body of its
``MessageList`` frame, undecoded (a ``u32`` count, then each message:
lookup id, arrival time, queue name, encoded message; see
``wire.client.fast_codec``).
"""

from __future__ import annotations

from ._blocking import QueueManager
from ._blocking_io import SocketConnection
from ._codec import RawMessageList
from ._protocol import Waiter
from ._replies import unexpected

__all__ = ["PageRequest", "page_body", "request_page"]


class PageRequest:
    """A ``PeekRange`` request under way on a blocking connection."""

    __slots__ = ("_conn", "_waiter")

    def __init__(self, conn: SocketConnection, waiter: Waiter) -> None:
        self._conn = conn
        self._waiter = waiter


def request_page(qm: QueueManager, queue: str, after: int, max_count: int) -> PageRequest:
    """Ask for up to ``max_count`` messages of ``queue`` above ``after`` (the daemon stops at
    about 4 MB), without waiting for the answer.

    Raises:
        ConnectionLost, InvalidArgument
    """
    conn = qm._conn
    with conn.held():
        waiter = conn.proto.page_request(conn.proto.out, queue, after, max_count)
        conn.write()
    return PageRequest(conn, waiter)


def page_body(request: PageRequest) -> bytes:
    """Wait for the answer to ``request``: the body of its MessageList frame.

    Raises:
        QueueNotFound, InvalidName, ... (the daemon's errors), ConnectionLost
    """
    conn, waiter = request._conn, request._waiter
    try:
        reply: object = conn.exchange(waiter)
    finally:
        conn.proto.forget_page(waiter)
    if type(reply) is RawMessageList:
        return reply.body
    raise unexpected(reply, "MessageList")
