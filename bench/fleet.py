"""A fleet of queue managers on one machine: start-up, memory, sessions, throughput, latency.

Run (as root for network namespaces; on loopback addresses otherwise)::

    .venv/bin/python bench/fleet.py [--qms 100] [--sites 10] [--network namespaces|loopback]
                                    [--seconds 20] [--latency-seconds 10] [--latency-rate 20]
                                    [--outage 5] [--idle-timeout 15] [--json] [--keep]

The fleet is ``tests/fleet``'s (``fleet_kit.Fleet``): ``--sites`` sites of
``--qms / --sites`` queue managers, two of them gates (routers), every
queue manager started as ``python -m qmgr serve`` (by ``ip netns exec`` in
its own namespace), at the ``info`` log level, reached by the benchmark on
its Unix-domain socket. Routes name both gates of each site, in order
(``fleet_topology.TWO_GATE_ROUTES``). One trio process drives the load
(``bench/_fleet_load.py``): a source and a consumer per queue manager,
transactions of 1 to 10 messages of 256 bytes, each source to 3
destinations (one in its own site). Phases, in order:

``start``
    every daemon started, 4 at a time, until each logged that it serves:
    the wall time, and per queue manager.
``idle``
    resident memory (VmRSS, and Pss: shared pages divided among the
    processes mapping them), file descriptors and peer sessions (its
    established TCP connections) of every queue manager, before any traffic.
``sessions``
    every queue manager sends one message to a neighbour of its site (which
    warms it up), then one to every other queue manager of its site, and
    each first gate one to every other first gate: the growth of anonymous
    resident memory over the growth of peer sessions, summed over the fleet
    (each session with the outgoing queue and incoming sequence it carries).
``throughput``
    every source commits as fast as it can for ``--seconds``; messages
    received per second fleet-wide in that window (and committed), resident
    memory, descriptors and sessions sampled in its middle (``busy``), and
    how long after it everything was received and every outgoing queue was
    empty (the next phase starts then); the CPU the daemons and this process
    used meanwhile (in cores: this process drives all the clients).
``latency``
    sources paced at ``--latency-rate`` transactions/s fleet-wide (each at
    its own moment in the period, not all at once) for
    ``--latency-seconds``: commit returned -> the consumer peeked it, p50 and
    p99 by queue-manager hops (1: within a site; 2: from or to a first gate
    across sites; 3: host to host across sites).
``drain``
    gate ``s0g1`` is killed (SIGKILL); for ``--outage`` seconds every other
    source sends to site 0 at the latency rate; then the gate is started
    again: the seconds from its start until every message was received, and
    until every outgoing queue is empty (every acknowledgment in).
``close``
    ``peers.idle_timeout`` is ``--idle-timeout``: the seconds after the last
    message until no peer session is left, and memory and descriptors then.

At the end every message committed is checked against the consumers' record:
``lost``, ``duplicated``, ``out_of_order`` (a stream's numbers going down),
``unexpected``. ``--json`` prints one object (the table goes to stderr) with
at least ``qms``, ``delivered_msgs_per_s``, ``rss_idle_median_mb``,
``rss_busy_median_mb``, ``lost``, ``duplicated``, ``out_of_order``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "fleet")]

import trio  # noqa: E402
from _command import add_run_options, publish, run_in_workdir, script_parser  # noqa: E402
from _daemon import process_cpu_seconds  # noqa: E402
from _fleet_load import QUEUE, Load, choose_destinations  # noqa: E402
from _proc import Sample, sample  # noqa: E402
from _report import print_table  # noqa: E402
from fleet_kit import Fleet  # noqa: E402
from fleet_topology import TWO_GATE_ROUTES, Topology  # noqa: E402

#: Peering settings of the bench's fleet (with ``fleet_kit.FLEET_PEERS``): sessions are
#: given up after the default 20 s without an answer (a loaded machine is not a partition).
BENCH_PEERS: dict[str, object] = {"ack_timeout": 20.0}
#: Seconds without progress before a wait gives up.
STALL = 120.0


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def samples(fleet: Fleet) -> dict[str, Sample]:
    """Every running queue manager's memory, descriptors and sessions now."""
    found = {}
    for name, daemon in fleet.daemons.items():
        if daemon.running and daemon.process is not None:
            found[name] = sample(daemon.process.pid)
    return found


def summary(prefix: str, found: dict[str, Sample]) -> dict[str, float]:
    """Medians (and the largest) of a round of samples, as ``<prefix>_...`` figures."""
    values = list(found.values())
    return {
        f"rss_{prefix}_median_mb": _median([s.rss / 1024 for s in values]),
        f"rss_{prefix}_max_mb": max(s.rss for s in values) / 1024,
        f"pss_{prefix}_median_mb": _median([s.pss / 1024 for s in values]),
        f"anon_{prefix}_median_mb": _median([s.anon / 1024 for s in values]),
        f"fds_{prefix}_median": _median([s.fds for s in values]),
        f"sessions_{prefix}_median": _median([s.sessions for s in values]),
        f"sessions_{prefix}_max": max(s.sessions for s in values),
    }


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def _until(what: str, done: Callable[[], bool]) -> float:
    """Poll ``done`` (in a thread) until it holds; the seconds it took (at most :data:`STALL`)."""
    began = time.perf_counter()
    while not await trio.to_thread.run_sync(done):
        if time.perf_counter() - began > STALL:
            raise SystemExit(f"{what}: not within {STALL:g} s")
        await trio.sleep(0.1)
    return time.perf_counter() - began


def _all_received(load: Load) -> Callable[[], bool]:
    return lambda: load.ledger.received_count >= load.ledger.committed_count


async def measure_sessions(fleet: Fleet, load: Load) -> dict[str, float]:
    topology = fleet.topology
    async with trio.open_nursery() as nursery:
        for spec in topology.qms:
            neighbour = next(q.name for q in topology.site(spec.site) if q != spec)
            nursery.start_soon(load.send_each, spec.name, [neighbour])
    await _until("the warm-up messages", _all_received(load))
    warm = await trio.to_thread.run_sync(samples, fleet)
    async with trio.open_nursery() as nursery:
        for spec in topology.qms:
            targets = [q.name for q in topology.site(spec.site) if q != spec]
            if spec.gate and spec.number == 1:
                targets += [g.name for s in range(topology.sites) if s != spec.site
                            for g in topology.gates_of(s)[:1]]  # fmt: skip
            nursery.start_soon(load.send_each, spec.name, targets)
    await _until("the fan-out messages", _all_received(load))
    fanned = await trio.to_thread.run_sync(samples, fleet)
    grown = sum(fanned[n].anon - warm[n].anon for n in fanned)
    opened = sum(fanned[n].sessions - warm[n].sessions for n in fanned)
    return {
        "session_kib": grown / opened if opened else 0.0,
        "sessions_opened": opened,
        **summary("sessions", fanned),
    }


def daemons_cpu(fleet: Fleet) -> float:
    """CPU seconds the running daemons have used so far, all together."""
    return sum(
        process_cpu_seconds(d.process.pid)
        for d in fleet.daemons.values()
        if d.running and d.process is not None
    )


async def measure_throughput(fleet: Fleet, load: Load, seconds: float) -> dict[str, float]:
    began = time.perf_counter()
    until = began + seconds
    busy: dict[str, Sample] = {}
    before = load.ledger.committed_count
    cpu, own_cpu = daemons_cpu(fleet), time.process_time()

    async def sample_midway() -> None:
        await trio.sleep(seconds / 2)
        busy.update(await trio.to_thread.run_sync(samples, fleet))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample_midway)
        for name in fleet.names:
            nursery.start_soon(load.source, name, until)
    cpu, own_cpu = daemons_cpu(fleet) - cpu, time.process_time() - own_cpu
    committed = load.ledger.committed_count - before
    received = sum(n for t, n in load.ledger.arrivals if began <= t <= until)
    tail = await _until("delivery after the throughput window", _all_received(load))
    settled = await _until("outgoing queues empty", lambda: not fleet.outgoing_left())
    return {
        "delivered_msgs_per_s": received / seconds,
        "committed_msgs_per_s": committed / seconds,
        "throughput_tail_s": tail,
        "throughput_settled_s": tail + settled,
        "throughput_daemons_cores": cpu / seconds,
        "throughput_bench_cores": own_cpu / seconds,
        **summary("busy", busy),
    }


async def measure_latency(fleet: Fleet, load: Load, seconds: float, rate: float) -> dict[str, Any]:
    load.measuring = True
    until = time.perf_counter() + seconds
    async with trio.open_nursery() as nursery:
        for name in fleet.names:
            nursery.start_soon(load.source, name, until, rate / len(fleet.names))
    await _until("delivery of the latency messages", _all_received(load))
    load.measuring = False
    by_hops = {
        str(hops): {
            "p50_ms": statistics.median(values) * 1000,
            "p99_ms": _percentile(values, 0.99) * 1000,
            "count": len(values),
        }
        for hops, values in sorted(load.ledger.latencies.items())
    }
    return {"latency_by_hops": by_hops}


async def measure_drain(fleet: Fleet, load: Load, outage: float, rate: float) -> dict[str, float]:
    gate = "s0g1"
    site = [q.name for q in fleet.topology.site(0)]
    await trio.to_thread.run_sync(fleet.kill, gate)
    until = time.perf_counter() + outage
    senders = [name for name in fleet.names if name != gate]
    async with trio.open_nursery() as nursery:
        for name in senders:
            nursery.start_soon(load.source, name, until, rate / len(senders), site)
    waiting = load.ledger.committed_count - load.ledger.received_count
    await trio.to_thread.run_sync(fleet.revive, gate)
    back = time.perf_counter()
    received = await _until("delivery after the gate came back", _all_received(load))
    settled = await _until("outgoing queues empty", lambda: not fleet.outgoing_left())
    return {
        "drain_waiting_messages": waiting,
        "drain_received_s": received,
        "drain_after_gate_s": time.perf_counter() - back,
        "drain_settled_extra_s": settled,
    }


async def run_load(fleet: Fleet, args: argparse.Namespace, result: dict[str, Any]) -> Load:
    load = Load(fleet, choose_destinations(fleet, random.Random(7)), seed=11)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        for name in fleet.names:
            nursery.start_soon(load.consumer, name, stop)
        progress("sessions: warm-up, then a fan-out")
        result.update(await measure_sessions(fleet, load))
        progress(f"throughput: every source as fast as it can for {args.seconds:g} s")
        result.update(await measure_throughput(fleet, load, args.seconds))
        progress(f"latency: {args.latency_rate:g} transactions/s for {args.latency_seconds:g} s")
        result.update(await measure_latency(fleet, load, args.latency_seconds, args.latency_rate))
        progress(f"drain: s0g1 down for {args.outage:g} s while site 0 gets traffic")
        result.update(await measure_drain(fleet, load, args.outage, args.latency_rate))
        result["last_message_at"] = time.perf_counter()
        stop.set()
    return load


def wait_sessions_closed(fleet: Fleet, since: float, timeout: float) -> float:
    """Seconds from ``since`` until no queue manager holds a peer session."""
    while any(s.sessions for s in samples(fleet).values()):
        if time.perf_counter() - since > timeout:
            raise SystemExit(f"peer sessions still open {timeout:g} s after the last message")
        time.sleep(0.5)
    return time.perf_counter() - since


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    sites = args.sites
    per_site = args.qms // sites
    topology = Topology(sites=sites, gates=2, hosts=per_site - 2)
    peers = {**BENCH_PEERS, "idle_timeout": args.idle_timeout}
    result: dict[str, Any] = {"qms": args.qms, "sites": sites, "two_gate_routes": TWO_GATE_ROUTES}
    with Fleet(
        topology, workdir, kind=args.network, peers=peers, launch="exec", link_proxies=False
    ) as fleet:
        result["network"] = fleet.kind
        result["start_seconds"] = fleet.start_seconds
        result["start_per_qm_seconds"] = fleet.start_seconds / args.qms
        progress(f"{fleet.describe()}: started in {fleet.start_seconds:.1f} s")
        for name in fleet.names:
            with fleet.client(name) as qm:
                qm.create_queue(QUEUE, transactional=True)
        result.update(summary("idle", samples(fleet)))
        load = trio.run(run_load, fleet, args, result)
        progress(f"close: waiting for peers.idle_timeout ({args.idle_timeout:g} s)")
        result["idle_close_s"] = wait_sessions_closed(
            fleet, result.pop("last_message_at"), args.idle_timeout * 4 + 30
        )
        result.update(summary("closed", samples(fleet)))
        result["messages"] = load.ledger.committed_count
        result.update(load.ledger.check())
    return result


TARGETS = {
    "rss_idle_median_mb": ("<=", 40.0),
    "session_kib": ("<=", 64.0),
    "lost": ("<=", 0),
    "duplicated": ("<=", 0),
    "out_of_order": ("<=", 0),
}


def report(r: dict[str, Any], out: TextIO) -> None:
    rows = [
        ("start", f"{r['start_seconds']:.1f} s", f"{r['start_per_qm_seconds']:.2f} s per QM", ""),
        ("resident memory, idle (median)", f"{r['rss_idle_median_mb']:.1f} MB",
         f"Pss {r['pss_idle_median_mb']:.1f} MB", f"max {r['rss_idle_max_mb']:.1f} MB"),
        ("resident memory, busy (median)", f"{r['rss_busy_median_mb']:.1f} MB",
         f"Pss {r['pss_busy_median_mb']:.1f} MB", f"max {r['rss_busy_max_mb']:.1f} MB"),
        ("file descriptors idle / busy", f"{r['fds_idle_median']:.0f} / {r['fds_busy_median']:.0f}",
         "median", ""),
        ("peer sessions busy", f"{r['sessions_busy_median']:.0f}", "median",
         f"max {r['sessions_busy_max']}"),
        ("memory per peer session", f"{r['session_kib']:.1f} KiB",
         f"{r['sessions_opened']} sessions", "anonymous RSS growth / sessions opened"),
        ("delivered fleet-wide", f"{r['delivered_msgs_per_s']:,.0f} msg/s",
         f"committed {r['committed_msgs_per_s']:,.0f} msg/s",
         f"all received {r['throughput_tail_s']:.1f} s after, outgoing queues empty "
         f"{r['throughput_settled_s']:.1f} s after; CPU: daemons "
         f"{r['throughput_daemons_cores']:.2f} cores, bench {r['throughput_bench_cores']:.2f}"),
        *[
            (f"commit -> receive, {hops} hop(s)", f"p50 {v['p50_ms']:.1f} ms",
             f"p99 {v['p99_ms']:.1f} ms", f"{v['count']} messages")
            for hops, v in r["latency_by_hops"].items()
        ],
        ("drain after the gate is back", f"{r['drain_after_gate_s']:.1f} s",
         f"{r['drain_waiting_messages']} waiting",
         f"all received after {r['drain_received_s']:.1f} s, then outgoing queues empty"),
        ("idle sessions closed", f"{r['idle_close_s']:.1f} s after the last message",
         f"RSS {r['rss_closed_median_mb']:.1f} MB", f"fds {r['fds_closed_median']:.0f}"),
        ("exactly once", f"{r['messages']:,} messages",
         f"lost {r['lost']}, duplicated {r['duplicated']}",
         f"out of order {r['out_of_order']}, unexpected {r['unexpected']}"),
    ]  # fmt: skip
    title = (
        f"qmgr fleet benchmark: {r['qms']} queue managers in {r['sites']} sites "
        f"({r['network']}), {os.cpu_count()} cores"
    )
    print_table(title, rows, out, ("measure", "result", "", ""))
    for figure, met in r["targets"].items():
        print(f"  target {figure} {TARGETS[figure][0]} {TARGETS[figure][1]}: "
              f"{'met' if met else 'NOT met'}", file=out)  # fmt: skip


def main() -> None:
    parser = script_parser(__doc__)
    add = parser.add_argument
    add("--qms", type=int, default=100, help="queue managers in all")
    add("--sites", type=int, default=10, help="sites (each gets --qms / --sites)")
    add("--network", choices=["namespaces", "loopback"], help="default: namespaces if root")
    add("--seconds", type=float, default=20.0, help="length of the throughput phase")
    add("--latency-seconds", type=float, default=10.0)
    add("--latency-rate", type=float, default=20.0, help="transactions/s, fleet-wide")
    add("--outage", type=float, default=5.0, help="seconds gate s0g1 stays down")
    add("--idle-timeout", type=float, default=15.0, help="peers.idle_timeout of every QM")
    add_run_options(parser, "the stores go", "the stores and the daemons' logs")
    args = parser.parse_args()
    if args.qms % args.sites or args.qms // args.sites < 3:
        parser.error("--qms must be a multiple of --sites, with at least 3 per site")
    result = run_in_workdir(args, "stores and logs", lambda workdir: run(args, workdir))
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
    result["targets"] = {
        figure: (result[figure] <= bound) for figure, (_, bound) in TARGETS.items()
    }
    publish(args, result, report)


if __name__ == "__main__":
    main()
