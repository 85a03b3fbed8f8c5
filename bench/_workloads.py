"""The timed workloads of ``bench/local.py``: the disk's ceilings and the daemon's loads.

Each daemon workload connects first, then times only its loop, and returns
a :class:`Sample`: how many commits and messages it made, the wall time, and
the CPU seconds the daemon and this process used meanwhile.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import shutil
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.synchronize import Event as ProcessEvent
from pathlib import Path

import lmdb
import trio
from _daemon import Daemon
from _tls import connect_to, open_to

from qmgr.client import AsyncQueueManager, QueueManager

BODY = b"x" * 256


# --------------------------------------------------------------------------
# What one timed run measured
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    """One moment: the wall clock, and CPU seconds used so far by each process."""

    wall: float
    own_cpu: float
    daemon_cpu: float

    @classmethod
    def now(cls, daemon: Daemon) -> Mark:
        return cls(time.perf_counter(), time.process_time(), daemon.cpu_seconds())


@dataclass(frozen=True)
class Sample:
    """One timed run against the daemon."""

    commits: int
    messages: int
    seconds: float
    daemon_cpu: float  # CPU seconds of the daemon process (all its threads)
    own_cpu: float  # CPU seconds of this process (all its threads): the clients

    @classmethod
    def between(cls, start: Mark, end: Mark, commits: int, per_commit: int = 1) -> Sample:
        if commits == 0:
            raise SystemExit("a timed run made no commits at all")
        return cls(
            commits=commits,
            messages=commits * per_commit,
            seconds=end.wall - start.wall,
            daemon_cpu=end.daemon_cpu - start.daemon_cpu,
            own_cpu=end.own_cpu - start.own_cpu,
        )

    @property
    def commit_rate(self) -> float:
        return self.commits / self.seconds

    @property
    def message_rate(self) -> float:
        return self.messages / self.seconds

    @property
    def daemon_cpu_per_1000_commits(self) -> float:
        return self.daemon_cpu / self.commits * 1000

    @property
    def own_cpu_per_1000_commits(self) -> float:
        return self.own_cpu / self.commits * 1000

    @property
    def daemon_busy(self) -> float:
        """The share of one core the daemon used (1.0: one core flat out)."""
        return self.daemon_cpu / self.seconds

    @property
    def own_busy(self) -> float:
        """The share of one core this process used."""
        return self.own_cpu / self.seconds


# --------------------------------------------------------------------------
# The disk's ceilings
# --------------------------------------------------------------------------


def fsync_rate(directory: Path, seconds: float) -> float:
    """512-byte overwrites of one file, each followed by fdatasync, per second."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            os.pwrite(fd, b"y" * 512, 0)
            os.fdatasync(fd)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def lmdb_commit_rate(directory: Path, seconds: float) -> float:
    """LMDB write transactions of one 256-byte put, synced (LMDB's default), per second."""
    path = directory / "lmdb-probe"
    env = lmdb.open(str(path), map_size=1 << 28)
    try:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            with env.begin(write=True) as txn:
                txn.put(count.to_bytes(8, "big"), BODY)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        env.close()
        shutil.rmtree(path)


def lmdb_pair_latency(directory: Path, seconds: float, rate: float) -> tuple[float, float]:
    """p50 and p99 in ms of two synced LMDB commits in a row (a 256-byte put,
    then its delete), paced at ``rate`` pairs per second for ``seconds``.

    The disk's part of ``latency``: there a message is written by the
    sender's commit and removed by the receiver's, each one synced commit.
    """
    path = directory / "lmdb-pair-probe"
    env = lmdb.open(str(path), map_size=1 << 28)
    durations: list[float] = []
    try:
        interval = 1.0 / rate
        next_pair = time.perf_counter()
        for index in range(int(seconds * rate)):
            delay = next_pair - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            key = index.to_bytes(8, "big")
            start = time.perf_counter()
            with env.begin(write=True) as txn:
                txn.put(key, BODY)
            with env.begin(write=True) as txn:
                txn.delete(key)
            durations.append(time.perf_counter() - start)
            next_pair += interval
    finally:
        env.close()
        shutil.rmtree(path)
    return _p50_p99_ms(durations)


def _p50_p99_ms(durations: list[float]) -> tuple[float, float]:
    """The median and the 99th percentile of ``durations`` (seconds), in ms."""
    durations.sort()
    p99 = durations[min(len(durations) - 1, int(len(durations) * 0.99))]
    return statistics.median(durations) * 1000, p99 * 1000


# --------------------------------------------------------------------------
# The daemon's loads
# --------------------------------------------------------------------------


def refill(address: str, queue: str, messages: int) -> None:
    """Empty ``queue``, then send ``messages`` (rounded up to 100s), 100 per commit."""
    with connect_to(address) as qm:
        qm.purge_queue(queue)
        for _ in range(math.ceil(messages / 100)):
            with qm.begin() as tx:
                for _ in range(100):
                    tx.send(queue, BODY)


def empty(address: str, queue: str) -> None:
    with connect_to(address) as qm:
        qm.purge_queue(queue)


def one_client(
    daemon: Daemon, seconds: float, per_commit: int, step: Callable[[QueueManager], bool]
) -> Sample:
    """Time ``step`` (one commit) in a loop from one blocking client."""
    with connect_to(daemon.address) as qm:
        commits = 0
        start = Mark.now(daemon)
        while time.perf_counter() - start.wall < seconds:
            if not step(qm):
                raise SystemExit(f"the queue ran dry after {commits:,} receives; raise the prefill")
            commits += 1
        end = Mark.now(daemon)
    return Sample.between(start, end, commits, per_commit)


class _Gate:
    """Opens once ``count`` tasks have arrived."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.open = trio.Event()

    def arrive(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.open.set()


def concurrent_clients(
    daemon: Daemon,
    seconds: float,
    clients: int,
    step: Callable[[AsyncQueueManager], Awaitable[bool]],
) -> Sample:
    """Time ``step`` (one commit) in a loop from ``clients`` trio clients at once.

    Every client connects before the clock starts, and the clock stops when
    the last one has finished its last commit, before any disconnects.
    """

    async def main() -> Sample:
        counts = [0] * clients
        ready, done = _Gate(clients), _Gate(clients)
        go, close = trio.Event(), trio.Event()
        deadline = math.inf
        dry = False

        async def client(index: int) -> None:
            nonlocal deadline, dry
            async with open_to(daemon.address) as qm:
                ready.arrive()
                await go.wait()
                while trio.current_time() < deadline:
                    if not await step(qm):
                        dry, deadline = True, -math.inf
                        break
                    counts[index] += 1
                done.arrive()
                await close.wait()

        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(client, index)
            await ready.open.wait()
            start = Mark.now(daemon)
            deadline = trio.current_time() + seconds
            go.set()
            await done.open.wait()
            end = Mark.now(daemon)
            close.set()
        if dry:
            raise SystemExit(
                f"the queue ran dry after {sum(counts):,} receives by {clients} clients; "
                "raise the prefill"
            )
        return Sample.between(start, end, sum(counts))

    return trio.run(main)


def sends_one_client(daemon: Daemon, queue: str, seconds: float, per_commit: int) -> Sample:
    """``with qm.begin() as tx: tx.send(queue, BODY)`` ``per_commit`` times, in a loop."""
    empty(daemon.address, queue)

    def step(qm: QueueManager) -> bool:
        with qm.begin() as tx:
            for _ in range(per_commit):
                tx.send(queue, BODY)
        return True

    return one_client(daemon, seconds, per_commit, step)


def sends_concurrent(daemon: Daemon, queue: str, seconds: float, clients: int) -> Sample:
    """``async with qm.begin() as tx: await tx.send(queue, BODY)`` from each client."""
    empty(daemon.address, queue)

    async def step(qm: AsyncQueueManager) -> bool:
        async with qm.begin() as tx:
            await tx.send(queue, BODY)
        return True

    return concurrent_clients(daemon, seconds, clients, step)


def receives_one_client(daemon: Daemon, queue: str, seconds: float, prefill: int) -> Sample:
    """``with qm.begin() as tx: tx.receive(queue)`` in a loop, from a prefilled queue."""
    refill(daemon.address, queue, prefill)

    def step(qm: QueueManager) -> bool:
        with qm.begin() as tx:
            message = tx.receive(queue)
        return message is not None

    return one_client(daemon, seconds, 1, step)


def receives_concurrent(
    daemon: Daemon, queue: str, seconds: float, clients: int, prefill: int
) -> Sample:
    """``async with qm.begin() as tx: await tx.receive(queue)`` from each client."""
    refill(daemon.address, queue, prefill)

    async def step(qm: AsyncQueueManager) -> bool:
        async with qm.begin() as tx:
            message = await tx.receive(queue)
        return message is not None

    return concurrent_clients(daemon, seconds, clients, step)


def latency(
    address: str, queue: str, seconds: float, rate: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """p50 and p99 in ms from a sender calling commit to a blocked receiver having
    the message, and p50 and p99 of the sender's commit (call to return).

    The sender commits one message per transaction at a paced ``rate``; the
    receiver, in a process of its own as an application's would be, takes
    each as a single-message transaction (``qm.receive``), which returns once
    the removal is synced. The body carries the sender's stamp
    (``time.monotonic_ns``, one clock for both processes).
    """
    commits: list[float] = []
    count = int(seconds * rate)
    processes = multiprocessing.get_context("fork")
    ready = processes.Event()
    out: multiprocessing.Queue[list[int] | str] = processes.Queue()
    with connect_to(address) as qm:
        qm.purge_queue(queue)
        receiver = processes.Process(
            target=_latency_receiver, args=(address, queue, count, ready, out)
        )
        receiver.start()
        ready.wait()
        interval = 1.0 / rate
        next_send = time.perf_counter()
        for _ in range(count):
            if not receiver.is_alive():
                break
            delay = next_send - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            tx = qm.begin()
            started = time.perf_counter()
            tx.send(queue, time.monotonic_ns().to_bytes(8, "big") + BODY[8:])
            tx.commit()
            commits.append(time.perf_counter() - started)
            next_send += interval
        found = out.get(timeout=30)
        receiver.join()
    if isinstance(found, str):
        raise SystemExit(f"latency: the receiver failed: {found}")
    return _p50_p99_ms([ns / 1e9 for ns in found]), _p50_p99_ms(commits)


def _latency_receiver(
    address: str,
    queue: str,
    count: int,
    ready: ProcessEvent,
    out: multiprocessing.Queue[list[int] | str],
) -> None:
    """:func:`latency`'s receiving process: puts each message's nanoseconds since
    its stamp, or what went wrong."""
    try:
        found: list[int] = []
        with connect_to(address) as qm:
            ready.set()
            for _ in range(count):
                message = qm.receive(queue, timeout=10.0)
                now = time.monotonic_ns()
                if message is None:
                    out.put("a message did not arrive within 10 s")
                    return
                found.append(now - int.from_bytes(message.body[:8], "big"))
        out.put(found)
    except BaseException as exc:
        out.put(f"{type(exc).__name__}: {exc}")
        ready.set()
