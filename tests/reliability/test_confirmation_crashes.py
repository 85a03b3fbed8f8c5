"""The confirmation process survives SIGKILLs of the router and the destination.

A -> R (a router) -> B. A client of A commits transactions of transactional
messages to a queue of B, each asking for the confirmation process
(MQMSG_DEADLETTER | MQMSG_JOURNAL, 300 s to be received: no deadline passes
during the test). A reader of B receives them in transactions of its own,
aborting some on purpose (their messages are received again), while the
test SIGKILLs R, B or both at seeded random moments and starts them again;
the reader reconnects and goes on. The last kill comes once the reader has
handled every message, while FinalAcks may still be on their way back.

Afterwards, with everything running:

* B received every message exactly once, in A's commit order (its queue's
  journal, and the reader's own record, say so);
* A's ``system$;journal`` holds exactly one copy of each message, put there
  by its ACK_RECEIVE (each FinalAck came back through R, crashes or not),
  nothing awaits confirmation, and A's ``system$;deadxact`` is empty.

The default run sends 60 messages with 3 kills; the ``soak`` version 2,000
messages with 20 kills (``pytest -m soak``). ``QMGR_CONFIRM_SEED=N`` replays
a run with another seed.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import threading
import time
from collections.abc import Callable

import pytest
from crash_kit import reconnecting
from helpers import (  # type: ignore[import-not-found, unused-ignore]
    PEER_FAST,
    ROUTER,
    DaemonProcess,
    remote_queue,
    route_args,
    wait_until,
)
from transfer_kit import describe_outgoing, event_count, log_excerpt

from qmgr.client import (
    ConnectionLost,
    Journal,
    Message,
    MessageClass,
    QueueManager,
    connect,
)

QUEUE = "orders"
#: Seconds to be received: far more than the test takes, so no deadline passes.
TTBR = 300
#: Share of the reader's transactions aborted on purpose.
ABORT_RATE = 0.25


@dataclasses.dataclass(frozen=True)
class Run:
    """How big a run is."""

    messages: int
    kills: int
    #: A's client spreads its commits over at least this many seconds.
    seconds: float
    #: Seconds any one step may take: the reader's progress between two kills,
    #: and each settling wait at the end.
    timeout: float


RUNS = [
    pytest.param(
        Run(60, kills=3, seconds=1.5, timeout=30.0), 4101, id="short", marks=pytest.mark.slow
    ),
    pytest.param(
        Run(2_000, kills=20, seconds=30.0, timeout=120.0), 4102, id="soak", marks=pytest.mark.soak
    ),
]


def body(number: int) -> bytes:
    return b"m%06d" % number


# --------------------------------------------------------------------------
# A's sending client
# --------------------------------------------------------------------------


class Sender:
    """One client of A committing ``messages`` confirmed messages to B's queue, in
    transactions of 1 to 8 (A is never killed: every commit has its reply)."""

    def __init__(self, a: DaemonProcess, b: DaemonProcess, run: Run, seed: int) -> None:
        self.address = a.address
        self.destination = remote_queue(b, QUEUE)
        self.run = run
        self.rng = random.Random(seed)
        #: The bodies, in commit order.
        self.sent: list[bytes] = []
        self.transactions = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="sender")

    def _main(self) -> None:
        try:
            self._send()
        except BaseException as exc:
            self.error = exc

    def _send(self) -> None:
        started = time.monotonic()
        with connect(self.address, client_name="sender") as qa:
            while len(self.sent) < self.run.messages:
                ahead = len(self.sent) / self.run.messages * self.run.seconds - (
                    time.monotonic() - started
                )
                if ahead > 0:
                    time.sleep(ahead)  # pacing: the sends spread over the kills
                count = min(self.rng.randint(1, 8), self.run.messages - len(self.sent))
                bodies = [body(len(self.sent) + index) for index in range(count)]
                with qa.begin() as tx:
                    for data in bodies:
                        tx.send(
                            self.destination,
                            data,
                            journal=Journal.DEADLETTER | Journal.JOURNAL,
                            time_to_be_received=TTBR,
                        )
                    tx.commit()
                self.sent.extend(bodies)
                self.transactions += 1


# --------------------------------------------------------------------------
# B's reader
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Batch:
    """One of the reader's transactions that asked to commit."""

    bodies: list[bytes]
    #: False: the connection died before the commit's reply (in doubt).
    confirmed: bool
    #: An in-doubt batch whose first message was received again: not committed.
    rolled_back: bool = False


class Reader:
    """One client of B receiving in transactions of 1 to 6 messages, some aborted on
    purpose, reconnecting across B's crashes.

    A transaction whose commit reply was lost to a kill is in doubt: it
    committed unless its messages come back (B's reader is the queue's only
    one, and the queue is in order, so they would be the next ones received).
    """

    def __init__(self, b: DaemonProcess, seed: int) -> None:
        self.address = b.address
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.batches: list[Batch] = []
        #: Bodies of confirmed commits, and of in-doubt ones, to the batch.
        self.taken: dict[bytes, Batch] = {}
        #: Bodies received again after a confirmed commit.
        self.again: list[bytes] = []
        self.aborted = self.in_doubt = self.reconnects = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._main, name="reader")

    @property
    def handled(self) -> int:
        """Messages the reader committed or tried to (its progress)."""
        with self.lock:
            return len(self.taken)

    def received(self) -> list[bytes]:
        """The bodies the reader received for good, in the order it committed them."""
        with self.lock:
            return [data for b in self.batches if not b.rolled_back for data in b.bodies]

    def _main(self) -> None:
        try:
            for qm in reconnecting(self.address, self.stop):
                while not self.stop.is_set() and self._one_transaction(qm):
                    pass
                self.reconnects += 1
        except BaseException as exc:
            self.error = exc

    def _seen(self, data: bytes) -> None:
        with self.lock:
            batch = self.taken.pop(data, None)
            if batch is None:
                return
            if batch.confirmed:
                self.again.append(data)
            else:  # an in-doubt commit that did not happen: its messages came back
                batch.rolled_back = True
                for other in batch.bodies:
                    self.taken.pop(other, None)

    def _one_transaction(self, qm: QueueManager) -> bool:
        """One transaction; False once the connection is lost."""
        got: list[bytes] = []
        commit_sent = False
        try:
            tx = qm.begin()
            for _ in range(self.rng.randint(1, 6)):
                message = tx.receive(QUEUE, timeout=0 if got else 0.25)
                if message is None:
                    break
                self._seen(message.body)
                got.append(message.body)
            if not got or self.rng.random() < ABORT_RATE:
                tx.abort()
                self.aborted += bool(got)
                return True
            commit_sent = True
            tx.commit()
        except (ConnectionLost, OSError):
            if commit_sent:
                self._record(Batch(got, confirmed=False))
                self.in_doubt += 1
            return False
        self._record(Batch(got, confirmed=True))
        return True

    def _record(self, batch: Batch) -> None:
        with self.lock:
            self.batches.append(batch)
            for data in batch.bodies:
                self.taken[data] = batch


# --------------------------------------------------------------------------
# Reading and explaining
# --------------------------------------------------------------------------


def peek_all(qm: QueueManager, queue: str) -> list[Message]:
    """Every visible message of ``queue``, in lookup-id order."""
    found: list[Message] = []
    while page := qm.peek_range(queue, after=found[-1].lookup_id if found else 0):
        found.extend(page)
    return found


def depth(daemon: DaemonProcess, queue: str) -> int:
    """Committed messages in ``queue`` (-1 while the daemon does not answer)."""
    try:
        with connect(daemon.address, timeout=5.0) as qm:
            return next(info.depth for info in qm.list_queues() if info.name == queue)
    except ConnectionLost:
        return -1


def trace_text(daemon: DaemonProcess, message_id: str) -> str:
    with connect(daemon.address) as qm:
        findings = qm.trace(message_id).findings
    return (
        "; ".join(
            f"{f.kind} {f.place!r} {f.class_name} {f.detail!r} next_hop={f.next_hop!r}"
            for f in findings
        )
        or "nothing known"
    )


def explain(daemons: dict[str, DaemonProcess], ids: dict[bytes, str], suspects: list[bytes]) -> str:
    """What A, R and B know about some ``suspects`` (traced by message id where
    one is known), their outgoing queues, and their logs."""
    lines = []
    for data in suspects[:5]:
        message_id = ids.get(data)
        if message_id is None:
            lines.append(f"{data!r}: no message id known (it reached no queue read here)")
            continue
        lines.append(f"{data!r} {message_id}:")
        lines.extend(
            f"  at {label}: {trace_text(daemon, message_id)}" for label, daemon in daemons.items()
        )
    for label, daemon in daemons.items():
        with connect(daemon.address) as qm:
            lines.append(f"{label} outgoing: {describe_outgoing(qm.outgoing())}")
    lines.extend(log_excerpt(daemon, 40) for daemon in daemons.values())
    return "\n".join(lines)


def poll(predicate: Callable[[], bool], timeout: float) -> bool:
    """Whether ``predicate`` came to hold within ``timeout`` seconds (polled)."""
    try:
        wait_until(predicate, timeout)
    except AssertionError:
        return False
    return True


# --------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("run", "seed"), RUNS)
def test_every_message_is_confirmed_once_through_crashes_of_router_and_destination(
    daemon_factory: Callable[..., DaemonProcess], run: Run, seed: int
) -> None:
    seed = int(os.environ.get("QMGR_CONFIRM_SEED", "0")) or seed  # to replay another run
    rng = random.Random(seed)
    b = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    r = daemon_factory(name="qm-r", extra_args=(*PEER_FAST, *ROUTER))
    a = daemon_factory(name="qm-a", extra_args=(*PEER_FAST, *route_args(b.peer_port, r.peer_port)))
    daemons = {"A": a, "R": r, "B": b}
    with connect(b.address) as qb:
        qb.create_queue(QUEUE, transactional=True, journal=True)

    # Who dies at each kill: R and B at least once each; a kill once the
    # reader handled everything (FinalAcks alone on their way) comes last.
    victims = [["R"], ["B"]] + [
        rng.choice([["R"], ["B"], ["R", "B"]]) for _ in range(run.kills - 2)
    ]
    rng.shuffle(victims)
    marks = [
        *sorted(rng.sample(range(run.messages // 20, run.messages), run.kills - 1)),
        run.messages,
    ]

    sender = Sender(a, b, run, seed)
    reader = Reader(b, seed + 1)
    in_flight: list[int] = []
    started = time.monotonic()
    sender.thread.start()
    reader.thread.start()
    try:
        for mark, victim in zip(marks, victims, strict=True):
            assert poll(
                lambda m=mark: reader.handled >= m or reader.error is not None, run.timeout
            ), (
                f"the reader stalled at {reader.handled} of {run.messages} messages "
                f"(waiting for {mark} before killing {victim})\n"
                + "\n".join(log_excerpt(d) for d in daemons.values())
            )
            assert reader.error is None, f"the reader failed: {reader.error!r}"
            time.sleep(rng.uniform(0.0, 0.1))  # a random moment, not a wait for anything
            dying = [daemons[label] for label in victim]
            for daemon in dying:
                daemon.kill()
            time.sleep(rng.uniform(0.0, 0.3))  # down for a random while
            # Messages the reader took whose confirmation A has not journaled yet
            # (their FinalAcks were in flight at the kill, or made while R was down).
            in_flight.append(reader.handled - depth(a, "system$;journal"))
            for daemon in dying:
                daemon.start()
        kills_over = time.monotonic() - started
        # Everything is running: B's queue journal fills up with every message.
        complete = poll(lambda: depth(b, f"{QUEUE};journal") >= run.messages, run.timeout)
    finally:
        reader.stop.set()
        sender.thread.join(run.timeout)
        reader.thread.join(30)
    assert not sender.thread.is_alive(), "the sender did not finish"
    assert not reader.thread.is_alive(), "the reader did not stop"
    assert sender.error is None, f"the sender failed: {sender.error!r}"
    assert reader.error is None, f"the reader failed: {reader.error!r}"
    sent = sender.sent
    assert len(sent) == run.messages

    with connect(b.address) as qb:
        at_b = peek_all(qb, f"{QUEUE};journal")
        left_at_b = peek_all(qb, QUEUE)
        dead_at_b = peek_all(qb, "system$;deadxact")
    ids = {m.body: m.id for m in at_b + left_at_b}
    received = [m.body for m in at_b]
    if not complete or received != sent or left_at_b or reader.again:
        missing = [data for data in sent if data not in set(received)]
        doubled = [data for data, n in collections.Counter(received).items() if n > 1]
        pairs = enumerate(zip(received, sent, strict=False))
        first_difference = next((i for i, (x, y) in pairs if x != y), None)
        pytest.fail(
            f"B did not receive every message once in order: {len(received)} received of "
            f"{len(sent)}, missing {missing[:10]}, received twice {doubled[:10]}, "
            f"received again after a commit {reader.again[:10]}, left in the queue "
            f"{[m.body for m in left_at_b][:10]}; first difference at {first_difference}\n"
            + explain(daemons, ids, missing + doubled + reader.again)
        )
    assert reader.received() == sent, "the reader's own record differs from B's queue journal"
    assert dead_at_b == []

    # A: one confirmed copy of each message in its journal, nothing in deadxact.
    with connect(a.address) as qa:
        confirmed = poll(lambda: depth(a, "system$;journal") >= run.messages, run.timeout)
        settled = time.monotonic() - started
        journal = peek_all(qa, "system$;journal")
        deadxact = peek_all(qa, "system$;deadxact")
    counts = collections.Counter(m.body for m in journal)
    unconfirmed = [data for data in sent if counts[data] == 0]
    doubled = [data for data in sent if counts[data] > 1]
    strays = [m.body for m in journal if m.body not in ids]
    classes = collections.Counter(m.class_name for m in journal)
    wrong_ids = [m.body for m in journal if ids.get(m.body, m.id) != m.id]
    if not confirmed or unconfirmed or doubled or strays or deadxact or wrong_ids:
        pytest.fail(
            f"A's journal holds {len(journal)} copies for {len(sent)} messages: "
            f"unconfirmed {unconfirmed[:10]}, twice {doubled[:10]}, strays {strays[:10]}, "
            f"other ids {wrong_ids[:10]}; deadxact holds "
            f"{[(m.body, m.class_name) for m in deadxact][:10]}\n"
            + explain(daemons, ids, unconfirmed + doubled + [m.body for m in deadxact] + wrong_ids)
        )
    # The source's journal copy is the message itself (class NORMAL), put there
    # by its ACK_RECEIVE because it asked for MQMSG_JOURNAL.
    assert classes == {MessageClass.NORMAL.name: len(sent)}, classes
    assert all(m.journal & Journal.JOURNAL for m in journal)
    # Nothing left awaiting confirmation at A (a sample, traced).
    for data in rng.sample(sent, min(10, len(sent))):
        with connect(a.address) as qa:
            findings = qa.trace(ids[data]).findings
        assert not [f for f in findings if f.kind == "awaiting-confirmation"], (data, findings)

    expected_starts = {
        label: 1 + sum(label in victim for victim in victims) for label in ("R", "B")
    }
    starts = {label: event_count(daemons[label], "queue_manager_started") for label in ("R", "B")}
    assert starts == expected_starts
    print(
        f"seed {seed}: {run.messages} messages in {sender.transactions} transactions; kills "
        f"{['+'.join(v) for v in victims]} over {kills_over:.1f} s; reader: {len(reader.batches)} "
        f"commits, {reader.in_doubt} in doubt, {reader.aborted} aborted on purpose, "
        f"{reader.reconnects} reconnects; unconfirmed at each restart {in_flight}; "
        f"all confirmed at A {settled:.1f} s after the start"
    )
