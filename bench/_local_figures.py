"""The figures of ``bench/local.py`` and what it makes of them: each row's figure
names, the targets, the medians and ratios of the rounds' samples, the CPU
reference loop that makes CPU figures compare across machines, and the table
printed.

``bench/local.py`` measures (its module docstring says what each row and figure
is); this module only names, summarises and prints. ``bench/transfer.py`` uses
:class:`Target` for its own target.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Literal, TextIO

import _workloads as w

# The figure each throughput row reports its rate under, and the suffix of its CPU figures.
RATE_KEYS = {
    "send-1": "send_1_client_per_s",
    "send-8": "send_8_clients_per_s",
    "send-100": "send_100_per_commit_msgs_per_s",
    "receive-1": "receive_1_client_per_s",
    "receive-8": "receive_8_clients_per_s",
}
CPU_SUFFIXES = {
    "send-1": "1_client",
    "send-8": "8_clients",
    "send-100": "send_100_per_commit",
    "receive-1": "receive_1_client",
    "receive-8": "receive_8_clients",
}
# Ratio figure -> (rate figure, messages per commit).
RATIOS = {
    "send_1_client_x_lmdb": ("send_1_client_per_s", 1),
    "send_8_clients_x_lmdb": ("send_8_clients_per_s", 1),
    "send_100_per_commit_commits_x_lmdb": ("send_100_per_commit_msgs_per_s", 100),
    "receive_1_client_x_lmdb": ("receive_1_client_per_s", 1),
    "receive_8_clients_x_lmdb": ("receive_8_clients_per_s", 1),
}
LABELS = {
    "send-1": "tx sends, 1/commit, 1 client",
    "send-8": "tx sends, 1/commit, 8 clients",
    "send-100": "tx sends, 100/commit, 1 client",
    "receive-1": "tx receives, 1/commit, 1 client",
    "receive-8": "tx receives, 1/commit, 8 clients",
}


@dataclass(frozen=True)
class Target:
    """A target: its figure, the comparison and threshold it is met by, and its text
    in the table."""

    figure: str
    op: Literal[">=", "<="]
    threshold: float
    text: str

    def met(self, value: float | None) -> bool | None:
        if value is None:
            return None
        return value >= self.threshold if self.op == ">=" else value <= self.threshold


TARGETS = (
    Target("send_1_client_x_lmdb", ">=", 0.65, ">= 0.65 x LMDB"),
    Target("send_8_clients_x_lmdb", ">=", 1.8, ">= 1.8 x LMDB"),
    Target("send_100_per_commit_msgs_per_s", ">=", 60_000.0, ">= 60,000 msg/s"),
    Target("receive_1_client_x_lmdb", ">=", 0.6, ">= 0.6 x LMDB"),
    Target("latency_p99_ms", "<=", 1.0, "<= 1 ms"),
)
TARGET_OF = {target.figure: target for target in TARGETS}


#: Iterations of the reference loop (``for i in range(N): s += i``).
LOOP_ITERATIONS = 5_000_000
#: Messages each CPU figure's operation carries (the row of 100 per commit: 100).
MESSAGES_PER_OP = {"send_100_per_commit": 100}


#: The reference loop, run as a script's top level runs it (global names).
_LOOP = compile(f"s = 0\nfor i in range({LOOP_ITERATIONS}):\n    s += i\n", "<loop>", "exec")


def loop_iteration_seconds() -> float:
    """Seconds of one iteration of a fixed pure-Python loop, timed here (best of
    three): the unit that makes CPU figures comparable between machines."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        exec(_LOOP, {})
        best = min(best, time.perf_counter() - started)
    return best / LOOP_ITERATIONS


def in_loop_iterations(figures: dict[str, Any], unit: float) -> None:
    """Add each daemon CPU figure as loop iterations per operation (per message at
    100 per commit): ``daemon_cpu_loop_iterations_per_op_<row>``."""
    for suffix in CPU_SUFFIXES.values():
        value = figures.get(f"daemon_cpu_s_per_1000_commits_{suffix}")
        per_op = None
        if value is not None:
            per_op = round(value / 1000 / MESSAGES_PER_OP.get(suffix, 1) / unit)
        figures[f"daemon_cpu_loop_iterations_per_op_{suffix}"] = per_op
    figures["loop_iteration_ns"] = round(unit * 1e9, 3)


def summarise(
    samples: dict[str, list[float]], rows: list[str], seconds: float, runs: int
) -> dict[str, Any]:
    figures: dict[str, float | None] = {
        "lmdb_sync_commits_per_s": None,
        "fsync_per_s": None,
        **dict.fromkeys(RATE_KEYS.values()),
        **dict.fromkeys(RATIOS),
        "latency_p50_ms": None,
        "latency_p99_ms": None,
        "latency_commit_p50_ms": None,
        "latency_commit_p99_ms": None,
        "lmdb_pair_p50_ms": None,
        "lmdb_pair_p99_ms": None,
        "latency_p50_x_commit": None,
        "latency_p99_x_commit": None,
    }
    for suffix in CPU_SUFFIXES.values():
        for kind in ("daemon_cpu_s_per_1000_commits", "bench_cpu_s_per_1000_commits"):
            figures[f"{kind}_{suffix}"] = None
        for kind in ("daemon_cpu_busy", "bench_cpu_busy"):
            figures[f"{kind}_{suffix}"] = None
    for figure, values in samples.items():
        samples[figure] = [round(value, 4) for value in values]
        figures[figure] = round(statistics.median(values), 4)
    lmdb_rate = figures["lmdb_sync_commits_per_s"]
    for ratio, (figure, per_commit) in RATIOS.items():
        value = figures[figure]
        if value is not None and lmdb_rate:
            figures[ratio] = round(value / per_commit / lmdb_rate, 4)
    for p in ("p50", "p99"):
        value, commit = figures[f"latency_{p}_ms"], figures[f"latency_commit_{p}_ms"]
        if value is not None and commit:
            figures[f"latency_{p}_x_commit"] = round(value / commit, 4)
    targets = {
        t.figure: {
            "op": t.op,
            "threshold": t.threshold,
            "value": figures[t.figure],
            "met": t.met(figures[t.figure]),
        }
        for t in TARGETS
    }
    return {
        **figures,
        "runs": runs,
        "seconds": seconds,
        "cores": os.cpu_count(),
        "body_bytes": len(w.BODY),
        "rows": rows,
        "samples": samples,
        "targets": targets,
    }


def _met_text(met: bool | None) -> str:
    return "" if met is None else ("yes" if met else "NO")


def report(result: dict[str, Any], out: TextIO) -> None:
    lines: list[tuple[str, str, str, str, str]] = []
    rows: list[str] = result["rows"]

    def add(label: str, figure: str, value_text: str, ratio: str | None = None) -> None:
        target = TARGET_OF.get(figure) or (TARGET_OF.get(ratio) if ratio else None)
        ratio_value = result.get(ratio) if ratio else None
        met = result["targets"][target.figure]["met"] if target else None
        lines.append(
            (
                label,
                value_text,
                f"{ratio_value:.2f}" if ratio_value is not None else "",
                target.text if target else "",
                _met_text(met),
            )
        )

    if "fsync" in rows:
        add("disk fdatasync", "fsync_per_s", f"{result['fsync_per_s']:,.0f}/s")
    lmdb_rate = result["lmdb_sync_commits_per_s"]
    lines.append(("LMDB synced commit (1 put)", f"{lmdb_rate:,.0f}/s", "1.00", "ceiling", ""))
    for row, rate_key in RATE_KEYS.items():
        if row in rows:
            unit = " msg/s" if row == "send-100" else "/s"
            ratio = next(r for r, (f, _) in RATIOS.items() if f == rate_key)
            add(LABELS[row], rate_key, f"{result[rate_key]:,.0f}{unit}", ratio)
    if "latency" in rows:
        for p in ("p50", "p99"):
            figure = f"latency_{p}_ms"
            add(f"commit-to-receive at 500/s, {p}", figure, f"{result[figure]:.2f} ms")
        for p in ("p50", "p99"):
            commit = result[f"latency_commit_{p}_ms"]
            add(f"  the sender's commit, {p}", "", f"{commit:.2f} ms")
        for p in ("p50", "p99"):
            pair = result[f"lmdb_pair_{p}_ms"]
            add(f"  two LMDB commits in a row, {p}", "", f"{pair:.2f} ms")
    for row, clients in (("send-1", "1 client"), ("send-8", "8 clients")):
        if row in rows:
            figure = f"daemon_cpu_s_per_1000_commits_{CPU_SUFFIXES[row]}"
            add(f"daemon CPU s per 1,000 commits, {clients}", figure, f"{result[figure]:.3f} s")

    header = ("measure", "result", "x LMDB", "target", "met")
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(5)]
    print(
        f"qmgr local benchmark: {result['cores']} cores, {result['runs']} "
        f"run{'s' if result['runs'] != 1 else ''} of {result['seconds']:g} s "
        f"(median), {result['body_bytes']}-byte bodies, "
        "daemon log level info",
        file=out,
    )
    for line in [header, *lines]:
        print(
            f"  {line[0]:<{widths[0]}}  {line[1]:>{widths[1]}}  {line[2]:>{widths[2]}}"
            f"  {line[3]:<{widths[3]}}  {line[4]}".rstrip(),
            file=out,
        )
    judged = [t for t in result["targets"].values() if t["met"] is not None]
    print(
        f"  targets met: {sum(t['met'] for t in judged)} of {len(judged)}"
        + ("" if len(judged) == len(TARGETS) else f" measured ({len(TARGETS)} in all)"),
        file=out,
    )
    cpu_rows = [row for row in CPU_SUFFIXES if row in rows]
    if cpu_rows:
        print(
            "CPU during the timed loops, per 1,000 commits and as the share of one core "
            "kept busy (a client process near 100% set that row's figure):",
            file=out,
        )
        width = max(len(LABELS[row]) for row in cpu_rows)
        for row in cpu_rows:
            suffix = CPU_SUFFIXES[row]
            daemon_cpu = result[f"daemon_cpu_s_per_1000_commits_{suffix}"]
            daemon_busy = result[f"daemon_cpu_busy_{suffix}"]
            own_cpu = result[f"bench_cpu_s_per_1000_commits_{suffix}"]
            own_busy = result[f"bench_cpu_busy_{suffix}"]
            iterations = result.get(f"daemon_cpu_loop_iterations_per_op_{suffix}")
            per = "message" if suffix in MESSAGES_PER_OP else "operation"
            loops = "" if iterations is None else f", {iterations:,} loop iterations a {per}"
            print(
                f"  {LABELS[row]:<{width}}  daemon {daemon_cpu:.3f} s ({daemon_busy:.0%}{loops}),"
                f" benchmark clients {own_cpu:.3f} s ({own_busy:.0%})",
                file=out,
            )
    if result.get("scrapes") is not None:
        print(
            f"/metrics scraped {result['scrapes']:.0f} times while the rows ran"
            f" ({result.get('scrape_failures') or 0:.0f} failed)",
            file=out,
        )
