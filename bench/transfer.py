"""Delivery between two queue managers on loopback, beside the same run's local ceilings.

Run::

    .venv/bin/python bench/transfer.py [--seconds 5] [--drain-messages 100000]
                                       [--only drain|live|latency] [--tls] [--json] [--keep]

Daemons A and B are started as ``bench/local.py`` starts its daemon, at their
default settings (``--daemon-arg`` passes arguments to both). A sends to
``DIRECT=TCP:127.0.0.1:<B's peer port>\\private$\\<queue>``; B's peer port is
chosen before B first starts. Bodies are 256 bytes. First ``bench/local.py``
measures the ceilings (LMDB synced commits; 100-message transactions from one
client) with its own daemon, stopped before A and B start; LMDB again at the end.

``drain``: ``--drain-messages`` messages, 100 per transaction, committed on A
while B is down; messages/s from B's start until all are in B's queue (depth
polled every 50 ms), the count checked exactly once A has every OrderAck. A's
outgoing queue is paused while loading and resumed once B answers, so that
A's reconnect back-off is not measured. Target >= 30,000/s.
``live``: 8 client threads commit 1 message per transaction on A for
``--seconds``: A's commit rate, the rate at which messages reached B's queue
in that window, their ratio, the time after it until A's outgoing queues were
empty, and the most messages they held (``qm.outgoing()`` every 50 ms).
``latency``: commit on A to ``qm.receive`` on B at 500 single-message
transactions/s for ``--seconds``, the body holding the commit's
``time.perf_counter()``: p50, p99, max, and the rate the sender achieved.
Then the same with B's consumer receiving each message in a transaction of
its own and committing it, the latency taken when the receive returns
(``latency_tx_*``), as the side-by-side W4's consumer does on one host.

``--tls`` runs everything a second time with TLS on both daemons' ports
(mutual TLS between A and B, client certificates required) and prints that
table and the plain-to-TLS ratios (``tls`` and ``tls_x_plain`` in the JSON).

``--json`` prints one JSON object to stdout (the table goes to stderr);
figures of measures not run are null. The daemons' log warnings and errors
are counted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _tls
import _workloads as w
import local
from _command import add_run_options, finish_workdir, report_out, script_parser
from _daemon import Daemon, free_port, fresh_workdir, remote
from _local_figures import Target
from _report import dump_json, print_table, print_tls_x_plain, progress, tls_x_plain
from _tls import connect_to

from qmgr.client import QueueManager

MEASURES = ("drain", "live", "latency")
POLL = 0.05  # seconds between polls of queue depths and outgoing queues
STALL = 30.0  # seconds without progress before a wait gives up
LIVE_CLIENTS = 8
LATENCY_RATE = 500.0
STAMP = struct.Struct("!dQ")  # the send time (perf_counter) and the message's index
TARGETS = (Target("drain_msgs_per_s", ">=", 30_000.0, ">= 30,000 msg/s"),)
FIGURES = (
    "drain_msgs_per_s", "drain_from_b_ready_msgs_per_s", "drain_b_startup_s",
    "drain_load_msgs_per_s", "drain_a_cpu_busy", "drain_b_cpu_busy", "live_commit_per_s",
    "live_delivered_per_s", "live_delivered_x_committed", "live_tail_s", "live_committed",
    "live_max_waiting", "live_max_unacknowledged", "live_a_cpu_busy", "live_b_cpu_busy",
    "live_bench_cpu_busy", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
    "latency_sent_per_s", "latency_tx_p50_ms", "latency_tx_p99_ms", "latency_tx_max_ms",
    "latency_tx_sent_per_s", "lmdb_sync_commits_per_s_after",
)  # fmt: skip


def depth(qm: QueueManager, queue: str) -> int:
    return next(q.depth for q in qm.list_queues() if q.name == queue)


def backlog(qm: QueueManager) -> tuple[int, int]:
    """Messages A's outgoing queues hold: not yet sent, and sent but not yet acknowledged."""
    outgoing = qm.outgoing()
    return sum(o.waiting for o in outgoing), sum(o.unacknowledged for o in outgoing)


def start_threads(targets: list[Callable[[], None]]) -> Callable[[], None]:
    """Run each target on a thread; the function returned joins them all, re-raising a failure."""
    failures: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,), daemon=True) for t in targets]
    for thread in threads:
        thread.start()

    def join() -> None:
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]

    return join


def wait(
    qa: QueueManager, qb: QueueManager, queue: str, expected: int, *, acked: bool = False,
    peaks: list[int] | None = None,
) -> float:  # fmt: skip
    """Poll until ``queue`` on B holds ``expected`` messages (and, if ``acked``, A's
    outgoing queues are empty and nothing was dead-lettered); when that was first seen.

    ``peaks`` gets the most messages A's outgoing queues held (waiting, unacknowledged).
    """
    seen: object = None
    last_change = time.perf_counter()
    while True:
        now, count = time.perf_counter(), depth(qb, queue)
        held = backlog(qa) if acked or peaks is not None else (0, 0)
        if peaks is not None:
            peaks[:] = map(max, peaks, held)
        if count > expected:
            raise SystemExit(f"{queue}: {count:,} messages on B, more than the {expected:,} sent")
        if count == expected and not (acked and any(held)):
            break
        if (count, held) != seen:
            seen, last_change = (count, held), now
        elif now - last_change > STALL:
            errors = "; ".join({o.last_error for o in qa.outgoing() if o.last_error})
            raise SystemExit(
                f"{queue}: stuck for {STALL:g} s at {count:,} of {expected:,} messages on B, "
                f"{held} waiting and unacknowledged on A ({errors or 'no error on A'})"
            )
        time.sleep(POLL)
    if acked and (dead := sum(q.depth for q in qb.list_queues() if q.kind != "normal")):
        raise SystemExit(f"{queue}: {dead} messages were dead-lettered on B")
    return now


class Pair:
    """A, and B with its peer port chosen before it first starts."""

    b: Daemon

    def __init__(self, workdir: Path, daemon_args: list[str], stack: contextlib.ExitStack):
        self.workdir, self.stack, self.starts = workdir, stack, 0
        self.b_port = free_port()
        self.b_args = [*daemon_args, "--listen", f"127.0.0.1:{self.b_port}"]
        self.a = stack.enter_context(Daemon(workdir / "a", workdir / "a.log", daemon_args))
        self.b = self.start_b()
        with connect_to(self.b.address) as qb:
            for queue in (*MEASURES, "latency_tx"):
                qb.create_queue(queue, transactional=True)

    def start_b(self) -> Daemon:
        self.starts += 1
        log = self.workdir / f"b-{self.starts}.log"
        self.b = self.stack.enter_context(Daemon(self.workdir / "b", log, self.b_args))
        return self.b


def measure_drain(pair: Pair, messages: int, clients: int) -> dict[str, float]:
    dest = remote(pair.b_port, "drain")
    batches = [100] * (messages // 100) + ([messages % 100] if messages % 100 else [])
    pair.b.stop()

    def load(share: list[int]) -> Callable[[], None]:
        def loader() -> None:
            with connect_to(pair.a.address) as qm:
                for size in share:
                    with qm.begin() as tx:
                        for _ in range(size):
                            tx.send(dest, w.BODY)

        return loader

    with connect_to(pair.a.address) as qa:
        load(batches[:1])()  # creates the outgoing queue, which peering then picks up
        start = time.perf_counter()
        while not qa.outgoing() and time.perf_counter() - start < STALL:
            time.sleep(0.001)
        qa.pause_outgoing(dest)
        start = time.perf_counter()
        start_threads([load(batches[1 + i :: clients]) for i in range(clients)])()
        loaded = time.perf_counter() - start
        if (held := backlog(qa)) != (messages, 0):
            raise SystemExit(f"drain: A's outgoing queues hold {held}, not ({messages}, 0)")
        while any(o.next_attempt for o in qa.outgoing()):  # A's back-off since B went down
            time.sleep(POLL)
        b_start = time.perf_counter()
        b = pair.start_b()
        with connect_to(b.address) as qb:
            b_ready = time.perf_counter()
            a_cpu, b_cpu = pair.a.cpu_seconds(), b.cpu_seconds()
            qa.resume_outgoing(dest)
            done = wait(qa, qb, "drain", messages)
            a_cpu, b_cpu = pair.a.cpu_seconds() - a_cpu, b.cpu_seconds() - b_cpu
            wait(qa, qb, "drain", messages, acked=True)
    return {
        "drain_msgs_per_s": messages / (done - b_start),
        "drain_from_b_ready_msgs_per_s": messages / (done - b_ready),
        "drain_b_startup_s": b_ready - b_start,
        "drain_load_msgs_per_s": (messages - batches[0]) / loaded,
        "drain_a_cpu_busy": a_cpu / (done - b_ready),
        "drain_b_cpu_busy": b_cpu / (done - b_ready),
    }


def measure_live(pair: Pair, seconds: float) -> dict[str, float]:
    dest = remote(pair.b_port, "live")
    counts, in_window = [0] * LIVE_CLIENTS, [0] * LIVE_CLIENTS
    window = [0.0, 0.0]  # start, end

    def open_window() -> None:
        window[:] = [time.perf_counter(), time.perf_counter() + seconds]

    gate = threading.Barrier(LIVE_CLIENTS + 1, action=open_window)

    def client(index: int) -> Callable[[], None]:
        def sender() -> None:
            with connect_to(pair.a.address) as qm:
                gate.wait()
                while time.perf_counter() < window[1]:
                    with qm.begin() as tx:
                        tx.send(dest, w.BODY)
                    counts[index] += 1
                    in_window[index] += time.perf_counter() <= window[1]

        return sender

    peaks = [0, 0]
    with connect_to(pair.a.address) as qa, connect_to(pair.b.address) as qb:
        join = start_threads([client(i) for i in range(LIVE_CLIENTS)])
        gate.wait(timeout=STALL)
        a_cpu, b_cpu, own_cpu = pair.a.cpu_seconds(), pair.b.cpu_seconds(), time.process_time()
        while (left := window[1] - time.perf_counter()) > 0:
            peaks[:] = map(max, peaks, backlog(qa))
            time.sleep(min(POLL, left))
        delivered = depth(qb, "live")
        a_cpu, b_cpu = pair.a.cpu_seconds() - a_cpu, pair.b.cpu_seconds() - b_cpu
        own_cpu = time.process_time() - own_cpu
        join()
        committed = sum(counts)
        empty = wait(qa, qb, "live", committed, acked=True, peaks=peaks)
    commits = sum(in_window)
    return {
        "live_commit_per_s": commits / seconds,
        "live_delivered_per_s": delivered / seconds,
        "live_delivered_x_committed": delivered / commits,
        "live_tail_s": empty - window[1],
        "live_committed": committed,
        "live_max_waiting": peaks[0],
        "live_max_unacknowledged": peaks[1],
        "live_a_cpu_busy": a_cpu / seconds,
        "live_b_cpu_busy": b_cpu / seconds,
        "live_bench_cpu_busy": own_cpu / seconds,
    }


def measure_latency(pair: Pair, seconds: float, *, transactional: bool = False) -> dict[str, float]:
    """Commit on A to receive on B; ``transactional``: B's consumer receives each
    message in a transaction of its own and commits it, the latency taken when
    the receive returns (figures ``latency_tx_*``)."""
    queue = "latency_tx" if transactional else "latency"
    dest = remote(pair.b_port, queue)
    count = int(seconds * LATENCY_RATE)
    latencies: list[float] = []
    ready, sending = threading.Event(), [0.0, 0.0]  # the sender's start and end

    def take(qb: QueueManager) -> tuple[Any, float]:
        if not transactional:
            message = qb.receive(queue, timeout=STALL)
            return message, time.perf_counter()
        with qb.begin() as tx:
            message = tx.receive(queue, timeout=STALL)
            return message, time.perf_counter()

    def receiver() -> None:
        with connect_to(pair.b.address) as qb:
            ready.set()
            for index in range(count):
                message, now = take(qb)
                if message is None:
                    raise SystemExit(f"latency: message {index} did not arrive in {STALL:g} s")
                sent, number = STAMP.unpack_from(message.body)
                if number != index:
                    raise SystemExit(f"latency: message {number} arrived as number {index}")
                latencies.append(now - sent)

    def sender() -> None:
        pad = w.BODY[STAMP.size :]
        ready.wait(timeout=STALL)
        with connect_to(pair.a.address) as qa:
            next_send = sending[0] = time.perf_counter()
            for index in range(count):
                time.sleep(max(0.0, next_send - time.perf_counter()))
                tx = qa.begin()
                tx.send(dest, STAMP.pack(time.perf_counter(), index) + pad)
                tx.commit()
                next_send += 1.0 / LATENCY_RATE
            sending[1] = time.perf_counter()

    start_threads([receiver, sender])()
    with connect_to(pair.a.address) as qa, connect_to(pair.b.address) as qb:
        wait(qa, qb, queue, 0, acked=True)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    name = "latency_tx" if transactional else "latency"
    return {
        f"{name}_p50_ms": statistics.median(latencies) * 1000,
        f"{name}_p99_ms": p99 * 1000,
        f"{name}_max_ms": latencies[-1] * 1000,
        f"{name}_sent_per_s": count / (sending[1] - sending[0]),
    }


#: Figures compared between the plain run and the TLS run (``--tls``).
TLS_COMPARED = (
    "drain_msgs_per_s",
    "live_commit_per_s",
    "live_delivered_per_s",
    "latency_p50_ms",
    "latency_p99_ms",
)


def log_problems(workdir: Path) -> dict[str, int]:
    """Warnings, errors and other output in A's and B's logs: ``"file: level event"`` -> count."""
    found: Counter[str] = Counter()
    for path in sorted(workdir.glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            entry = json.loads(line) if line.startswith("{") else {"level": "?", "event": line[:80]}
            if entry.get("level") not in ("debug", "info"):
                found[f"{path.name}: {entry.get('level')} {entry.get('event')}"] += 1
    return dict(found)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    measures = [args.only] if args.only else list(MEASURES)
    progress("ceilings (bench/local.py: lmdb, send-100)")
    (workdir / "ceilings").mkdir()
    ceilings = local.run(
        ["lmdb", "send-100"], args.ceiling_seconds, 1, workdir / "ceilings", args.daemon_arg
    )
    result: dict[str, Any] = dict.fromkeys(FIGURES)
    with contextlib.ExitStack() as stack:
        pair = Pair(workdir, args.daemon_arg, stack)
        for measure in measures:
            progress(measure)
            if measure == "drain":
                result.update(measure_drain(pair, args.drain_messages, args.load_clients))
            elif measure == "live":
                result.update(measure_live(pair, args.seconds))
            else:
                result.update(measure_latency(pair, args.seconds))
                result.update(measure_latency(pair, args.seconds, transactional=True))
    progress("lmdb, again")
    result["lmdb_sync_commits_per_s_after"] = w.lmdb_commit_rate(workdir, args.ceiling_seconds / 2)
    progress("")
    lmdb_rate = result["lmdb_sync_commits_per_s"] = ceilings["lmdb_sync_commits_per_s"][0]
    send_100 = ceilings["send_100_per_commit_msgs_per_s"][0]
    result["send_100_per_commit_msgs_per_s"] = send_100
    for figure in ("drain_msgs_per_s", "drain_from_b_ready_msgs_per_s", "drain_load_msgs_per_s"):
        value = result[figure]
        result[figure.replace("_per_s", "_x_send_100")] = value and value / send_100
    result["live_commit_x_lmdb"] = result["live_commit_per_s"] and (
        result["live_commit_per_s"] / lmdb_rate
    )
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
    result["targets"] = {
        t.figure: {"op": t.op, "threshold": t.threshold, "value": result[t.figure],
                   "met": t.met(result[t.figure])}
        for t in TARGETS
    }  # fmt: skip
    result.update(
        measures=measures, seconds=args.seconds, ceiling_seconds=args.ceiling_seconds,
        drain_messages=args.drain_messages, load_clients=args.load_clients,
        live_clients=LIVE_CLIENTS, latency_rate=LATENCY_RATE, body_bytes=len(w.BODY),
        daemon_args=args.daemon_arg, cores=os.cpu_count(),
        daemon_log_problems=log_problems(workdir),
    )  # fmt: skip
    return result


def report(r: dict[str, Any], out: TextIO) -> None:
    rows = [
        ("LMDB synced commit (1 put)", f"{r['lmdb_sync_commits_per_s']:,.0f}/s", "ceiling",
         f"at the end: {r['lmdb_sync_commits_per_s_after']:,.0f}/s"),
        ("local tx sends, 100/commit", f"{r['send_100_per_commit_msgs_per_s']:,.0f} msg/s",
         "ceiling", ""),
    ]  # fmt: skip
    if r["drain_msgs_per_s"] is not None:
        met = "yes" if r["targets"]["drain_msgs_per_s"]["met"] else "NO"
        rows += [
            (f"drain {r['drain_messages']:,}, from B's start", f"{r['drain_msgs_per_s']:,.0f}"
             " msg/s", f"{r['drain_msgs_x_send_100']:.2f} x send-100", f">= 30,000/s: {met}"),
            (f"  from B answering ({r['drain_b_startup_s']:.2f} s later)",
             f"{r['drain_from_b_ready_msgs_per_s']:,.0f} msg/s",
             f"{r['drain_from_b_ready_msgs_x_send_100']:.2f} x send-100",
             f"CPU: A {r['drain_a_cpu_busy']:.0%}, B {r['drain_b_cpu_busy']:.0%}"),
            (f"  loading A: {r['load_clients']} clients, 100/commit",
             f"{r['drain_load_msgs_per_s']:,.0f} msg/s",
             f"{r['drain_load_msgs_x_send_100']:.2f} x send-100", ""),
        ]  # fmt: skip
    if r["live_commit_per_s"] is not None:
        rows += [
            (f"live, {LIVE_CLIENTS} clients, 1/commit: on A", f"{r['live_commit_per_s']:,.0f}/s",
             f"{r['live_commit_x_lmdb']:.2f} x LMDB",
             f"CPU: A {r['live_a_cpu_busy']:.0%}, B {r['live_b_cpu_busy']:.0%}, "
             f"clients {r['live_bench_cpu_busy']:.0%}"),
            ("  delivered to B in the window", f"{r['live_delivered_per_s']:,.0f}/s",
             f"{r['live_delivered_x_committed']:.2f} x committed",
             f"all {r['live_committed']:,} acked {r['live_tail_s']:.2f} s after"),
            ("  most in outgoing: waiting / unacked",
             f"{r['live_max_waiting']:,} / {r['live_max_unacknowledged']:,}", "", ""),
        ]  # fmt: skip
    for name, what in (("latency", "receive"), ("latency_tx", "receive in a transaction")):
        if r[f"{name}_p50_ms"] is None:
            continue
        rows += [
            (
                f"commit on A -> {what} on B, {p}",
                f"{r[f'{name}_{p}_ms']:.2f} ms",
                "",
                f"sent at {r[f'{name}_sent_per_s']:.0f}/s" if p == "p50" else "",
            )
            for p in ("p50", "p99", "max")
        ]
    title = (
        f"qmgr transfer benchmark: A -> B on loopback, {r['cores']} cores, one run; live and "
        f"latency (at {LATENCY_RATE:g}/s) {r['seconds']:g} s, {r['body_bytes']}-byte bodies"
    )
    print_table(title, rows, out)
    problems = r["daemon_log_problems"]
    print("daemon log warnings and errors:" + ("" if problems else " none"), file=out)
    for text, count in sorted(problems.items()):
        print(f"  {count:>6} x {text}", file=out)


def main() -> None:
    parser = script_parser(__doc__)
    add = parser.add_argument
    add("--seconds", type=float, default=5.0, help="length of live and latency")
    add("--drain-messages", type=int, default=100_000, metavar="N", help="backlog to drain")
    add("--load-clients", type=int, default=4, help="clients loading the backlog on A")
    add("--ceiling-seconds", type=float, default=3.0, help="bench/local.py's --seconds")
    add("--only", choices=MEASURES, help="run one measure (the ceilings always run)")
    add_run_options(parser, "the stores go", "the stores and the daemons' logs")
    add("--tls", action="store_true", help="run again with TLS on both ports of both daemons")
    add(
        "--daemon-arg", action="append", default=[], metavar="ARG",
        help="an argument for both daemons (repeatable): --daemon-arg=--set=peers.window=256",
    )  # fmt: skip
    args = parser.parse_args()
    if args.seconds <= 0 or args.ceiling_seconds <= 0:
        parser.error("--seconds and --ceiling-seconds must be positive")
    if args.drain_messages <= 100 or args.load_clients < 1:
        parser.error("--drain-messages must be above 100 and --load-clients at least 1")

    workdir = fresh_workdir(args.data_dir)
    try:
        (workdir / "plain").mkdir()
        result = run(args, workdir / "plain")
        if args.tls:
            result["tls"] = run(args, _tls.enable_in(workdir))
            result["tls_x_plain"] = tls_x_plain(result, result["tls"], TLS_COMPARED)
    except KeyboardInterrupt:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    except BaseException:
        progress("")
        print(f"failed; stores and logs kept in {workdir}:", log_problems(workdir), file=sys.stderr)
        raise
    finish_workdir(args, "stores and logs", workdir)
    out = report_out(args)
    report(result, out)
    if args.tls:
        print("\nwith mutual TLS between A and B and TLS to the clients:", file=out)
        report(result["tls"], out)
        print_tls_x_plain(result["tls_x_plain"], out)
    if args.json:
        dump_json(result)


if __name__ == "__main__":
    main()
