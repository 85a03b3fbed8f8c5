"""Streaming job: running totals per customer, each update sent exactly once.

Order events (JSON, see ``pipelines/feeder.py``) arrive in the queue
``orders``. For every micro-batch the job updates, per customer, the number
of orders and their total amount, and sends each updated total to
``customer-totals`` as JSON (label: the customer)::

    {"customer": "c-017", "orders": 12, "total": 731.4}

Events that are not valid orders are counted the same way under no customer,
and that count goes to ``orders-rejected``. Spark keeps the totals and the
position in the queue in the checkpoint; qmgr commits each micro-batch's
updates in one transaction, so after any crash and restart each update is
in ``customer-totals`` exactly once.

Local Spark (from the repository, against ``make run``)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python pipelines/order_totals.py \\
        --endpoint 127.0.0.1:1802 --checkpoint var/pipeline/checkpoint

A cluster (qmgr installed on every node, or shipped as below)::

    spark-submit --master spark://spark-master:7077 --py-files dist/qmgr-spark.zip \\
        pipelines/order_totals.py --endpoint qm.example.net:1802 \\
        --checkpoint hdfs:///checkpoints/order-totals

With ``--sources HOST:PORT,HOST:PORT,...`` the job reads ``orders`` on each
of those queue managers (the data source's option ``endpoints``), every
order once, and keeps one total per customer across them all; the totals
still go to the queue manager of ``--endpoint``.

Runs until stopped (Ctrl-C or SIGTERM), or with ``--available-now`` until
every order that was there at the start is processed.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

ORDERS = "orders"
TOTALS = "customer-totals"
REJECTED = "orders-rejected"
ORDER_SCHEMA = "order_id STRING, customer STRING, amount DOUBLE, placed_at TIMESTAMP"


def session(app: str) -> SparkSession:
    """The Spark session (``spark-submit`` says where; plain ``python`` runs local Spark)."""
    from qmgr.spark import spark_session

    return spark_session(app)


def running_total(key: tuple[Any, ...], batches: Iterator[Any], state: Any) -> Iterator[Any]:
    """One customer's orders in a micro-batch -> its new running total (pandas frames)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    orders, total = state.get if state.exists else (0, 0.0)
    for frame in batches:
        orders += len(frame)
        total += float(frame["amount"].sum())
    state.update((orders, total))
    yield pd.DataFrame({"customer": [key[0]], "orders": [orders], "total": [round(total, 2)]})


def start(
    spark: SparkSession,
    endpoint: str,
    checkpoint: str,
    *,
    available_now: bool = False,
    trigger_seconds: float = 1.0,
    max_per_trigger: int = 10_000,
    sources: Sequence[str] = (),
) -> StreamingQuery:
    """Start the job's streaming query (reading ``orders`` at ``sources``, if given,
    else at ``endpoint``; writing to ``endpoint``)."""
    from pyspark.sql import functions as f

    where = {"endpoints": ",".join(sources)} if sources else {"endpoint": endpoint}
    events = (
        spark.readStream.format("qmgr")
        .options(**where)
        .option("queue", ORDERS)
        .option("maxMessagesPerTrigger", str(max_per_trigger))
        .load()
    )
    order = f.from_json(f.col("body").cast("string"), ORDER_SCHEMA)
    parsed = events.select(order.alias("o"))
    valid = f.col("o.customer").isNotNull() & f.col("o.amount").isNotNull()
    amounts = parsed.select(
        f.when(valid, f.col("o.customer")).alias("customer"),
        f.when(valid, f.col("o.amount")).otherwise(0.0).alias("amount"),
    )
    # Spark's Python sinks take appended rows: a state per customer (kept in the
    # checkpoint) gives one row per customer whose total changed in the micro-batch.
    totals = amounts.groupBy("customer").applyInPandasWithState(
        running_total,
        outputStructType="customer STRING, orders LONG, total DOUBLE",
        stateStructType="orders LONG, total DOUBLE",
        outputMode="append",
        timeoutConf="NoTimeout",
    )
    rejected = f.col("customer").isNull()
    updates = totals.select(
        f.to_json(f.struct("customer", "orders", "total")).alias("body"),
        f.coalesce(f.col("customer"), f.lit("rejected")).alias("label"),
        f.when(rejected, f.lit(REJECTED)).otherwise(f.lit(TOTALS)).alias("destination"),
    )
    writer = (
        updates.writeStream.queryName("order_totals")
        .outputMode("append")
        .format("qmgr")
        .option("endpoint", endpoint)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="127.0.0.1:1802", help="client port HOST:PORT")
    parser.add_argument(
        "--sources", default="", help="read orders at HOST:PORT,HOST:PORT,... (default: --endpoint)"
    )
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    parser.add_argument("--available-now", action="store_true", help="stop when caught up")
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch period")
    parser.add_argument("--max-per-trigger", type=int, default=10_000, help="orders per batch")
    args = parser.parse_args()
    spark = session("qmgr order totals")
    query = start(
        spark,
        args.endpoint,
        args.checkpoint,
        available_now=args.available_now,
        trigger_seconds=args.trigger_seconds,
        max_per_trigger=args.max_per_trigger,
        sources=[source for source in args.sources.split(",") if source],
    )
    # Ctrl-C or SIGTERM stops the query between micro-batches' calls, quietly.
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    try:
        while query.isActive and not stopping.is_set():
            query.awaitTermination(1)
        if query.isActive:
            query.stop()
        elif query.exception() is not None:
            msg = f"the query failed: {query.exception()}"
            raise SystemExit(msg)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
