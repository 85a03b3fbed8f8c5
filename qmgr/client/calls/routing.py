"""Routing: ``qm.routing(destination)`` and what it returns.

A queue manager says whether it is a router, the other names it is reached
by (``server.aliases``), its ``[routes]`` entries, and for one destination
which next hop its messages take, which entry chose it, and how each link
stands. ``qmgr route`` and ``qmgr status`` show it. The request needs the
protocol's ``ROUTING_VERSION``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from wire import client as cf

from .._protocol import ClientProtocol, Flow, W
from .._replies import expect

__all__ = ["Hop", "Route", "Routing", "routing"]


@dataclass(frozen=True, slots=True)
class Route:
    """One ``[routes]`` entry.

    Attributes:
        key: the destinations it names: ``HOST:PORT``, a CIDR network, ``*.suffix`` or ``*``.
        hops: its next hops in order of preference (``direct``: the destination itself).
    """

    key: str
    hops: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Hop:
    """One next hop of a destination, and the link to it.

    Attributes:
        hop: ``HOST:PORT``.
        state: ``connected``, ``connecting``, ``waiting`` (to retry), ``idle``,
            or ``unused`` (nothing has needed it yet).
        in_use: the destination's messages go through it now.
        down_since: since when every attempt to reach it has failed (None:
            it answered last, or was not tried).
        last_error: why the last attempt or session failed ("" if none did).
    """

    hop: str
    state: str
    in_use: bool
    down_since: _dt.datetime | None
    last_error: str


@dataclass(frozen=True, slots=True)
class Routing:
    """How a queue manager routes, and where one destination goes.

    Attributes:
        router: it stores and forwards messages addressed to others (``peers.router``).
        failover_after: seconds a next hop may stay unreachable before its
            queues move to the next (``peers.route_failover_after``).
        aliases: ``server.aliases``.
        routes: ``[routes]``, most specific first.
        destination: the asked destination as ``HOST:PORT`` ("" if none was asked).
        local: the destination is this queue manager.
        entry: the ``[routes]`` key that matched ("": none, straight to the destination).
        hops: the destination's next hops in order of preference.
    """

    router: bool
    failover_after: float
    aliases: tuple[str, ...]
    routes: tuple[Route, ...]
    destination: str
    local: bool
    entry: str
    hops: tuple[Hop, ...]

    @property
    def in_use(self) -> Hop | None:
        """The next hop the destination's messages take now."""
        return next((hop for hop in self.hops if hop.in_use), None)

    @classmethod
    def from_wire(cls, info: cf.RoutingInfo) -> Routing:
        """Convert the protocol's value."""
        return cls(
            router=info.router,
            failover_after=info.failover_after,
            aliases=info.aliases,
            routes=tuple(Route(r.key, r.hops) for r in info.routes),
            destination=info.destination,
            local=info.local,
            entry=info.entry,
            hops=tuple(_hop(h) for h in info.hops),
        )


def _hop(found: cf.HopInfo) -> Hop:
    down = found.down_since
    return Hop(
        hop=found.hop,
        state=found.state,
        in_use=found.in_use,
        down_since=_dt.datetime.fromtimestamp(down, _dt.UTC) if down > 0 else None,
        last_error=found.last_error,
    )


def routing(proto: ClientProtocol[W], destination: str = "") -> Flow[W, Routing]:
    """``routing()``."""
    proto.require(cf.ROUTING_VERSION, "routing()")
    info = expect((yield proto.call(cf.GetRouting(destination=destination))), cf.RoutingInfo)
    return Routing.from_wire(info)
