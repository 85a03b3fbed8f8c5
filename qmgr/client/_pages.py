"""Raw pages of ``peek_range``: the daemon's MessageList bytes, for readers that decode them.

A reader that turns messages into columns (the Spark data source builds
Arrow arrays) need not build a :class:`~qmgr.client.Message` per message
first: :func:`request_page` sends one ``PeekRange`` request and returns at
once, so the caller can work on the previous page while the queue manager
answers; :func:`page_body` waits for the reply and returns the body of its
``MessageList`` frame, undecoded (a ``u32`` count, then each message:
lookup id, arrival time, queue name, encoded message; see
``wire/_client_fast.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wire import client_frames as cf

from ._codec import RawMessageList
from ._replies import unexpected

if TYPE_CHECKING:
    from ._blocking import QueueManager
    from ._protocol import Waiter

__all__ = ["PageRequest", "page_body", "request_page"]


class PageRequest:
    """A ``PeekRange`` request under way on a blocking connection."""

    __slots__ = ("_qm", "_waiter")

    def __init__(self, qm: QueueManager, waiter: Waiter) -> None:
        self._qm = qm
        self._waiter = waiter


def request_page(qm: QueueManager, queue: str, after: int, max_count: int) -> PageRequest:
    """Ask for up to ``max_count`` messages of ``queue`` above ``after`` (the daemon stops at
    about 4 MB), without waiting for the answer.

    Raises:
        ConnectionLost, InvalidArgument
    """
    proto = qm._proto
    waiter = proto.request(proto.out, cf.PeekRange(queue=queue, after=after, max_count=max_count))
    proto._reader.raw.add(waiter.request_id)
    qm._flush_guarded()
    return PageRequest(qm, waiter)


def page_body(request: PageRequest) -> bytes:
    """Wait for the answer to ``request``: the body of its MessageList frame.

    Raises:
        QueueNotFound, InvalidName, ... (the daemon's errors), ConnectionLost
    """
    qm, waiter = request._qm, request._waiter
    try:
        reply: object = qm._exchange(waiter)
    finally:
        qm._proto._reader.raw.discard(waiter.request_id)
    if type(reply) is RawMessageList:
        return reply.body
    raise unexpected(reply, "MessageList")  # type: ignore[arg-type]
