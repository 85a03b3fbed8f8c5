"""Send sample order events to a queue manager, as a shop's front end would.

    python -m pipelines.feeder [--endpoint 127.0.0.1:1802] [--orders 2000]
                               [--customers 50] [--peer 127.0.0.1:1801] [--seed 1]

Creates the pipeline's queues if they are missing: ``orders`` (transactional,
with a journal, so every order taken off it is kept in ``orders;journal``),
``customer-totals`` and ``orders-rejected``. Then sends ``--orders`` events,
100 per transaction, each a JSON object::

    {"order_id": "o-000042", "customer": "c-017", "amount": 12.5,
     "placed_at": "2026-05-01T10:00:00+00:00"}

About one in a hundred is malformed (the pipeline counts those in
``orders-rejected``). With ``--partner`` (another queue manager's client
port) and ``--peer`` (the peer port of the one at ``--endpoint``), a few
orders also come from that partner, addressed to a misspelt queue: the
queue manager at ``--endpoint`` refuses them at arrival and keeps them in
its dead-letter queues (class ``NACK_BAD_DST_Q``), which the delivery report
then shows.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import time

from qmgr.client import QueueExists, QueueManager, connect

ORDERS = "orders"
TOTALS = "customer-totals"
REJECTED = "orders-rejected"
#: Orders sent to a queue that does not exist, when --peer is given.
MISADDRESSED = 10


def create_queues(qm: QueueManager) -> None:
    """The pipeline's queues (those that exist already are kept as they are)."""
    for name, journal in ((ORDERS, True), (TOTALS, False), (REJECTED, False)):
        with contextlib.suppress(QueueExists):
            qm.create_queue(name, transactional=True, journal=journal)


def order(rng: random.Random, number: str, customers: int) -> bytes:
    """One order event; about 1% are malformed."""
    if rng.random() < 0.01:
        return rng.choice([b"{not json", b'{"order_id": "o-x"}', b'{"customer": 7}'])
    placed = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=rng.randrange(3600))
    event = {
        "order_id": f"o-{number}",
        "customer": f"c-{rng.randrange(customers):03d}",
        "amount": round(rng.uniform(1, 200), 2),
        "placed_at": placed.isoformat(timespec="seconds"),
    }
    return json.dumps(event).encode()


def feed(
    endpoint: str,
    orders: int,
    customers: int = 50,
    *,
    partner: str | None = None,
    peer: str | None = None,
    seed: int = 1,
) -> int:
    """Send the orders (misaddressed ones from ``partner`` to ``peer``); return how many."""
    rng = random.Random(seed)
    run = f"{time.time_ns() // 1_000_000_000 % 100_000:05d}"  # order ids differ between runs
    with connect(endpoint) as qm:
        create_queues(qm)
        for first in range(0, orders, 100):
            with qm.begin() as tx:
                for number in range(first, min(first + 100, orders)):
                    body = order(rng, f"{run}-{number:06d}", customers)
                    tx.send(ORDERS, body, label="order")
    if partner and peer:
        # A misspelt queue name in a remote format name: refused where it arrives.
        nowhere = f"DIRECT=TCP:{peer}\\private$\\ordres"
        with connect(partner) as qm:
            for number in range(MISADDRESSED):
                body = order(rng, f"{run}-x{number}", customers)
                qm.send(nowhere, body, label="misaddressed", transactional=number % 2 == 0)
    return orders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="127.0.0.1:1802", help="client port HOST:PORT")
    parser.add_argument("--orders", type=int, default=2000, help="orders to send")
    parser.add_argument("--customers", type=int, default=50, help="distinct customers")
    parser.add_argument("--partner", help="client port of a queue manager to misaddress from")
    parser.add_argument("--peer", help="peer port HOST:PORT of the one at --endpoint")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    args = parser.parse_args()
    sent = feed(
        args.endpoint,
        args.orders,
        args.customers,
        partner=args.partner,
        peer=args.peer,
        seed=args.seed,
    )
    print(f"sent {sent} orders to {ORDERS!r} at {args.endpoint}")


if __name__ == "__main__":
    main()
