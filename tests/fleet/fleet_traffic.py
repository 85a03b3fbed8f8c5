"""Transactional traffic across a fleet, its ledger, and the check of what arrived.

Theory of operation
-------------------
Every queue manager of the fleet has a :class:`Source`: a client thread
that commits transactions of 1 to ``max_messages`` messages, each message
to one of the source's destinations (other queue managers of its own site
and of others, and every port-mapped one), into their transactional queue
``fleet``. A share of the transactions ask for ACK_REACH_QUEUE in the
source's admin queue ``acks`` (named by the source's address as the others
reach it), and a share are aborted on purpose. Each message's label and
body say who sent it, to whom, its number in that (source, destination)
stream and its transaction: ``s0h1>s2h2#17@5``.

The source records each transaction as committed (the commit returned),
aborted (aborted on purpose, or its connection was lost before the commit
was asked), or in doubt (the connection was lost during the commit: the
queue manager was killed). It reconnects when its queue manager comes
back, and spreads its transactions over at least ``seconds``, so that the
faults land while messages are committed and delivered.

:func:`check` reads every queue (peeking: nothing is removed) and holds the
fleet to its promises: per (source, destination), the messages of committed
transactions exactly once and in commit order, nothing of an aborted one, an
in-doubt one wholly or not at all (in every destination alike); exactly one
ACK_REACH_QUEUE per delivered message that asked for one, and nothing else
in the admin queues; no dead letters; every outgoing queue empty.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from fleet_kit import Fleet
from helpers import drain

from qmgr.client import Acknowledge, ConnectionLost, connect

if TYPE_CHECKING:
    from qmgr.client import QueueManager

__all__ = ["ADMIN", "QUEUE", "Plan", "Source", "Summary", "check", "create_queues", "run_sources"]

#: The transactional queue every queue manager receives the fleet's messages in.
QUEUE = "fleet"
#: The (non-transactional) admin queue acknowledgments come back to.
ADMIN = "acks"
#: The dead-letter queues that must stay empty.
DEAD = ("system$;deadxact", "system$;deadletter")
#: Seconds a source may go without reaching its queue manager.
RECONNECT_TIMEOUT = 60.0

Outcome = Literal["committed", "aborted", "in doubt"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """How much traffic each source makes, and how."""

    transactions: int
    #: The source spreads its transactions over at least this many seconds.
    seconds: float
    max_messages: int = 10
    #: Destinations of each source besides the port-mapped queue managers.
    destinations: int = 3
    abort_rate: float = 0.08
    ack_rate: float = 0.3


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One message sent."""

    label: str
    destination: str
    ack: bool


@dataclasses.dataclass(slots=True)
class Tx:
    """One transaction of a source, in commit order."""

    number: int
    entries: list[Entry]
    outcome: Outcome = "aborted"


def _label(source: str, destination: str, number: int, tx: int) -> str:
    return f"{source}>{destination}#{number}@{tx}"


def _source_of(label: str) -> str:
    return label.partition(">")[0]


class Source:
    """The client thread of one queue manager (see the module's docstring)."""

    def __init__(
        self, fleet: Fleet, name: str, destinations: Sequence[str], plan: Plan, seed: int
    ) -> None:
        self.fleet = fleet
        self.name = name
        self.destinations = list(destinations)
        self.plan = plan
        self.rng = random.Random(seed)
        self.log: list[Tx] = []
        self.done = 0
        self.error: BaseException | None = None
        self._numbers: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"source-{name}", daemon=True)

    def stop(self) -> None:
        self._stop.set()

    def _connect(self) -> QueueManager:
        deadline = time.monotonic() + RECONNECT_TIMEOUT
        while True:
            try:
                return connect(self.fleet.daemons[self.name].address, timeout=5.0)
            except (ConnectionLost, OSError):
                if time.monotonic() > deadline or self._stop.is_set():
                    raise
                time.sleep(0.05)  # its queue manager is down: try again

    def _transaction(self, number: int) -> Tx:
        entries = []
        ack = self.rng.random() < self.plan.ack_rate
        for _ in range(self.rng.randint(1, self.plan.max_messages)):
            destination = self.rng.choice(self.destinations)
            self._numbers[destination] += 1
            label = _label(self.name, destination, self._numbers[destination], number)
            entries.append(Entry(label, destination, ack))
        return Tx(number, entries)

    def _send(self, qm: QueueManager, tx: Tx) -> None:
        """Send ``tx`` and commit or abort it; its outcome is recorded even if this raises."""
        transaction = qm.begin()
        admin = self.fleet.queue(self.name, ADMIN)
        for entry in tx.entries:
            body = entry.label.encode() + b"." * self.rng.randint(16, 400)
            transaction.send(
                self.fleet.queue(entry.destination, QUEUE),
                body,
                label=entry.label,
                acknowledge=Acknowledge.FULL_REACH_QUEUE if entry.ack else Acknowledge.NONE,
                admin_queue=admin if entry.ack else "",
            )
        if self.rng.random() < self.plan.abort_rate:
            transaction.abort()
            return
        tx.outcome = "in doubt"
        transaction.commit()
        tx.outcome = "committed"

    def _run(self) -> None:
        try:
            began = time.monotonic()
            pace = self.plan.seconds / max(1, self.plan.transactions)
            qm = self._connect()
            for number in range(1, self.plan.transactions + 1):
                if self._stop.is_set():
                    break
                time.sleep(max(0.0, began + number * pace - time.monotonic()))
                tx = self._transaction(number)
                self.log.append(tx)
                try:
                    self._send(qm, tx)
                except (ConnectionLost, OSError):
                    qm.close()
                    qm = self._connect()
                self.done += 1
            qm.close()
        except BaseException as exc:
            self.error = exc
            self.done = self.plan.transactions


def choose_destinations(fleet: Fleet, name: str, count: int, rng: random.Random) -> list[str]:
    """``count`` destinations for ``name``: one of its own site (if it has company), the
    rest elsewhere; and every port-mapped queue manager but itself."""
    spec = fleet.topology.by_name(name)
    mapped = [other for other in fleet.port_mapped if other != name]
    site = [q.name for q in fleet.topology.site(spec.site) if q.name != name]
    away = [q.name for q in fleet.topology.qms if q.site != spec.site]
    chosen = rng.sample([n for n in site if n not in mapped], min(1, len(site)))
    rest = [n for n in away if n not in mapped]
    chosen += rng.sample(rest, min(len(rest), count - len(chosen)))
    return chosen + mapped


def create_queues(fleet: Fleet) -> None:
    """The transactional ``fleet`` queue and the ``acks`` admin queue on every queue manager."""
    for name in fleet.names:
        with fleet.client(name) as qm:
            qm.create_queue(QUEUE, transactional=True)
            qm.create_queue(ADMIN)


def run_sources(fleet: Fleet, plan: Plan, seed: int) -> list[Source]:
    """A :class:`Source` per queue manager, started."""
    rng = random.Random(seed)
    sources = [
        Source(fleet, name, choose_destinations(fleet, name, plan.destinations, rng), plan, seed)
        for seed, name in enumerate(fleet.names, start=seed)
    ]
    for source in sources:
        source.thread.start()
    return sources


def progress(sources: Sequence[Source]) -> Callable[[], float]:
    """The share of all planned transactions the sources have made so far."""
    total = sum(source.plan.transactions for source in sources)
    return lambda: sum(source.done for source in sources) / total


def join(sources: Sequence[Source], timeout: float) -> None:
    """Wait for every source to finish; re-raise the first one's failure."""
    deadline = time.monotonic() + timeout
    for source in sources:
        source.thread.join(max(0.0, deadline - time.monotonic()))
    for source in sources:
        source.stop()
        if source.thread.is_alive():
            raise AssertionError(f"source {source.name} did not finish in {timeout:g} s")
        if source.error is not None:
            raise AssertionError(f"source {source.name} failed") from source.error


@dataclasses.dataclass
class Summary:
    """What a run committed, delivered and acknowledged (for the report)."""

    transactions: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    committed_messages: int = 0
    delivered: int = 0
    acknowledgments: int = 0
    streams: int = 0

    def __str__(self) -> str:
        return (
            f"{dict(self.transactions)} transactions; {self.committed_messages} messages "
            f"committed, {self.delivered} delivered in {self.streams} (source, destination) "
            f"streams, {self.acknowledgments} acknowledgments"
        )


def _read(fleet: Fleet, name: str, queue: str) -> list[bytes]:
    return [body for _, body in drain(fleet.daemons[name].address, queue)]


def settle(fleet: Fleet, expected: int, timeout: float) -> float:
    """Wait until every outgoing queue is empty and at least ``expected`` messages are in
    the ``fleet`` queues; the seconds it took."""

    def delivered() -> int:
        total = 0
        for name in fleet.names:
            with fleet.client(name) as qm:
                total += next(q.depth for q in qm.list_queues() if q.name == QUEUE)
        return total

    return fleet.wait(
        f"delivery of {expected} messages, outgoing queues empty ({fleet.describe()})",
        lambda: not fleet.outgoing_left() and delivered() >= expected,
        timeout,
    )


def check(fleet: Fleet, sources: Sequence[Source]) -> Summary:
    """Hold what arrived to the ledgers (see the module's docstring); the summary."""
    summary = Summary()
    arrived: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for name in fleet.names:
        for body in _read(fleet, name, QUEUE):
            label = body.split(b".", 1)[0].decode()
            arrived[(_source_of(label), name)].append(label)
        for dead in DEAD:
            found = _read(fleet, name, dead)
            assert not found, f"{name} has {len(found)} messages in {dead}: {found[:3]}"
    # Every outgoing queue empties (nothing is stuck). settle() saw them empty
    # one daemon after another, not all at one instant: a gate may have taken
    # acknowledgments from a queue manager polled after it, so wait for that.
    fleet.wait(
        f"outgoing queues empty ({fleet.describe()})", lambda: not fleet.outgoing_left(), 60.0
    )
    present = {label for labels in arrived.values() for label in labels}
    acks_expected: dict[str, collections.Counter[str]] = {}
    for source in sources:
        expected: dict[str, list[str]] = collections.defaultdict(list)
        acks = acks_expected[source.name] = collections.Counter()
        for tx in source.log:
            summary.transactions[tx.outcome] += 1
            landed = [entry.label in present for entry in tx.entries]
            if tx.outcome == "aborted":
                assert not any(landed), f"{source.name}: aborted transaction {tx.number} arrived"
                continue
            if tx.outcome == "in doubt":
                assert all(landed) or not any(landed), (
                    f"{source.name}: in-doubt transaction {tx.number} arrived in part: "
                    f"{[e.label for e, got in zip(tx.entries, landed, strict=True) if got]}"
                )
                if not any(landed):
                    continue
            summary.committed_messages += len(tx.entries)
            for entry in tx.entries:
                expected[entry.destination].append(entry.label)
                if entry.ack:
                    acks[entry.label] += 1
        for destination in {*expected, *source.destinations}:
            got = arrived.get((source.name, destination), [])
            want = expected.get(destination, [])
            summary.delivered += len(got)
            summary.streams += bool(want)
            assert got == want, _difference(source.name, destination, want, got)
    for name, acks in acks_expected.items():
        with fleet.client(name) as qm:
            reports = qm.peek_range(ADMIN, max=100_000)
        classes = collections.Counter(message.class_name for message in reports)
        assert set(classes) <= {"ACK_REACH_QUEUE"}, f"{name}'s admin queue: {classes}"
        labels = collections.Counter(message.label for message in reports)
        assert labels == acks, f"{name}'s acknowledgments: {_counter_difference(acks, labels)}"
        summary.acknowledgments += sum(labels.values())
    return summary


def _difference(source: str, destination: str, want: list[str], got: list[str]) -> str:
    missing = [label for label in want if label not in set(got)]
    extra = collections.Counter(got) - collections.Counter(want)
    first = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), None)
    return (
        f"{source} -> {destination}: {len(want)} expected, {len(got)} arrived; missing "
        f"{missing[:5]}, duplicated or unexpected {dict(extra)}; first out of place at "
        f"{first}: {want[first : first + 3] if first is not None else ''} vs "
        f"{got[first : first + 3] if first is not None else ''}"
    )


def _counter_difference(want: collections.Counter[str], got: collections.Counter[str]) -> str:
    return f"missing {dict(want - got)}, extra {dict(got - want)}"
