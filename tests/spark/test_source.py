"""The data source's planning (``qmgr.spark._source``): a wrong or missing option, a queue
manager out of reach or a missing queue fail at planning."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from helpers import DaemonProcess, free_port

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from qmgr.client import QueueManager

#: Planning fails within this many seconds, whatever is wrong.
QUICK = 15.0


def fails_quickly(action: Callable[[], Any], message: str) -> str:
    started = time.monotonic()
    with pytest.raises(Exception) as info:  # Spark wraps the error: its text matters
        action()
    elapsed = time.monotonic() - started
    text = str(info.value)
    assert message in text, text
    assert elapsed < QUICK, f"took {elapsed:.1f} s"
    return text


def read(spark: SparkSession, **options: str) -> DataFrame:
    return spark.read.format("qmgr").options(**options).load()


def test_read_without_endpoint(spark: SparkSession) -> None:
    text = fails_quickly(
        lambda: read(spark, queue="orders").collect(), "the option 'endpoint' is required"
    )
    assert "qmgr data source:" in text


def test_read_without_queue(spark: SparkSession, shared_daemon: DaemonProcess) -> None:
    fails_quickly(
        lambda: read(spark, endpoint=shared_daemon.address).collect(),
        "the option 'queue' is required to read",
    )


def test_wrong_option_values(spark: SparkSession, shared_daemon: DaemonProcess) -> None:
    address = shared_daemon.address
    fails_quickly(
        lambda: read(spark, endpoint=address, queue="q", partitions="none").collect(),
        "'partitions' must be an integer",
    )
    fails_quickly(lambda: read(spark, endpoint="no-port", queue="q").collect(), "must be HOST:PORT")
    fails_quickly(
        lambda: read(spark, endpoint=address, queue="q", maxMessagePerTrigger="5").collect(),
        "did you mean 'maxMessagesPerTrigger'",
    )


def test_missing_queue(spark: SparkSession, shared_daemon: DaemonProcess, queue_name: str) -> None:
    fails_quickly(
        lambda: read(spark, endpoint=shared_daemon.address, queue=queue_name).collect(),
        f"there is no queue '{queue_name}'",
    )
    fails_quickly(
        lambda: (
            spark.readStream.format("qmgr")
            .options(endpoint=shared_daemon.address, queue=queue_name)
            .load()
            .writeStream.format("noop")
            .start()
            .awaitTermination(QUICK)
        ),
        f"there is no queue '{queue_name}'",
    )


def test_unreachable_queue_manager(spark: SparkSession) -> None:
    port = free_port()  # nothing listens there
    fails_quickly(
        lambda: read(spark, endpoint=f"127.0.0.1:{port}", queue="q").collect(),
        f"cannot connect to the queue manager at 127.0.0.1:{port}: connection refused",
    )


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung queue manager)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def test_queue_manager_that_does_not_answer(spark: SparkSession, silent_listener: int) -> None:
    started = time.monotonic()
    fails_quickly(
        lambda: read(
            spark, endpoint=f"127.0.0.1:{silent_listener}", queue="q", connectTimeout="1"
        ).collect(),
        "(within 1 s: the option 'connectTimeout')",
    )
    assert time.monotonic() - started < 10


def test_write_errors(
    spark: SparkSession, shared_daemon: DaemonProcess, qm: QueueManager, queue_name: str
) -> None:
    address = shared_daemon.address
    qm.create_queue(queue_name, transactional=True)
    plain = f"{queue_name}-plain"
    qm.create_queue(plain)
    bodies = spark.createDataFrame([("a",)], "body string")

    def write(df: DataFrame, mode: str = "append", **options: str) -> None:
        df.write.format("qmgr").mode(mode).options(endpoint=address, **options).save()

    fails_quickly(
        lambda: write(spark.createDataFrame([("a",)], "text string"), queue=queue_name),
        "needs a 'body' column",
    )
    fails_quickly(
        lambda: write(spark.createDataFrame([(1,)], "body int"), queue=queue_name),
        "the column 'body' is int; it must be binary or string",
    )
    fails_quickly(lambda: write(bodies), "the option 'queue' is required to write")
    fails_quickly(lambda: write(bodies, queue=f"{queue_name}-x"), "there is no queue")
    fails_quickly(lambda: write(bodies, queue=plain), "is not transactional")
    fails_quickly(lambda: write(bodies, "overwrite", queue=queue_name), "mode('append')")
    assert qm.peek_range(queue_name) == []
