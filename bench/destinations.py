"""Sends through one next hop while the sender holds many other outgoing queues.

Run::

    .venv/bin/python bench/destinations.py [--destinations 3000] [--commits 500] [--json]

Daemons A and B are started as ``bench/transfer.py`` starts them (A with
``peers.outgoing_cleanup_after=0``, so that its idle queues last); B has
``--destinations + 1`` transactional queues. First A commits one message to
each of ``--destinations`` queues on B, one transaction each (A then holds as
many outgoing queues, all through the one link to B), and waits until all are
delivered and acknowledged. Then, in rounds, A commits ``--commits``
single-message transactions to the one other queue on B, once with the idle
queues and once on a second pair of daemons that never had them: commits/s
and A's CPU per commit, each with the idle queues as a ratio of the same
without them (1.0: the idle queues cost nothing). Bodies are 256 bytes.

``--json`` prints one JSON object to stdout (the table goes to stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _command import add_run_options, publish, run_in_workdir, script_parser
from _daemon import Daemon, free_port, remote
from _report import print_table
from _tls import connect_to

from qmgr.client import QueueManager

BODY = b"x" * 256
POLL = 0.05  # seconds between polls of A's outgoing queues
STALL = 120.0  # seconds without every outgoing queue emptied before giving up


def wait_empty(qa: QueueManager) -> None:
    """Until every outgoing queue of A is empty (delivered and acknowledged)."""
    deadline = time.monotonic() + STALL
    while any(o.waiting or o.unacknowledged for o in qa.outgoing()):
        if time.monotonic() > deadline:
            raise SystemExit(f"A's outgoing queues not empty after {STALL:g} s")
        time.sleep(POLL)


class Pair:
    """A and B, with ``queues`` transactional queues on B and, when ``idle`` is on,
    one outgoing queue on A for each but the first."""

    def __init__(self, workdir: Path, stack: contextlib.ExitStack, queues: int, idle: bool):
        self.b_port = free_port()
        # The idle queues must last the run: no cleanup (peers.outgoing_cleanup_after).
        keep = ["--set", "peers.outgoing_cleanup_after=0"]
        self.a = stack.enter_context(Daemon(workdir / "a", workdir / "a.log", keep))
        b_args = ["--listen", f"127.0.0.1:{self.b_port}"]
        self.b = stack.enter_context(Daemon(workdir / "b", workdir / "b.log", b_args))
        with connect_to(self.b.address) as qb:
            for index in range(queues if idle else 1):
                qb.create_queue(f"q{index}", transactional=True)
        self.qa = stack.enter_context(connect_to(self.a.address))
        if idle:
            for index in range(1, queues):
                with self.qa.begin() as tx:
                    tx.send(remote(self.b_port, f"q{index}"), BODY)
            wait_empty(self.qa)

    def commits(self, count: int) -> tuple[float, float]:
        """``count`` single-message commits to ``q0`` on B: commits/s and A's CPU
        seconds per commit (its outgoing queue emptied after each round)."""
        destination, qa = remote(self.b_port, "q0"), self.qa
        cpu, start = self.a.cpu_seconds(), time.perf_counter()
        for _ in range(count):
            with qa.begin() as tx:
                tx.send(destination, BODY)
        elapsed = time.perf_counter() - start
        used = self.a.cpu_seconds() - cpu
        wait_empty(qa)
        return count / elapsed, used / count


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    samples: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with contextlib.ExitStack() as stack:
        (workdir / "idle").mkdir()
        (workdir / "none").mkdir()
        start = time.perf_counter()
        pairs = {
            True: Pair(workdir / "idle", stack, args.destinations + 1, idle=True),
            False: Pair(workdir / "none", stack, args.destinations + 1, idle=False),
        }
        loading = time.perf_counter() - start
        for round_ in range(args.rounds):
            for idle in (True, False) if round_ % 2 == 0 else (False, True):
                samples[idle].append(pairs[idle].commits(args.commits))
        held = len(pairs[True].qa.outgoing())
        assert held == args.destinations + 1, f"A held {held} outgoing queues at the end"
    result: dict[str, Any] = {"destinations": args.destinations, "setup_s": round(loading, 1)}
    for idle, name in ((True, "idle"), (False, "none")):
        result[f"commits_per_s_{name}"] = round(statistics.median(s[0] for s in samples[idle]))
        cpu = statistics.median(s[1] for s in samples[idle])
        result[f"a_cpu_ms_per_commit_{name}"] = round(cpu * 1000, 3)
    result["commits_idle_x_none"] = round(
        result["commits_per_s_idle"] / result["commits_per_s_none"], 3
    )
    result["a_cpu_idle_x_none"] = round(
        result["a_cpu_ms_per_commit_idle"] / result["a_cpu_ms_per_commit_none"], 3
    )
    return result


def report(r: dict[str, Any], out: TextIO) -> None:
    n = r["destinations"]
    rows = [
        (
            "commits/s to one remote queue",
            f"{r['commits_per_s_idle']:,}",
            f"{r['commits_idle_x_none']:.2f} x without",
            f"{r['commits_per_s_none']:,}/s without the idle queues",
        ),
        (
            "A's CPU per commit",
            f"{r['a_cpu_ms_per_commit_idle']:.3f} ms",
            f"{r['a_cpu_idle_x_none']:.2f} x without",
            f"{r['a_cpu_ms_per_commit_none']:.3f} ms without",
        ),
    ]
    title = (
        f"qmgr destinations benchmark: A -> B on loopback, with {n:,} idle outgoing queues "
        f"on A's link to B (set up in {r['setup_s']:g} s), medians of rounds"
    )
    print_table(title, rows, out)


def main() -> None:
    parser = script_parser(__doc__)
    add = parser.add_argument
    add("--destinations", type=int, default=3000, help="idle outgoing queues on A")
    add("--commits", type=int, default=500, help="single-message commits per round")
    add("--rounds", type=int, default=3, help="rounds (each measures both pairs)")
    add_run_options(parser, "the stores go", "the stores and the daemons' logs")
    args = parser.parse_args()
    if args.destinations < 1 or args.commits < 1 or args.rounds < 1:
        parser.error("--destinations, --commits and --rounds must be at least 1")
    result = run_in_workdir(args, "stores and logs", lambda workdir: run(args, workdir))
    publish(args, result, report)


if __name__ == "__main__":
    main()
