"""A streaming query from one queue to another, run as its own process by the crash test.

    python tests/spark/stream_driver.py ENDPOINT SOURCE SINK CHECKPOINT [--max N]

Each message's body ``b`` becomes ``transform(b)``: the upper-cased body, a
bar and the first 12 hex digits of its SHA-256. The query runs until the
process is killed; it prints ``started`` once the query is running.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys


def transform(body: bytes) -> bytes:
    """What the query makes of one body (the test checks the sink against it)."""
    return body.upper() + b"|" + hashlib.sha256(body).hexdigest()[:12].encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("source")
    parser.add_argument("sink")
    parser.add_argument("checkpoint")
    parser.add_argument("--max", default="2000", help="maxMessagesPerTrigger")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable

    from pyspark.sql import SparkSession

    from qmgr.spark import QueueDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("qmgr-crash-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(QueueDataSource)
    query = (
        spark.readStream.format("qmgr")
        .option("endpoint", args.endpoint)
        .option("queue", args.source)
        .option("maxMessagesPerTrigger", args.max)
        .load()
        .selectExpr(
            "cast(concat(upper(cast(body as string)), '|', substr(sha2(body, 256), 1, 12))"
            " as binary) as body",
            "label",
        )
        .writeStream.format("qmgr")
        .option("endpoint", args.endpoint)
        .option("queue", args.sink)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
