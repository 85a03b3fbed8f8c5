"""The transfer the peering fault tests run, and what checks it.

One client (:class:`Committer`) commits transactions on queue manager A, each
sending 1 to 20 messages (a seeded random number, with seeded random body
sizes) to a transactional queue on another queue manager. One committing
client keeps the commit order well defined. Every body starts with its
transaction's number and its index in the transaction; some transactions are
aborted on purpose. The client's :class:`Ledger` records what it committed.

Afterwards, everything is read from the destination queue
(:func:`wait_settled`, :func:`receive_all`) and compared with the client's
ledger (:func:`check_delivery`): every committed message exactly once, in
commit order; nothing from an aborted or unfinished transaction; a
transaction whose commit reply was lost to a kill of A ("in doubt") wholly
present or wholly absent, never in part. Every outgoing queue on the way
ends empty with nothing unacknowledged (:func:`check_outgoing_empty`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import random
import threading
import time
from collections.abc import Iterable

import pytest
from _pytest.mark import ParameterSet
from helpers import DaemonProcess  # type: ignore[import-not-found, unused-ignore]

from qmgr.client import ConnectionLost, OutgoingInfo, QueueError, QueueManager, connect

QUEUE = "orders"
#: Share of transactions aborted on purpose.
ABORT_RATE = 0.08
#: Seconds the whole delivery may take to settle once the faults stop.
SETTLE_TIMEOUT = 60.0
#: Seconds with every outgoing queue empty and the destination's depth unchanged
#: after which the destination is read even though messages are missing.
QUIET = 5.0
#: Seconds the committing client may go without reaching its queue manager.
RECONNECT_TIMEOUT = 60.0


@dataclasses.dataclass(frozen=True)
class Size:
    """How big a run is."""

    messages: int
    #: The committing client spreads its commits over at least this many seconds,
    #: so that the faults land while messages are being committed and delivered.
    seconds: float
    #: Kills (crash tests) spread over the transfer.
    kills: int = 0
    #: The range of seconds between two proxy faults.
    pause: tuple[float, float] = (0.1, 0.4)
    #: The range of a proxy stall's length.
    stall: tuple[float, float] = (0.1, 0.6)
    #: Live-connection cuts the proxy test must have made, at least.
    min_cuts: int = 0
    #: Seconds the destination is watched, once delivery settled, for messages
    #: that should not come (nothing can: every outgoing queue is empty).
    watch: float = 0.25


#: The long runs, for ``pytest -m soak``.
SOAK_SIZES = [
    pytest.param(
        Size(
            10_000, kills=4, seconds=8.0, pause=(0.1, 0.5), stall=(0.2, 1.5), min_cuts=8, watch=1.0
        ),
        id="10k",
        marks=pytest.mark.soak,
    ),
    pytest.param(
        Size(
            100_000,
            kills=20,
            seconds=90.0,
            pause=(0.05, 0.4),
            stall=(0.2, 1.5),
            min_cuts=80,
            watch=1.0,
        ),
        id="100k",
        marks=pytest.mark.soak,
    ),
]


def with_soak_sizes(short: Size) -> list[ParameterSet]:
    """The parameters of a test's sizes: its own short run (named by its thousands
    of messages, ``2k``), then :data:`SOAK_SIZES`."""
    return [pytest.param(short, id=f"{short.messages // 1000}k"), *SOAK_SIZES]


def remote(port: int, queue: str = QUEUE) -> str:
    """The format name of ``queue`` on the queue manager whose peer port is ``port``."""
    return f"DIRECT=TCP:127.0.0.1:{port}\\private$\\{queue}"


# --------------------------------------------------------------------------
# The committing client and its ledger
# --------------------------------------------------------------------------


def body(tx: int, index: int, padding: bytes) -> bytes:
    """A message body: ``T<transaction>:<index>|`` and padding."""
    return b"T%08d:%02d|" % (tx, index) + padding


def name(data: bytes) -> str:
    """``T<transaction>:<index>`` of a body, for messages."""
    return data[:12].decode("ascii", "replace")


def tx_of(data: bytes) -> int:
    """The transaction number of a body (-1 if it is not one of ours)."""
    try:
        return int(data[1:9])
    except ValueError:
        return -1


@dataclasses.dataclass
class Ledger:
    """What the committing client knows, in commit order."""

    #: ("committed" | "in doubt", transaction number, bodies) in the order committed.
    order: list[tuple[str, int, list[bytes]]] = dataclasses.field(default_factory=list)
    #: Transactions aborted on purpose, or never asked to commit (connection lost).
    never: dict[int, list[bytes]] = dataclasses.field(default_factory=dict)
    committed_messages: int = 0
    reconnects: int = 0
    error: BaseException | None = None

    @property
    def in_doubt(self) -> list[int]:
        return [tx for outcome, tx, _ in self.order if outcome == "in doubt"]


class Committer:
    """One client committing ``messages`` messages on a queue manager, in a thread.

    It reconnects whenever its queue manager dies. A transaction whose
    commit was sent but whose reply never came is recorded as in doubt. It
    commits no faster than ``messages`` in ``seconds``.
    """

    def __init__(
        self, address: str, destination: str, messages: int, seed: int, seconds: float = 0.0
    ) -> None:
        self.address = address
        self.destination = destination
        self.messages = messages
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="committer")
        self.started = 0.0
        self.elapsed = 0.0

    @property
    def committed(self) -> int:
        return self.ledger.committed_messages

    def start(self) -> Committer:
        self.started = time.monotonic()
        self.thread.start()
        return self

    def join(self, timeout: float) -> Ledger:
        """Wait for the transfer to finish; re-raise the thread's error."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.stop.set()
            self.thread.join(30.0)
            raise AssertionError(
                f"the transfer did not finish within {timeout} s: "
                f"{self.committed}/{self.messages} messages committed"
            )
        if self.ledger.error is not None:
            raise AssertionError(f"the committing client failed: {self.ledger.error!r}")
        return self.ledger

    def _run(self) -> None:
        try:
            self._transfer()
        except BaseException as exc:
            self.ledger.error = exc
        self.elapsed = time.monotonic() - self.started

    def _connect(self) -> QueueManager:
        deadline = time.monotonic() + RECONNECT_TIMEOUT
        while True:
            try:
                return connect(self.address, timeout=2.0, client_name="committer")
            except ConnectionLost:
                if time.monotonic() > deadline or self.stop.is_set():
                    raise
                time.sleep(0.02)

    def _transfer(self) -> None:
        rng = self.rng
        ledger = self.ledger
        tx = 0
        first = True
        while ledger.committed_messages < self.messages and not self.stop.is_set():
            qm = self._connect()
            if not first:
                ledger.reconnects += 1
            first = False
            with qm:
                while ledger.committed_messages < self.messages and not self.stop.is_set():
                    ahead = ledger.committed_messages / self.messages * self.seconds - (
                        time.monotonic() - self.started
                    )
                    if ahead > 0:
                        time.sleep(ahead)
                    tx += 1
                    count = min(rng.randint(1, 20), self.messages - ledger.committed_messages)
                    bodies = [
                        body(tx, index, rng.randbytes(rng.randint(0, 400)))
                        for index in range(count)
                    ]
                    abort = rng.random() < ABORT_RATE
                    commit_sent = False
                    try:
                        transaction = qm.begin()
                        for data in bodies:
                            transaction.send(self.destination, data)
                        if abort:
                            transaction.abort()
                            ledger.never[tx] = bodies
                            continue
                        commit_sent = True
                        transaction.commit()
                    except ConnectionLost:
                        if commit_sent:
                            ledger.order.append(("in doubt", tx, bodies))
                        else:
                            ledger.never[tx] = bodies
                        break
                    except QueueError:
                        if commit_sent:  # a reply saying what went wrong: not in doubt
                            ledger.never[tx] = bodies
                        raise
                    ledger.order.append(("committed", tx, bodies))
                    ledger.committed_messages += count


def start_transfer(
    source: DaemonProcess, receiver: DaemonProcess, size: Size, seed: int
) -> Committer:
    """Create the transactional queue :data:`QUEUE` on ``receiver`` and start a
    :class:`Committer` sending ``size.messages`` to it through ``source``."""
    with connect(receiver.address) as qm:
        qm.create_queue(QUEUE, transactional=True)
    destination = remote(receiver.peer_port)
    return Committer(source.address, destination, size.messages, seed, size.seconds).start()


# --------------------------------------------------------------------------
# Waiting and checking
# --------------------------------------------------------------------------


def depth(qm: QueueManager, queue: str) -> int:
    for info in qm.list_queues():
        if info.name == queue:
            return info.depth
    raise AssertionError(f"no queue {queue!r} on {qm.address}")


def describe_outgoing(infos: Iterable[OutgoingInfo]) -> str:
    return "; ".join(
        f"{info.destination} via {info.next_hop}: state={info.state} waiting={info.waiting} "
        f"unacknowledged={info.unacknowledged} sequence={info.sequence} "
        f"next_number={info.next_number} last_error={info.last_error!r}"
        for info in infos
    )


def log_excerpt(daemon: DaemonProcess, lines: int = 25) -> str:
    """The daemon's last warnings and errors, and its last peering events."""
    picked = []
    for line in daemon.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            picked.append(line)  # a traceback or anything not JSON
            continue
        if entry.get("level") in ("warning", "error", "critical") or "peer" in str(
            entry.get("event", "")
        ):
            picked.append(line)
    tail = picked[-lines:]
    return f"--- {daemon.name} ({len(picked)} lines picked, last {len(tail)}):\n" + "\n".join(tail)


def event_count(daemon: DaemonProcess, event: str, contains: str = "") -> int:
    """How many log lines have this event (and contain ``contains``)."""
    count = 0
    for line in daemon.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == event and contains in line:
            count += 1
    return count


def wait_settled(
    senders: list[tuple[str, DaemonProcess]],
    receiver: DaemonProcess,
    minimum: int,
    timeout: float = SETTLE_TIMEOUT,
) -> float:
    """Poll until every sender's outgoing queues are empty with nothing unacknowledged
    and the destination queue holds at least ``minimum`` messages; return how long it took.

    Once every outgoing queue is empty, nothing more can come: if the depth
    then stays below ``minimum`` for :data:`QUIET` seconds, it returns anyway,
    so that :func:`check_delivery` names the messages that were lost.

    Raises:
        AssertionError: with the outgoing queues, the depth and the logs, on timeout.
    """
    started = time.monotonic()
    deadline = started + timeout
    outgoing: dict[str, list[OutgoingInfo]] = {}
    held = -1
    quiet_since: tuple[float, int] | None = None  # (since when, depth) with nothing to send
    while True:
        try:
            for label, daemon in senders:
                with connect(daemon.address) as qm:
                    outgoing[label] = qm.outgoing()
            with connect(receiver.address) as qm:
                held = depth(qm, QUEUE)
        except ConnectionLost:
            pass  # a daemon restarting: try again
        else:
            empty = all(
                info.waiting == 0 and info.unacknowledged == 0
                for infos in outgoing.values()
                for info in infos
            )
            now = time.monotonic()
            if empty and len(outgoing) == len(senders):
                if held >= minimum:
                    return now - started
                if quiet_since is None or quiet_since[1] != held:
                    quiet_since = (now, held)
                elif now - quiet_since[0] > QUIET:
                    return now - started
            else:
                quiet_since = None
        if time.monotonic() > deadline:
            state = "\n".join(f"{label}: {describe_outgoing(i)}" for label, i in outgoing.items())
            logs = "\n".join(log_excerpt(d) for _, d in [*senders, ("dest", receiver)])
            raise AssertionError(
                f"delivery did not settle within {timeout} s: destination holds {held} "
                f"messages, at least {minimum} committed\n{state}\n{logs}"
            )
        time.sleep(0.1)


def receive_all(daemon: DaemonProcess, watch: float, queue: str = QUEUE) -> list[bytes]:
    """Receive every message in ``queue`` (in queue order), then check that no more
    come within ``watch`` seconds."""
    bodies: list[bytes] = []
    with connect(daemon.address) as qm:
        # In transactions of up to 1000 receives: one sync each, not one per message.
        while True:
            with qm.begin() as transaction:
                batch: list[bytes] = []
                while len(batch) < 1000:
                    message = transaction.receive(queue, timeout=0)
                    if message is None:
                        break
                    batch.append(message.body)
            bodies.extend(batch)
            if len(batch) < 1000:
                break
        late = qm.receive(queue, timeout=watch)
        if late is not None:
            bodies.append(late.body)
            while (message := qm.receive(queue, timeout=0.2)) is not None:
                bodies.append(message.body)
            raise AssertionError(
                f"messages kept arriving after delivery settled: {[name(b) for b in bodies[-5:]]}"
            )
    return bodies


def check_delivery(received: list[bytes], ledger: Ledger) -> None:
    """Every committed message exactly once in commit order, in-doubt transactions whole
    or absent, nothing else.

    Raises:
        AssertionError: listing every kind of difference found, with examples.
    """
    problems: list[str] = []
    counts = collections.Counter(received)
    duplicated = [name(data) for data, count in counts.items() if count > 1]
    if duplicated:
        problems.append(f"{len(duplicated)} messages delivered more than once: {duplicated[:10]}")
    present = set(counts)
    expected: list[bytes] = []
    missing: list[str] = []
    partial: list[str] = []
    in_doubt_present = in_doubt_absent = 0
    for outcome, tx, bodies in ledger.order:
        here = [data in present for data in bodies]
        if outcome == "committed":
            if not all(here):
                lost = [index for index, ok in enumerate(here) if not ok]
                missing.append(f"T{tx}{lost} of {len(bodies)}")
            expected.extend(bodies)
        elif all(here):
            in_doubt_present += 1
            expected.extend(bodies)
        elif any(here):
            partial.append(f"T{tx}: {sum(here)} of {len(bodies)} present")
        else:
            in_doubt_absent += 1
    if missing:
        problems.append(f"{len(missing)} committed transactions lost messages: {missing[:10]}")
    if partial:
        problems.append(f"in-doubt transactions delivered in part: {partial[:10]}")
    known = {data for _, _, bodies in ledger.order for data in bodies}
    stray = [name(data) for data in present if tx_of(data) in ledger.never]
    if stray:
        problems.append(
            f"{len(stray)} messages of aborted or never-committed transactions arrived: "
            f"{sorted(stray)[:10]}"
        )
    unknown = [
        data[:40] for data in present if data not in known and tx_of(data) not in ledger.never
    ]
    if unknown:
        problems.append(f"{len(unknown)} messages the client never sent: {unknown[:5]}")
    if received != expected:
        first = next(
            (i for i, (a, b) in enumerate(zip(received, expected, strict=False)) if a != b),
            min(len(received), len(expected)),
        )
        window = slice(max(0, first - 3), first + 4)
        problems.append(
            f"order differs from commit order at position {first} "
            f"(received {len(received)}, expected {len(expected)}): "
            f"received {[name(b) for b in received[window]]}, "
            f"expected {[name(b) for b in expected[window]]}"
        )
    assert not problems, (
        f"{len(received)} messages received; ledger: "
        f"{sum(1 for o in ledger.order if o[0] == 'committed')} committed transactions, "
        f"{in_doubt_present} in doubt present, {in_doubt_absent} in doubt absent, "
        f"{len(ledger.never)} aborted or never committed\n" + "\n".join(problems)
    )


def check_transfer(
    senders: list[tuple[str, DaemonProcess]], receiver: DaemonProcess, ledger: Ledger, watch: float
) -> float:
    """Once delivery settled (:func:`wait_settled`), read the destination queue and
    check it against ``ledger`` (:func:`check_delivery`) and every sender's outgoing
    queues (:func:`check_outgoing_empty`); return how long settling took."""
    settle = wait_settled(senders, receiver, ledger.committed_messages)
    received = receive_all(receiver, watch)
    for label, daemon in senders:
        check_outgoing_empty(label, daemon)
    check_delivery(received, ledger)
    return settle


def check_outgoing_empty(label: str, daemon: DaemonProcess) -> None:
    with connect(daemon.address) as qm:
        infos = qm.outgoing()
    assert infos, f"{label} has no outgoing queue at all: nothing went through it"
    busy = [i for i in infos if i.waiting or i.unacknowledged]
    assert not busy, f"{label}'s outgoing queues are not empty: {describe_outgoing(busy)}"
