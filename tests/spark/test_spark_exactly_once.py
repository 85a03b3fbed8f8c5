"""Exactly once under failure: a streaming query SIGKILLed and restarted from its checkpoint.

The query runs in a process of its own (``stream_driver.py``: the Python
driver, Spark's JVM and its Python workers, in one process group). It moves
messages from one queue to another through a transformation; the test kills
the whole group at random moments, each time while results are coming in,
and restarts it. At the end the source is empty, the sink holds each result
exactly once (compared by content), and no prepared transaction is left in
doubt.

The default run moves 2,000 messages, kills the query once, and restarts it
from its checkpoint in this process's Spark (already warm: a new process
would start a JVM and its Python workers again, some twenty seconds on a
loaded machine); what it restarts from is what the killed process left. The
``soak`` version moves 20,000, kills the query twice and restarts it in a
process of its own each time (``pytest -m soak``).
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest
from helpers import DaemonProcess
from stream_driver import start_query, transform

from qmgr.client import QueueManager, connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

DRIVER = Path(__file__).with_name("stream_driver.py")
#: Most seconds a run may go without progress before the test gives up.
STALL = 120.0


def depth(qm: QueueManager, queue: str) -> int:
    return next(q.depth for q in qm.list_queues() if q.name == queue)


class Run(Protocol):
    """A run of the query, wherever it runs."""

    def check_alive(self) -> None:
        """Raise AssertionError if the run ended (with what it says why)."""


class Driver:
    """The query's process group."""

    def __init__(self, daemon: DaemonProcess, checkpoint: Path, log: Path) -> None:
        self.checkpoint = checkpoint
        self.command = [
            sys.executable,
            str(DRIVER),
            daemon.address,
            "orders",
            "results",
            str(checkpoint),
        ]
        self.log = log
        #: The query's ``maxMessagesPerTrigger``.
        self.per_trigger = 1500
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [*self.command, "--max", str(self.per_trigger)],
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


class InProcess:
    """The query restarted in this process's Spark."""

    def __init__(self, query: StreamingQuery) -> None:
        self.query = query

    def check_alive(self) -> None:
        error = self.query.exception()
        assert error is None, f"the query failed: {error}"
        assert self.query.isActive, "the query stopped"


def wait_until(run: Run, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STALL
    while not condition():
        run.check_alive()
        assert time.monotonic() < deadline, f"no {what} within {STALL:g} s"
        time.sleep(0.05)


@dataclass(frozen=True)
class Size:
    """How big a run is."""

    messages: int
    #: Kills, each after a random number of results in ``between`` and a random
    #: number of seconds in ``delay``.
    kills: int
    between: tuple[int, int]
    delay: tuple[float, float]
    #: ``maxMessagesPerTrigger`` of the query.
    per_trigger: int
    #: Whether the last run is in this process's Spark (or a process of its own).
    last_here: bool


SIZES = [
    pytest.param(
        Size(
            2_000, kills=1, between=(200, 1_000), delay=(0.0, 0.6), per_trigger=400, last_here=True
        ),
        id="2k",
    ),
    pytest.param(
        Size(
            20_000,
            kills=2,
            between=(1_000, 7_500),
            delay=(0.0, 1.5),
            per_trigger=1_500,
            last_here=False,
        ),
        id="20k",
        marks=pytest.mark.soak,
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
def test_exactly_once_when_the_query_is_killed(
    request: pytest.FixtureRequest, daemon: DaemonProcess, driver: Driver, size: Size
) -> None:
    seed = int(os.environ.get("QMGR_TEST_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    print(f"seed {seed} (QMGR_TEST_SEED={seed} to repeat)")
    messages = size.messages
    driver.per_trigger = size.per_trigger
    with connect(daemon.address) as qm:
        qm.create_queue("orders", transactional=True)
        qm.create_queue("results", transactional=True)
        bodies = [f"order-{i:05d}-{rng.randrange(10**9)}".encode() for i in range(messages)]
        for start in range(0, messages, 1000):
            with qm.begin() as tx:
                for body in bodies[start : start + 1000]:
                    tx.send("orders", body)

        # Kill while results come in, each run after a random number of them and
        # a random delay: mid-batch, between prepare and commit, or while planning.
        for _ in range(size.kills):
            driver.start()
            # (Before Spark 4.2, a query restarted after a committed micro-batch
            # reads everything in its first one: it may get to the end at once.)
            target = min(depth(qm, "results") + rng.randrange(*size.between), messages)
            reached = lambda t=target: depth(qm, "results") >= t  # noqa: E731
            wait_until(driver, reached, f"{target} results")
            time.sleep(rng.uniform(*size.delay))  # a random moment, not a wait for anything
            driver.check_alive()
            driver.kill()
            in_doubt = len(qm.transactions("spark:"))
            print(f"killed at {depth(qm, 'results')} results, {in_doubt} prepared in doubt")

        last: Run = driver
        if size.last_here:
            spark: SparkSession = request.getfixturevalue("spark")
            query = start_query(
                spark, daemon.address, "orders", "results", str(driver.checkpoint), size.per_trigger
            )
            request.addfinalizer(query.stop)
            last = InProcess(query)
        else:
            driver.start()
        wait_until(
            last,
            lambda: depth(qm, "orders") == 0 and depth(qm, "results") >= messages,
            "end of the run",
        )
        # Once no transaction of the query is open and the source is empty (its
        # messages removed, not just read), nothing is left that could be written
        # again: the results are final.
        wait_until(last, lambda: qm.transactions("spark:") == [], "abort of leftovers")
        last.check_alive()
        if size.last_here:
            query.stop()
        else:
            driver.kill()

        results = Counter(m.body for m in qm.peek_range("results", max=messages + 1000))
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
