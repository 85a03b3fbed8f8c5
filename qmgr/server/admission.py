"""Who may open a client connection now: limits that apply before authentication.

Theory of operation
-------------------
A client is *unauthenticated* from the moment it connects until it has
said Hello and, when ``auth.required``, shown who it is (a client
certificate or a token; without ``auth.required``, the Hello is enough).
Such a connection can cost the daemon, and other clients, only so much,
and it can never keep an authenticated client out:

* **It lasts at most the Hello deadline.** The session closes a
  connection that has not authenticated ``server.hello_timeout`` seconds
  after it opened, Hello or not (``client.session``).
* **Unauthenticated connections have a budget of their own**: at most
  ``limits.max_unauthenticated_per_address`` from one address and
  ``limits.max_unauthenticated`` in all. A new connection that finds a
  budget full *evicts the oldest unauthenticated connection* in it instead
  of being refused: a client that means to authenticate always gets in,
  and a flood of connections that never authenticate only churns through
  its own budget. A legitimate client is evicted only if that many newer
  unauthenticated connections arrive before it has authenticated (one
  round trip or two).
* **Per address**, at most ``limits.max_connections_per_address``
  connections at once, authenticated or not: one host cannot take every
  slot of ``server.max_connections``. When they are all taken, an
  unauthenticated one is evicted if there is one; a new connection is
  refused only when the address's authenticated connections fill them.
* **Failures slow an address down**: an address whose handshakes or
  tokens failed ``auth.failure_limit`` times within the last minute waits
  ``auth.failure_delay`` seconds before each new connection is served (the
  wait holds an unauthenticated slot, so it is evictable too).

:class:`Admission` is plain bookkeeping with an explicit ``now`` (trio's
clock): it never sleeps, logs or closes anything. :meth:`Admission.arrive`
says which connections to evict; the daemon closes them (a
:class:`Ticket`'s ``close``). Memory is bounded: one ticket per
connection being served, and failures kept for one minute, for at most
``MAX_TRACKED`` addresses (the oldest are forgotten first).

The peer port keeps the same books for queue managers that connect
(``AdmissionLimits.section`` ``peers``), which is why this module is
``qmgr.server``'s, beside ``client/`` and ``peering/``, not either one's.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_TRACKED", "WINDOW", "Admission", "AdmissionLimits", "Arrival", "Ticket"]

#: Seconds failures are remembered.
WINDOW: Final = 60.0
#: Addresses whose failures are remembered at once.
MAX_TRACKED: Final = 10_000


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """The per-address and unauthenticated limits (see the module docstring)."""

    max_connections_per_address: int
    failure_limit: int
    failure_delay: float
    max_unauthenticated_per_address: int = 64
    max_unauthenticated: int = 512
    #: The configuration section the limits come from, for messages: the peer
    #: port's are in ``peers`` (its per-address limit is ``peers.max_connections``).
    section: str = "limits"

    def key(self, name: str) -> str:
        """The configuration key of limit ``name``, for messages."""
        if self.section == "peers" and name == "max_connections_per_address":
            name = "max_connections"
        return f"{self.section}.{name}"


def _no_close(reason: str) -> None:
    del reason


class Ticket:
    """One connection being served, from its arrival until it closes."""

    __slots__ = ("address", "authenticated", "close", "opened_at", "released")

    def __init__(self, address: str, opened_at: float) -> None:
        self.address = address
        self.opened_at = opened_at
        self.authenticated = False
        #: Set once it no longer counts (closed, or evicted).
        self.released = False
        #: How the daemon closes it, saying why (set by the daemon as the
        #: connection moves from its handshake to its session).
        self.close: Callable[[str], None] = _no_close


@dataclass(frozen=True, slots=True)
class Arrival:
    """A new connection admitted, and the unauthenticated ones to close for it."""

    ticket: Ticket
    evicted: tuple[tuple[Ticket, str], ...] = ()


class Admission:
    """Connections per address, unauthenticated budgets, and recent failures."""

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self._open: dict[str, int] = {}
        #: Unauthenticated connections, oldest first: in all, and per address.
        self._pending: OrderedDict[Ticket, None] = OrderedDict()
        self._pending_at: dict[str, OrderedDict[Ticket, None]] = {}
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    # ------------------------------------------------------------------ connections

    def arrive(self, address: str, now: float) -> Arrival | str:
        """Admit a new connection from ``address``: its ticket and the
        unauthenticated connections to evict for it, or why it is refused."""
        limits = self.limits
        evicted: list[tuple[Ticket, str]] = []
        per_address = limits.max_connections_per_address
        if self._open.get(address, 0) >= per_address:
            key = limits.key("max_connections_per_address")
            if not self._evict(
                address, f"{address} has {per_address} connections ({key})", evicted
            ):
                return f"too many connections from {address}: at most {per_address} at once ({key})"
        if self._count_pending(address) >= limits.max_unauthenticated_per_address:
            key = limits.key("max_unauthenticated_per_address")
            count = limits.max_unauthenticated_per_address
            self._evict(
                address, f"{address} has {count} unauthenticated connections ({key})", evicted
            )
        if len(self._pending) >= limits.max_unauthenticated:
            key = limits.key("max_unauthenticated")
            count = limits.max_unauthenticated
            why = f"the queue manager has {count} unauthenticated connections ({key})"
            self._evict(None, why, evicted)
        ticket = Ticket(address, now)
        self._open[address] = self._open.get(address, 0) + 1
        self._pending[ticket] = None
        self._pending_at.setdefault(address, OrderedDict())[ticket] = None
        return Arrival(ticket, tuple(evicted))

    def _evict(self, address: str | None, why: str, evicted: list[tuple[Ticket, str]]) -> bool:
        """Release the oldest unauthenticated connection (of ``address``, or of
        any), adding it to ``evicted`` with the reason; False if there is none."""
        victim = self._oldest(address)
        if victim is None:
            return False
        evicted.append(
            (
                victim,
                "closing this connection, which has not authenticated, to make room for a "
                f"new one: {why}",
            )
        )
        return True

    def authenticated(self, ticket: Ticket) -> None:
        """``ticket``'s connection authenticated: it leaves the unauthenticated budgets."""
        if ticket.released or ticket.authenticated:
            return
        ticket.authenticated = True
        self._unpend(ticket)

    def closed(self, ticket: Ticket) -> None:
        """``ticket``'s connection ended (a ticket already evicted counts no more)."""
        self._release(ticket)

    def oldest_unauthenticated(self) -> Ticket | None:
        """The unauthenticated connection that arrived first, if any (the daemon
        evicts it first when ``server.max_connections`` are all taken); it no
        longer counts once returned."""
        return self._oldest(None)

    def connections(self, address: str) -> int:
        """Connections from ``address`` being served."""
        return self._open.get(address, 0)

    def unauthenticated(self, address: str | None = None) -> int:
        """Unauthenticated connections from ``address`` (None: in all)."""
        return len(self._pending) if address is None else self._count_pending(address)

    def _count_pending(self, address: str) -> int:
        pending = self._pending_at.get(address)
        return 0 if pending is None else len(pending)

    def _oldest(self, address: str | None) -> Ticket | None:
        """Release and return the oldest unauthenticated ticket (of ``address``)."""
        pending = self._pending if address is None else self._pending_at.get(address)
        if not pending:
            return None
        ticket = next(iter(pending))
        self._release(ticket)
        return ticket

    def _release(self, ticket: Ticket) -> None:
        if ticket.released:
            return
        ticket.released = True
        if not ticket.authenticated:
            self._unpend(ticket)
        left = self._open.get(ticket.address, 0) - 1
        if left > 0:
            self._open[ticket.address] = left
        else:
            self._open.pop(ticket.address, None)

    def _unpend(self, ticket: Ticket) -> None:
        self._pending.pop(ticket, None)
        pending = self._pending_at.get(ticket.address)
        if pending is not None:
            pending.pop(ticket, None)
            if not pending:
                del self._pending_at[ticket.address]

    # ------------------------------------------------------------------ failures

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
