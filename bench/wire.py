"""Throughput of the MSMQ packet codec: parse and build rates on one core.

Run: ``.venv/bin/python bench/wire.py [--runs 7] [--seconds 0.3]``

Packets measured:

* a transactional UserMessage with a 256-byte body, as a queue manager sends
  one: direct destination name, TransactionHeader, a label, DM=1, PR=0;
* the same with a 28-byte SID SecurityHeader, as Windows sends it;
* an OrderAck (parse includes classifying it and decoding its body);
* a SessionAck;
* the FrameDecoder fed a stream of 1,000 transactional messages in 64 KiB chunks.

Each line gives the median and the best of ``--runs`` timed runs of at least
``--seconds`` each, in packets per second; on a busy machine the best is the
better estimate of what one free core does. The target for the transactional
UserMessage is a median of 60,000 parses/s and 60,000 builds/s.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "wire"))

from msmq import msmq_samples as samples  # noqa: E402  (after the path is set up)

import wire  # noqa: E402

ORDER_ACK = samples.order_ack()
SESSION_ACK = wire.SessionAck(
    session=wire.SessionHeader(
        ack_sequence_number=100, recoverable_ack_sequence_number=90, recoverable_ack_flags=0x3FF
    )
)


def parse_order_ack(data: bytes) -> wire.OrderAck:
    message = wire.parse_packet(data)
    assert isinstance(message, wire.UserMessage)
    assert wire.classify_packet(message) is wire.PacketKind.ORDER_ACK
    return wire.OrderAck.from_message(message)


def rate(function: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``function``, over at least ``seconds``."""
    batch = 1
    while True:
        start = time.perf_counter()
        for _ in range(batch):
            function()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return batch / elapsed
        batch *= 2 if elapsed < seconds / 4 else 1 + int(seconds / max(elapsed, 1e-9))


def rates(function: Callable[[], object], runs: int, seconds: float) -> tuple[float, float]:
    """The median and the best of ``runs`` measured rates."""
    function()  # warm memos and caches, and fail early
    measured = [rate(function, seconds) for _ in range(runs)]
    return statistics.median(measured), max(measured)


def decode_stream(chunks: list[bytes], expected: int) -> None:
    decoder = wire.FrameDecoder()
    count = 0
    for chunk in chunks:
        decoder.receive_data(chunk)
        while decoder.next_packet() is not None:
            count += 1
    assert count == expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.3)
    args = parser.parse_args()

    message = samples.transactional_message()
    data = wire.build_packet(message)
    windows_like = samples.transactional_message(
        security=wire.SecurityHeader(flags=1, sender_id=bytes(range(28)))
    )
    windows_data = wire.build_packet(windows_like)
    order_ack = wire.build_packet(ORDER_ACK)
    session_ack = wire.build_packet(SESSION_ACK)
    assert wire.parse_packet(data) == message
    assert parse_order_ack(order_ack) == ORDER_ACK
    stream = data * 1000
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]

    cases: list[tuple[str, Callable[[], object], float]] = [
        (f"UserMessage tx+256B ({len(data)} B)  parse", lambda: wire.parse_packet(data), 60_000),
        (f"UserMessage tx+256B ({len(data)} B)  build", lambda: wire.build_packet(message), 60_000),
        (
            f"  + SID SecurityHeader ({len(windows_data)} B) parse",
            lambda: wire.parse_packet(windows_data),
            0,
        ),
        (
            f"  + SID SecurityHeader ({len(windows_data)} B) build",
            lambda: wire.build_packet(windows_like),
            0,
        ),
        (
            f"OrderAck ({len(order_ack)} B)  parse+classify+decode",
            lambda: parse_order_ack(order_ack),
            0,
        ),
        (f"OrderAck ({len(order_ack)} B)  build", lambda: wire.build_packet(ORDER_ACK), 0),
        (f"SessionAck ({len(session_ack)} B)  parse", lambda: wire.parse_packet(session_ack), 0),
        (f"SessionAck ({len(session_ack)} B)  build", lambda: wire.build_packet(SESSION_ACK), 0),
    ]
    print(f"qmgr wire codec, Python {platform.python_version()}, {args.runs} runs, packets/s")
    print(f"{'':<52} {'median':>9} {'best':>9}")
    for name, function, target in cases:
        median, best = rates(function, args.runs, args.seconds)
        verdict = "" if not target else ("  ok" if median >= target else f"  BELOW {target:,}")
        print(f"{name:<52} {median:>9,.0f} {best:>9,.0f}{verdict}")
    median, best = rates(lambda: decode_stream(chunks, 1000), args.runs, args.seconds)
    name = "FrameDecoder, tx UserMessages in 64 KiB chunks"
    print(f"{name:<52} {median * 1000:>9,.0f} {best * 1000:>9,.0f}")


if __name__ == "__main__":
    main()
