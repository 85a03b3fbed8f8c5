"""Batch reads and writes through Spark: round trips, journals, dead letters, all or nothing."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import pytest
from helpers import DaemonProcess, drain, wait_until

from qmgr.client import TransactionStatus, connect
from wire import MessageClass

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from qmgr.client import Message, QueueManager


def read(spark: SparkSession, address: str, queue: str, **options: str) -> DataFrame:
    return spark.read.format("qmgr").options(endpoint=address, queue=queue, **options).load()


def as_text(correlation: bytes | None) -> str | None:
    if correlation is None:
        return None
    ordinal = int.from_bytes(correlation[16:], "little")
    return f"{{{uuid.UUID(bytes_le=correlation[:16])}}}\\{ordinal}"  # as MSMQ lays an id out


def as_row(message: Message) -> dict[str, object]:
    return {
        "lookup_id": message.lookup_id,
        "id": message.id,
        "label": message.label,
        "body": message.body,
        "correlation_id": as_text(message.correlation_id),
        "app_specific": message.app_specific,
        "priority": message.priority,
        "message_class": message.message_class,
        "source_qm": str(message.source_qm),
        "queue": message.queue,
    }


def collected(df: DataFrame) -> list[dict[str, object]]:
    rows = [row.asDict() for row in df.orderBy("lookup_id").collect()]
    for row in rows:
        row["body"] = bytes(row["body"])
        assert row.pop("sent_time") is not None
        assert row.pop("arrived_time") is not None
    return rows


@pytest.mark.parametrize("partitions", ["1", "3"])
def test_batch_read_is_a_snapshot_of_the_queue(
    spark: SparkSession,
    shared_daemon: DaemonProcess,
    qm: QueueManager,
    queue_name: str,
    partitions: str,
) -> None:
    qm.create_queue(queue_name, transactional=True)
    reply_to = uuid.uuid4().bytes + (42).to_bytes(4, "little")
    with qm.begin() as tx:
        for i in range(120):
            tx.send(
                queue_name,
                f"order {i}".encode() * (i % 7),
                label=f"label {i}",
                app_specific=i * 1000,
                correlation_id=reply_to if i % 3 == 0 else None,
            )
    qm.receive(queue_name)  # the first one is gone: ids no longer start at 1
    expected = [as_row(m) for m in qm.peek_range(queue_name, max=1000)]
    assert len(expected) == 119

    df = read(spark, shared_daemon.address, queue_name, partitions=partitions)
    assert df.rdd.getNumPartitions() == int(partitions)
    assert collected(df) == expected
    assert len(qm.peek_range(queue_name, max=1000)) == 119  # nothing was removed


def test_batch_read_of_an_empty_queue(
    spark: SparkSession, shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str
) -> None:
    qm.create_queue(queue_name)
    assert read(spark, shared_daemon.address, queue_name).count() == 0


def test_batch_read_of_journal_and_dead_letter_queues(
    spark: SparkSession,
    shared_daemon: DaemonProcess,
    daemon: DaemonProcess,
    qm: QueueManager,
    queue_name: str,
) -> None:
    address = shared_daemon.address
    qm.create_queue(queue_name, transactional=True, journal=True)
    for i in range(5):
        qm.send(queue_name, f"journaled {i}")
    for _ in range(3):
        assert qm.receive(queue_name) is not None
    journal = read(spark, address, f"{queue_name};journal").orderBy("lookup_id").collect()
    assert [bytes(r.body) for r in journal] == [f"journaled {i}".encode() for i in range(3)]

    # Messages from another queue manager to a queue that does not exist here: this
    # one keeps them in its dead-letter queues with the class that says why.
    missing = f"DIRECT=TCP:127.0.0.1:{shared_daemon.peer_port}\\private$\\{queue_name}-nowhere"
    marker = f"dead {uuid.uuid4()}"
    with connect(daemon.address) as other:
        other.send(missing, marker, transactional=False)
        other.send(missing, marker, transactional=True)
    dead_letter_queues = ["system$;deadletter", "system$;deadxact"]
    wait_until(
        lambda: all(
            any(body == marker.encode() for _, body in drain(address, queue))
            for queue in dead_letter_queues
        ),
        timeout=30,
    )
    for queue in dead_letter_queues:
        rows = read(spark, address, queue).where(f"cast(body as string) = '{marker}'").collect()
        assert [r.message_class for r in rows] == [int(MessageClass.NACK_BAD_DST_Q)]
        assert rows[0].queue == queue


def test_batch_write_round_trip(
    spark: SparkSession, shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str
) -> None:
    qm.create_queue(queue_name, transactional=True)
    guid = uuid.uuid4()
    rows = [
        (f"body {i}", f"label {i}", f"{{{guid}}}\\{i}" if i % 2 else None, i) for i in range(300)
    ]
    df = spark.createDataFrame(
        rows, "body string, label string, correlation_id string, app_specific int"
    ).repartition(3)
    df.write.format("qmgr").mode("append").options(
        endpoint=shared_daemon.address, queue=queue_name
    ).save()

    found = qm.peek_range(queue_name, max=1000)
    assert sorted((m.text, m.label, m.correlation_id, m.app_specific) for m in found) == sorted(
        (
            body,
            label,
            None if c is None else guid.bytes_le + int(c.split("\\")[1]).to_bytes(4, "little"),
            app,
        )
        for body, label, c, app in rows
    )
    assert all(m.transactional for m in found)
    assert qm.transactions("spark-batch:") == []

    # What a read gives can be written again: a copy of the queue.
    copy = f"{queue_name}-copy"
    qm.create_queue(copy, transactional=True)
    read(spark, shared_daemon.address, queue_name).write.format("qmgr").mode("append").options(
        endpoint=shared_daemon.address, queue=copy
    ).save()
    copied = qm.peek_range(copy, max=1000)
    assert sorted((m.body, m.label, m.correlation_id) for m in copied) == sorted(
        (m.body, m.label, m.correlation_id) for m in found
    )


def test_batch_write_destination_column(
    spark: SparkSession, shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str
) -> None:
    even, odd = f"{queue_name}-even", f"{queue_name}-odd"
    qm.create_queue(even, transactional=True)
    qm.create_queue(odd, transactional=True)
    df = spark.range(100).selectExpr(
        "cast(cast(id as string) as binary) as body",
        f"if(id % 2 = 0, '{even}', '{odd}') as destination",
    )
    df.write.format("qmgr").mode("append").option("endpoint", shared_daemon.address).save()
    assert sorted(int(m.text) for m in qm.peek_range(even, max=1000)) == list(range(0, 100, 2))
    assert sorted(int(m.text) for m in qm.peek_range(odd, max=1000)) == list(range(1, 100, 2))


def test_batch_write_whose_task_fails_leaves_nothing(
    spark: SparkSession, shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str
) -> None:
    from pyspark.sql.functions import col, udf

    qm.create_queue(queue_name, transactional=True)
    other = f"{queue_name}-other"
    qm.create_queue(other, transactional=True)

    @udf(returnType="string", useArrow=False)
    def body(value: int) -> str:
        if value == 2500:  # in the third of four partitions
            raise ValueError("this task fails")
        return f"row {value}"

    df = spark.range(0, 4000, numPartitions=4).select(
        body("id").alias("body"), (col("id") % 2).alias("parity")
    )
    df = df.selectExpr("body", f"if(parity = 0, '{queue_name}', '{other}') as destination")
    with pytest.raises(Exception, match="this task fails"):
        df.write.format("qmgr").mode("append").option("endpoint", shared_daemon.address).save()

    deadline = time.monotonic() + 10
    while qm.transactions("spark-batch:") and time.monotonic() < deadline:
        time.sleep(0.1)  # a task cancelled after the failure may still be ending
    assert qm.transactions("spark-batch:") == []
    assert qm.peek_range(queue_name) == []
    assert qm.peek_range(other) == []
    # The tasks that succeeded had prepared their transactions: the job aborted them.
    outcomes = qm.transactions("spark-batch:", resolved=True, limit=10_000)
    assert any(t.state == TransactionStatus.ABORTED for t in outcomes)


def test_batch_read_of_some_columns(
    spark: SparkSession, shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str
) -> None:
    qm.create_queue(queue_name, transactional=True)
    for i in range(10):
        qm.send(queue_name, f"only {i}", label=f"label {i}")
    df = (
        spark.read.format("qmgr")
        .schema("body BINARY, lookup_id BIGINT")
        .options(endpoint=shared_daemon.address, queue=queue_name)
        .load()
    )
    rows = df.orderBy("lookup_id").collect()
    assert df.columns == ["body", "lookup_id"]
    assert [bytes(r.body) for r in rows] == [f"only {i}".encode() for i in range(10)]
    with pytest.raises(Exception, match="a queue has no column 'size'"):
        spark.read.format("qmgr").schema("size INT").options(
            endpoint=shared_daemon.address, queue=queue_name
        ).load().collect()
