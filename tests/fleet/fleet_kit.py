"""A fleet of real queue managers: started, hurt (kills, partitions, slow links), measured.

Theory of operation
-------------------
:class:`Fleet` starts every queue manager of a
:class:`~fleet_topology.Topology` as ``qmgr serve``
(:class:`FleetDaemon`, a :class:`helpers.DaemonProcess`), each with the
configuration ``fleet_topology.config_toml`` writes for it, on one of two
networks (``fleet_topology`` describes both):

* **namespaces**, when this process is root and ``ip`` works
  (:func:`fleet_net.available`): each queue manager in a network namespace
  of its own; a partition takes a gate's backbone interface down;
* **loopback** otherwise: each on its own ``127.L.S.H``; the links between
  sites then go through fault proxies, and a partition stalls them.

Clients reach every queue manager on its Unix-domain socket, so the test's
own connections never depend on the network it is hurting.

In front of the network, two kinds of :class:`~fault_proxy.FaultProxy`:

* a **forwarder** per port-mapped queue manager (``port_mapped``): the
  others reach it only at the forwarder's ``HOST:PORT``, and it sees every
  connection come from the forwarder's address (a port map and a NAT);
* a **link proxy** per (site, gate of another site) when ``link_proxies``
  (always on loopback): the gates of that site reach that gate through it,
  so :meth:`Fleet.shape` can give the links between sites latency, loss and
  a bandwidth limit.

Everything started is stopped by :meth:`Fleet.close` (daemons, proxies,
namespaces, bridges), which a fixture's finalizer calls whatever happened;
:func:`fleet_net.sweep_stale` removes what an earlier run killed with
SIGKILL left behind.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self

import fleet_net
from fault_proxy import FaultProxy
from fleet_topology import (
    HTTP_PORT,
    PEER_PORT,
    TWO_GATE_ROUTES,
    Addresses,
    NetworkKind,
    QmSpec,
    Topology,
    config_toml,
    loopback_addresses,
    namespace_addresses,
)
from helpers import DaemonProcess, Launch

if TYPE_CHECKING:
    from qmgr.client import QueueManager

__all__ = ["FLEET_PEERS", "Fleet", "FleetDaemon", "network_kind"]

#: Peering settings of every queue manager of a test fleet: quick to reconnect and to
#: acknowledge, and quick to give up a session that a partition left hanging.
FLEET_PEERS: dict[str, object] = {
    "retry_initial": 0.05,
    "retry_max": 0.5,
    "order_ack_delay": 0.02,
    "resend_intervals": [1.0],
    "ack_timeout": 3.0,
    "connect_timeout": 2.0,
}
#: Interface of a gate's backbone link in its namespace (``eth0`` is its site's LAN).
_BACKBONE_INTERFACE = 1
#: Where a fleet's Unix-domain sockets go, in a directory of its own (short paths: a
#: socket's path has at most 107 bytes).
_SOCKETS = Path("/tmp")


def network_kind(wanted: NetworkKind | None = None) -> NetworkKind:
    """``wanted``, else ``QMGR_FLEET_NETWORK`` (``namespaces`` or ``loopback``), else
    namespaces where they can be made and loopback elsewhere."""
    chosen = wanted or os.environ.get("QMGR_FLEET_NETWORK")
    if chosen == "namespaces":
        return "namespaces"
    if chosen == "loopback":
        return "loopback"
    if chosen:
        raise ValueError(f"QMGR_FLEET_NETWORK={chosen!r}: namespaces or loopback")
    return "namespaces" if fleet_net.available() else "loopback"


class FleetDaemon(DaemonProcess):
    """One queue manager of a fleet: ``qmgr serve`` with its own configuration file,
    listening where the fleet's addresses say, in its namespace (if it has one), and
    reached by clients on its Unix-domain socket (:attr:`address` is ``unix:PATH``)."""

    def __init__(
        self,
        data_dir: Path,
        spec: QmSpec,
        *,
        listen: str,
        client_listen: str,
        config_path: Path,
        socket_path: str,
        namespace: str | None,
        launch: Launch | None,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(data_dir, extra_args=extra_args, name=spec.name, launch=launch)
        self.spec = spec
        self.listen = listen
        self.client_listen = client_listen
        self.config_path = config_path
        self.address = f"unix:{socket_path}"
        self.namespace = namespace
        if namespace is not None:
            self.prepare = functools.partial(
                fleet_net.enter_namespace, fleet_net.namespace_path(namespace)
            )

    def placement(self) -> list[str]:
        """Its configuration file, and where the fleet's addresses say it listens."""
        return [
            "--config",
            str(self.config_path),
            "--client-listen",
            self.client_listen,
            # The HTTP listener beside the client port, on the queue manager's own address.
            "--http-listen",
            f"{self.client_listen.rpartition(':')[0]}:{HTTP_PORT}",
            "--listen",
            self.listen,
        ]

    def command(self) -> list[str]:
        inside = ["ip", "netns", "exec", self.namespace] if self.namespace else []
        return [*inside, sys.executable, "-m", "qmgr", *self.arguments()]


def _free_loopback_octet() -> int:
    """A second octet L such that ``127.L.0.1:1801`` can be bound now (another run's
    fleet would hold it)."""
    for second in sorted(range(64, 251), key=lambda n: (n * 7919 + os.getpid()) % 251):
        with socket.socket() as probe:
            try:
                probe.bind((f"127.{second}.0.1", PEER_PORT))
            except OSError:
                continue
            return second
    raise RuntimeError("no free 127.L.0.0/16 on loopback for the fleet")


class Fleet:
    """The queue managers of ``topology``, their network and its proxies (see the module).

    Args:
        topology: the sites, gates and hosts.
        root: where the stores, logs and configuration files go.
        kind: the network (default: :func:`network_kind`).
        peers: ``[peers]`` settings of every queue manager (with :data:`FLEET_PEERS`).
        port_mapped: queue managers the others reach only through a forwarder.
        link_proxies: put a fault proxy on every link between sites (None: on loopback
            only, where partitions need them).
        launch: how daemons start (``helpers.DEFAULT_LAUNCH`` if None).
        starting: how many daemons may be starting at once.
        daemon_args: more ``qmgr serve`` arguments for every daemon (``--log-level``).
    """

    def __init__(
        self,
        topology: Topology,
        root: Path,
        *,
        kind: NetworkKind | None = None,
        peers: Mapping[str, object] = {},
        port_mapped: Sequence[str] = (),
        link_proxies: bool | None = None,
        launch: Launch | None = None,
        starting: int = 4,
        daemon_args: Sequence[str] = (),
    ) -> None:
        self.topology = topology
        self.root = root
        self.kind = network_kind(kind)
        self.peers = {**FLEET_PEERS, **peers}
        self.port_mapped = list(port_mapped)
        self.link_proxies = self.kind == "loopback" if link_proxies is None else link_proxies
        self.launch = launch
        self.starting = starting
        self.daemon_args = list(daemon_args)
        self.tag = fleet_net.run_tag()
        self.namespaces: fleet_net.Namespaces | None = None
        self.addresses: Addresses | None = None
        self.daemons: dict[str, FleetDaemon] = {}
        self.forwarders: dict[str, FaultProxy] = {}
        #: (site, gate) -> the proxy the gates of ``site`` reach ``gate`` through.
        self.links: dict[tuple[int, str], FaultProxy] = {}
        self._shaping: dict[str, object] = {}
        self._sockets: Path | None = None
        #: Seconds :meth:`start` took (network, proxies, configuration, daemons).
        self.start_seconds = 0.0

    # ------------------------------------------------------------------ life cycle

    def start(self) -> Self:
        """Make the network and the proxies, write the configurations, start every daemon
        (and wait until each serves)."""
        began = time.monotonic()
        fleet_net.sweep_stale_directories(_SOCKETS)  # what a killed run left behind
        self._sockets = Path(tempfile.mkdtemp(prefix=f"{self.tag}-", dir=_SOCKETS))
        addresses = self.addresses = self._addresses()
        self._start_proxies(addresses)
        for spec in self.topology.qms:
            self.daemons[spec.name] = self._daemon(spec, addresses)
        self._start_all(list(self.daemons.values()))
        self.start_seconds = time.monotonic() - began
        return self

    def _addresses(self) -> Addresses:
        if self.kind == "loopback":
            return loopback_addresses(self.topology, _free_loopback_octet())
        fleet_net.sweep_stale()  # what a run killed before its finalizers left behind
        addresses = namespace_addresses(self.topology, fleet_net.free_subnet())
        self.namespaces = fleet_net.Namespaces(self.tag)
        for name, address in addresses.segments.items():
            self.namespaces.add_segment(name, address)
        self.namespaces.add_hosts(addresses.interfaces)
        return addresses

    def _listen_host(self, segment: str) -> str:
        """Where a proxy on ``segment`` listens: the root namespace's address on it."""
        assert self.addresses is not None
        if self.kind == "loopback":
            return "127.0.0.1"
        return self.addresses.segments[segment].split("/")[0]

    def _start_proxies(self, addresses: Addresses) -> None:
        for name in self.port_mapped:
            spec = self.topology.by_name(name)
            target = addresses.endpoint[name]
            proxy = FaultProxy(
                PEER_PORT, target_host=target, listen_host=self._listen_host(f"lan{spec.site}")
            ).start()
            self.forwarders[name] = proxy
            addresses.map_port(name, proxy.address)
        if not self.link_proxies:
            return
        for site in range(self.topology.sites):
            for other in range(self.topology.sites):
                for gate in self.topology.gates_of(other) if other != site else []:
                    host, _, port = addresses.backbone_hop[(site, gate.name)].rpartition(":")
                    proxy = FaultProxy(
                        int(port), target_host=host, listen_host=self._listen_host("backbone")
                    ).start()
                    self.links[(site, gate.name)] = proxy
                    addresses.route_through(site, gate.name, proxy.address)

    def _daemon(self, spec: QmSpec, addresses: Addresses) -> FleetDaemon:
        directory = self.root / spec.name
        directory.mkdir(parents=True, exist_ok=True)
        assert self._sockets is not None
        socket_path = str(self._sockets / f"{spec.name}.sock")
        config = directory / "qmgr.toml"
        config.write_text(
            config_toml(self.topology, addresses, spec, unix_socket=socket_path, peers=self.peers),
            encoding="utf-8",
        )
        return FleetDaemon(
            directory / "store",
            spec,
            listen=addresses.listen[spec.name],
            client_listen=addresses.client_listen[spec.name],
            config_path=config,
            socket_path=socket_path,
            namespace=self.namespaces.namespace(spec.name) if self.namespaces else None,
            launch=self.launch,
            extra_args=self.daemon_args,
        )

    def _start_all(self, daemons: list[FleetDaemon]) -> None:
        """Start ``daemons``, at most :attr:`starting` at once; re-raise the first failure."""
        gate = threading.Semaphore(self.starting)
        failures: list[BaseException] = []

        def start(daemon: FleetDaemon) -> None:
            with gate:
                try:
                    daemon.start()
                except BaseException as exc:
                    failures.append(exc)

        threads = [threading.Thread(target=start, args=(d,)) for d in daemons]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]

    def close(self) -> None:
        """Stop every daemon (SIGTERM, SIGKILL if that fails), close the proxies, remove
        the namespaces and bridges. Safe to call twice, and after a failed start."""
        try:
            for daemon in self.daemons.values():
                with contextlib.suppress(AssertionError):
                    daemon.close()
        finally:
            for proxy in [*self.forwarders.values(), *self.links.values()]:
                with contextlib.suppress(AssertionError):
                    proxy.close()
            if self.namespaces is not None:
                self.namespaces.close()
            if self._sockets is not None:
                shutil.rmtree(self._sockets, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ who is where

    @property
    def names(self) -> list[str]:
        return list(self.daemons)

    def endpoint(self, name: str) -> str:
        """How the others name ``name`` in format names (an address, or a port map's)."""
        assert self.addresses is not None
        return self.addresses.endpoint[name]

    def queue(self, name: str, queue: str) -> str:
        """The direct format name of ``queue`` on ``name``, as the others send to it."""
        return f"DIRECT=TCP:{self.endpoint(name)}\\private$\\{queue}"

    def hops(self, source: str, destination: str) -> int:
        """Queue-manager hops from ``source`` to ``destination``: 1 within a site, 2 or 3
        between sites (a host goes through a gate of its own site first)."""
        a, b = self.topology.by_name(source), self.topology.by_name(destination)
        if a.site == b.site:
            return 1
        return (1 if a.gate else 2) + (0 if b.gate and b.number == 1 else 1)

    @contextlib.contextmanager
    def client(self, name: str, timeout: float = 10.0) -> Iterator[QueueManager]:
        """A connection to ``name`` (on its Unix-domain socket)."""
        from qmgr.client import connect

        with connect(self.daemons[name].address, timeout=timeout) as qm:
            yield qm

    # ------------------------------------------------------------------ faults

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` (a crash); :meth:`revive` starts it again on the same store."""
        self.daemons[name].kill()

    def revive(self, name: str) -> None:
        """Start ``name`` again after :meth:`kill` and wait until it serves."""
        self.daemons[name].start()

    def _site_links(self, site: int) -> list[FaultProxy]:
        """The link proxies into and out of ``site``."""
        gates = {gate.name for gate in self.topology.gates_of(site)}
        return [p for (s, gate), p in self.links.items() if s == site or gate in gates]

    def cut(self, site: int) -> None:
        """Cut ``site`` off from the others: its gates' backbone interfaces go down
        (namespaces), or its links stall (loopback); :meth:`heal` ends it."""
        if self.namespaces is not None:
            for gate in self.topology.gates_of(site):
                self.namespaces.set_link(gate.name, _BACKBONE_INTERFACE, up=False)
        else:
            assert self.links, "a fleet on loopback is cut off through its link proxies"
            for proxy in self._site_links(site):
                proxy.stall(24 * 3600.0)

    def heal(self, site: int) -> None:
        """End :meth:`cut` of ``site``."""
        if self.namespaces is not None:
            for gate in self.topology.gates_of(site):
                self.namespaces.set_link(gate.name, _BACKBONE_INTERFACE, up=True)
        else:
            for proxy in self._site_links(site):
                proxy.heal()
                self._reshape(proxy)

    def backbone_bytes(self, site: int) -> int:
        """Bytes that have crossed the links between ``site`` and the others so far: on its
        gates' backbone interfaces (namespaces), or through its link proxies (loopback)."""
        if self.namespaces is not None:
            return sum(
                self.namespaces.link_bytes(gate.name, _BACKBONE_INTERFACE)
                for gate in self.topology.gates_of(site)
            )
        return sum(proxy.snapshot().bytes_forwarded for proxy in self._site_links(site))

    def quiet_backbone(self, site: int, timeout: float = 5.0) -> int:
        """:meth:`backbone_bytes` of ``site`` once two readings 50 ms apart agree (what
        was on its way when a cut began has gone through or been dropped)."""
        readings = [self.backbone_bytes(site)]

        def steady() -> bool:
            readings.append(self.backbone_bytes(site))
            return readings[-1] == readings[-2]

        self.wait(f"the links of site {site} to go quiet", steady, timeout)
        return readings[-1]

    def shape(self, *, delay: float = 0.0, rate: float | None = None, loss: float = 0.0) -> None:
        """Give every link between sites ``delay`` seconds of latency each way, at most
        ``rate`` bytes/s each way, and ``loss`` (a share of chunks held a retransmission
        time longer). Needs link proxies."""
        assert self.links, "the fleet has no link proxies to shape"
        self._shaping = {"delay": delay, "rate": rate, "loss": loss}
        for proxy in self.links.values():
            self._reshape(proxy)

    def _reshape(self, proxy: FaultProxy) -> None:
        if not self._shaping:
            return
        delay, rate, loss = (self._shaping[key] for key in ("delay", "rate", "loss"))
        assert isinstance(delay, float)
        assert isinstance(loss, float)
        assert rate is None or isinstance(rate, float | int)
        proxy.set_delay(delay)
        proxy.shape(rate=rate, loss=loss)

    # ------------------------------------------------------------------ state

    def outgoing_left(self) -> dict[str, tuple[int, int]]:
        """Per queue manager with any: messages in its outgoing queues (waiting,
        unacknowledged). Empty when everything was delivered and acknowledged."""
        left = {}
        for name in self.daemons:
            with self.client(name) as qm:
                outgoing = qm.outgoing()
            waiting = sum(q.waiting for q in outgoing)
            unacknowledged = sum(q.unacknowledged for q in outgoing)
            if waiting or unacknowledged:
                left[name] = (waiting, unacknowledged)
        return left

    def wait(self, what: str, done: Callable[[], bool], timeout: float) -> float:
        """Poll ``done`` until it holds; fail after ``timeout`` s, naming ``what``.
        Returns the seconds it took."""
        began = time.monotonic()
        while not done():
            if time.monotonic() - began > timeout:
                raise AssertionError(f"{what}: not within {timeout:g} s")
            time.sleep(0.05)
        return time.monotonic() - began

    def describe(self) -> str:
        """One line: the network, its size and what stands in it (for failure messages)."""
        routed = "both gates of a site, in order" if TWO_GATE_ROUTES else "gate 1 of each site"
        return (
            f"{self.kind} fleet {self.tag}: {len(self.daemons)} queue managers in "
            f"{self.topology.sites} sites, {len(self.forwarders)} port map(s), "
            f"{len(self.links)} link proxies, routes through {routed}"
        )
