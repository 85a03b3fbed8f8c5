"""Single-host throughput and latency of a real qmgr daemon, with the disk's ceilings.

Run: ``.venv/bin/python bench/local.py [--seconds 3] [--data-dir DIR]``

Everything is measured in one run on the same machine and the same disk:

* the disk's fsync rate and LMDB's synced-commit rate (the ceilings);
* transactional sends, 1 message per commit, from 1 client and from 8
  concurrent clients (group commit);
* 100 messages per commit from 1 client;
* transactional receives, 1 per commit;
* p50/p99 latency from a sender calling commit to a blocked receiver getting
  the message as a single-message transaction (both syncs included), at a
  paced 500 messages/s.

The daemon is started as a subprocess (``qmgr serve``) with its store in a
fresh directory on the disk under test (default: ``./var/bench``). Each
figure is the median of ``--runs`` timed runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lmdb
import trio

from qmgr.client import connect, open_client

BODY = b"x" * 256


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def fsync_rate(directory: Path, seconds: float) -> float:
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


class Daemon:
    def __init__(self, data_dir: Path) -> None:
        # The default log level, as in production: one line per commit, to a file.
        self.log = (data_dir.parent / "daemon.log").open("wb")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "qmgr",
                "serve",
                "--data-dir",
                str(data_dir),
                "--client-listen",
                self.address,
                "--listen",
                f"127.0.0.1:{free_port()}",
                "--log-format",
                "json",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.process.poll() is not None:
                    log = Path(self.log.name).read_text(encoding="utf-8", errors="replace")
                    raise SystemExit(log)  # noqa: B904 - the daemon's own words say why
                time.sleep(0.05)
        raise SystemExit("daemon did not start")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        self.log.close()


def timed(seconds: float, step: Callable[[], int]) -> float:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        count += step()
    return count / (time.perf_counter() - start)


def bench_sends_one_client(address: str, queue: str, seconds: float, per_commit: int) -> float:
    with connect(address) as qm:

        def step() -> int:
            with qm.begin() as tx:
                for _ in range(per_commit):
                    tx.send(queue, BODY)
            return per_commit

        return timed(seconds, step)


def bench_sends_concurrent(address: str, queue: str, seconds: float, clients: int) -> float:
    async def main() -> float:
        counts = [0] * clients
        start = time.perf_counter()
        deadline = trio.current_time() + seconds

        async def client(index: int) -> None:
            async with open_client(address) as qm:
                while trio.current_time() < deadline:
                    async with qm.begin() as tx:
                        await tx.send(queue, BODY)
                    counts[index] += 1

        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(client, index)
        return sum(counts) / (time.perf_counter() - start)

    return trio.run(main)


def bench_receives(address: str, queue: str, seconds: float) -> float:
    with connect(address) as qm:
        qm.purge_queue(queue)
        prefill = int(seconds * 5000)
        for _ in range(prefill // 100):
            with qm.begin() as tx:
                for _ in range(100):
                    tx.send(queue, BODY)

        def step() -> int:
            with qm.begin() as tx:
                message = tx.receive(queue)
            if message is None:
                raise SystemExit("receive benchmark ran out of messages; raise the prefill")
            return 1

        return timed(seconds, step)


def bench_latency(address: str, queue: str, seconds: float, rate: float) -> tuple[float, float]:
    latencies: list[float] = []
    committed_at: dict[bytes, float] = {}
    count = int(seconds * rate)
    ready = threading.Event()

    def receiver() -> None:
        with connect(address) as qm:
            ready.set()
            for _ in range(count):
                # A single-message transaction: the message is returned once its
                # removal is synced, so each delivery includes the receiver's sync.
                message = qm.receive(queue, timeout=10.0)
                now = time.perf_counter()
                if message is None:
                    raise SystemExit("latency benchmark: a message did not arrive within 10 s")
                latencies.append(now - committed_at[message.body[:16]])

    with connect(address) as qm:
        qm.purge_queue(queue)
        thread = threading.Thread(target=receiver)
        thread.start()
        ready.wait()
        interval = 1.0 / rate
        next_send = time.perf_counter()
        for index in range(count):
            delay = next_send - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            key = index.to_bytes(16, "big")
            tx = qm.begin()
            tx.send(queue, key + BODY[16:])
            committed_at[key] = time.perf_counter()
            tx.commit()
            next_send += interval
        thread.join()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return p50 * 1000, p99 * 1000


def median_of(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed run")
    parser.add_argument(
        "--runs", type=int, default=3, help="timed runs per figure (median reported)"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path("var/bench"), help="where the store goes"
    )
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=args.data_dir))
    rows: list[tuple[str, str, str]] = []
    try:
        fsync = median_of(args.runs, lambda: fsync_rate(workdir, args.seconds / 2))
        lmdb_rate = median_of(args.runs, lambda: lmdb_commit_rate(workdir, args.seconds / 2))
        rows.append(("disk fdatasync", f"{fsync:,.0f}/s", "ceiling"))
        rows.append(("LMDB synced commit (1 put)", f"{lmdb_rate:,.0f}/s", "ceiling"))
        daemon = Daemon(workdir / "store")
        try:
            with connect(daemon.address) as qm:
                qm.create_queue("bench", transactional=True)
                qm.create_queue("latency", transactional=True)
            one = median_of(
                args.runs, lambda: bench_sends_one_client(daemon.address, "bench", args.seconds, 1)
            )
            rows.append(
                (
                    "tx sends, 1/commit, 1 client",
                    f"{one:,.0f}/s",
                    f"{one / lmdb_rate:.2f} x LMDB; target >= 2,100",
                )
            )
            eight = median_of(
                args.runs, lambda: bench_sends_concurrent(daemon.address, "bench", args.seconds, 8)
            )
            rows.append(
                (
                    "tx sends, 1/commit, 8 clients",
                    f"{eight:,.0f}/s",
                    f"{eight / one:.2f} x 1 client; target >= 10,000",
                )
            )
            hundred = median_of(
                args.runs,
                lambda: bench_sends_one_client(daemon.address, "bench", args.seconds, 100),
            )
            rows.append(
                ("tx sends, 100/commit, 1 client", f"{hundred:,.0f} msg/s", "target >= 60,000")
            )
            receives = median_of(
                args.runs, lambda: bench_receives(daemon.address, "bench", args.seconds)
            )
            rows.append(
                (
                    "tx receives, 1/commit",
                    f"{receives:,.0f}/s",
                    f"{receives / lmdb_rate:.2f} x LMDB; target >= 2,100",
                )
            )
            p50, p99 = bench_latency(daemon.address, "latency", max(args.seconds, 4.0), 500.0)
            rows.append(
                (
                    "commit-to-receive at 500/s",
                    f"p50 {p50:.2f} ms",
                    f"p99 {p99:.2f} ms; target p99 <= 1 ms",
                )
            )
        finally:
            daemon.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print(
        f"qmgr local benchmark: {os.cpu_count()} cores, "
        f"{args.runs} runs of {args.seconds:g} s, median"
    )
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
