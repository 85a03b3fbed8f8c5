"""Fixtures of the fleet tests: fleets of real queue managers, always taken down.

``fleet_factory(topology, ...)`` starts a :class:`fleet_kit.Fleet` (its
arguments are the fleet's) in this test's temporary directory, on network
namespaces when the tests run as root with ``ip`` (as CI does), on loopback
addresses otherwise; every fleet it started is closed when the test ends,
passed or failed: daemons stopped (killed if need be), proxies closed,
namespaces and bridges deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fleet_kit import Fleet
from fleet_topology import Topology


@pytest.fixture
def fleet_factory(tmp_path: Path) -> Iterator[Callable[..., Fleet]]:
    """Start fleets for this test; all are closed afterwards."""
    fleets: list[Fleet] = []

    def start(topology: Topology, **options: object) -> Fleet:
        fleet = Fleet(topology, tmp_path / f"fleet{len(fleets) + 1}", **options)  # type: ignore[arg-type]
        fleets.append(fleet)
        return fleet.start()

    try:
        yield start
    finally:
        for fleet in fleets:
            fleet.close()
