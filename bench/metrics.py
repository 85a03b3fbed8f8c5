"""What a scrape of ``/metrics`` costs: with many queues, and on a busy daemon.

Run::

    .venv/bin/python bench/metrics.py [--queues 10000] [--scrapes 20] [--data-dir DIR]

1. **Many queues**: a store with ``--queues`` queues made as ``qmgr queue
   create`` makes them (each with its journal and its two subqueues: four
   series per queue in every per-queue family), a message in each. First
   the daemon's collector over it in this process: the median and the worst
   time of one scrape's body (the collector reading the store and the core,
   the exposition writing it) in both formats, its size, and the part of it
   spent on the event loop; then a real daemon on that store, scraped over
   HTTP. The first scrape is shown apart: it writes every queue's lines,
   which later scrapes only fill in (until a queue is created or deleted).
   Target: under 200 ms with 10,000 queues.
2. **A real daemon** (``python -m qmgr serve``) with a few queues, scraped
   over HTTP ``--scrapes`` times back to back: the wall time of a scrape, and
   the daemon's CPU time per scrape (from ``/proc``), which is what scraping
   once a second takes from the daemon, as a share of one core.

The cost of scraping while clients work is measured by ``bench/local.py
--scrape 1`` against a run without it.
"""

from __future__ import annotations

import http.client
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import trio
from _command import script_parser
from _daemon import CLOCK_TICKS, Daemon, fresh_workdir
from _metrics_sources import standalone_sources
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import choose_encoder

import storage
from qmgr.client import connect
from qmgr.core.engine import QueueManagerCore
from qmgr.server.http.exposition import Exposition
from qmgr.server.http.metrics import QueueManagerCollector

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
BODY = b"x" * 100


def registry_families(registry: CollectorRegistry, accept: str) -> bytes:
    encoder, _ = choose_encoder(accept)
    return encoder(registry)


def make_queues(directory: Path, count: int) -> None:
    """A store with ``count`` queues made as ``qmgr queue create`` makes them, and a
    message in each (so that each has an oldest message to read)."""
    with storage.Store(directory, initial_map_size=1 << 26, durable=False) as store:
        core = QueueManagerCore(store)
        now = time.time()
        store.commit(core.queues.system_queue_units(now), now=now)
        started = time.perf_counter()
        for first in range(0, count, 500):
            units = [
                core.queues.create(f"queue-{i:05d}", transactional=True, wall=now)
                for i in range(first, min(first + 500, count))
            ]
            appends = [
                storage.Unit(
                    (storage.AppendMessage(core.queues.created(o).queue_id, BODY, 0, 100),)
                )
                for o in store.commit(units, now=now)
            ]
            store.commit(appends, now=now)
        made = time.perf_counter() - started
        records = len(store.list_queues())
    print(f"{count:,} queues ({records:,} queue records) made in {made:.1f} s")


def in_process(directory: Path, rounds: int) -> None:
    """The scrape's body written in this process, timed, in both formats."""
    with storage.Store(directory, initial_map_size=1 << 26, durable=False) as store:
        sources = standalone_sources(store, directory)
        collector = QueueManagerCollector(sources)
        registry = CollectorRegistry()
        registry.register(collector)
        ProcessCollector(registry=registry)
        exposition = Exposition(registry, collector)
        started = time.perf_counter()
        trio.run(exposition.scrape, "")
        first = time.perf_counter() - started
        print(
            f"  in process, the first scrape (the lines of every queue made) {first * 1000:.1f} ms"
        )
        for accept, label in (("", "Prometheus text"), (OPENMETRICS, "OpenMetrics")):
            times = []
            on_loop = []
            size = 0
            for _ in range(rounds):
                started = time.perf_counter()
                body, _ = trio.run(exposition.scrape, accept)
                times.append(time.perf_counter() - started)
                size = len(body)
                # The share of the scrape spent on the event loop (the rest is on
                # a worker thread): the snapshot and the registry's families.
                started = time.perf_counter()
                registry_families(registry, accept)
                collector.snapshot()
                on_loop.append(time.perf_counter() - started)
            print(
                f"  in process, {label:16} median {statistics.median(times) * 1000:6.1f} ms, "
                f"worst {max(times) * 1000:6.1f} ms, {size / 1e6:.1f} MB; on the event "
                f"loop {statistics.median(on_loop) * 1000:.1f} ms"
            )


def scrape_over_http(daemon: Daemon, scrapes: int, accept: str = "") -> tuple[list[float], float]:
    """``scrapes`` scrapes back to back: the wall time of each and the daemon's
    CPU seconds per scrape."""
    client = http.client.HTTPConnection("127.0.0.1", daemon.http_port, timeout=30)
    walls = []
    cpu_before = daemon.cpu_seconds()
    for _ in range(scrapes):
        started = time.perf_counter()
        client.request("GET", "/metrics", headers={"Accept": accept} if accept else {})
        response = client.getresponse()
        response.read()
        walls.append(time.perf_counter() - started)
        assert response.status == 200, response.status
    cpu = (daemon.cpu_seconds() - cpu_before) / scrapes
    client.close()
    return walls, cpu


def daemon_with_many_queues(workdir: Path, directory: Path, rounds: int) -> None:
    daemon = Daemon(directory, workdir / "many.log")
    try:
        [first], _ = scrape_over_http(daemon, 1)
        print(f"  over HTTP,  the first scrape {first * 1000:.1f} ms")
        for accept, label in (("", "Prometheus text"), (OPENMETRICS, "OpenMetrics")):
            walls, _ = scrape_over_http(daemon, rounds, accept)
            print(
                f"  over HTTP,  {label:16} median {statistics.median(walls) * 1000:6.1f} ms, "
                f"worst {max(walls) * 1000:6.1f} ms"
            )
        changed = []
        with connect(daemon.address) as qm:
            for number in range(rounds):
                qm.create_queue(f"new-{number}")
                [wall], _ = scrape_over_http(daemon, 1)
                changed.append(wall)
        print(
            f"  over HTTP,  a queue created before each scrape: median "
            f"{statistics.median(changed) * 1000:.1f} ms, worst {max(changed) * 1000:.1f} ms"
        )
    finally:
        daemon.stop()


def daemon_with_few_queues(workdir: Path, scrapes: int) -> None:
    daemon = Daemon(workdir / "store", workdir / "daemon.log")
    try:
        with connect(daemon.address) as qm:
            for name in ("send", "receive", "latency"):
                qm.create_queue(name, transactional=True)
        walls, cpu = scrape_over_http(daemon, scrapes)
    finally:
        daemon.stop()
    print(
        f"a daemon with 3 queues, {scrapes} scrapes over HTTP: median "
        f"{statistics.median(walls) * 1000:.2f} ms each, daemon CPU {cpu * 1000:.2f} ms per "
        f"scrape ({cpu * 100:.2f}% of a core at one scrape a second; /proc counts in "
        f"{1000 / CLOCK_TICKS:.0f} ms ticks, hence the many scrapes)"
    )


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5, help="scrapes timed per format")
    parser.add_argument("--scrapes", type=int, default=200, help="scrapes of the real daemon")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    args = parser.parse_args()
    workdir = fresh_workdir(args.data_dir)
    try:
        many = workdir / "many"
        make_queues(many, args.queues)
        in_process(many, args.rounds)
        daemon_with_many_queues(workdir, many, args.rounds)
        daemon_with_few_queues(workdir, args.scrapes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
