"""The tests' local Spark: ``local[2]`` in this process's JVM, its Python workers
on this interpreter, small and quiet, with the ``qmgr`` data source registered.

The session fixture (``conftest.spark``) and the crash test's query process
(``stream_driver.py``, run as a script from this folder) both start it with
:func:`local_session`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Settings for a small, quiet local Spark.
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.streaming.stopTimeout": "30s",
    # The JVM's quick compiler only: a test run is too short for the optimizing
    # one to pay back (measured: a fifth less of the JVM's CPU time for tests/spark).
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
}


def local_session(app: str) -> SparkSession:
    """A ``local[2]`` session named ``app`` with :data:`SPARK_CONF`, logging errors
    only, its driver and workers on this interpreter, the ``qmgr`` format registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from qmgr.spark import QueueDataSource

    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(QueueDataSource)
    return session
