"""A fleet's shape and addresses, and each queue manager's configuration, made in one place.

Theory of operation
-------------------
A :class:`Topology` is sites of queue managers: in each, ``gates`` routers
(``s0g1``, ``s0g2``: ``peers.router = true``) and ``hosts`` ordinary queue
managers (``s0h1``, ...). Hosts of one site reach each other directly;
everything between sites goes host -> a gate of its site -> a gate of the
destination's site -> the destination, store and forward at each gate.
:class:`Addresses` says where each one is, for one of two networks:

* **namespaces** (root, ``ip``): each queue manager is a host of its own
  (``fleet_net``) on its site's LAN, ``10.X.S.H``, listening on port 1801,
  so format names carry no port, as between real hosts; gates are also on
  the backbone LAN, ``10.X.250.N``, and listen on every address. Only the
  gates can reach other sites.
* **loopback**: each queue manager listens on ``127.L.S.H:1801``, its own
  address on loopback. Every socket is real, but nothing stops a host from
  reaching another site: only the routes send it through the gates.

:func:`routes` is the one place a queue manager's ``[routes]`` are made. A
host routes every queue manager of another site to its site's gates; a
gate routes every queue manager of another site to that site's gates (as
seen from its own site: the gate's backbone address, or the link proxy in
front of it). :data:`TWO_GATE_ROUTES` says whether a route names both
gates, a list tried in order (``peers.route_failover_after``), or only the
first.
:func:`config_toml` writes the rest of a queue manager's configuration.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "HTTP_PORT",
    "PEER_PORT",
    "TWO_GATE_ROUTES",
    "Addresses",
    "NetworkKind",
    "QmSpec",
    "Topology",
    "config_toml",
    "host_port",
    "loopback_addresses",
    "namespace_addresses",
    "routes",
]

#: Whether a route names both gates of a site (a list of next hops, tried in order, failing
#: over after ``peers.route_failover_after``) or only the first gate (a killed gate then
#: holds its site's traffic until it is back).
TWO_GATE_ROUTES: Final = True
#: Seconds a next hop may fail before the next one of a route's list is tried (with lists).
ROUTE_FAILOVER_AFTER: Final = 1.0
#: The MSMQ port every queue manager listens on.
PEER_PORT: Final = 1801
#: The client port each queue manager listens on (on its own loopback, or its own address).
CLIENT_PORT: Final = 1802
#: The HTTP listener's port (``/metrics``), beside the client port.
HTTP_PORT: Final = 1803
#: The third octet of the backbone LAN (sites are numbered below it).
_BACKBONE: Final = 250
#: Host numbers of the gates on their site's LAN: 201, 202, ...
_GATE_BASE: Final = 200

NetworkKind = Literal["namespaces", "loopback"]


@dataclass(frozen=True, slots=True)
class QmSpec:
    """One queue manager of a fleet: ``s<site>g<n>`` (a gate) or ``s<site>h<n>`` (a host)."""

    site: int
    #: Its number among its site's gates (``gate``) or hosts, from 1.
    number: int
    gate: bool

    @property
    def name(self) -> str:
        return f"s{self.site}{'g' if self.gate else 'h'}{self.number}"


@dataclass(frozen=True, slots=True)
class Topology:
    """``sites`` sites of ``gates`` gates and ``hosts`` hosts each."""

    sites: int
    gates: int = 2
    hosts: int = 2

    def __post_init__(self) -> None:
        if not 1 <= self.sites < _BACKBONE or not 1 <= self.gates <= 9 or self.hosts > 199:
            raise ValueError(f"no such fleet: {self}")

    def site(self, site: int) -> list[QmSpec]:
        """The gates, then the hosts, of ``site``."""
        gates = [QmSpec(site, n, gate=True) for n in range(1, self.gates + 1)]
        return gates + [QmSpec(site, n, gate=False) for n in range(1, self.hosts + 1)]

    def gates_of(self, site: int) -> list[QmSpec]:
        return [qm for qm in self.site(site) if qm.gate]

    @property
    def qms(self) -> list[QmSpec]:
        return [qm for site in range(self.sites) for qm in self.site(site)]

    def by_name(self, name: str) -> QmSpec:
        return next(qm for qm in self.qms if qm.name == name)


def host_port(address: str) -> str:
    """``address`` with the peer port if it has none (a ``[routes]`` key or next hop)."""
    return address if ":" in address else f"{address}:{PEER_PORT}"


@dataclass(slots=True)
class Addresses:
    """Where each queue manager of a fleet is (keys: queue-manager names).

    ``endpoint`` is how the others name it in format names (``10.1.0.1``, or a port
    map's ``HOST:PORT``); ``lan_hop`` a gate as its site's hosts reach it;
    ``backbone_hop[(site, gate)]`` a gate as the gates of ``site`` reach it.
    """

    kind: NetworkKind
    listen: dict[str, str]
    client_listen: dict[str, str]
    endpoint: dict[str, str]
    lan_hop: dict[str, str]
    backbone_hop: dict[tuple[int, str], str]
    aliases: dict[str, list[str]] = field(default_factory=dict)
    accept_from: list[str] = field(default_factory=list)
    #: Namespaces only: each queue manager's interfaces, ``[(segment, "10.1.0.1/24")]``.
    interfaces: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: Namespaces only: the root namespace's address on each segment.
    segments: dict[str, str] = field(default_factory=dict)

    def map_port(self, qm: str, public: str) -> None:
        """From now on the others reach ``qm`` at ``public`` (a port map, a NAT) only."""
        self.endpoint[qm] = public
        self.aliases.setdefault(qm, []).append(public)

    def route_through(self, site: int, gate: str, hop: str) -> None:
        """The gates of ``site`` reach ``gate`` through ``hop`` (a link proxy)."""
        self.backbone_hop[(site, gate)] = hop


def namespace_addresses(topology: Topology, network: ipaddress.IPv4Network) -> Addresses:
    """Addresses for namespaces in ``network`` (a /16): site LANs ``X.X.S.0/24`` and the
    backbone ``X.X.250.0/24``; the root namespace is ``.254`` on each."""
    base = network.network_address

    def at(third: int, fourth: int) -> str:
        return str(base + third * 256 + fourth)

    addresses = Addresses("namespaces", {}, {}, {}, {}, {}, accept_from=[str(network)])
    addresses.accept_from.append("127.0.0.0/8")
    addresses.segments = {f"lan{s}": f"{at(s, 254)}/24" for s in range(topology.sites)}
    addresses.segments["backbone"] = f"{at(_BACKBONE, 254)}/24"
    for qm in topology.qms:
        lan = at(qm.site, _GATE_BASE + qm.number if qm.gate else qm.number)
        addresses.endpoint[qm.name] = lan
        addresses.client_listen[qm.name] = f"127.0.0.1:{CLIENT_PORT}"
        addresses.interfaces[qm.name] = [(f"lan{qm.site}", f"{lan}/24")]
        if not qm.gate:
            addresses.listen[qm.name] = host_port(lan)
            continue
        backbone = at(_BACKBONE, qm.site * topology.gates + qm.number)
        addresses.interfaces[qm.name].append(("backbone", f"{backbone}/24"))
        addresses.listen[qm.name] = f"0.0.0.0:{PEER_PORT}"
        addresses.aliases[qm.name] = [lan, backbone]
        addresses.lan_hop[qm.name] = host_port(lan)
        for site in range(topology.sites):
            addresses.backbone_hop[(site, qm.name)] = host_port(backbone)
    return addresses


def loopback_addresses(topology: Topology, second: int) -> Addresses:
    """Addresses on loopback: ``127.<second>.S.H``, gates at ``.201``, ``.202``, ..."""
    addresses = Addresses("loopback", {}, {}, {}, {}, {}, accept_from=["127.0.0.0/8"])
    for qm in topology.qms:
        own = f"127.{second}.{qm.site}.{_GATE_BASE + qm.number if qm.gate else qm.number}"
        addresses.endpoint[qm.name] = own
        addresses.listen[qm.name] = host_port(own)
        addresses.client_listen[qm.name] = f"{own}:{CLIENT_PORT}"
        if qm.gate:
            addresses.lan_hop[qm.name] = host_port(own)
            for site in range(topology.sites):
                addresses.backbone_hop[(site, qm.name)] = host_port(own)
    return addresses


def routes(
    topology: Topology, addresses: Addresses, qm: QmSpec, *, two_gates: bool = TWO_GATE_ROUTES
) -> dict[str, str | list[str]]:
    """The ``[routes]`` of ``qm``: every queue manager of another site, by the address the
    others name it by, to the gates that lead there (both, in order, with ``two_gates``)."""
    found: dict[str, str | list[str]] = {}
    for destination in topology.qms:
        if destination.site == qm.site:
            continue
        if qm.gate:
            hops = [
                addresses.backbone_hop[(qm.site, gate.name)]
                for gate in topology.gates_of(destination.site)
            ]
        else:
            hops = [addresses.lan_hop[gate.name] for gate in topology.gates_of(qm.site)]
        found[host_port(addresses.endpoint[destination.name])] = hops if two_gates else hops[0]
    return found


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str | list):
        return json.dumps(value)
    raise TypeError(f"no TOML for {value!r}")


def _section(name: str, values: Mapping[str, object]) -> Iterator[str]:
    yield f"[{name}]"
    for key, value in values.items():
        yield f"{json.dumps(key) if not key.isidentifier() else key} = {_toml(value)}"
    yield ""


def config_toml(
    topology: Topology,
    addresses: Addresses,
    qm: QmSpec,
    *,
    unix_socket: str,
    peers: Mapping[str, object] = {},
    two_gates: bool = TWO_GATE_ROUTES,
) -> str:
    """The configuration file of ``qm`` (its listeners are given on the command line):
    its Unix-domain socket (how the fleet's clients reach it, whatever the network does),
    its aliases, who may connect, whether it is a router, ``peers`` settings, its routes."""
    server: dict[str, object] = {"unix_socket": unix_socket}
    if addresses.kind == "namespaces":
        server["insecure"] = True  # plain TCP on a LAN address: the fleet's own network
    if addresses.aliases.get(qm.name):
        server["aliases"] = addresses.aliases[qm.name]
    peer_section: dict[str, object] = {"accept_from": addresses.accept_from, **peers}
    peer_section["router"] = qm.gate
    if two_gates:
        peer_section["route_failover_after"] = ROUTE_FAILOVER_AFTER
    lines = [
        *_section("server", server),
        *_section("peers", peer_section),
        *_section("routes", routes(topology, addresses, qm, two_gates=two_gates)),
    ]
    return "\n".join(lines)
