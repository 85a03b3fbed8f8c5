"""The shipped pipeline end to end on local Spark: ``make pipeline``.

    python -m pipelines.run [--endpoint 127.0.0.1:1802] [--peer 127.0.0.1:1801]
                            [--orders 2000] [--work-dir var/pipeline]

1. The feeder sends ``--orders`` sample orders to ``orders``. A partner
   queue manager (started here for a moment, its store in ``WORK_DIR``)
   sends a few more to a misspelt queue by way of ``--peer``, the peer port
   of the queue manager at ``--endpoint``, which keeps them as dead letters.
2. The streaming job (``pipelines/order_totals.py``) runs with
   Trigger.AvailableNow: it processes every order there and stops. Its
   checkpoint is in ``WORK_DIR/order-totals``, so a second run goes on
   where the first stopped.
3. The latest total of the busiest customers, read from ``customer-totals``
   (a batch read: nothing is removed).
4. The batch report (``pipelines/delivery_report.py``): deliveries from
   ``orders;journal`` and dead letters by class.

Needs a queue manager at ``--endpoint`` (``make run`` in another terminal)
and Java 17 or newer.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pipelines import delivery_report, feeder, order_totals

#: Seconds the partner queue manager has to start, and to deliver its messages.
PARTNER_TIMEOUT = 30.0


@contextlib.contextmanager
def partner_queue_manager(data_dir: Path, peer: str) -> Iterator[str | None]:
    """Run a second queue manager for a moment; yield its client address (None if no peer).

    On exit it waits until everything it sent has been delivered, then stops.
    """
    if not peer:
        yield None
        return
    from qmgr.client import connect

    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    address = f"127.0.0.1:{ports[0]}"
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "qmgr", "serve", "--data-dir", str(data_dir),
               "--client-listen", address, "--listen", f"127.0.0.1:{ports[1]}",
               "--http-listen", "", "--name", "partner", "--log-format", "json"]  # fmt: skip
    with (data_dir / "qmgr.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + PARTNER_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", ports[0]), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield address
        with connect(address) as qm:
            while any(o.waiting or o.unacknowledged for o in qm.outgoing()):
                if time.monotonic() > deadline:
                    print(f"the partner could not deliver to {peer}: {qm.outgoing()}")
                    break
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="127.0.0.1:1802", help="client port HOST:PORT")
    parser.add_argument(
        "--peer", default="127.0.0.1:1801", help="its peer port HOST:PORT ('' for none)"
    )
    parser.add_argument("--orders", type=int, default=2000, help="orders to send")
    parser.add_argument("--work-dir", type=Path, default=Path("var/pipeline"))
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        with partner_queue_manager(args.work_dir / "partner-qm", args.peer) as partner:
            sent = feeder.feed(args.endpoint, args.orders, partner=partner, peer=args.peer)
    except Exception as exc:
        msg = (
            f"cannot feed the queue manager at {args.endpoint} ({exc}); "
            "start one with `make run` in another terminal"
        )
        raise SystemExit(msg) from None
    dead = f" and {feeder.MISADDRESSED} misaddressed ones" if args.peer else ""
    print(f"1. sent {sent} orders to 'orders'{dead}")

    spark = order_totals.session("qmgr pipeline")
    try:
        started = time.monotonic()
        checkpoint = str((args.work_dir / "order-totals").resolve())
        query = order_totals.start(spark, args.endpoint, checkpoint, available_now=True)
        query.awaitTermination()
        processed = sum(p["numInputRows"] for p in query.recentProgress)
        elapsed = time.monotonic() - started
        print(f"2. order totals: {processed} orders in {elapsed:.1f} s (checkpoint {checkpoint})")

        from pyspark.sql import functions as f

        totals = (
            delivery_report.queue(spark, args.endpoint, order_totals.TOTALS)
            .select(f.from_json(f.col("body").cast("string"), "customer STRING, orders LONG, "
                                "total DOUBLE").alias("t"), "lookup_id")
            .groupBy("t.customer")
            .agg(f.max_by("t", "lookup_id").alias("latest"))
            .select("customer", "latest.orders", "latest.total")
            .orderBy(f.desc("total"))
        )  # fmt: skip
        print("3. latest running totals, busiest customers first:")
        totals.show(10, truncate=False)
        print("4. delivery report:")
        delivery_report.report(spark, args.endpoint, [order_totals.ORDERS])
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
