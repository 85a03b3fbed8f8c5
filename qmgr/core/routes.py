"""Routes: which next hop carries the messages for a remote destination.

Theory of operation
-------------------
A queue manager sends each remote destination's messages straight to it,
unless ``[routes]`` names next hops (routers) for it. A :class:`RouteTable`
holds the entries, each a key and one next hop or a list of them:

* ``"HOST:PORT"`` (or ``"HOST"``, which stands for port 1801): that one
  destination;
* ``"10.1.0.0/16"`` (IPv4 or IPv6 CIDR): destinations named by an address in
  the network, any port;
* ``"*.site-b.example.net"``: destinations named by a host name under that
  DNS suffix, any port;
* ``"*"``: every other destination (the default route).

The most specific entry wins: a destination before a network (the longer
prefix first), a network before a suffix (the longer first), a suffix before
``"*"``. Matching is on the destination as written in the format name: a host
name is not resolved to match a network, nor an address to match a suffix.

A next hop is ``HOST[:PORT]`` or ``"direct"`` (straight to the destination,
as without a route: a way to exempt a site's own network from a default
route). With several, :func:`choose_hop` says which one an outgoing queue
uses: the first that is not known to have been unreachable for the failover
time, so traffic moves to the next when one stays down, and back to an
earlier one as soon as it answers again (MSMQ lets a computer name up to
three out-routing servers the same way).

Parsing is pure; :mod:`qmgr.config` turns its :class:`RouteError` into a
configuration error naming the file.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wire import quoted
from wire.addresses import endpoint_text

from . import names
from .errors import InvalidName
from .names import DEFAULT_PEER_PORT

__all__ = [
    "DEFAULT_ROUTE",
    "DIRECT",
    "Endpoint",
    "HopState",
    "Route",
    "RouteError",
    "RouteKind",
    "RouteTable",
    "choose_hop",
    "endpoint_text",
    "failover_deadline",
    "parse_route",
    "socket_address_text",
    "split_host_port",
]

#: A next hop that means "straight to the destination".
DIRECT = "direct"
#: The key of the default route.
DEFAULT_ROUTE = "*"

#: A lower-case host and a port.
Endpoint = tuple[str, int]


class RouteError(ValueError):
    """A ``[routes]`` entry, an alias or an address that does not parse."""


class RouteKind(enum.IntEnum):
    """What a route's key matches, most specific first."""

    DESTINATION = 0  #: one HOST:PORT
    NETWORK = 1  #: an address in a CIDR network
    SUFFIX = 2  #: a host name under a DNS suffix
    DEFAULT = 3  #: anything


def split_host_port(text: str) -> tuple[str, int | None]:
    """``HOST[:PORT]`` (``[v6]:PORT`` for IPv6) as a lower-case host and its port
    (None: none written), as a format name's host is split: text with more than
    one colon and no brackets is an IPv6 address without a port.

    Raises:
        RouteError: no host, a port that is not 1-65535, or an IPv6 address
            and a port without brackets (the message says to write ``[addr]:port``).
    """
    text = text.strip()
    try:
        host, port = names.split_host_port(text)
    except InvalidName as exc:
        msg = f"expected HOST[:PORT]: {exc}"
        raise RouteError(msg) from None
    if not host:
        msg = f"expected HOST[:PORT], got {quoted(text)}"
        raise RouteError(msg)
    return host.lower(), port


def socket_address_text(address: tuple[Any, ...] | str) -> str:
    """A socket address as ``getsockname``/``getpeername`` give it, written as
    :func:`endpoint_text` writes it: ``[v6]:port``, ``host:port``. An IPv6 one's
    scope id (its fourth item) is written ``%id`` when the host does not carry it;
    an IPv4 peer on a dual-stack socket (``::ffff:a.b.c.d``) is written as the
    IPv4 address it is. A string (a Unix-domain socket's path) is returned as it is."""
    if isinstance(address, str):
        return address
    host, port = str(address[0]), int(address[1])
    mapped = _address(host)
    if isinstance(mapped, ipaddress.IPv6Address) and mapped.ipv4_mapped is not None:
        return endpoint_text(str(mapped.ipv4_mapped), port)
    if len(address) >= 4 and address[3] and "%" not in host:
        host = f"{host}%{address[3]}"
    return endpoint_text(host, port)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Route:
    """One ``[routes]`` entry."""

    #: The key as it is shown (``10.1.0.0/16``, ``*.site-b.example.net``, ``host:port``, ``*``).
    key: str
    kind: RouteKind
    #: The next hops in order of preference; None stands for "direct".
    hops: tuple[Endpoint | None, ...]
    #: DESTINATION: the endpoint; NETWORK: the network; SUFFIX: ``.suffix``.
    target: Endpoint | ipaddress.IPv4Network | ipaddress.IPv6Network | str | None = None

    def matches(self, host: str, port: int) -> bool:
        """Whether a destination ``host:port`` (host lower-case, canonical) falls under it."""
        if self.kind is RouteKind.DESTINATION:
            return self.target == (host, port)
        if self.kind is RouteKind.NETWORK:
            address = _address(host)
            network = self.target
            assert isinstance(network, ipaddress.IPv4Network | ipaddress.IPv6Network)
            return address is not None and address.version == network.version and address in network
        if self.kind is RouteKind.SUFFIX:
            assert isinstance(self.target, str)
            return _address(host) is None and host.endswith(self.target)
        return True

    def specificity(self) -> tuple[int, int]:
        """Sort key: lower is more specific."""
        if isinstance(self.target, ipaddress.IPv4Network | ipaddress.IPv6Network):
            return self.kind, -self.target.prefixlen
        if isinstance(self.target, str):
            return self.kind, -len(self.target)
        return self.kind, 0

    def resolve(self, destination: Endpoint) -> tuple[Endpoint, ...]:
        """The next hops for ``destination`` ("direct" becomes the destination), in order."""
        return tuple(dict.fromkeys(destination if hop is None else hop for hop in self.hops))

    def hops_text(self) -> list[str]:
        """The next hops as written (``direct`` for the destination itself)."""
        return [DIRECT if hop is None else endpoint_text(*hop) for hop in self.hops]


def _endpoint(text: str) -> Endpoint:
    host, port = split_host_port(text)
    return names.canonical_host(host), DEFAULT_PEER_PORT if port is None else port


def parse_route(key: str, value: str | Sequence[str]) -> Route:
    """One ``[routes]`` entry.

    Raises:
        RouteError: the key or a next hop does not parse, or no next hop.
    """
    shown = key.strip()
    target: Endpoint | ipaddress.IPv4Network | ipaddress.IPv6Network | str | None
    if shown == DEFAULT_ROUTE:
        kind, target = RouteKind.DEFAULT, None
    elif shown.startswith("*."):
        suffix = shown[1:].lower()
        if len(suffix) < 2 or any(ch in suffix for ch in "*/:[] \\"):
            msg = f"{quoted(shown)} is not a DNS suffix such as '*.site-b.example.net'"
            raise RouteError(msg)
        kind, target = RouteKind.SUFFIX, suffix
        shown = "*" + suffix
    elif "/" in shown:
        try:
            network = ipaddress.ip_network(shown, strict=False)
        except ValueError:
            msg = f"{quoted(shown)} is not a CIDR network such as '10.1.0.0/16'"
            raise RouteError(msg) from None
        kind, target, shown = RouteKind.NETWORK, network, str(network)
    else:
        if "*" in shown:
            msg = f"{quoted(shown)}: '*' stands alone or before a DNS suffix ('*.example.net')"
            raise RouteError(msg)
        endpoint = _endpoint(shown)
        kind, target, shown = RouteKind.DESTINATION, endpoint, endpoint_text(*endpoint)
    values: list[object] = [value] if isinstance(value, str) else list(value)
    if not values:
        msg = f"{quoted(shown)} names no next hop"
        raise RouteError(msg)
    hops: list[Endpoint | None] = []
    for hop in values:
        if not isinstance(hop, str):
            msg = f"{quoted(shown)}: a next hop is a 'HOST:PORT' string or 'direct', not {hop!r}"
            raise RouteError(msg)
        parsed = None if hop.strip().lower() == DIRECT else _endpoint(hop)
        if parsed in hops:
            msg = f"{quoted(shown)} names the next hop {quoted(hop)} twice"
            raise RouteError(msg)
        hops.append(parsed)
    return Route(key=shown, kind=kind, hops=tuple(hops), target=target)


class RouteTable:
    """The ``[routes]`` entries, searched most specific first.

    Args:
        routes: the entries (their keys must differ).
    """

    def __init__(self, routes: Sequence[Route] = ()) -> None:
        self._routes = tuple(sorted(routes, key=Route.specificity))
        keys = [route.key for route in self._routes]
        if len(set(keys)) != len(keys):
            msg = "two [routes] entries have the same key"
            raise RouteError(msg)

    @classmethod
    def parse(cls, entries: Mapping[str, str | Sequence[str]]) -> RouteTable:
        """Build the table from ``[routes]`` as written.

        Raises:
            RouteError: an entry does not parse (the message names it), or two
                keys name the same thing (``"b:1801"`` and ``"b"``).
        """
        routes: dict[str, Route] = {}
        for key, value in entries.items():
            try:
                route = parse_route(key, value)
            except RouteError as exc:
                msg = f'routes."{key}": {exc}'
                raise RouteError(msg) from None
            if route.key in routes:
                msg = f'routes."{key}": the same destinations as another entry ({route.key})'
                raise RouteError(msg)
            routes[route.key] = route
        return cls(list(routes.values()))

    def __iter__(self) -> Iterator[Route]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RouteTable) and self._routes == other._routes

    def __hash__(self) -> int:
        return hash(self._routes)

    def match(self, destination: Endpoint) -> Route | None:
        """The most specific entry for a destination, or None (straight to it)."""
        host, port = names.canonical_host(destination[0]), destination[1]
        for route in self._routes:
            if route.matches(host, port):
                return route
        return None

    def hops(self, destination: Endpoint) -> tuple[Endpoint, ...]:
        """The next hops for a destination in order of preference (itself when no entry)."""
        route = self.match(destination)
        return (destination,) if route is None else route.resolve(destination)


@dataclass(frozen=True, slots=True)
class HopState:
    """What is known of one next hop's reachability."""

    #: Since when every attempt to reach it has failed (None: it answered last,
    #: or it was not tried).
    down_since: float | None = None
    #: A session with it is open.
    up: bool = False


def choose_hop(current: int, states: Sequence[HopState], now: float, failover_after: float) -> int:
    """Which of an outgoing queue's next hops to use now.

    An earlier hop than the current one wins as soon as it answers (an open
    session); the current one stays until it has been unreachable for
    ``failover_after`` seconds, then the next one that has not been (after the
    last, the first again); when every one has, the current one stays.

    Args:
        current: the index in use.
        states: one per next hop, in order of preference.
        now: the time of ``down_since``'s clock.
        failover_after: ``peers.route_failover_after``.
    """
    for index in range(current):
        if states[index].up:
            return index
    if not _long_down(states[current], now, failover_after):
        return current
    order = list(range(current + 1, len(states))) + list(range(current))
    for index in order:
        if not _long_down(states[index], now, failover_after):
            return index
    return current


def _long_down(state: HopState, now: float, failover_after: float) -> bool:
    return state.down_since is not None and now - state.down_since >= failover_after


def failover_deadline(states: Sequence[HopState], failover_after: float) -> float | None:
    """The earliest time :func:`choose_hop`'s answer may change without news from a link."""
    deadlines = [s.down_since + failover_after for s in states if s.down_since is not None]
    return min(deadlines, default=None)
