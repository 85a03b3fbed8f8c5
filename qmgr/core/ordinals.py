"""Message-id ordinals: unique per queue manager, across crashes, without a write per message.

Theory of operation
-------------------
A message id is this queue manager's GUID and a 32-bit ordinal, assigned
when the message is sent. Writing the counter for every message would cost
a page per commit, so the store keeps only a *limit*: ordinals below it may
have been used. The allocator hands out ordinals from memory below the
limit the store has made durable; when fewer than half a block remain, it
asks for the limit to be raised by a block (:meth:`OrdinalAllocator.reservation`),
which the daemon commits like any other write, in the next batch. After a
crash, counting starts again at the durable limit, so an ordinal is never
handed out twice; the ones skipped are simply never used. At an orderly
stop the daemon closes the allocator once nothing else may send
(:meth:`OrdinalAllocator.give_back`) and writes the count it reached as the
limit: a restart then wastes none, and only crashes skip ordinals.

The count runs in 64 bits and the ordinal is its low 32 bits, skipping 0,
so ids wrap after four billion messages as MSMQ's do.
"""

from __future__ import annotations

from typing import Final

from .errors import LimitExceeded, QueueManagerError, ShuttingDown

#: Ordinals reserved at a time.
BLOCK: Final = 1 << 20


class OrdinalAllocator:
    """Hands out message-id ordinals below the durable limit."""

    __slots__ = ("_closed", "_durable", "_failure", "_next", "_requested")

    def __init__(self, durable_limit: int) -> None:
        """``durable_limit`` is the store's ordinal limit at start-up."""
        self._next = durable_limit
        self._durable = durable_limit
        self._requested = durable_limit
        # Why the last reservation could not be written (None: it was, or none failed).
        self._failure: QueueManagerError | None = None
        self._closed = False

    @property
    def wanted(self) -> bool:
        """True when :meth:`reservation` would ask for a new limit."""
        return (
            not self._closed
            and self._durable - self._next < BLOCK // 2
            and self._requested <= self._durable
        )

    def give_back(self) -> int | None:
        """Close the allocator (the daemon stops: nothing may send any more) and
        return the count it reached, the limit to write so that the ordinals
        reserved and never used are not lost; None if there are none."""
        self._closed = True
        unused = self._next < self._durable
        self._durable = self._next
        return self._next if unused else None

    @property
    def failing(self) -> bool:
        """True while the last reservation could not be written (and said why)."""
        return self._failure is not None

    @property
    def durable_limit(self) -> int:
        """Counts below this are safe to hand out."""
        return self._durable

    def reservation(self) -> int | None:
        """The limit to ask the store for now, or None if none is needed."""
        if not self.wanted:
            return None
        self._requested = max(self._durable, self._next) + BLOCK
        return self._requested

    def reserved(self, limit: int) -> None:
        """The store has made ``limit`` durable."""
        self._durable = max(self._durable, limit)
        self._requested = max(self._requested, self._durable)
        self._failure = None

    def reservation_failed(self, error: QueueManagerError | None = None) -> None:
        """The reservation could not be written (``error``: why, when known); ask
        again next time."""
        self._requested = self._durable
        if error is not None:
            self._failure = error

    def take(self) -> int:
        """The next ordinal (1..0xFFFFFFFF).

        Raises:
            ShuttingDown: the allocator was closed (:meth:`give_back`).
            LimitExceeded: every ordinal below the durable limit is used and
                the next reservation is not written yet.
            the error of the last reservation (``StoreFull`` on a full store),
                when every ordinal is used because it could not be written.
        """
        if self._closed:
            msg = "the queue manager is shutting down"
            raise ShuttingDown(msg)
        count = self._next
        if count >= self._durable:
            failure = self._failure
            if failure is not None:
                text = f"no message id is free: reserving more failed: {failure.message}"
                raise type(failure)(text)
            msg = "message ids are being reserved in the store; retry the send"
            raise LimitExceeded(msg)
        self._next = count + 1
        ordinal = count & 0xFFFFFFFF
        if ordinal == 0:
            return self.take()
        return ordinal
