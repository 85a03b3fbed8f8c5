"""One queue read on three queue managers at once (``endpoints``), in this process's Spark.

Three real queue managers each hold a queue ``orders`` with messages of
their own. A batch read takes a snapshot of all three; a streaming query
reads the three queues into one queue on the first queue manager, is
stopped and started again from its checkpoint while more messages arrive
here and there, stops when one of the queue managers crashes, and goes on
once it is back. In the end every message is in the sink exactly once,
every source queue is empty, and no transaction is left in doubt.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import DaemonProcess

from qmgr.client import connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

SOURCE = "orders"
SINK = "results"


@pytest.fixture
def daemons(daemon_factory: Callable[..., DaemonProcess]) -> list[DaemonProcess]:
    """Three queue managers with ``orders``; the first also has ``results``."""
    started = []
    for number in (1, 2, 3):
        daemon = daemon_factory(name=f"qm-{number}")
        with connect(daemon.address) as qm:
            qm.create_queue(SOURCE, transactional=True)
            if number == 1:
                qm.create_queue(SINK, transactional=True)
        started.append(daemon)
    return started


@pytest.fixture
def fleet(daemons: list[DaemonProcess]) -> list[str]:
    """The addresses of the three queue managers."""
    return [daemon.address for daemon in daemons]


def fill(address: str, prefix: str, count: int) -> list[str]:
    bodies = [f"{prefix}-{i}" for i in range(count)]
    with connect(address) as qm, qm.begin() as tx:
        for body in bodies:
            tx.send(SOURCE, body, label=prefix)
    return bodies


def depth(address: str, queue: str) -> int:
    with connect(address) as qm:
        return next(q.depth for q in qm.list_queues() if q.name == queue)


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def start_query(spark: SparkSession, fleet: list[str], checkpoint: Path) -> StreamingQuery:
    """``orders`` on every queue manager -> upper-case bodies -> ``results`` on the first."""
    return (
        spark.readStream.format("qmgr")
        .options(endpoints=",".join(fleet), queue=SOURCE)
        .options(maxMessagesPerTrigger="60", partitions="2")
        .load()
        .selectExpr("upper(cast(body as string)) as body", "label")
        .writeStream.format("qmgr")
        .options(endpoint=fleet[0], queue=SINK)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def end_offset(query: StreamingQuery) -> dict[str, Any]:
    progress = [p for p in query.recentProgress if p["numInputRows"]][-1]
    end = progress["sources"][0]["endOffset"]
    found: dict[str, Any] = json.loads(end) if isinstance(end, str) else dict(end)
    return found


def test_a_stream_reads_a_queue_on_three_queue_managers_exactly_once(
    spark: SparkSession, daemons: list[DaemonProcess], fleet: list[str], tmp_path: Path
) -> None:
    bodies = [
        body for n, address in enumerate(fleet) for body in fill(address, f"qm{n}", 90 + 45 * n)
    ]
    snapshot = (
        spark.read.format("qmgr")
        .options(endpoints=",".join(fleet), queue=SOURCE, partitions="2")
        .load()
    )
    assert snapshot.rdd.getNumPartitions() == 6  # two per queue manager
    rows = snapshot.select("body", "lookup_id").collect()
    assert Counter(bytes(r.body).decode() for r in rows) == Counter(bodies)

    checkpoint = tmp_path / "checkpoint"
    query = start_query(spark, fleet, checkpoint)
    try:
        query.processAllAvailable()
        bodies += fill(fleet[1], "qm1-more", 70)  # one queue manager gets more meanwhile
        query.processAllAvailable()
        rows_per_batch = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        offsets = end_offset(query)
    finally:
        query.stop()
    assert len(rows_per_batch) >= 3
    # Each queue manager has its own place in the offsets, by GUID, with its address.
    assert sorted(entry["endpoint"] for entry in offsets.values()) == sorted(fleet)
    assert all(set(entry) == {"endpoint", "queue_id", "lookup_id"} for entry in offsets.values())

    # Started again from the checkpoint: each queue manager goes on where it was.
    bodies += fill(fleet[2], "qm2-more", 40) + fill(fleet[0], "qm0-more", 25)
    query = start_query(spark, fleet, checkpoint)
    try:
        query.processAllAvailable()
        daemons[2].kill()  # a crash: the next trigger cannot reach it
        bodies += fill(fleet[1], "qm1-late", 20)
        with pytest.raises(Exception, match=f"cannot connect to the queue manager at {fleet[2]}"):
            query.awaitTermination(60)
    finally:
        query.stop()

    # Back again: nothing was lost, and nothing is read twice.
    daemons[2].restart()
    bodies += fill(fleet[2], "qm2-back", 15)
    query = start_query(spark, fleet, checkpoint)
    try:
        query.processAllAvailable()
        # The last micro-batch leaves its queues at the next trigger.
        wait_for(lambda: all(depth(address, SOURCE) == 0 for address in fleet))
    finally:
        query.stop()

    with connect(fleet[0]) as qm:
        found = qm.peek_range(SINK, max=10_000)
        assert qm.transactions("spark:") == []
    assert Counter(m.text for m in found) == Counter(body.upper() for body in bodies)
    assert len(found) == len(bodies) == 90 + 135 + 180 + 70 + 40 + 25 + 20 + 15


def test_fleet_mistakes_fail_at_planning(
    spark: SparkSession, fleet: list[str], tmp_path: Path
) -> None:
    def read(**options: str) -> Any:
        return spark.read.format("qmgr").options(queue=SOURCE, **options).load().collect()

    port = fleet[0].rpartition(":")[2]
    with pytest.raises(Exception, match="names the same queue manager twice"):
        read(endpoints=f"{fleet[0]},{fleet[1]},localhost:{port}")
    with connect(fleet[2]) as qm:
        qm.delete_queue(SOURCE)
    with pytest.raises(
        Exception, match=f"there is no queue 'orders' on the queue manager at {fleet[2]}"
    ):
        read(endpoints=",".join(fleet))
    rows = spark.createDataFrame([("a",)], "body string")
    with pytest.raises(Exception, match="'endpoints' is for reads; a write goes through one"):
        rows.write.format("qmgr").mode("append").options(
            endpoints=",".join(fleet), queue=SINK
        ).save()
