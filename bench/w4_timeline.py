"""The side-by-side W4, message by message: where its latency tail comes from.

Run::

    .venv/bin/python bench/w4_timeline.py [--runs 2] [--rate 500] [--seconds 10] [--json]

The same loops as the side-by-side harness's W4 (``bench/peers/run.sh``): a
producer commits one 256-byte message per transaction, paced at ``--rate``;
a consumer in a process of its own receives each in a transaction of its own
and commits it; the latency of a message runs from the producer's send call
(the stamp in its body) to the consumer's receive returning. Each run starts
a fresh daemon, the writer inline (the default) and on a thread
(``store.writer_thread``) alternating, ``--runs`` of each.

Beside the p50 and p99 of that latency it records what a tail is made of:
how many messages were later than 5 ms, the producer's commit times, the
consumer's commit and receive times (overall, and while it was behind:
for the messages later than 5 ms), and how many synced writes the daemon
made for the run's commits (``qmgr status``: two commits a message, one
write each unless written together). Medians over the runs; ``--json``
prints one JSON object to stdout (the table goes to stderr).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _command import add_run_options, publish, run_in_workdir, script_parser
from _daemon import Daemon
from _report import print_table
from _tls import connect_to

QUEUE = "w4"
BODY_SIZE = 256
LATE_NS = 5_000_000
MODES = {"inline": (), "thread": ("--set", "store.writer_thread=true")}


def stamped() -> bytes:
    return (b"%020d" % time.monotonic_ns()).ljust(BODY_SIZE, b"x")


def consume(address: str, count: int, stop_at: float, out: Connection) -> None:
    """Receive ``count`` messages, one transaction each; send back, per message,
    (latency, receive time, commit time) in ns."""
    samples: list[tuple[int, int, int]] = []
    with connect_to(address) as qm:
        out.send("ready")
        while len(samples) < count and time.monotonic() < stop_at:
            started = time.monotonic_ns()
            tx = qm.begin()
            message = tx.receive(QUEUE, timeout=0.5)
            received = time.monotonic_ns()
            tx.commit()
            if message is not None:
                latency = received - int(message.body[:20])
                samples.append((latency, received - started, time.monotonic_ns() - received))
    out.send(samples)


def quantile(values: list[int], share: float) -> float:
    """The ``share`` quantile of ``values`` in ms."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * (len(ordered) - 1)))] / 1e6


def one_run(workdir: Path, mode: str, rate: float, seconds: float) -> dict[str, float]:
    data = workdir / f"{mode}-{time.monotonic_ns()}"
    data.mkdir()
    count = int(rate * seconds)
    with Daemon(data, data / "daemon.log", MODES[mode]) as daemon:
        with connect_to(daemon.address) as qm:
            qm.create_queue(QUEUE, transactional=True)
            writes_before = qm.status().batches
        ours, theirs = multiprocessing.get_context("fork").Pipe()
        consumer = multiprocessing.get_context("fork").Process(
            target=consume, args=(daemon.address, count, time.monotonic() + seconds + 30, theirs)
        )
        consumer.start()
        ours.recv()
        commits: list[int] = []
        with connect_to(daemon.address) as qm:
            start = time.monotonic()
            for sent in range(count):
                delay = start + sent / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                before = time.monotonic_ns()
                with qm.begin() as tx:
                    tx.send(QUEUE, stamped())
                commits.append(time.monotonic_ns() - before)
        samples: list[tuple[int, int, int]] = ours.recv()
        consumer.join(10)
        with connect_to(daemon.address) as qm:
            writes = qm.status().batches - writes_before
    if len(samples) < count:
        raise SystemExit(f"the consumer received {len(samples)} of {count} messages")
    latencies = [s[0] for s in samples]
    behind = [s for s in samples if s[0] > LATE_NS]
    return {
        "p50_ms": quantile(latencies, 0.5),
        "p99_ms": quantile(latencies, 0.99),
        "late": len(behind),
        "producer_commit_p50_ms": quantile(commits, 0.5),
        "producer_commit_p99_ms": quantile(commits, 0.99),
        "consumer_commit_p50_ms": quantile([s[2] for s in samples], 0.5),
        "consumer_commit_behind_p50_ms": quantile([s[2] for s in behind], 0.5) if behind else 0,
        "consumer_receive_behind_p50_ms": quantile([s[1] for s in behind], 0.5) if behind else 0,
        "writes_per_commit": writes / (2 * count),
    }


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for index in range(args.runs):
        order = list(MODES) if index % 2 == 0 else list(reversed(MODES))
        for mode in order:
            runs[mode].append(one_run(workdir, mode, args.rate, args.seconds))
    result: dict[str, Any] = {"rate": args.rate, "seconds": args.seconds, "runs": runs}
    for mode, figures in runs.items():
        for name in figures[0]:
            result[f"{mode}_{name}"] = round(statistics.median(f[name] for f in figures), 3)
    result["p99_thread_x_inline"] = round(result["thread_p99_ms"] / result["inline_p99_ms"], 2)
    return result


ROWS = (
    ("p50, commit on the producer to receive (ms)", "p50_ms"),
    ("p99 (ms)", "p99_ms"),
    ("messages later than 5 ms", "late"),
    ("the producer's commit, p50 (ms)", "producer_commit_p50_ms"),
    ("the producer's commit, p99 (ms)", "producer_commit_p99_ms"),
    ("the consumer's commit, p50 (ms)", "consumer_commit_p50_ms"),
    ("... while behind (ms)", "consumer_commit_behind_p50_ms"),
    ("the consumer's receive while behind, p50 (ms)", "consumer_receive_behind_p50_ms"),
    ("synced writes per commit", "writes_per_commit"),
)


def report(r: dict[str, Any], out: TextIO) -> None:
    def cell(mode: str, key: str) -> str:
        each = " / ".join(f"{f[key]:.3g}" for f in r["runs"][mode])
        return f"{r[f'{mode}_{key}']:.3g} ({each})"

    rows = [(label, cell("inline", key), cell("thread", key), "") for label, key in ROWS]
    header = ("measure", "inline (runs)", "writer thread (runs)", "")
    title = f"W4 at {r['rate']:g}/s for {r['seconds']:g} s; medians of the runs"
    print_table(title, rows, out, header)
    print(f"p99 with a writer thread / inline: {r['p99_thread_x_inline']:.2f}", file=out)


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--runs", type=int, default=2, help="runs of each writer (default 2)")
    parser.add_argument("--rate", type=float, default=500.0, help="messages/s (default 500)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds a run (default 10)")
    add_run_options(parser, "the daemons' stores go", "the stores and logs")
    args = parser.parse_args()
    result = run_in_workdir(args, "stores and logs", lambda workdir: run(args, workdir))
    publish(args, result, report)


if __name__ == "__main__":
    main()
