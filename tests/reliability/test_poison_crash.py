"""Kill -9 the daemon at random moments while clients abort poison messages.

A transactional queue with short poison settings (retry count 1, three retry
cycles, a retry delay of 0.3 s) holds "good" and "bad" messages.
Client threads receive in transactions: they commit the good ones and abort
the bad ones, so the bad ones travel to ``;retry``, back, and on to
``;poison`` while the daemon is SIGKILLed and started again. Afterwards,
once the moves have settled, every message is in exactly one place, once:

* a good one was committed by exactly one client, or is still in the queue
  (or its commit's answer was lost with the connection, and it is in no queue);
* a bad one is in the queue, ``;retry`` or ``;poison``: never lost (nobody
  commits it), never in two places, never twice in one;
* the ones in ``;poison`` went through every step: their move count is 7
  (three trips through ``;retry`` and back, then ``;poison``).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from crash_kit import Crashes, kill_while_working, reconnecting, short_and_soak
from helpers import DaemonProcess, drain, wait_until

from qmgr.client import ConnectionLost, QueueError, connect

QUEUE = "work"
PLACES = (QUEUE, QUEUE + ";retry", QUEUE + ";poison")
#: Trips through ;retry before ;poison.
CYCLES = 3


@dataclass(frozen=True, kw_only=True)
class Run(Crashes):
    """The size of one run (its progress: aborted receives)."""

    good: int
    bad: int


SHORT = Run(good=120, bad=40, workers=3, kills=3, progress=10)
SOAK = Run(good=2000, bad=400, workers=6, kills=20, progress=40)


@dataclass
class Ledger:
    """What one client did."""

    #: Good messages whose commit was answered.
    committed: list[bytes] = field(default_factory=list)
    #: Good messages whose commit went out but whose answer was lost.
    unsure: list[bytes] = field(default_factory=list)
    #: Bad messages received (each then aborted).
    aborts: int = 0


def _worker(address: str, stop: threading.Event, ledger: Ledger) -> None:
    for qm in reconnecting(address, stop):
        while not stop.is_set():
            body = None
            try:
                tx = qm.begin()
                message = tx.receive(QUEUE, timeout=0.2)
                if message is None:
                    tx.abort()
                    continue
                body = message.body
                if body.startswith(b"bad"):
                    ledger.aborts += 1
                    tx.abort()
                    body = None
                    continue
                tx.commit()
                ledger.committed.append(body)
                body = None
            except (ConnectionLost, OSError):
                if body is not None:
                    ledger.unsure.append(body)
                break
            except QueueError as exc:  # e.g. shutting down while the daemon stops
                if "shutting down" not in str(exc):
                    raise
                if body is not None:
                    ledger.unsure.append(body)
                break


def _everything(address: str) -> dict[str, list[bytes]]:
    return {place: [body for _, body in drain(address, place)] for place in PLACES}


def _run(daemon: DaemonProcess, run: Run, seed: int) -> None:
    rng = random.Random(seed)
    good = [f"good-{i}".encode() for i in range(run.good)]
    bad = [f"bad-{i}".encode() for i in range(run.bad)]
    with connect(daemon.address) as qm:
        qm.create_queue(QUEUE, transactional=True)
        qm.set_queue_properties(QUEUE, retry_count=1, retry_cycles=CYCLES, retry_delay=0.3)
        bodies = good + bad
        rng.shuffle(bodies)
        with qm.begin() as tx:
            for body in bodies:
                tx.send(QUEUE, body)

    stop = threading.Event()
    ledgers = [Ledger() for _ in range(run.workers)]
    threads = [
        threading.Thread(target=_worker, args=(daemon.address, stop, ledgers[w]), daemon=True)
        for w in range(run.workers)
    ]

    def aborts() -> int:
        return sum(ledger.aborts for ledger in ledgers)

    def all_poisoned() -> None:
        """Let the bad ones finish their way to ;poison."""
        wait_until(lambda: len(drain(daemon.address, QUEUE + ";poison")) == run.bad, 120)

    kill_while_working(daemon, threads, stop, aborts, run, rng, finish=all_poisoned)
    found = _everything(daemon.address)
    committed = [body for ledger in ledgers for body in ledger.committed]
    unsure = {body for ledger in ledgers for body in ledger.unsure}
    everywhere = [body for place in PLACES for body in found[place]]
    assert len(everywhere) == len(set(everywhere)), "a message is in two places, or twice in one"
    assert len(committed) == len(set(committed)), "a message was committed twice"
    assert not set(committed) & set(everywhere), "a committed message is still in a queue"
    assert sorted(found[QUEUE + ";poison"]) == sorted(bad), "a bad message was lost"
    missing = set(good) - set(committed) - set(everywhere)
    assert missing <= unsure, f"good messages lost: {sorted(missing - unsure)}"
    assert not set(found[QUEUE + ";poison"]) & set(good)
    with connect(daemon.address) as qm:
        for message in qm.peek_range(QUEUE + ";poison", max=run.bad):
            assert (message.move_count, message.abort_count) == (2 * CYCLES + 1, 0), message


@short_and_soak(SHORT, SOAK, seed=20261201)
def test_kill_9_while_poison_messages_are_aborted_loses_and_duplicates_nothing(
    daemon: DaemonProcess, run: Run, seed: int
) -> None:
    _run(daemon, run, seed)
