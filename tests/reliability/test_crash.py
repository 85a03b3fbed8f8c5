"""Kill -9 the daemon at random moments while clients commit transactions.

Clients run transactions in a loop. Each one moves a message from ``source``
to ``sink`` (a transactional receive plus a send of a "moved" marker) and
sends a few messages of its own, then commits — or, now and then, aborts on
purpose. Meanwhile the test SIGKILLs the daemon at random moments and starts
it again; clients reconnect and carry on.

Afterwards:

* every transaction a client saw committed is in ``sink`` exactly once, whole,
  in order, with consecutive LookupIds;
* a transaction whose commit was in doubt (the connection died before the
  reply) is there whole or not at all;
* no aborted or unfinished transaction left anything behind;
* every source message is in exactly one place: still in ``source`` (in its
  original position, with its original LookupId) or moved to ``sink``.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest
from crash_kit import Crashes, kill_while_working, work_in_rounds
from helpers import DaemonProcess, drain, wait_until

from qmgr.client import ConnectionLost, QueueError, QueueManager, connect

SOURCE_MESSAGES = 400
#: A kill after every 4 commits (within 30 s), up to 0.15 s later.
CRASHES = Crashes(workers=3, kills=6, progress=4, pause=0.15, timeout=30)


@dataclass
class Ledger:
    """What one worker knows about the transactions it ran."""

    committed: list[tuple[str, list[bytes]]] = field(default_factory=list)
    in_doubt: list[tuple[str, list[bytes]]] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)


def _body(tx_name: str, index: int) -> bytes:
    return f"{tx_name}:{index}".encode()


def _worker(address: str, worker: int, stop: threading.Event, ledger: Ledger, seed: int) -> None:
    rng = random.Random(seed)

    def one_transaction(qm: QueueManager, sequence: int) -> bool:
        tx_name = f"w{worker}-t{sequence}"
        planned: list[bytes] = []
        commit_sent = False
        try:
            tx = qm.begin()
            moved = tx.receive("source", timeout=0.0)
            if moved is not None:
                marker = f"moved:{moved.lookup_id}:{tx_name}:".encode()
                planned.append(marker + moved.body)
            for index in range(rng.randint(1, 4)):
                planned.append(_body(tx_name, index))
            for body in planned:
                tx.send("sink", body)
            if rng.random() < 0.15:
                tx.abort()
                ledger.aborted.append(tx_name)
                return True
            commit_sent = True
            tx.commit()
            ledger.committed.append((tx_name, planned))
        except (ConnectionLost, OSError):
            if commit_sent:
                ledger.in_doubt.append((tx_name, planned))
            else:
                ledger.aborted.append(tx_name)
            return False
        except QueueError as exc:  # e.g. shutting down while the daemon stops
            if commit_sent:
                ledger.in_doubt.append((tx_name, planned))
            else:
                ledger.aborted.append(tx_name)
            if "shutting down" not in str(exc):
                raise
        return True

    work_in_rounds(address, stop, one_transaction)


@pytest.mark.slow
def test_kill_9_loses_nothing_and_duplicates_nothing(daemon: DaemonProcess) -> None:
    rng = random.Random(20261122)
    with connect(daemon.address) as qm:
        qm.create_queue("source", transactional=True)
        qm.create_queue("sink", transactional=True)
        with qm.begin() as tx:
            for index in range(SOURCE_MESSAGES):
                tx.send("source", f"src-{index}".encode())
    original = drain(daemon.address, "source")
    assert len(original) == SOURCE_MESSAGES

    stop = threading.Event()
    ledgers = [Ledger() for _ in range(CRASHES.workers)]
    threads = [
        threading.Thread(target=_worker, args=(daemon.address, w, stop, ledgers[w], rng.random()))
        for w in range(CRASHES.workers)
    ]

    def commits() -> int:
        return sum(len(ledger.committed) for ledger in ledgers)

    # Let some transactions commit between two kills; the last crash, with
    # nothing in flight, checks the restart itself.
    kill_while_working(
        daemon,
        threads,
        stop,
        commits,
        CRASHES,
        rng,
        finish=lambda: wait_until(lambda: commits() > 0, 30),
    )

    sink = drain(daemon.address, "sink")
    source_left = drain(daemon.address, "source")
    bodies = [body for _, body in sink]
    assert len(bodies) == len(set(bodies)), "a message was delivered twice"
    position = {body: index for index, (_, body) in enumerate(sink)}
    lookup = {body: lookup_id for lookup_id, body in sink}

    committed = [entry for ledger in ledgers for entry in ledger.committed]
    in_doubt = [entry for ledger in ledgers for entry in ledger.in_doubt]
    aborted = {name for ledger in ledgers for name in ledger.aborted}
    assert len(committed) >= CRASHES.kills, "too few commits to mean anything"

    accounted: set[bytes] = set()
    for tx_name, planned in committed:
        missing = [body for body in planned if body not in position]
        assert not missing, f"committed transaction {tx_name} lost {missing}"
        _assert_whole_and_in_order(planned, position, lookup)
        accounted.update(planned)
    for _tx_name, planned in in_doubt:
        present = [body for body in planned if body in position]
        assert present in ([], planned), f"in-doubt transaction {_tx_name} is partial"
        if present:
            _assert_whole_and_in_order(planned, position, lookup)
            accounted.update(planned)
    stray = [body for body in bodies if body not in accounted]
    assert not stray, f"messages from aborted or unknown transactions: {stray[:5]}"
    for body in bodies:
        name = body.split(b":")[2] if body.startswith(b"moved:") else body.split(b":")[0]
        assert name.decode() not in aborted

    # Every source message is in exactly one place, and the ones still in the
    # source queue kept their LookupIds and their order.
    moves = [body.split(b":", 3) for body in bodies if body.startswith(b"moved:")]
    moved = {int(lookup_id): body for _, lookup_id, _, body in moves}
    assert len(moved) == len(moves), "a source message was moved twice"
    left = dict(source_left)
    assert not set(moved) & set(left), "a message is both moved and still in the source"
    assert set(moved) | set(left) == {lookup_id for lookup_id, _ in original}
    original_bodies = dict(original)
    assert all(original_bodies[lid] == body for lid, body in moved.items())
    assert all(original_bodies[lid] == body for lid, body in left.items())
    assert [lid for lid, _ in source_left] == sorted(left)

    # The daemon logged its crashes' successors starting up cleanly.
    assert daemon.log().count("queue_manager_started") == CRASHES.kills + 2


def _assert_whole_and_in_order(
    planned: list[bytes], position: dict[bytes, int], lookup: dict[bytes, int]
) -> None:
    places = [position[body] for body in planned]
    assert places == list(range(places[0], places[0] + len(planned))), "not contiguous"
    ids = [lookup[body] for body in planned]
    assert ids == list(range(ids[0], ids[0] + len(planned))), "LookupIds not consecutive"
