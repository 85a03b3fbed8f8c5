"""The shipped streaming pipeline on a Spark standalone cluster, qmgr only in ``--py-files``.

A master and two workers (one core and 1 GB each) start from the pyspark
wheel alone; the driver and the executors run a Python that has pyspark,
pyarrow and pandas but not qmgr (``standalone_kit``). ``spark-submit
--py-files qmgr-spark.zip pipelines/order_totals.py --available-now``
processes the orders a feeder sent; every order is then counted exactly
once in the totals, the journal holds each one, and no transaction of the
query is left in doubt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import java_problem
from helpers import DaemonProcess
from standalone_kit import standalone_cluster, worker_python
from test_pipelines import expected_totals, latest

from pipelines import feeder, order_totals, package
from qmgr.client import connect

ROOT = Path(__file__).resolve().parents[2]
ORDERS = 400
#: Seconds spark-submit may take (it starts a JVM, executors and their Python workers).
SUBMIT_TIMEOUT = 240.0


@pytest.mark.slow
def test_order_totals_on_a_standalone_cluster_with_py_files(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    problem = java_problem()
    if problem is not None:
        pytest.fail(f"Spark needs Java 17 or newer ({problem})")
    archive = tmp_path / "dist" / "qmgr-spark.zip"
    package.build(archive)
    python = worker_python(tmp_path / "worker-python")
    feeder.feed(daemon.address, ORDERS, customers=9, seed=11)

    with standalone_cluster(tmp_path / "cluster", python) as cluster:
        result = cluster.submit(
            [
                "--py-files", str(archive),
                str(ROOT / "pipelines" / "order_totals.py"),
                "--endpoint", daemon.address,
                "--checkpoint", str(tmp_path / "checkpoint"),
                "--available-now",
            ],
            timeout=SUBMIT_TIMEOUT,
        )  # fmt: skip
        assert result.returncode == 0, f"spark-submit failed:\n{result.stdout[-8000:]}"
    # Both workers ran executors for the job (each keeps its executors' logs).
    for number in (1, 2):
        assert list((tmp_path / "cluster" / f"worker{number}").glob("app-*/*/stderr"))

    with connect(daemon.address) as qm:
        journal = [m.body for m in qm.peek_range(f"{order_totals.ORDERS};journal", max=10_000)]
        # Orders of a last micro-batch may stay in the queue (see test_pipelines): counted.
        left = [m.body for m in qm.peek_range(order_totals.ORDERS, max=10_000)]
        assert qm.transactions("spark:") == []
    assert len(journal) + len(left) == ORDERS
    totals, rejected = expected_totals(journal + left)
    found = latest(daemon.address, order_totals.TOTALS)
    assert {c: (u["orders"], u["total"]) for c, u in found.items()} == totals
    if rejected:
        assert latest(daemon.address, order_totals.REJECTED)["None"]["orders"] == rejected
