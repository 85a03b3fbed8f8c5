"""The fleet's routes and configuration files (``fleet_topology``), without starting anything:
the routes lead every queue manager of another site through the gates, and what
``config_toml`` writes is a configuration ``qmgr serve`` accepts."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

import pytest
from fleet_topology import (
    Addresses,
    Topology,
    config_toml,
    loopback_addresses,
    namespace_addresses,
    routes,
)

from qmgr.config import load_config

TOPOLOGY = Topology(sites=3, gates=2, hosts=2)


@pytest.fixture(params=["namespaces", "loopback"])
def addresses(request: pytest.FixtureRequest) -> Addresses:
    if request.param == "namespaces":
        return namespace_addresses(TOPOLOGY, ipaddress.IPv4Network("10.77.0.0/16"))
    return loopback_addresses(TOPOLOGY, 77)


def test_hosts_route_other_sites_through_their_gates_and_gates_through_the_others(
    addresses: Addresses,
) -> None:
    host, gate = TOPOLOGY.by_name("s0h1"), TOPOLOGY.by_name("s0g1")
    elsewhere = {q.name for q in TOPOLOGY.qms if q.site != 0}
    for spec in (host, gate):
        found = routes(TOPOLOGY, addresses, spec, two_gates=False)
        assert len(found) == len(elsewhere)
        for destination in elsewhere:
            key = addresses.endpoint[destination]
            hop = found[key if ":" in key else f"{key}:1801"]
            site = TOPOLOGY.by_name(destination).site
            if spec.gate:
                assert hop == addresses.backbone_hop[(0, f"s{site}g1")]
            else:
                assert hop == addresses.lan_hop["s0g1"]


def test_with_two_gates_a_route_names_both_in_order(addresses: Addresses) -> None:
    found = routes(TOPOLOGY, addresses, TOPOLOGY.by_name("s1h2"), two_gates=True)
    assert set(map(tuple, found.values())) == {  # type: ignore[arg-type]
        (addresses.lan_hop["s1g1"], addresses.lan_hop["s1g2"])
    }
    found = routes(TOPOLOGY, addresses, TOPOLOGY.by_name("s1g2"), two_gates=True)
    to_site_2 = found[f"{addresses.endpoint['s2h1']}:1801"]
    assert to_site_2 == [addresses.backbone_hop[(1, "s2g1")], addresses.backbone_hop[(1, "s2g2")]]


def test_a_port_map_is_how_the_others_name_and_route_it(addresses: Addresses) -> None:
    addresses.map_port("s2h2", "127.0.0.1:40001")
    found = routes(TOPOLOGY, addresses, TOPOLOGY.by_name("s0h1"), two_gates=False)
    assert found["127.0.0.1:40001"] == addresses.lan_hop["s0g1"]
    assert "127.0.0.1:40001" in addresses.aliases["s2h2"]


def test_every_configuration_is_one_qmgr_serve_accepts(
    addresses: Addresses, tmp_path: Path
) -> None:
    peers = {"retry_initial": 0.05, "resend_intervals": [1.0]}
    for spec in TOPOLOGY.qms:
        text = config_toml(
            TOPOLOGY, addresses, spec, unix_socket=str(tmp_path / "s"), peers=peers, two_gates=False
        )
        path = tmp_path / f"{spec.name}.toml"
        path.write_text(text, encoding="utf-8")
        config = load_config(
            path, listen=addresses.listen[spec.name], name=spec.name, data_dir=tmp_path / spec.name
        )
        assert config.peer_router is spec.gate
        assert len(config.routes) == len(tomllib.loads(text)["routes"]) > 0
