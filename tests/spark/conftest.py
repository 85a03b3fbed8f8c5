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
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from helpers import DaemonProcess
from local_spark_kit import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from qmgr.client import QueueManager


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = local_session("qmgr-tests")
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
