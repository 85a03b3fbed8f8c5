"""Streaming reads and writes in this process's Spark: removal, limits, replays, leftovers."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import DaemonProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from qmgr.client import QueueManager

#: The PySpark version these tests run on, as (major, minor).
SPARK_VERSION = tuple(int(part) for part in version("pyspark").split(".")[:2])


def fill(qm: QueueManager, queue: str, count: int, start: int = 0) -> list[str]:
    bodies = [f"message {i}" for i in range(start, start + count)]
    with qm.begin() as tx:
        for body in bodies:
            tx.send(queue, body, label=f"label {body}")
    return bodies


def depth(qm: QueueManager, queue: str) -> int:
    return next(q.depth for q in qm.list_queues() if q.name == queue)


def wait_for(condition: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def start_query(
    spark: SparkSession,
    address: str,
    source: str,
    sink: str,
    checkpoint: Path,
    **options: str,
) -> StreamingQuery:
    """``source`` -> upper-case bodies -> ``sink``, exactly once."""
    return (
        spark.readStream.format("qmgr")
        .options(endpoint=address, queue=source, **options)
        .load()
        .selectExpr("upper(cast(body as string)) as body", "label")
        .writeStream.format("qmgr")
        .options(endpoint=address, queue=sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def process_all(query: StreamingQuery) -> StreamingQuery:
    """Let ``query`` process what its source holds, then stop it."""
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


@pytest.fixture
def queues(qm: QueueManager, queue_name: str) -> tuple[str, str]:
    source, sink = f"{queue_name}-in", f"{queue_name}-out"
    qm.create_queue(source, transactional=True)
    qm.create_queue(sink, transactional=True)
    return source, sink


@pytest.fixture
def stream(
    spark: SparkSession, shared_daemon: DaemonProcess, queues: tuple[str, str], tmp_path: Path
) -> Callable[..., StreamingQuery]:
    """``stream(**options)`` starts :func:`start_query` from the test's ``queues``,
    its checkpoint in the test's ``tmp_path``."""
    source, sink = queues

    def start(**options: str) -> StreamingQuery:
        return start_query(spark, shared_daemon.address, source, sink, tmp_path, **options)

    return start


def test_stream_moves_messages_and_removes_them(
    qm: QueueManager, queues: tuple[str, str], stream: Callable[..., StreamingQuery]
) -> None:
    source, sink = queues
    # Before Spark 4.2, Spark asks a Python source for its first micro-batch's
    # end without saying where it starts, so the limit applies from the second.
    first = 250 if SPARK_VERSION >= (4, 2) else 10
    bodies = fill(qm, source, first)
    query = stream(maxMessagesPerTrigger="100")
    try:
        if first < 250:
            query.processAllAvailable()
            bodies += fill(qm, source, 250 - first, start=first)
        query.processAllAvailable()
        # The last micro-batch leaves the source at the next trigger.
        wait_for(lambda: depth(qm, source) == 0)
        rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert sum(rows) == 250
        assert max(rows) <= 100
        assert len(rows) >= 3
        more = fill(qm, source, 30, start=250)
        query.processAllAvailable()
        wait_for(lambda: depth(qm, source) == 0)
    finally:
        query.stop()
    found = qm.peek_range(sink, max=1000)
    assert Counter((m.text, m.label) for m in found) == Counter(
        (b.upper(), f"label {b}") for b in bodies + more
    )
    assert qm.transactions(f"spark:{query.id}:") == []


def test_stream_without_removal_keeps_the_source(
    qm: QueueManager, queues: tuple[str, str], stream: Callable[..., StreamingQuery]
) -> None:
    source, sink = queues
    fill(qm, source, 40)
    query = stream(removeOnCommit="false")
    try:
        query.processAllAvailable()
        # A micro-batch after the first: planning it commits the first to the
        # source, which is when removal would take the first 40 away.
        fill(qm, source, 10, start=40)
        query.processAllAvailable()
    finally:
        query.stop()
    assert depth(qm, source) == 50
    assert depth(qm, sink) == 50


def test_replayed_batch_writes_nothing_twice(
    qm: QueueManager,
    queues: tuple[str, str],
    stream: Callable[..., StreamingQuery],
    tmp_path: Path,
) -> None:
    source, sink = queues
    bodies = fill(qm, source, 50)
    options = {"removeOnCommit": "false", "maxMessagesPerTrigger": "20"}
    process_all(stream(**options))
    assert depth(qm, sink) == 50
    # Forget that the last micro-batch was committed, as a crash between the sink's
    # commit and Spark's commit log would: Spark runs it again with the same id.
    commits = sorted((tmp_path / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last = commits[-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)

    again = process_all(stream(**options))
    replayed = [p for p in again.recentProgress if p["batchId"] == int(last.name)]
    assert replayed
    assert replayed[0]["numInputRows"] > 0
    assert Counter(m.text for m in qm.peek_range(sink, max=1000)) == Counter(
        b.upper() for b in bodies
    )


def test_prepared_leftovers_of_a_query_are_aborted(
    qm: QueueManager, queues: tuple[str, str], stream: Callable[..., StreamingQuery]
) -> None:
    source, sink = queues
    first = fill(qm, source, 10)
    query = stream()
    try:
        query.processAllAvailable()
        # What a driver that died between its tasks' prepare and its commit leaves behind.
        xid = f"spark:{query.id}:0:7:0123456789ab"
        tx = qm.begin(xid=xid)
        tx.send(sink, b"never to be seen")
        tx.prepare()
        assert [t.xid for t in qm.transactions(f"spark:{query.id}:")] == [xid]
        second = fill(qm, source, 10, start=10)
        query.processAllAvailable()
        wait_for(lambda: qm.transactions(f"spark:{query.id}:") == [])
    finally:
        query.stop()
    assert Counter(m.text for m in qm.peek_range(sink, max=1000)) == Counter(
        b.upper() for b in first + second
    )


def test_a_queue_created_again_is_a_clear_error(
    qm: QueueManager, queues: tuple[str, str], stream: Callable[..., StreamingQuery]
) -> None:
    source, sink = queues
    fill(qm, source, 5)
    process_all(stream())
    qm.delete_queue(source)
    qm.create_queue(source, transactional=True)
    fill(qm, source, 5)
    again = stream()
    with pytest.raises(Exception, match="was deleted and created again"):
        again.awaitTermination(30)
    again.stop()
    assert depth(qm, sink) == 5
