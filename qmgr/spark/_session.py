"""A Spark session for qmgr's pipelines and jobs: the data source registered, quiet logs."""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_session"]


def spark_session(app: str) -> SparkSession:
    """The Spark session with the ``qmgr`` format registered.

    Under ``spark-submit`` the master is whatever it says; run with plain
    ``python``, it is local Spark whose Python workers use this interpreter.
    """
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: local workers
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # PySpark 4 warns that it does not fully support pandas 3; the job needs neither more.
    quiet = "ignore:PySpark does not yet fully support pandas:FutureWarning"
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    from pyspark.sql import SparkSession

    from ._source import QueueDataSource

    spark = (
        SparkSession.builder.appName(app)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(QueueDataSource)
    return spark
