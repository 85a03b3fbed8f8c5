"""A fleet of queue managers in sites, with gates between them, delivers exactly once through
crashes, partitions and a port map.

The default run: 12 queue managers in 3 sites, two gates (routers) and two
hosts in each (:mod:`fleet_topology`), every one sending transactions of 1
to 10 messages to several others (:mod:`fleet_traffic`), ``s2h2`` reached
by everyone only through a port map (a forwarder that also hides the
senders' addresses, as a NAT would). While the traffic flows, gate ``s0g1``
is killed with SIGKILL and started again 2 s later, and site 1 is cut off
from the others for 10 s (its gates' backbone links down: not a byte
crosses them meanwhile, while its queue managers go on committing).
Afterwards every committed message is at its destination exactly once and in commit order
per (source, destination), nothing of an aborted transaction arrived, every
outgoing queue is empty, no message was dead-lettered, and every
acknowledgment asked for is in its admin queue, once.

Routes name both gates of a site, in order (``fleet_topology.TWO_GATE_ROUTES``):
while the first is down for longer than ``peers.route_failover_after``, the
traffic for its site goes through the second, and back once the first
answers; the sequences stay exactly once across the change of gate.

The ``soak`` run (``pytest -m soak``) is bigger (16 queue managers in 4
sites), runs longer, repeats the faults round after round over every site
and first gate, and shapes the links between sites (latency, loss, a
bandwidth limit) through fault proxies.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pytest
from fleet_kit import Fleet
from fleet_topology import TWO_GATE_ROUTES, Topology
from fleet_traffic import Plan, check, create_queues, join, progress, run_sources, settle
from helpers import log_events

#: The queue manager everyone reaches only through a port map.
MAPPED = "s2h2"


@dataclasses.dataclass(frozen=True)
class Run:
    """One version of the scenario."""

    topology: Topology
    plan: Plan
    #: Rounds of faults (each: a gate killed, then a site cut off), spread over the traffic.
    rounds: int
    #: Seconds a killed gate stays down, and a cut-off site stays cut off.
    kill_for: float
    cut_for: float
    #: ``Fleet.shape`` arguments for the links between sites (None: links as they are).
    shaping: dict[str, float] | None = None
    settle_timeout: float = 120.0


SHORT = Run(Topology(sites=3), Plan(transactions=40, seconds=20.0), 1, kill_for=2.0, cut_for=10.0)
SOAK = Run(
    Topology(sites=4, hosts=2),
    Plan(transactions=600, seconds=240.0, destinations=4),
    rounds=4,
    kill_for=3.0,
    cut_for=10.0,
    shaping={"delay": 0.01, "loss": 0.01, "rate": 2_000_000.0},
    settle_timeout=300.0,
)


def faults(fleet: Fleet, run: Run, done: Callable[[], float]) -> list[str]:
    """Kill a first gate and cut a site off, ``run.rounds`` times while the traffic flows
    (round ``r`` waits for its share of the transactions first); what happened, when."""
    log = []
    began = time.monotonic()
    sites = fleet.topology.sites

    def reached(share: float) -> Callable[[], bool]:
        return lambda: done() >= share

    for round_ in range(run.rounds):
        gate, site = f"s{round_ % sites}g1", (round_ + 1) % sites
        fleet.wait("traffic", reached((round_ + 0.15) / run.rounds), 120.0)
        fleet.kill(gate)
        time.sleep(run.kill_for)  # how long the gate stays down: the fault itself
        fleet.revive(gate)
        log.append(f"{time.monotonic() - began:6.1f}s {gate} killed for {run.kill_for:g} s")
        fleet.wait("traffic", reached((round_ + 0.3) / run.rounds), 120.0)
        fleet.cut(site)
        crossed = fleet.quiet_backbone(site)
        time.sleep(run.cut_for)  # how long the site stays cut off: the fault itself
        assert fleet.backbone_bytes(site) == crossed, f"bytes crossed the cut of site {site}"
        fleet.heal(site)
        log.append(
            f"{time.monotonic() - began:6.1f}s site {site} cut off for {run.cut_for:g} s, "
            f"{done():.0%} of the transactions made"
        )
        assert done() < 1.0, "the traffic ended before the site came back: make it longer"
    return log


@pytest.mark.parametrize(
    "run",
    [
        pytest.param(SHORT, id="short", marks=pytest.mark.slow),
        pytest.param(SOAK, id="soak", marks=pytest.mark.soak),
    ],
)
def test_every_committed_message_arrives_once_in_order_through_gates_crashes_and_cuts(
    fleet_factory: Callable[..., Fleet], run: Run
) -> None:
    began = time.monotonic()
    fleet = fleet_factory(
        run.topology, port_mapped=[MAPPED], link_proxies=True if run.shaping else None
    )
    started = time.monotonic() - began
    if run.shaping is not None:
        fleet.shape(**run.shaping)
    create_queues(fleet)
    sources = run_sources(fleet, run.plan, seed=20_251)
    log = faults(fleet, run, progress(sources))
    join(sources, timeout=run.plan.seconds * 3 + 60.0)
    committed = sum(len(tx.entries) for s in sources for tx in s.log if tx.outcome == "committed")
    settled = settle(fleet, committed, run.settle_timeout)
    summary = check(fleet, sources)
    assert summary.transactions["committed"] > 0
    assert summary.acknowledgments > 0
    assert fleet.forwarders[MAPPED].snapshot().accepted > 0, "nothing went through the port map"
    moves = [
        (name, event["from_hop"], event["to_hop"])
        for name, daemon in fleet.daemons.items()
        for event in log_events(daemon, "outgoing_route_changed")
    ]
    if TWO_GATE_ROUTES:
        assert moves, "no outgoing queue moved to a second gate while a first one was down"
    print(
        f"\n{fleet.describe()}, started in {started:.1f} s\n" + "\n".join(log) + "\n"
        f"{summary}; {len(moves)} moves between gates; "
        f"settled {settled:.1f} s after the last commit; "
        f"{time.monotonic() - began:.1f} s in all"
    )
