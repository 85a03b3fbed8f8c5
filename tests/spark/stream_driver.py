"""A streaming query from one queue to another, run as its own process by the crash test.

    python tests/spark/stream_driver.py ENDPOINT SOURCE SINK CHECKPOINT [--max N]

Each message's body ``b`` becomes ``transform(b)``: the upper-cased body, a
bar and the first 12 hex digits of its SHA-256. The query runs until the
process is killed; it prints ``started`` once the query is running, and a
line for each micro-batch.
"""

from __future__ import annotations

import argparse
import hashlib
from typing import TYPE_CHECKING

from local_spark_kit import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def transform(body: bytes) -> bytes:
    """What the query makes of one body (the test checks the sink against it)."""
    return body.upper() + b"|" + hashlib.sha256(body).hexdigest()[:12].encode()


def start_query(
    spark: SparkSession, endpoint: str, source: str, sink: str, checkpoint: str, per_trigger: int
) -> StreamingQuery:
    """The query: ``source`` -> ``transform`` -> ``sink``, exactly once (the driver
    runs it; the crash test restarts it in its own Spark from the same checkpoint)."""
    return (
        spark.readStream.format("qmgr")
        .option("endpoint", endpoint)
        .option("queue", source)
        .option("maxMessagesPerTrigger", str(per_trigger))
        .load()
        .selectExpr(
            "cast(concat(upper(cast(body as string)), '|', substr(sha2(body, 256), 1, 12))"
            " as binary) as body",
            "label",
        )
        .writeStream.format("qmgr")
        .option("endpoint", endpoint)
        .option("queue", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("endpoint")
    parser.add_argument("source")
    parser.add_argument("sink")
    parser.add_argument("checkpoint")
    parser.add_argument("--max", type=int, default=2000, help="maxMessagesPerTrigger")
    args = parser.parse_args()
    spark = local_session("qmgr-crash-test")
    spark.streams.addListener(progress_printer())  # type: ignore[arg-type]
    query = start_query(spark, args.endpoint, args.source, args.sink, args.checkpoint, args.max)
    print("started", flush=True)
    query.awaitTermination()


def progress_printer() -> object:
    """A listener that prints ``batch ID: ROWS rows`` as each micro-batch ends."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Printer(StreamingQueryListener):
        def onQueryStarted(self, event: object) -> None:
            pass

        def onQueryProgress(self, event: object) -> None:
            progress = event.progress  # type: ignore[attr-defined]
            print(
                f"batch {progress.batchId}: {progress.numInputRows} rows "
                f"in {progress.batchDuration} ms ({progress.timestamp})",
                flush=True,
            )

        def onQueryIdle(self, event: object) -> None:
            pass

        def onQueryTerminated(self, event: object) -> None:
            pass

    return Printer()


if __name__ == "__main__":
    main()
