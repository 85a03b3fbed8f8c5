"""Kill -9 the daemon at random moments while clients move messages with two-phase commits.

Client threads move messages from ``src`` to ``dst`` one at a time, each in a
global transaction: ``begin(xid)``, a receive from ``src``, a send of the
same body to ``dst``, ``prepare()``, then a commit (now and then an abort) of
the prepared transaction, half of the time by the transaction object and
half by xid (``commit_prepared`` / ``abort_prepared``). Meanwhile the test
SIGKILLs the daemon at random moments and starts it again; the clients
reconnect and carry on with new xids.

Afterwards every client resolves what it left in doubt, from what the
daemon lists (``transactions()``) and its own record of the xids it used,
and then:

* no prepared transaction is left;
* a prepare that was answered survived: its xid is prepared or has an outcome;
* a resolution that was answered is the kept outcome;
* every source message is in exactly one place, exactly once: still in
  ``src`` (with its original LookupId) or in ``dst``, moved there by exactly
  one committed transaction.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from crash_kit import Crashes, kill_while_working, short_and_soak, work_in_rounds
from helpers import DaemonProcess, drain, wait_until

from qmgr.client import (
    ConnectionLost,
    QueueError,
    QueueManager,
    Resolution,
    TransactionStatus,
    connect,
)


@dataclass(frozen=True, kw_only=True)
class Run(Crashes):
    """The size of one run (its progress: resolutions)."""

    messages: int


SHORT = Run(messages=300, workers=3, kills=3, progress=4)
SOAK = Run(messages=4000, workers=6, kills=25, progress=40)


@dataclass
class Ledger:
    """What one client knows about the global transactions it ran."""

    #: Every xid it began (in order).
    begun: list[str] = field(default_factory=list)
    #: The body each xid received (and sent to dst).
    moved: dict[str, bytes] = field(default_factory=dict)
    #: Whether it meant to commit (True) or abort each one it prepared.
    wanted: dict[str, bool] = field(default_factory=dict)
    #: Xids whose Prepare was answered Ok: they must have survived.
    prepared: set[str] = field(default_factory=set)
    #: Xids whose resolution was answered: committed (True) or aborted.
    resolved: dict[str, bool] = field(default_factory=dict)


def _resolve(qm: QueueManager, tx_object: object, xid: str, commit: bool, by_xid: bool) -> None:
    if by_xid:
        done = qm.commit_prepared(xid) if commit else qm.abort_prepared(xid)
        assert done is (Resolution.COMMITTED if commit else Resolution.ABORTED), (xid, done)
    elif commit:
        tx_object.commit()  # type: ignore[attr-defined]
    else:
        tx_object.abort()  # type: ignore[attr-defined]


def _worker(address: str, worker: int, stop: threading.Event, ledger: Ledger, seed: int) -> None:
    rng = random.Random(seed)

    def one_move(qm: QueueManager, sequence: int) -> bool:
        xid = f"w{worker}-{sequence}"
        ledger.begun.append(xid)
        commit = rng.random() >= 0.25
        try:
            tx = qm.begin(xid=xid)
            message = tx.receive("src", timeout=0.2)
            if message is None:
                tx.abort()
                return True
            ledger.moved[xid] = message.body
            tx.send("dst", message.body)
            ledger.wanted[xid] = commit
            tx.prepare()
            ledger.prepared.add(xid)
            _resolve(qm, tx, xid, commit, by_xid=rng.random() < 0.5)
            ledger.resolved[xid] = commit
        except (ConnectionLost, OSError):
            return False
        except QueueError as exc:  # e.g. shutting down while the daemon stops
            if "shutting down" not in str(exc):
                raise
            return False
        return True

    work_in_rounds(address, stop, one_move)


def _settle(address: str, worker: int, ledger: Ledger) -> None:
    """Resolve what the worker left in doubt, as a recovering client would."""
    prefix = f"w{worker}-"
    with connect(address) as qm:
        listed = {t.xid: t for t in qm.transactions(prefix, limit=100_000)}
        assert set(listed) <= set(ledger.moved), f"prepared xids nobody began: {listed}"
        for xid in ledger.begun:
            if xid in listed:
                assert listed[xid].state is TransactionStatus.PREPARED
                commit = ledger.wanted[xid]
                done = qm.commit_prepared(xid) if commit else qm.abort_prepared(xid)
                assert done is (Resolution.COMMITTED if commit else Resolution.ABORTED)
                ledger.resolved[xid] = commit
        assert qm.transactions(prefix) == []


def _listed(address: str) -> dict[str, TransactionStatus]:
    """Every xid the daemon knows: prepared, or with a kept outcome."""
    with connect(address) as qm:
        listed = qm.transactions(resolved=True, limit=100_000)
    states = {t.xid: t.state for t in listed}
    assert len(states) == len(listed), "an xid is listed twice"
    return states


def _run(daemon: DaemonProcess, run: Run, seed: int) -> None:
    rng = random.Random(seed)
    with connect(daemon.address) as qm:
        qm.create_queue("src", transactional=True)
        qm.create_queue("dst", transactional=True)
        with qm.begin() as tx:
            for index in range(run.messages):
                tx.send("src", f"m{index}".encode())
    original = dict(drain(daemon.address, "src"))
    assert len(original) == run.messages

    stop = threading.Event()
    ledgers = [Ledger() for _ in range(run.workers)]
    threads = [
        threading.Thread(
            target=_worker, args=(daemon.address, w, stop, ledgers[w], rng.random()), daemon=True
        )
        for w in range(run.workers)
    ]

    def resolutions() -> int:
        return sum(len(ledger.resolved) for ledger in ledgers)

    def one_more_resolution() -> None:
        before = resolutions()
        wait_until(lambda: resolutions() > before, 60)

    # Whatever the last crash left in doubt, each client resolves it after one more crash.
    kill_while_working(daemon, threads, stop, resolutions, run, rng, finish=one_more_resolution)
    known = _listed(daemon.address)
    for worker, ledger in enumerate(ledgers):
        for xid in ledger.prepared:
            assert xid in known, f"prepared transaction {xid} was lost"
        for xid, commit in ledger.resolved.items():
            wanted = TransactionStatus.COMMITTED if commit else TransactionStatus.ABORTED
            assert known[xid] is wanted, f"{xid} was resolved but is {known[xid]}"
        _settle(daemon.address, worker, ledger)
    states = _listed(daemon.address)
    assert TransactionStatus.PREPARED not in states.values(), "a transaction is left in doubt"
    outcomes = {xid: state is TransactionStatus.COMMITTED for xid, state in states.items()}

    for ledger in ledgers:
        for xid in ledger.prepared:
            assert xid in outcomes, f"prepared transaction {xid} was lost"
        for xid, commit in ledger.resolved.items():
            assert outcomes[xid] is commit, f"{xid} was resolved the other way"
        for xid in set(ledger.begun) - set(ledger.wanted):
            assert xid not in outcomes, f"{xid} was never prepared but has an outcome"
    assert sum(map(len, (ledger.resolved for ledger in ledgers))) >= run.kills

    src = drain(daemon.address, "src")
    dst = [body for _, body in drain(daemon.address, "dst")]
    assert len(dst) == len(set(dst)), "a message was delivered twice"
    assert all(original[lookup_id] == body for lookup_id, body in src), "src changed"
    left = {body for _, body in src}
    assert not left & set(dst), "a message is both still in src and in dst"
    assert left | set(dst) == set(original.values()), "a message was lost"
    committed_moves = sorted(
        ledger.moved[xid] for ledger in ledgers for xid in ledger.moved if outcomes.get(xid) is True
    )
    assert committed_moves == sorted(dst), "dst is not what the committed transactions moved"


@short_and_soak(SHORT, SOAK, seed=20261123)
def test_kill_9_during_two_phase_moves_loses_and_duplicates_nothing(
    daemon: DaemonProcess, run: Run, seed: int
) -> None:
    _run(daemon, run, seed)
