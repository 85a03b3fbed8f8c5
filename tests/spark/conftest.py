"""Fixtures for the Spark data source tests: one local Spark session for the whole run.

Spark runs as ``local[2]`` in this process's JVM, its Python workers on this
interpreter (``PYSPARK_PYTHON``), against real queue managers
(``helpers.DaemonProcess``). Starting Spark takes seconds, so the session is
shared; each test uses queues of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from helpers import DaemonProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from qmgr.client import QueueManager

#: Settings for a small, quiet local Spark (also used by the driver scripts of the tests).
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


def java_problem() -> str | None:
    """Why Spark cannot run here (no Java 17+), or None."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return "no java found"
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)', result.stderr)
    if match is None or int(match.group(1)) < 17:
        return f"{java} is not Java 17 or newer: {result.stderr.strip()[:80]}"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # PySpark warns about pandas 3 when it loads pandas; nothing here uses pandas.
    mark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(mark)
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local[2] Spark session with the ``qmgr`` data source registered."""
    problem = java_problem()
    if problem is not None:
        pytest.fail(
            f"Spark needs Java 17 or newer ({problem}): install it "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pyspark.sql import SparkSession

        from qmgr.spark import QueueDataSource

        builder = SparkSession.builder.master("local[2]").appName("qmgr-tests")
        for key, value in SPARK_CONF.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(QueueDataSource)
    try:
        yield session
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            session.stop()


@pytest.fixture
def qm(shared_daemon: DaemonProcess) -> Iterator[QueueManager]:
    """A connection to the session's queue manager."""
    from qmgr.client import connect

    with connect(shared_daemon.address) as client:
        yield client
