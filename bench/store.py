"""Micro-benchmark of the LMDB store: group-commit cost and record codec cost.

Prints, for durable=False (CPU only) and durable=True (one sync per batch):

* commit_batch of 1 unit x 1 send of a 256-byte body, in commits/s;
* commit_batch of 1 unit x 100 sends, in messages/s;

and the encode/decode time of one message record with a 256-byte body, in µs.
Each figure is the median of 3 runs. Run from the repository root:

    .venv/bin/python bench/store.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage import (
    CommitUnit,
    MessageRecord,
    NewMessage,
    Store,
    decode_message,
    encode_message,
)

RUNS = 3
BODY = bytes(range(256))


def make_record(qm: uuid.UUID) -> MessageRecord:
    return MessageRecord(
        message_id_qm=qm,
        message_id_ordinal=0,
        label="benchmark message",
        body=BODY,
        correlation_id=b"",
        app_specific=0,
        priority=3,
        delivery=1,
        acknowledge=0,
        journal_level=0,
        admin_queue="",
        response_queue="DIRECT=OS:host\\private$\\replies",
        time_to_reach_queue=0xFFFFFFFF,
        time_to_be_received=0xFFFFFFFF,
        message_class=0,
        sent_time=time.time(),
        arrived_time=0.0,
        source_qm=qm,
        transactional=True,
        destination="DIRECT=OS:host\\private$\\orders",
    )


def median_rate(run: Callable[[], float]) -> float:
    return statistics.median(run() for _ in range(RUNS))


def bench_commits(durable: bool, sends_per_unit: int, batches: int) -> float:
    """Messages committed per second, one unit per batch."""

    def run() -> float:
        with tempfile.TemporaryDirectory() as directory:
            store = Store(directory, durable=durable)
            try:
                queue = store.create_queue(
                    name="bench", display_name="bench", transactional=True, now=time.time()
                )
                record = make_record(store.qm_guid)
                unit = CommitUnit(
                    sends=[NewMessage(queue_id=queue.queue_id, record=record)] * sends_per_unit
                )
                store.commit_batch([unit], now=time.time())  # warm up
                started = time.perf_counter()
                for _ in range(batches):
                    store.commit_batch([unit], now=time.time())
                elapsed = time.perf_counter() - started
            finally:
                store.close()
        return batches * sends_per_unit / elapsed

    return median_rate(run)


def bench_codec() -> tuple[float, float]:
    """µs per encode and per decode of a message record with a 256-byte body."""
    record = make_record(uuid.uuid4())
    data = encode_message(record)
    count = 100_000

    def time_it(operation: Callable[[], object]) -> float:
        started = time.perf_counter()
        for _ in range(count):
            operation()
        return (time.perf_counter() - started) / count * 1e6

    encode_us = statistics.median(time_it(lambda: encode_message(record)) for _ in range(RUNS))
    decode_us = statistics.median(time_it(lambda: decode_message(data)) for _ in range(RUNS))
    return encode_us, decode_us


def main() -> None:
    print(f"storage benchmark (median of {RUNS} runs, 256-byte bodies)")
    for durable in (False, True):
        single = bench_commits(durable, sends_per_unit=1, batches=20_000 if not durable else 2_000)
        hundred = bench_commits(durable, sends_per_unit=100, batches=500 if not durable else 200)
        print(
            f"  durable={durable!s:<5}  1 unit x 1 send: {single:>9,.0f} commits/s "
            f"({1e6 / single:5.1f} µs)   1 unit x 100 sends: {hundred:>9,.0f} messages/s"
        )
    encode_us, decode_us = bench_codec()
    print(f"  message record codec: encode {encode_us:.2f} µs, decode {decode_us:.2f} µs")


if __name__ == "__main__":
    main()
