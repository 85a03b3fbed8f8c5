"""The shipped pipelines, on this process's Spark: the totals they keep are the orders' totals."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from helpers import DaemonProcess

from pipelines import delivery_report, feeder, order_totals
from qmgr.client import Journal, connect
from wire import MessageClass

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def expected_totals(bodies: list[bytes]) -> tuple[dict[str, tuple[int, float]], int]:
    """Orders and total per customer, and how many events were not valid orders."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    rejected = 0
    for body in bodies:
        try:
            event = json.loads(body)
        except ValueError:
            event = None
        if (
            not isinstance(event, dict)
            or not isinstance(event.get("customer"), str)
            or not isinstance(event.get("amount"), float | int)
        ):
            rejected += 1
            continue
        totals[event["customer"]][0] += 1
        totals[event["customer"]][1] += event["amount"]
    return {c: (int(n), round(t, 2)) for c, (n, t) in totals.items()}, rejected


def latest(qm_address: str, queue: str) -> dict[str, dict[str, object]]:
    with connect(qm_address) as qm:
        updates = [json.loads(m.body) for m in qm.peek_range(queue, max=100_000)]
    return {str(u.get("customer")): u for u in updates}  # later updates win


def test_order_totals_and_delivery_report(
    spark: SparkSession, daemon: DaemonProcess, tmp_path: Path
) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    feeder.feed(daemon.address, 600, customers=7, seed=3)
    query = order_totals.start(spark, daemon.address, checkpoint, available_now=True)
    query.awaitTermination(120)
    feeder.feed(daemon.address, 300, customers=7, seed=4)  # a second run goes on
    query = order_totals.start(spark, daemon.address, checkpoint, available_now=True)
    query.awaitTermination(120)
    # Spark commits a micro-batch to its source when it plans the next one, so the
    # last batch of a run leaves the queue at the next run's start: a run with
    # nothing new to read removes it.
    query = order_totals.start(spark, daemon.address, checkpoint, available_now=True)
    query.awaitTermination(120)

    with connect(daemon.address) as qm:
        deadline = time.monotonic() + 30
        while qm.peek_range(order_totals.ORDERS) and time.monotonic() < deadline:
            time.sleep(0.05)  # the reader removes on a thread of its own
        assert qm.peek_range(order_totals.ORDERS) == []
        journal = [m.body for m in qm.peek_range(f"{order_totals.ORDERS};journal", max=10_000)]
        assert qm.transactions("spark:") == []
    assert len(journal) == 900
    totals, rejected = expected_totals(journal)
    found = latest(daemon.address, order_totals.TOTALS)
    assert {c: (u["orders"], u["total"]) for c, u in found.items()} == totals
    assert rejected > 0
    assert latest(daemon.address, order_totals.REJECTED)["None"]["orders"] == rejected

    rows = delivery_report.deliveries(spark, daemon.address, ["orders"]).collect()
    assert sum(r.delivered for r in rows) == 900
    assert delivery_report.dead_letters(spark, daemon.address).count() == 0

    # Messages that asked for dead-lettering, purged: the report counts them by
    # dead-letter queue and class; a plain purged message leaves nothing.
    with connect(daemon.address) as qm:
        qm.create_queue("scratch")
        qm.create_queue("scratch-tx", transactional=True)
        for _ in range(2):
            qm.send("scratch", b"p", journal=Journal.DEADLETTER)
        qm.send("scratch", b"plain")
        qm.send("scratch-tx", b"t", journal=Journal.DEADLETTER)
        qm.purge_queue("scratch")
        qm.purge_queue("scratch-tx")
    dead = delivery_report.dead_letters(spark, daemon.address).collect()
    purged = f"0x{MessageClass.NACK_Q_PURGED:04X}"
    assert [(r.queue, r["class"], r.name, r.messages) for r in dead] == [
        ("system$;deadletter", purged, "NACK_Q_PURGED", 2),
        ("system$;deadxact", purged, "NACK_Q_PURGED", 1),
    ]
