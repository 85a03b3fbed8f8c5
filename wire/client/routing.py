"""The client protocol's frames of routing (``qmgr route``, ``qmgr status``).

:class:`GetRouting` asks how a daemon routes: whether it is a router, the
other names it is reached by (``server.aliases``), its ``[routes]`` entries
and, for one destination, which next hop that destination's messages take,
which entry chose it, and the state of each link. The answer is
:class:`RoutingInfo`. This request is answered only on a connection that
negotiated ``ROUTING_VERSION`` (7) or later.

Layouts (little-endian; ``str`` is u16 length + UTF-8; ``[T]`` is a u32
count, then the elements)::

    GetRouting   0x1F  destination str ("": none)
    RoutingInfo  0x91  router flag, failover_after f64, aliases [str],
                       routes [key str, hops [str]],
                       destination str, local flag, entry str,
                       hops [hop str, state str, in_use flag, down_since f64,
                             last_error str]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["ROUTING_REQUESTS", "GetRouting", "HopInfo", "RouteEntry", "RoutingInfo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetRouting:
    """Ask how the queue manager routes and, with ``destination`` (a format name or
    ``HOST[:PORT]``), which next hop that destination takes. The reply is
    :class:`RoutingInfo`."""

    destination: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteEntry:
    """One ``[routes]`` entry: its key and its next hops in order (``direct``: the
    destination itself)."""

    key: str
    hops: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HopInfo:
    """One next hop of the asked destination, and the link to it."""

    #: ``HOST:PORT``.
    hop: str
    #: ``connected``, ``connecting``, ``waiting`` (to retry), ``idle``, or
    #: ``unused`` (no outgoing queue has needed it yet).
    state: str
    #: The destination's messages go through it now.
    in_use: bool
    #: Unix seconds since every attempt to reach it has failed (0: it answered
    #: last, or was not tried).
    down_since: float
    #: Why the last attempt or session failed ("" if none did).
    last_error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingInfo:
    """How the queue manager routes (the answer to :class:`GetRouting`)."""

    #: ``peers.router``: it stores and forwards messages addressed to others.
    router: bool
    #: ``peers.route_failover_after``, in seconds.
    failover_after: float
    #: ``server.aliases`` as written (``HOST`` or ``HOST:PORT``).
    aliases: tuple[str, ...]
    #: ``[routes]``, most specific first.
    routes: tuple[RouteEntry, ...]
    #: The asked destination as ``HOST:PORT`` ("" when none was asked).
    destination: str
    #: The destination is this queue manager (its address, names or aliases).
    local: bool
    #: The ``[routes]`` key that matched ("": none, straight to the destination).
    entry: str
    #: The destination's next hops in order of preference.
    hops: tuple[HopInfo, ...]


#: The requests a daemon answers only on a connection of ``ROUTING_VERSION`` or later.
ROUTING_REQUESTS: Final[frozenset[type[object]]] = frozenset({GetRouting})
