"""Fuzz the MSMQ packet parser and frame decoder.

The invariant: any byte string given to ``wire.parse_packet`` or to a
``wire.FrameDecoder`` either parses or raises ``wire.RemoteProtocolError``,
never anything else; what parses rebuilds to exactly the same bytes; and the
decoder says the same thing whether the bytes arrive whole, one at a time or in
random chunks. The same bytes, taken as a UDP datagram, either parse as a ping
(``wire.parse_ping``, rebuilt exactly) or raise ``RemoteProtocolError``, and
``qmgr.protocol.ping.PingResponder`` answers them with a well-formed ping or
not at all, never raising.

Two engines:

* with atheris installed (``pip install atheris``) and ``--atheris``,
  coverage-guided libFuzzer; the remaining arguments go to libFuzzer;
* otherwise a stdlib-only mutation loop over a seed corpus (the [MS-MQQB]
  example frames, pings included, built packets with every optional header and
  user messages with a piggy-backed SessionHeader), run for a
  number of iterations or seconds; it prints which fields the errors named.

An input that breaks the invariant is printed as hex, saved under
``fuzz/corpus/`` and the process exits with status 1.

    python fuzz/msmq_decoder.py --seconds 600
    python fuzz/msmq_decoder.py --atheris -max_total_time=600
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "wire"))

from msmq import msmq_decoding as md  # noqa: E402  (after the path is set up)
from msmq import msmq_samples as samples  # noqa: E402

import wire  # noqa: E402
from qmgr.protocol.ping import PingResponder  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"
INTERESTING_U32 = [0, 1, 2, 3, 4, 15, 16, 36, 119, 120, 572, 0x7FFF, 0xFFFF, 0x10000, 0x3FFFFF]
INTERESTING_U32 += [0x400000, 0x400001, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF]
T = TypeVar("T")


class InvariantBroken(Exception):
    """The parser or decoder misbehaved on an input."""


#: The queue manager that answers the fuzzed pings.
PING_QM = wire.parse_ping(samples.frame("4.1.2-ping-response")).qm
#: The 4.1.8 SessionAck's SessionHeader, piggy-backed on the seed user messages.
SESSION_HEADER = samples.frame("4.1.8-session-ack")[20:]
#: What the ping checks found, over a run.
PING_OUTCOMES: collections.Counter[str] = collections.Counter()


def round_trip(
    parse: Callable[[bytes], T], build: Callable[[T], bytes], data: bytes
) -> T | wire.RemoteProtocolError:
    """``msmq_decoding.round_trip``: the value or the ``RemoteProtocolError``.

    Raises:
        InvariantBroken: ``parse`` raised anything else, or its value does not rebuild.
    """
    try:
        return md.round_trip(parse, build, data)
    except md.NotRebuilt as exc:
        raise InvariantBroken(str(exc)) from exc
    except Exception as exc:
        raise InvariantBroken(f"{getattr(parse, '__name__', parse)} raised {exc!r}") from exc


def check_ping(data: bytes) -> str:
    """Check the ping invariant on ``data``; return "ping ok" or the field an error named."""
    ping = round_trip(wire.parse_ping, wire.build_ping, data)
    refused = isinstance(ping, wire.RemoteProtocolError)
    outcome = f"ping error {ping.field}" if refused else "ping ok"
    try:
        answer = PingResponder(PING_QM).answer(data, refuse=len(data) % 2 == 1, now=0.0)
    except Exception as exc:
        raise InvariantBroken(f"PingResponder.answer raised {exc!r}") from exc
    if (answer is None) != refused:
        raise InvariantBroken(f"a ping answered iff it parses: {outcome}, answer {answer!r}")
    if answer is not None:
        reply = wire.parse_ping(answer)
        if (reply.cookie, reply.qm) != (ping.cookie, PING_QM):
            raise InvariantBroken(f"the answer {reply!r} does not echo {ping!r}")
    return outcome


def piggy_backed(data: bytes) -> bytes:
    """The user packet ``data`` with a SessionHeader after PacketSize (BaseHeader SH)."""
    flags = int.from_bytes(data[2:4], "little") | int(wire.BaseFlags.SESSION)
    return data[:2] + flags.to_bytes(2, "little") + data[4:] + SESSION_HEADER


def check(data: bytes) -> str:
    """Check the invariant on ``data``; return "ok" or the field an error named."""
    if len(data) <= 64:
        PING_OUTCOMES[check_ping(data)] += 1
    packet = round_trip(wire.parse_packet, wire.build_packet, data)
    outcome = f"error {packet.field}" if isinstance(packet, wire.RemoteProtocolError) else "ok"
    rng = random.Random(data)
    cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, 5)))
    splits = [[data], md.bytewise(data), md.split_at(data, cuts)]
    results = [_decode(chunks) for chunks in splits]
    if results[1:] != results[:-1]:
        raise InvariantBroken(f"decoder results depend on chunking: {results}")
    packets, _error = results[0]
    rebuilt = b"".join(map(wire.build_packet, packets))
    if not data.startswith(rebuilt):
        raise InvariantBroken("decoded packets do not rebuild to the stream's bytes")
    return outcome


def _decode(chunks: list[bytes]) -> tuple[list[wire.Packet], str | None]:
    try:
        packets, error = md.decode(chunks)
    except Exception as exc:
        raise InvariantBroken(f"FrameDecoder raised {exc!r}") from exc
    return packets, None if error is None else error.field


def seeds() -> list[bytes]:
    """The example frames, the completed 4.1.7 message, built packets of every kind,
    the example pings and user messages with a piggy-backed SessionHeader."""
    return [
        *map(samples.frame, samples.WHOLE_FRAMES),
        samples.frame(samples.TRUNCATED_USER_MESSAGE),
        samples.completed_user_message(),
        wire.build_packet(samples.message_with_every_header()),
        wire.build_packet(samples.order_ack()),
        wire.build_packet(samples.final_ack()),
        samples.frame("4.1.1-ping-request"),
        samples.frame("4.1.2-ping-response"),
        piggy_backed(samples.completed_user_message()),
        piggy_backed(wire.build_packet(samples.transactional_message())),
        piggy_backed(wire.build_packet(samples.order_ack())),
    ]


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(10)
        if choice == 0 and out:
            del out[rng.randint(0, len(out)) :]
        elif choice == 1:
            out += rng.randbytes(rng.randint(1, 32))
        elif choice == 2 and out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        elif choice == 3 and out:
            out[rng.randrange(len(out))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif choice in (4, 5) and len(out) >= 4:
            at = rng.randrange(len(out) - 3) & ~(rng.choice([0, 1, 3]))
            value = rng.choice([*INTERESTING_U32, rng.getrandbits(32), len(out), len(out) - 16])
            out[at : at + 4] = (value & 0xFFFFFFFF).to_bytes(4, "little")
        elif choice == 6 and len(out) >= 12:
            lie = rng.choice([len(out) - 16, len(out) + 16, rng.randint(0, len(out) + 64)])
            out[8:12] = max(lie, 0).to_bytes(4, "little")
        elif choice == 7 and len(out) >= 64:
            out[2] ^= rng.randrange(256)
            out[rng.randrange(60, 64)] ^= 1 << rng.randrange(8)
        elif choice == 8:
            nuls = [i for i in range(0, len(out) - 1, 2) if out[i] == 0 and out[i + 1] == 0]
            if nuls:
                out[rng.choice(nuls)] = 0x41
        else:
            other = rng.choice(corpus)
            cut = rng.randint(0, len(out))
            out = out[:cut] + other[rng.randint(0, len(other)) :]
    if len(out) >= 16 and rng.random() < 0.6:
        # Keep PacketSize consistent with the length, so the mutation reaches the headers.
        user_with_session = out[2] & 0x18 == 0x10
        out[8:12] = (len(out) - (16 if user_with_session else 0)).to_bytes(4, "little")
    return bytes(out)


def run_loop(iterations: int | None, seconds: float | None, seed: int) -> int:
    rng = random.Random(seed)
    corpus = seeds()
    outcomes: collections.Counter[str] = collections.Counter()
    start = time.monotonic()
    count = 0
    while True:
        if iterations is not None and count >= iterations:
            break
        if seconds is not None and time.monotonic() - start >= seconds:
            break
        base = rng.choice(corpus)
        data = (
            rng.randbytes(rng.randint(0, 64)) if rng.random() < 0.02 else mutate(rng, base, corpus)
        )
        try:
            outcomes[check(data)] += 1
        except InvariantBroken:
            report(data)
            return 1
        count += 1
    elapsed = time.monotonic() - start
    print(f"{count} inputs in {elapsed:.1f}s ({count / max(elapsed, 1e-9):.0f}/s), seed {seed}")
    for outcome, n in [*outcomes.most_common(25), *PING_OUTCOMES.most_common()]:
        print(f"{n:8d}  {outcome}")
    return 0


def report(data: bytes) -> None:
    traceback.print_exc()
    CORPUS.mkdir(parents=True, exist_ok=True)
    path = CORPUS / f"crash-{hashlib.sha1(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    print(f"invariant broken by {len(data)} bytes, saved to {path}:\n{data.hex()}")


def run_atheris(argv: list[str]) -> int:
    atheris = importlib.import_module("atheris")

    def test_one_input(data: bytes) -> None:
        try:
            check(data)
        except InvariantBroken:
            report(data)
            raise

    CORPUS.mkdir(parents=True, exist_ok=True)
    for index, seed_bytes in enumerate(seeds()):
        (CORPUS / f"seed-{index:02d}.bin").write_bytes(seed_bytes)
    atheris.Setup([sys.argv[0], *argv, str(CORPUS)], test_one_input)
    atheris.Fuzz()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, help="stop after this many inputs")
    parser.add_argument("--seconds", type=float, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    parser.add_argument("--atheris", action="store_true", help="use atheris/libFuzzer")
    args, rest = parser.parse_known_args()
    if args.atheris:
        return run_atheris(rest)
    if args.iterations is None and args.seconds is None:
        args.iterations = 20_000
    seed = args.seed if args.seed is not None else time.time_ns() % 2**32
    return run_loop(args.iterations, args.seconds, seed)


if __name__ == "__main__":
    sys.exit(main())
