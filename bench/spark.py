"""The Spark data source on local[2]: streaming exactly once, batch reads and writes, a ceiling.

Run::

    .venv/bin/python bench/spark.py [--messages 100000] [--per-trigger 10000]
                                    [--partitions 2] [--json] [--keep]

One daemon is started as ``bench/local.py`` starts its daemon (default
settings; ``--daemon-arg`` passes arguments to it), and one local[2] Spark
session in this process, its Python workers on this interpreter. Bodies are
256 bytes. In order:

``batch write``: ``spark.range(N)`` as 256-byte bodies written to queue
``in`` (``df.write.format("qmgr")``: every task prepares its transactions,
the driver commits them all at once); messages/s from the call to its end.
``batch read``: queue ``in`` read whole (every column) into Spark's ``noop``
sink; messages/s. Nothing is removed.
``streaming``: ``in`` -> ``upper(body)`` -> ``out``, exactly once, at most
``--per-trigger`` messages per micro-batch, micro-batches back to back;
messages/s from ``start()`` until all N are in ``out`` (``qmgr`` status
polled every 50 ms), and the steady rate of the micro-batches after the
first (rows over their trigger time). Target >= 20,000 msg/s. Where the time
of a micro-batch goes is taken from Spark's progress reports (``durationMs``),
with the daemon's CPU use and the machine's.
``ceiling``: the same query shape on Spark's rate source (``rate-micro-batch``,
``--per-trigger`` rows per micro-batch, the same 256-byte bodies and
transformation) into the ``noop`` sink: what Spark itself does here.

``--json`` prints one JSON object to stdout (the table goes to stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _command import add_run_options, publish, run_in_workdir, script_parser
from _daemon import Daemon
from _report import print_table, progress

from qmgr.client import QueueManager, connect

POLL = 0.05
TARGET = 20_000.0
BODY_BYTES = 256
STALL = 120.0
#: The transformation of the streaming query and of the ceiling.
TRANSFORM = "cast(upper(cast(body as string)) as binary) as body"
BODY = f"cast(lpad(cast(id as string), {BODY_BYTES}, 'x') as binary) as body"
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / ticks, sum(fields) / ticks


class Usage:
    """CPU used by the daemon and by the machine between start and stop."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.started = time.perf_counter()
        self.daemon_cpu = daemon.cpu_seconds()
        self.machine = machine_cpu()

    def figures(self, prefix: str) -> dict[str, float]:
        elapsed = time.perf_counter() - self.started
        busy, total = machine_cpu()
        return {
            f"{prefix}_daemon_cpu_busy": (self.daemon.cpu_seconds() - self.daemon_cpu) / elapsed,
            f"{prefix}_machine_cpu_busy": (busy - self.machine[0])
            / max(total - self.machine[1], 1e-9),
        }


def depth(qm: QueueManager, queue: str) -> int:
    return next(q.depth for q in qm.list_queues() if q.name == queue)


def wait(condition: Callable[[], bool], what: str) -> float:
    """Poll until ``condition``; when it was first seen (perf_counter)."""
    deadline = time.perf_counter() + STALL
    while not condition():
        if time.perf_counter() > deadline:
            raise SystemExit(f"no {what} within {STALL:g} s")
        time.sleep(POLL)
    return time.perf_counter()


def steady(progress_reports: Sequence[Any]) -> tuple[float, dict[str, float]]:
    """Rows per second of the micro-batches after the first, and their mean phase times (ms)."""
    batches = [p for p in progress_reports if p["numInputRows"]][1:]
    if not batches:
        return 0.0, {}
    rows = sum(p["numInputRows"] for p in batches)
    millis = sum(p["durationMs"]["triggerExecution"] for p in batches)
    phases = {
        phase: sum(p["durationMs"].get(phase, 0) for p in batches) / len(batches)
        for phase in (*PHASES, "triggerExecution")
    }
    return rows / (millis / 1000), phases


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    n, per_trigger = args.messages, args.per_trigger
    result: dict[str, Any] = {}
    log = workdir / "qmgr.log"
    with Daemon(workdir / "store", log, args.daemon_arg) as daemon, connect(daemon.address) as qm:
        for queue in ("in", "out"):
            qm.create_queue(queue, transactional=True)
        progress("starting Spark")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pyspark.sql import SparkSession

            from qmgr.spark import QueueDataSource

            spark = (
                SparkSession.builder.master("local[2]")
                .appName("qmgr-bench")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(QueueDataSource)
        options = {"endpoint": daemon.address, "partitions": str(args.partitions)}
        try:
            # Warm up the Python workers (and the JVM's code paths) on a small job.
            spark.range(1000, numPartitions=2).selectExpr(BODY).write.format("qmgr").mode(
                "append"
            ).options(queue="out", **options).save()
            qm.purge_queue("out")

            progress("batch write")
            usage = Usage(daemon)
            started = time.perf_counter()
            frame = spark.range(n, numPartitions=args.partitions).selectExpr(BODY)
            frame.write.format("qmgr").mode("append").options(queue="in", **options).save()
            result["batch_write_msgs_per_s"] = n / (time.perf_counter() - started)
            result.update(usage.figures("batch_write"))
            assert depth(qm, "in") == n, depth(qm, "in")

            progress("batch read")
            usage = Usage(daemon)
            started = time.perf_counter()
            reader = spark.read.format("qmgr").options(queue="in", **options).load()
            reader.write.format("noop").mode("overwrite").save()
            result["batch_read_msgs_per_s"] = n / (time.perf_counter() - started)
            result.update(usage.figures("batch_read"))

            progress("streaming")
            usage = Usage(daemon)
            started = time.perf_counter()
            query = (
                spark.readStream.format("qmgr")
                .options(queue="in", maxMessagesPerTrigger=str(per_trigger), **options)
                .load()
                .selectExpr(TRANSFORM)
                .writeStream.format("qmgr")
                .options(queue="out", **options)
                .option("checkpointLocation", str(workdir / "checkpoint"))
                .start()
            )
            try:
                done = wait(lambda: depth(qm, "out") >= n, f"{n} messages in 'out'")
                result["streaming_msgs_per_s"] = n / (done - started)
                result.update(usage.figures("streaming"))
                wait(lambda: depth(qm, "in") == 0, "empty source")
                rate, phases = steady(query.recentProgress)
            finally:
                query.stop()
            result["streaming_steady_msgs_per_s"] = rate
            result["streaming_batch_ms"] = phases
            result["streaming_exactly_once_ok"] = depth(qm, "out") == n and not qm.transactions(
                "spark:"
            )

            progress("ceiling: rate source -> noop")
            started = time.perf_counter()
            ceiling = (
                spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", str(per_trigger))
                .option("numPartitions", str(args.partitions))
                .load()
                .selectExpr(BODY.replace("id", "value"))
                .selectExpr(TRANSFORM)
                .writeStream.format("noop")
                .option("checkpointLocation", str(workdir / "checkpoint-rate"))
                .start()
            )
            try:

                def rows() -> int:
                    return sum(p["numInputRows"] for p in ceiling.recentProgress)

                done = wait(lambda: rows() >= n, f"{n} rows from the rate source")
                result["ceiling_msgs_per_s"] = rows() / (done - started)
                result["ceiling_steady_msgs_per_s"] = steady(ceiling.recentProgress)[0]
            finally:
                spark.sparkContext.setLogLevel("OFF")  # stopping mid-batch logs errors
                ceiling.stop()
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                spark.stop()
        progress("")
    ceiling_rate = result["ceiling_msgs_per_s"]
    for figure in ("streaming_msgs_per_s", "batch_read_msgs_per_s", "batch_write_msgs_per_s"):
        result[figure.replace("_per_s", "_x_ceiling")] = result[figure] / ceiling_rate
    result["streaming_steady_x_ceiling_steady"] = (
        result["streaming_steady_msgs_per_s"] / result["ceiling_steady_msgs_per_s"]
    )
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}
    result["streaming_batch_ms"] = {k: round(v, 1) for k, v in phases.items()}
    result["targets"] = {
        "streaming_msgs_per_s": {
            "op": ">=",
            "threshold": TARGET,
            "value": result["streaming_msgs_per_s"],
            "met": result["streaming_msgs_per_s"] >= TARGET,
        }
    }
    result.update(
        messages=n, per_trigger=per_trigger, partitions=args.partitions, body_bytes=BODY_BYTES,
        cores=os.cpu_count(), daemon_args=args.daemon_arg, master="local[2]",
    )  # fmt: skip
    return result


def report(r: dict[str, Any], out: TextIO) -> None:
    ceiling = r["ceiling_msgs_per_s"]
    met = "yes" if r["targets"]["streaming_msgs_per_s"]["met"] else "NO"
    rows = [
        ("streaming queue -> upper -> queue", f"{r['streaming_msgs_per_s']:,.0f} msg/s",
         f"{r['streaming_msgs_x_ceiling']:.2f} x ceiling", f">= 20,000/s: {met}"),
        ("  steady (after the first batch)", f"{r['streaming_steady_msgs_per_s']:,.0f} msg/s",
         f"{r['streaming_steady_x_ceiling_steady']:.2f} x ceiling",
         f"CPU: daemon {r['streaming_daemon_cpu_busy']:.0%}, "
         f"machine {r['streaming_machine_cpu_busy']:.0%}"),
        ("batch read (all columns -> noop)", f"{r['batch_read_msgs_per_s']:,.0f} msg/s",
         f"{r['batch_read_msgs_x_ceiling']:.2f} x ceiling",
         f"CPU: daemon {r['batch_read_daemon_cpu_busy']:.0%}"),
        ("batch write (range -> queue)", f"{r['batch_write_msgs_per_s']:,.0f} msg/s",
         f"{r['batch_write_msgs_x_ceiling']:.2f} x ceiling",
         f"CPU: daemon {r['batch_write_daemon_cpu_busy']:.0%}"),
        ("ceiling: rate source -> upper -> noop", f"{ceiling:,.0f} msg/s", "ceiling",
         f"steady {r['ceiling_steady_msgs_per_s']:,.0f} msg/s"),
    ]  # fmt: skip
    title = (
        f"qmgr Spark benchmark: local[2], {r['cores']} cores, {r['messages']:,} messages of "
        f"{r['body_bytes']} bytes, {r['per_trigger']:,} per micro-batch, "
        f"{r['partitions']} partitions"
    )
    print_table(title, rows, out)
    phases = ", ".join(f"{k} {v:.0f}" for k, v in r["streaming_batch_ms"].items())
    print(f"  a streaming micro-batch, mean ms: {phases}", file=out)
    ok = r["streaming_exactly_once_ok"]
    print(f"  exactly once (all in 'out', none in doubt): {ok}", file=out)


def main() -> None:
    parser = script_parser(__doc__)
    add = parser.add_argument
    add("--messages", type=int, default=100_000, help="messages per measure")
    add("--per-trigger", type=int, default=10_000, help="maxMessagesPerTrigger")
    add("--partitions", type=int, default=2, help="read partitions and write tasks")
    add_run_options(parser, "the store goes", "the store, checkpoints and the daemon's log")
    add("--daemon-arg", action="append", default=[], metavar="ARG", help="for the daemon")
    args = parser.parse_args()
    if args.messages < 2 * args.per_trigger or args.per_trigger < 1 or args.partitions < 1:
        parser.error("--messages must be at least twice --per-trigger, both positive")
    result = run_in_workdir(
        args, "store and logs", lambda workdir: run(args, workdir), on_failure=lambda: progress("")
    )
    publish(args, result, report)


if __name__ == "__main__":
    main()
