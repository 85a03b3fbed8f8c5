"""Micro-benchmark of the LMDB store alone: the cost of a commit and of a record.

Run from the repository root::

    .venv/bin/python bench/store.py [--json]

Prints, with ``durable=False`` (the CPU cost alone) and ``durable=True``
(one synced write transaction per commit):

* ``Store.commit`` of 1 unit appending 1 message of a 256-byte body, in commits/s;
* ``Store.commit`` of 1 unit appending 100 such messages, in messages/s;
* ``Store.commit`` of 1 unit removing 1 message, in commits/s;

and the time to encode the store's record around a message and to read its
header back, in µs. The message is the one the daemon stores (a
``wire.MessageProperties`` with a label, a response queue and the body).
Each figure is the median of 3 runs. The durable rates are bounded by the
disk; compare them with ``bench/local.py``'s LMDB row from the same machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage import (
    AppendMessage,
    CreateQueue,
    QueueCreated,
    RemoveMessage,
    Store,
    Unit,
    encode_message_record,
    message_header,
)
from wire import MessageProperties

RUNS = 3
BODY = bytes(range(256))


def make_payload() -> bytes:
    message = MessageProperties(
        body=BODY,
        label="benchmark message",
        destination="orders",
        response_queue="DIRECT=OS:host\\private$\\replies",
    ).stamp(source_qm=uuid.uuid4(), ordinal=1, sent_time=time.time(), transactional=True)
    return bytes(message.raw)


def median_rate(run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(RUNS))


def open_queue(store: Store) -> int:
    create = Unit((CreateQueue("bench", "bench", transactional=True, created_at=time.time()),))
    result = store.commit([create], now=time.time())[0].results[0]
    assert isinstance(result, QueueCreated)
    return result.record.queue_id


def bench_appends(durable: bool, per_unit: int, commits: int) -> float:
    """Messages appended per second, one unit of ``per_unit`` appends per commit."""
    payload = make_payload()

    def run() -> float:
        with tempfile.TemporaryDirectory() as directory, Store(directory, durable=durable) as store:
            queue_id = open_queue(store)
            append = AppendMessage(queue_id, payload, 0, len(BODY))
            unit = Unit((append,) * per_unit)
            store.commit([unit], now=time.time())  # warm up
            started = time.perf_counter()
            for _ in range(commits):
                store.commit([unit], now=time.time())
            elapsed = time.perf_counter() - started
        return commits * per_unit / elapsed

    return median_rate(run)


def bench_removals(durable: bool, commits: int) -> float:
    """Commits per second of one unit removing one message."""
    payload = make_payload()

    def run() -> float:
        with tempfile.TemporaryDirectory() as directory:
            with Store(directory, durable=False) as store:
                queue_id = open_queue(store)
                append = AppendMessage(queue_id, payload, 0, len(BODY))
                for _ in range(commits // 100 + 1):
                    store.commit([Unit((append,) * 100)], now=time.time())
            with Store(directory, durable=durable) as store:
                started = time.perf_counter()
                for lookup_id in range(1, commits + 1):
                    unit = Unit((RemoveMessage(queue_id, lookup_id),))
                    outcome = store.commit([unit], now=time.time())[0]
                    assert outcome.error is None, outcome.error
                elapsed = time.perf_counter() - started
        return commits / elapsed

    return median_rate(run)


def bench_record() -> tuple[float, float]:
    """µs to encode a message record around a payload, and to read its header back."""
    payload = make_payload()
    record = encode_message_record(payload, priority=0, size=len(BODY), arrived_time=time.time())
    count = 100_000

    def time_it(operation: Callable[[], object]) -> float:
        started = time.perf_counter()
        for _ in range(count):
            operation()
        return (time.perf_counter() - started) / count * 1e6

    encode = statistics.median(
        time_it(lambda: encode_message_record(payload, priority=0, size=256, arrived_time=1.0))
        for _ in range(RUNS)
    )
    header = statistics.median(time_it(lambda: message_header(record)) for _ in range(RUNS))
    return encode, header


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    for durable in (False, True):
        name = "durable" if durable else "nosync"
        figures[f"{name}_append_1_commits_per_s"] = bench_appends(
            durable, per_unit=1, commits=2_000 if durable else 20_000
        )
        figures[f"{name}_append_100_msgs_per_s"] = bench_appends(
            durable, per_unit=100, commits=200 if durable else 500
        )
        figures[f"{name}_remove_1_commits_per_s"] = bench_removals(
            durable, commits=2_000 if durable else 20_000
        )
    figures["record_encode_us"], figures["record_header_us"] = bench_record()
    if args.json:
        print(json.dumps({key: round(value, 3) for key, value in figures.items()}))
        return
    print(f"storage benchmark (median of {RUNS} runs, 256-byte bodies)")
    for name in ("nosync", "durable"):
        single = figures[f"{name}_append_1_commits_per_s"]
        print(
            f"  {'durable=True ' if name == 'durable' else 'durable=False'}"
            f"  1 append: {single:>8,.0f} commits/s ({1e6 / single:5.1f} µs)"
            f"   100 appends: {figures[f'{name}_append_100_msgs_per_s']:>9,.0f} messages/s"
            f"   1 removal: {figures[f'{name}_remove_1_commits_per_s']:>8,.0f} commits/s"
        )
    print(
        f"  message record: encode {figures['record_encode_us']:.2f} µs, "
        f"header {figures['record_header_us']:.2f} µs"
    )


if __name__ == "__main__":
    main()
