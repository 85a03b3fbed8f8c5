"""Benchmark of the delivery-outcome machinery on one store, without a daemon.

Run from the repository root::

    .venv/bin/python bench/outcomes.py [--messages 200000] [--json]

Prints, with ``durable=False`` (the CPU cost alone):

* **trace scan**: how many stored messages ``qmgr trace`` searches per second
  (``Store.scan_messages`` with the tracer's test, in steps of 20,000, as the
  daemon runs it), and the time of one step;
* **expiry**: how many expired messages the expiry step finds and removes per
  second (``Expiry.step`` and the writes of its units, 512 per step, with no
  acknowledgments asked), and how long a step over an index of that many due
  messages takes to read;
* **sends with reports**: transactional sends of 100 messages per commit
  through the core and the store, as a ratio of the same sends asking for an
  acknowledgment of arrival and receipt, a dead-letter journal level and a
  time to be received (each then writes its acknowledgment and its deadline).

Each figure is the median of 3 runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import storage
from qmgr.core.engine import QueueManagerCore
from qmgr.core.trace import Tracer
from wire import MessageProperties

BODY = b"x" * 256


def _core(path: Path) -> tuple[storage.Store, QueueManagerCore]:
    store = storage.Store(path, durable=False, initial_map_size=1 << 30)
    core = QueueManagerCore(store)
    store.commit(core.queues.system_queue_units(1.0), now=1.0)
    for name, tx in (("q", True), ("admin", False)):
        core.queues.created(
            store.commit([core.queues.create(name, wall=1.0, transactional=tx)], now=1.0)[0]
        )
    return store, core


def _reserve(store: storage.Store, core: QueueManagerCore) -> None:
    unit = core.ordinal_reservation()
    if unit is not None:
        core.ordinals_reserved(unit, store.commit([unit], now=1.0)[0])


def trace_scan(messages: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store, core = _core(Path(tmp) / "s")
        queue = core.queue("q").queue_id
        guid = uuid.uuid4()
        for start in range(0, messages, 5000):
            ops = [
                storage.AppendMessage(
                    queue, MessageProperties(body=BODY, source_qm=guid, ordinal=i).raw, 0, 256
                )
                for i in range(start, min(messages, start + 5000))
            ]
            store.commit([storage.Unit(tuple(ops))], now=1.0)
        tracer = Tracer(store)
        select = tracer.select(tracer.key(guid, messages // 2))
        left = tracer.queues()
        steps = 0
        started = time.perf_counter()
        while left:
            _, left = store.scan_messages(left, select=select, limit=1000, visits=20_000)
            steps += 1
        elapsed = time.perf_counter() - started
        store.close()
    return messages / elapsed, elapsed / steps * 1000


def expiry(messages: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store, core = _core(Path(tmp) / "s")
        queue = core.queue("q").queue_id
        payload = MessageProperties(body=BODY, transactional=True).raw
        for start in range(0, messages, 5000):
            ops = [
                storage.AppendMessage(queue, payload, 0, 256, deadline=10.0 + i)
                for i in range(start, min(messages, start + 5000))
            ]
            store.commit([storage.Unit(tuple(ops))], now=1.0)
        started = time.perf_counter()
        first = None
        removed = 0
        while True:
            begun = time.perf_counter()
            step = core.expiry.step(1e9, 512)
            if first is None:
                first = time.perf_counter() - begun
            outcomes = store.commit(step.units, now=1.0)
            for message, outcome in zip(step.messages, outcomes, strict=True):
                core.expiry.done(message, outcome)
            removed += len(step.units)
            if not step.more:
                break
        elapsed = time.perf_counter() - started
        store.close()
    assert removed == messages, removed
    return messages / elapsed, (first or 0.0) * 1000


def sends(reports: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store, core = _core(Path(tmp) / "s")
        _reserve(store, core)
        options = (
            {"acknowledge": 0x0F, "admin_queue": "admin", "journal": 1, "time_to_be_received": 3600}
            if reports
            else {}
        )
        message = MessageProperties(body=BODY, destination="q", **options)  # type: ignore[arg-type]
        started = time.perf_counter()
        for index in range(100):
            tx = core.begin(None, index, 1.0)
            for _ in range(100):
                core.prepare_send(message, tx=tx, now=1.0, wall=1.0)
            unit = core.commit(tx, wall=1.0)
            core.commit_done(tx, unit, store.commit([unit], now=1.0)[0])
            _reserve(store, core)
        elapsed = time.perf_counter() - started
        store.close()
    return 10_000 / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scans = [trace_scan(args.messages) for _ in range(3)]
    expiries = [expiry(args.messages // 4) for _ in range(3)]
    plain = statistics.median(sends(False) for _ in range(3))
    reported = statistics.median(sends(True) for _ in range(3))
    figures = {
        "trace_scan_messages_per_s": statistics.median(s[0] for s in scans),
        "trace_scan_step_ms": statistics.median(s[1] for s in scans),
        "expiry_messages_per_s": statistics.median(e[0] for e in expiries),
        "expiry_first_step_ms": statistics.median(e[1] for e in expiries),
        "sends_plain_msg_per_s": plain,
        "sends_with_reports_msg_per_s": reported,
        "sends_with_reports_ratio": reported / plain,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"delivery outcomes, {args.messages:,} stored messages, durable=False, median of 3")
    print(
        f"  trace scan           {figures['trace_scan_messages_per_s']:>12,.0f} messages/s"
        f"  ({figures['trace_scan_step_ms']:.1f} ms per step of 20,000)"
    )
    print(
        f"  expiry               {figures['expiry_messages_per_s']:>12,.0f} messages/s"
        f"  (first step of 512: {figures['expiry_first_step_ms']:.1f} ms)"
    )
    print(f"  sends, no reports    {plain:>12,.0f} msg/s")
    print(f"  sends with reports   {reported:>12,.0f} msg/s  ({reported / plain:.2f} x)")


if __name__ == "__main__":
    main()
