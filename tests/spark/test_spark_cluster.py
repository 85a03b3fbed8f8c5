"""The shipped streaming pipeline on a Spark standalone cluster, qmgr only in ``--py-files``.

A master and two workers (one core and 1 GB each) start from the pyspark
wheel alone; the driver and the executors run a Python that has pyspark,
pyarrow and pandas but not qmgr (``standalone_kit``). A feeder sends
orders to two queue managers; ``spark-submit --py-files qmgr-spark.zip
pipelines/order_totals.py --available-now`` reads both (``--sources``, the
option ``endpoints``) and keeps the totals on the first. Every order is
then counted exactly once in the totals, the journals hold each one, and
no transaction of the query is left in doubt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import java_problem
from helpers import DaemonProcess
from standalone_kit import standalone_cluster, worker_python
from test_pipelines import expected_totals, latest

from pipelines import feeder, order_totals, package
from qmgr.client import connect

ROOT = Path(__file__).resolve().parents[2]
#: Orders sent to each queue manager.
ORDERS = 300
#: Seconds spark-submit may take (it starts a JVM, executors and their Python workers).
SUBMIT_TIMEOUT = 240.0


@pytest.mark.slow
def test_order_totals_on_a_standalone_cluster_with_py_files(
    daemon_factory: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    problem = java_problem()
    if problem is not None:
        pytest.fail(f"Spark needs Java 17 or newer ({problem})")
    archive = tmp_path / "dist" / "qmgr-spark.zip"
    package.build(archive)
    python = worker_python(tmp_path / "worker-python")
    sources = [daemon_factory(name=f"shop-{number}").address for number in (1, 2)]
    for number, address in enumerate(sources):
        feeder.feed(address, ORDERS, customers=9, seed=11 + number)

    with standalone_cluster(tmp_path / "cluster", python) as cluster:
        result = cluster.submit(
            [
                "--py-files", str(archive),
                str(ROOT / "pipelines" / "order_totals.py"),
                "--endpoint", sources[0],
                "--sources", ",".join(sources),
                "--checkpoint", str(tmp_path / "checkpoint"),
                "--available-now",
            ],
            timeout=SUBMIT_TIMEOUT,
        )  # fmt: skip
        assert result.returncode == 0, f"spark-submit failed:\n{result.stdout[-8000:]}"
    # Both workers ran executors for the job (each keeps its executors' logs).
    for number in (1, 2):
        assert list((tmp_path / "cluster" / f"worker{number}").glob("app-*/*/stderr"))

    orders = []
    for address in sources:
        with connect(address) as qm:
            orders += [m.body for m in qm.peek_range(f"{order_totals.ORDERS};journal", max=10_000)]
            # Orders of a last micro-batch may stay in the queue (see test_pipelines): counted.
            orders += [m.body for m in qm.peek_range(order_totals.ORDERS, max=10_000)]
            assert qm.transactions("spark:") == []
    assert len(orders) == 2 * ORDERS
    totals, rejected = expected_totals(orders)
    found = latest(sources[0], order_totals.TOTALS)
    assert {c: (u["orders"], u["total"]) for c, u in found.items()} == totals
    if rejected:
        assert latest(sources[0], order_totals.REJECTED)["None"]["orders"] == rejected
