"""Batch job: delivery counts from a journal queue, and why messages were dead-lettered.

A queue created with a journal keeps a copy of every message taken off it in
``NAME;journal``; the queue manager keeps messages it could not deliver in
``system$;deadletter`` (non-transactional) and ``system$;deadxact``
(transactional), each with the MSMQ class that says why. Reading them is a
batch read: a snapshot that removes nothing. The report shows:

* messages delivered from each journaled queue (``--queue``, default
  ``orders``), per minute of arrival, with their bytes;
* dead letters per dead-letter queue and class (``NACK_BAD_DST_Q``, ...).

Local Spark::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python pipelines/delivery_report.py \\
        --endpoint 127.0.0.1:1802

A cluster: ``spark-submit --master spark://spark-master:7077 --py-files
dist/qmgr-spark.zip pipelines/delivery_report.py --endpoint qm.example.net:1802``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEAD_LETTER_QUEUES = ("system$;deadletter", "system$;deadxact")


def session(app: str) -> SparkSession:
    """The Spark session (``spark-submit`` says where; plain ``python`` runs local Spark)."""
    from qmgr.spark import spark_session

    return spark_session(app)


def queue(spark: SparkSession, endpoint: str, name: str) -> DataFrame:
    return spark.read.format("qmgr").option("endpoint", endpoint).option("queue", name).load()


def deliveries(spark: SparkSession, endpoint: str, queues: list[str]) -> DataFrame:
    """Messages delivered (taken off) each queue, per minute in which they arrived."""
    from pyspark.sql import functions as f

    frames = [queue(spark, endpoint, f"{name};journal") for name in queues]
    journal = frames[0]
    for frame in frames[1:]:
        journal = journal.unionByName(frame)
    return (
        journal.groupBy(
            f.regexp_replace("queue", ";journal$", "").alias("queue"),
            f.date_trunc("minute", "arrived_time").alias("arrived_minute"),
        )
        .agg(f.count(f.lit(1)).alias("delivered"), f.sum(f.length("body")).alias("bytes"))
        .orderBy("queue", "arrived_minute")
    )


def dead_letters(spark: SparkSession, endpoint: str) -> DataFrame:
    """Dead letters per dead-letter queue and class, with the class's MSMQ name."""
    from pyspark.sql import functions as f

    from wire import MessageClass

    names = f.create_map(*(f.lit(x) for c in MessageClass for x in (int(c), c.name)))
    frames = [queue(spark, endpoint, name) for name in DEAD_LETTER_QUEUES]
    dead = frames[0].unionByName(frames[1])
    return (
        dead.groupBy("queue", "message_class")
        .agg(f.count(f.lit(1)).alias("messages"), f.max("arrived_time").alias("latest"))
        .select(
            "queue",
            f.format_string("0x%04X", "message_class").alias("class"),
            f.coalesce(names[f.col("message_class")], f.lit("(application)")).alias("name"),
            "messages",
            "latest",
        )
        .orderBy("queue", "class")
    )


def report(spark: SparkSession, endpoint: str, queues: list[str]) -> None:
    """Print the report."""
    print(f"Deliveries from {', '.join(queues)} (from their journals):")
    deliveries(spark, endpoint, queues).show(60, truncate=False)
    print("Dead letters:")
    dead_letters(spark, endpoint).show(60, truncate=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="127.0.0.1:1802", help="client port HOST:PORT")
    parser.add_argument(
        "--queue", action="append", help="a journaled queue to report on (repeatable)"
    )
    args = parser.parse_args()
    spark = session("qmgr delivery report")
    try:
        report(spark, args.endpoint, args.queue or ["orders"])
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
