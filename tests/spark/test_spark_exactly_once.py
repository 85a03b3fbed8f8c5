"""Exactly once under failure: a streaming query SIGKILLed and restarted from its checkpoint.

The query runs in a process of its own (``stream_driver.py``: the Python
driver, Spark's JVM and its Python workers, in one process group). It moves
20,000 messages from one queue to another through a transformation; the test
kills the whole group at random moments twice, each time while results are
coming in, and restarts it. At the end the source is empty, the sink holds
each result exactly once (compared by content), and no prepared transaction
is left in doubt.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import DaemonProcess
from stream_driver import transform

from qmgr.client import QueueManager, connect

MESSAGES = 20_000
DRIVER = Path(__file__).with_name("stream_driver.py")
#: Most seconds a run may go without progress before the test gives up.
STALL = 120.0


def depth(qm: QueueManager, queue: str) -> int:
    return next(q.depth for q in qm.list_queues() if q.name == queue)


class Driver:
    """The query's process group."""

    def __init__(self, daemon: DaemonProcess, checkpoint: Path, log: Path) -> None:
        self.command = [
            sys.executable,
            str(DRIVER),
            daemon.address,
            "orders",
            "results",
            str(checkpoint),
            "--max",
            "1500",
        ]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def check_alive(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            tail = self.log.read_text(errors="replace")[-4000:]
            raise AssertionError(f"the query's process exited with {code}:\n{tail}")


@pytest.fixture
def driver(daemon: DaemonProcess, tmp_path: Path) -> Iterator[Driver]:
    process = Driver(daemon, tmp_path / "checkpoint", tmp_path / "driver.log")
    try:
        yield process
    finally:
        process.kill()


def wait_until(driver: Driver, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STALL
    while not condition():
        driver.check_alive()
        assert time.monotonic() < deadline, f"no {what} within {STALL:g} s"
        time.sleep(0.05)


@pytest.mark.slow
def test_exactly_once_when_the_query_is_killed(daemon: DaemonProcess, driver: Driver) -> None:
    seed = int(os.environ.get("QMGR_TEST_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    print(f"seed {seed} (QMGR_TEST_SEED={seed} to repeat)")
    with connect(daemon.address) as qm:
        qm.create_queue("orders", transactional=True)
        qm.create_queue("results", transactional=True)
        bodies = [f"order-{i:05d}-{rng.randrange(10**9)}".encode() for i in range(MESSAGES)]
        for start in range(0, MESSAGES, 1000):
            with qm.begin() as tx:
                for body in bodies[start : start + 1000]:
                    tx.send("orders", body)

        # Kill twice while results come in, each run after a random number of them
        # and a random delay: mid-batch, between prepare and commit, or while planning.
        for _ in range(2):
            driver.start()
            # (Before Spark 4.2, a query restarted after a committed micro-batch
            # reads everything in its first one: it may get to the end at once.)
            target = min(depth(qm, "results") + rng.randrange(1_000, 7_500), MESSAGES)
            reached = lambda t=target: depth(qm, "results") >= t  # noqa: E731
            wait_until(driver, reached, f"{target} results")
            time.sleep(rng.uniform(0.0, 1.5))
            driver.check_alive()
            driver.kill()
            in_doubt = len(qm.transactions("spark:"))
            print(f"killed at {depth(qm, 'results')} results, {in_doubt} prepared in doubt")

        driver.start()
        wait_until(
            driver,
            lambda: depth(qm, "orders") == 0 and depth(qm, "results") >= MESSAGES,
            "end of the run",
        )
        wait_until(driver, lambda: qm.transactions("spark:") == [], "abort of leftovers")
        time.sleep(1.0)  # nothing more comes in
        driver.check_alive()
        driver.kill()

        results = Counter(m.body for m in qm.peek_range("results", max=MESSAGES + 1000))
        assert qm.transactions("spark:") == []
        assert depth(qm, "orders") == 0
    expected = Counter(transform(b) for b in bodies)
    duplicates = {body: n for body, n in results.items() if n > 1}
    assert not duplicates, (
        f"{len(duplicates)} results more than once, e.g. {next(iter(duplicates))!r}"
    )
    missing = expected - results
    assert not missing, f"{len(missing)} results missing, e.g. {next(iter(missing))!r}"
    assert results == expected
