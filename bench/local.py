"""Single-host throughput, latency and CPU cost of a real qmgr daemon, next to the disk's ceilings.

Run::

    .venv/bin/python bench/local.py [--seconds 3] [--runs 3] [--data-dir DIR]
                                    [--only ROW,ROW,...] [--tls] [--json]

The daemon is started as a subprocess (``python -m qmgr serve``) at the
``info`` log level, as in production (commits are counted, not logged; the log
goes to a file), with its store in a fresh directory on the disk under test (default:
``./var/bench``). Bodies are 256 bytes. Everything is measured in the same
run, in ``--runs`` rounds that each measure every row once; each figure is
the median over the rounds. Rates of commits are also given as a ratio to the
same run's LMDB synced-commit rate (median over median), because the disk's
speed drifts between runs and the ratios compare better than absolute figures.

The rows (names for ``--only``; LMDB is always measured, the ratios need it):

``fsync``
    the disk's fdatasync rate: 512-byte overwrites of one file, each synced.
``lmdb``
    LMDB synced commits of one put each, in this process. The ceiling for one
    client: an LMDB commit is two device flushes.
``send-1``
    transactional sends, 1 message per commit, 1 blocking client
    (``with qm.begin() as tx: tx.send(queue, body)``). Target >= 0.65 x LMDB.
``send-8``
    the same from 8 concurrent trio clients (``async with qm.begin()``), whose
    commits share syncs (group commit). Target >= 1.8 x LMDB.
``send-100``
    100 messages per commit, 1 client, in messages per second. Target >=
    60,000 messages/s. Its ratio to LMDB is that of its commits (messages / 100).
``receive-1``
    transactional receives, 1 per commit, 1 blocking client
    (``with qm.begin() as tx: tx.receive(queue)``) from a queue prefilled with
    100 messages per commit. Target >= 0.6 x LMDB.
``receive-8``
    the same from 8 concurrent trio clients (``async with qm.begin()``).
``latency``
    p50 and p99 from a sender calling commit to a blocked receiver, in a
    process of its own, getting the message as a single-message transaction
    (``qm.receive``, which returns once the removal is synced), at a paced 500
    messages/s for at least 4 s. Target p99 <= 1 ms. Beside it, the sender's
    own commit, call to return (``latency_commit_p50_ms``,
    ``latency_commit_p99_ms``, and the latency over it,
    ``latency_p50_x_commit``, ``latency_p99_x_commit``): a receive that
    waits is handed the message in the sender's write, so the two are close.
    And, in this process, two synced LMDB commits in a row (a put, then its
    delete) at the same pace: what the message's write and its removal would
    cost written apart (``lmdb_pair_p50_ms``, ``lmdb_pair_p99_ms``).

Around every daemon row the daemon's CPU time is read from
``/proc/<pid>/stat`` (utime + stime, all its threads) and this process's own
from ``time.process_time()``. The table shows the daemon's CPU seconds per
1,000 commits for ``send-1`` and ``send-8``; the notes under it give both
processes' CPU per 1,000 commits and the share of one core each kept busy
during the timed loop. A client process near 100% means the client side, not
the daemon, set that row's figure.

``--tls`` measures the daemon rows a second time against a daemon with TLS
on both ports and client certificates required (``auth.required``), and
prints that table and each rate as a ratio to the plain one (``tls`` and
``tls_x_plain`` in the JSON).

``--scrape SECONDS`` scrapes the daemon's ``/metrics`` (its HTTP listener) that
often from a thread of this process while the rows run, as a Prometheus
would; the notes say how many scrapes there were. Compare each row with a run
without it to see what scraping costs (``scrapes`` in the JSON; the plain run
only, not ``--tls``).

So that CPU figures compare across machines, the run also times one
iteration of a fixed pure-Python loop (``for i in range(5_000_000): s += i``
at a script's top level, best of three, same interpreter) and gives each
daemon CPU figure as that many iterations per operation (per message for ``send-100``):
``daemon_cpu_loop_iterations_per_op_*`` and ``loop_iteration_ns`` in the JSON,
and in the CPU notes.

``--json`` prints one JSON object to stdout instead of the table (which goes
to stderr): every figure (rates per second, latencies in ms, CPU in seconds,
``*_x_lmdb`` ratios, ``*_busy`` shares of one core), ``runs``, ``seconds``,
``cores``, the per-round ``samples``, and ``targets``: for each target figure
its comparison, threshold, value and whether it was met. Figures of rows not
run are null.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _tls
import _workloads as w
from _command import script_parser
from _daemon import Daemon, fresh_workdir
from _local_figures import (
    CPU_SUFFIXES,
    RATE_KEYS,
    in_loop_iterations,
    loop_iteration_seconds,
    report,
    summarise,
)
from _report import dump_json, print_tls_x_plain, progress, tls_x_plain
from _tls import connect_to

ROWS = ("fsync", "lmdb", "send-1", "send-8", "send-100", "receive-1", "receive-8", "latency")
DAEMON_ROWS = frozenset(ROWS[2:])
LATENCY_RATE = 500.0
LATENCY_MIN_SECONDS = 4.0

# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------


@dataclass
class Bench:
    workdir: Path
    seconds: float
    daemon: Daemon | None
    lmdb_rate: float = 0.0

    @property
    def the_daemon(self) -> Daemon:
        if self.daemon is None:
            raise RuntimeError("this row needs the daemon, which was not started")
        return self.daemon

    def prefill(self, lmdb_multiple: float, at_least_per_s: float) -> int:
        """Enough messages for a receive row that runs up to ``lmdb_multiple`` x LMDB."""
        return int(self.seconds * max(at_least_per_s, lmdb_multiple * self.lmdb_rate)) + 100


def sample_figures(row: str, sample: w.Sample) -> dict[str, float]:
    suffix = CPU_SUFFIXES[row]
    rate = sample.message_rate if row == "send-100" else sample.commit_rate
    return {
        RATE_KEYS[row]: rate,
        f"daemon_cpu_s_per_1000_commits_{suffix}": sample.daemon_cpu_per_1000_commits,
        f"bench_cpu_s_per_1000_commits_{suffix}": sample.own_cpu_per_1000_commits,
        f"daemon_cpu_busy_{suffix}": sample.daemon_busy,
        f"bench_cpu_busy_{suffix}": sample.own_busy,
    }


def measure_fsync(bench: Bench) -> dict[str, float]:
    return {"fsync_per_s": w.fsync_rate(bench.workdir, bench.seconds / 2)}


def measure_lmdb(bench: Bench) -> dict[str, float]:
    bench.lmdb_rate = w.lmdb_commit_rate(bench.workdir, bench.seconds / 2)
    return {"lmdb_sync_commits_per_s": bench.lmdb_rate}


def measure_latency(bench: Bench) -> dict[str, float]:
    seconds = max(bench.seconds, LATENCY_MIN_SECONDS)
    (p50, p99), (commit_p50, commit_p99) = w.latency(
        bench.the_daemon.address, "latency", seconds, LATENCY_RATE
    )
    pair_p50, pair_p99 = w.lmdb_pair_latency(bench.workdir, seconds, LATENCY_RATE)
    return {
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "latency_commit_p50_ms": commit_p50,
        "latency_commit_p99_ms": commit_p99,
        "lmdb_pair_p50_ms": pair_p50,
        "lmdb_pair_p99_ms": pair_p99,
    }


SAMPLED: dict[str, Callable[[Bench], w.Sample]] = {
    "send-1": lambda b: w.sends_one_client(b.the_daemon, "send", b.seconds, 1),
    "send-8": lambda b: w.sends_concurrent(b.the_daemon, "send", b.seconds, 8),
    "send-100": lambda b: w.sends_one_client(b.the_daemon, "send", b.seconds, 100),
    "receive-1": lambda b: w.receives_one_client(
        b.the_daemon, "receive", b.seconds, b.prefill(2.0, 5_000)
    ),
    "receive-8": lambda b: w.receives_concurrent(
        b.the_daemon, "receive", b.seconds, 8, b.prefill(4.0, 10_000)
    ),
}
PLAIN: dict[str, Callable[[Bench], dict[str, float]]] = {
    "fsync": measure_fsync,
    "lmdb": measure_lmdb,
    "latency": measure_latency,
}


def measure_row(bench: Bench, row: str) -> dict[str, float]:
    if row in SAMPLED:
        return sample_figures(row, SAMPLED[row](bench))
    return PLAIN[row](bench)


class Scraper:
    """Scrapes the daemon's ``/metrics`` every ``interval`` seconds on a thread."""

    def __init__(self, port: int, interval: float) -> None:
        self.port = port
        self.interval = interval
        self.scrapes = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        while not self._stop.wait(self.interval):
            try:
                connection.request("GET", "/metrics")
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                connection.close()
            self.scrapes += ok
            self.failures += not ok
        connection.close()


def run(
    rows: list[str],
    seconds: float,
    runs: int,
    workdir: Path,
    daemon_args: list[str],
    scrape: float | None = None,
) -> dict[str, list[float]]:
    """Every row once per round, ``runs`` rounds; each figure's values in round order
    (``scrape``: scrape ``/metrics`` that often meanwhile; ``samples["scrapes"]``)."""
    samples: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        daemon = None
        if DAEMON_ROWS.intersection(rows):
            daemon = stack.enter_context(
                Daemon(workdir / "store", workdir / "daemon.log", daemon_args)
            )
            with connect_to(daemon.address) as qm:
                for queue in ("send", "receive", "latency"):
                    qm.create_queue(queue, transactional=True)
            if scrape is not None:
                scraper = stack.enter_context(Scraper(daemon.http_port, scrape))
                stack.callback(
                    lambda: samples.update(
                        scrapes=[scraper.scrapes], scrape_failures=[scraper.failures]
                    )
                )
        bench = Bench(workdir, seconds, daemon)
        for round_number in range(1, runs + 1):
            for row in rows:
                progress(f"round {round_number}/{runs}: {row}")
                for figure, value in measure_row(bench, row).items():
                    samples.setdefault(figure, []).append(value)
    return samples


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_rows(text: str | None) -> list[str]:
    if text is None:
        return list(ROWS)
    wanted = {name.strip() for name in text.split(",") if name.strip()}
    unknown = wanted.difference(ROWS)
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(
            f"unknown row(s) {', '.join(sorted(unknown)) or '(none given)'}; "
            f"choose from {', '.join(ROWS)}"
        )
    wanted.add("lmdb")
    return [row for row in ROWS if row in wanted]


def main() -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed run")
    parser.add_argument(
        "--runs", type=int, default=3, help="rounds of every row (the median is reported)"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path("var/bench"), help="where the store goes"
    )
    parser.add_argument(
        "--only",
        metavar="ROWS",
        help=f"comma-separated rows to run (lmdb is always run): {','.join(ROWS)}",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the table goes to stderr)"
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="measure the daemon rows again with TLS on both ports and client certificates",
    )
    parser.add_argument(
        "--scrape",
        type=float,
        metavar="SECONDS",
        help="scrape the daemon's /metrics this often while the rows run",
    )
    parser.add_argument(
        "--daemon-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an argument for qmgr serve (repeatable): --daemon-arg=--set=store.erase_step=100",
    )
    args = parser.parse_args()
    try:
        rows = parse_rows(args.only)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.seconds <= 0 or args.runs < 1:
        parser.error("--seconds must be positive and --runs at least 1")

    workdir = fresh_workdir(args.data_dir)
    try:
        (workdir / "plain").mkdir()
        samples = run(
            rows, args.seconds, args.runs, workdir / "plain", args.daemon_arg, args.scrape
        )
        tls_samples = None
        if args.tls:
            tls_rows = [row for row in rows if row in DAEMON_ROWS or row == "lmdb"]
            tls_samples = run(
                tls_rows, args.seconds, args.runs, _tls.enable_in(workdir), args.daemon_arg
            )
    finally:
        progress("")
        shutil.rmtree(workdir, ignore_errors=True)
    unit = loop_iteration_seconds()
    result = summarise(samples, rows, args.seconds, args.runs)
    in_loop_iterations(result, unit)
    out = sys.stderr if args.json else sys.stdout
    report(result, out)
    if tls_samples is not None:
        tls_result = summarise(tls_samples, tls_rows, args.seconds, args.runs)
        in_loop_iterations(tls_result, unit)
        result["tls"] = tls_result
        result["tls_x_plain"] = tls_x_plain(result, tls_result, RATE_KEYS.values())
        print("\nwith TLS on both ports (TLS 1.3, client certificates required):", file=out)
        report(tls_result, out)
        print_tls_x_plain(result["tls_x_plain"], out)
    if args.json:
        dump_json(result)


if __name__ == "__main__":
    main()
