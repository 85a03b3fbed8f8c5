"""Who may open a client connection now: limits that apply before authentication.

Theory of operation
-------------------
A client is unauthenticated until its TLS handshake (and, later, its
credentials) succeed, so what it may cost before that is bounded here, per
source address, on top of the daemon-wide ``server.max_connections``:

* at most ``limits.max_connections_per_address`` connections from one
  address at once, counting those still in their handshake: one host cannot
  take every slot;
* an address whose handshakes or authentications failed
  ``auth.failure_limit`` times within the last minute is slowed down: each
  new connection from it waits ``auth.failure_delay`` seconds before it is
  served (the wait holds its slot, so a flood of retries from one address
  runs into the per-address limit, not into other clients).

:class:`Admission` is plain bookkeeping with an explicit ``now`` (trio's
clock): it never sleeps or logs; the daemon asks and acts. Memory is bounded:
failures are kept for one minute, for at most ``MAX_TRACKED`` addresses (the
oldest are forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_TRACKED", "WINDOW", "Admission", "AdmissionLimits"]

#: Seconds failures are remembered.
WINDOW: Final = 60.0
#: Addresses whose failures are remembered at once.
MAX_TRACKED: Final = 10_000


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """The per-address limits (see the module docstring)."""

    max_connections_per_address: int
    failure_limit: int
    failure_delay: float


class Admission:
    """Per-address connection counts and recent failures."""

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self._open: dict[str, int] = {}
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def refusal(self, address: str) -> str | None:
        """Why a new connection from ``address`` cannot be served now, or None."""
        limit = self.limits.max_connections_per_address
        if self._open.get(address, 0) >= limit:
            return (
                f"too many connections from {address}: at most {limit} at once "
                "(limits.max_connections_per_address)"
            )
        return None

    def opened(self, address: str) -> None:
        """A connection from ``address`` is being served (until :meth:`closed`)."""
        self._open[address] = self._open.get(address, 0) + 1

    def closed(self, address: str) -> None:
        """A connection from ``address`` ended."""
        left = self._open.get(address, 0) - 1
        if left > 0:
            self._open[address] = left
        else:
            self._open.pop(address, None)

    def failed(self, address: str, now: float) -> None:
        """A handshake or an authentication from ``address`` failed at ``now``."""
        times = self._failures.pop(address, None)
        if times is None:
            times = deque(maxlen=max(1, self.limits.failure_limit))
            while len(self._failures) >= MAX_TRACKED:
                self._failures.popitem(last=False)
        times.append(now)
        self._failures[address] = times

    def delay(self, address: str, now: float) -> float:
        """Seconds to wait before serving a new connection from ``address``."""
        times = self._failures.get(address)
        if times is None:
            return 0.0
        while times and now - times[0] > WINDOW:
            times.popleft()
        if not times:
            del self._failures[address]
            return 0.0
        if len(times) >= self.limits.failure_limit:
            return self.limits.failure_delay
        return 0.0

    def connections(self, address: str) -> int:
        """Connections from ``address`` being served."""
        return self._open.get(address, 0)
