"""Queues as a PySpark data source and sink: batch and streaming, exactly once.

::

    from pyspark.sql import SparkSession
    from qmgr.spark import QueueDataSource

    spark = SparkSession.builder.getOrCreate()
    spark.dataSource.register(QueueDataSource)

    snapshot = (spark.read.format("qmgr")
                .option("endpoint", "127.0.0.1:1802").option("queue", "orders").load())

    (spark.readStream.format("qmgr")
         .option("endpoint", "127.0.0.1:1802").option("queue", "orders").load()
         .selectExpr("upper(cast(body as string)) as body")
         .writeStream.format("qmgr")
         .option("endpoint", "127.0.0.1:1802").option("queue", "shipped")
         .option("checkpointLocation", "/var/lib/spark/orders-to-shipped")
         .start())

A batch read is a snapshot of a queue, removing nothing; a streaming read
goes through a queue by LookupId and removes what Spark has committed (the
query must be the queue's only consumer). Writes are all or nothing per job,
and exactly once per micro-batch, through prepared transactions that the
driver commits. Needs ``pip install 'qmgr[spark]'`` and Java 17 or newer;
see docs/spark.md.
"""

from __future__ import annotations

from ._options import DataSourceError, Options
from ._session import spark_session
from ._source import QueueDataSource

__all__ = ["DataSourceError", "Options", "QueueDataSource", "spark_session"]
