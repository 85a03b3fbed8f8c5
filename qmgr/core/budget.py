"""Memory budgets: a bound on bytes the daemon holds on behalf of all its clients.

A client can make the daemon hold memory two ways: by sending part of a
frame and stopping (the daemon buffers what it announced), and by sending
messages in a transaction it does not commit (they stay in memory until it
does). Per-connection and per-transaction limits alone do not bound the sum,
so each of the two has a daemon-wide :class:`MemoryBudget`: a reservation
that would take the total over its limit is refused, and the request that
needed it gets a clear error instead of the daemon growing without bound.
"""

from __future__ import annotations


class MemoryBudget:
    """A count of bytes in use against a limit (not thread-safe; one thread)."""

    __slots__ = ("_in_use", "limit", "what")

    def __init__(self, limit: int, *, what: str) -> None:
        """``what`` names the budget in error messages ("uncommitted messages")."""
        if limit <= 0:
            msg = f"the {what} budget must be positive, not {limit}"
            raise ValueError(msg)
        self.limit = limit
        self.what = what
        self._in_use = 0

    @property
    def in_use(self) -> int:
        """Bytes reserved now."""
        return self._in_use

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes; False (reserving nothing) if that would pass the limit."""
        if self._in_use + size > self.limit:
            return False
        self._in_use += size
        return True

    def release(self, size: int) -> None:
        """Give back bytes reserved earlier."""
        self._in_use = max(self._in_use - size, 0)

    def refusal(self, size: int) -> str:
        """Why a reservation of ``size`` bytes was refused, for the error message
        (one that can never fit is not told to retry)."""
        if size > self.limit:
            return (
                f"{size} bytes of {self.what} are more than the queue manager's limit of "
                f"{self.limit} for all its clients together"
            )
        return (
            f"the queue manager holds {self._in_use} bytes of {self.what} for all its "
            f"clients and {size} more would pass its limit of {self.limit}; retry later"
        )
