"""The load of ``bench/fleet.py``: transactional traffic across a fleet, received, checked.

One trio process drives every queue manager of the fleet over its
Unix-domain socket:

* a **source** per queue manager commits transactions of 1 to 10 messages,
  each message to one of the source's destinations (one of its own site,
  the others elsewhere), as fast as it can or paced at a rate; the bodies
  (256 bytes) say ``source>destination#n``, ``n`` counting each
  (source, destination) stream from 1;
* a **consumer** per queue manager takes what arrives: it waits for a
  message with ``peek``, takes every visible one with ``peek_range`` and
  removes them with ``remove_through`` (two syncs per batch, however large),
  and reconnects when its queue manager is killed (going on after the last
  lookup id it recorded, so a batch read before a kill is not counted twice).

The :class:`Ledger` keeps, per stream, the numbers committed (in commit
order) and received (in arrival order), and, while latency is measured,
each message's commit time and its receive time by the number of
queue-manager hops between its source and destination. :meth:`Ledger.check`
counts what was lost, duplicated, out of order, or received without being
committed.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import random
import time
from collections.abc import Sequence

import trio
from fleet_kit import Fleet

from qmgr.client import AsyncQueueManager, ConnectionLost, open_client

__all__ = ["QUEUE", "Ledger", "Load", "choose_destinations"]

#: The transactional queue every queue manager receives the bench's messages in.
QUEUE = "bench"
BODY_BYTES = 256
#: The most messages a consumer takes in one batch.
PAGE = 2000


def choose_destinations(fleet: Fleet, rng: random.Random, count: int = 3) -> dict[str, list[str]]:
    """Per queue manager, ``count`` destinations: one in its own site, the rest elsewhere."""
    chosen = {}
    for spec in fleet.topology.qms:
        own = [q.name for q in fleet.topology.site(spec.site) if q.name != spec.name]
        away = [q.name for q in fleet.topology.qms if q.site != spec.site]
        picked = rng.sample(own, min(1, len(own)))
        chosen[spec.name] = picked + rng.sample(away, min(len(away), count - len(picked)))
    return chosen


@dataclasses.dataclass
class Ledger:
    """What was committed and received, per (source, destination) stream."""

    committed: dict[tuple[str, str], list[int]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )
    received: dict[tuple[str, str], list[int]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )
    #: While measuring latency: commit time of each stream's message, by (stream, n).
    commit_times: dict[tuple[str, str, int], float] = dataclasses.field(default_factory=dict)
    #: Commit-to-receive seconds by hops.
    latencies: dict[int, list[float]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )
    #: Messages received, and the time of each batch received (for rates).
    received_count: int = 0
    arrivals: list[tuple[float, int]] = dataclasses.field(default_factory=list)

    @property
    def committed_count(self) -> int:
        return sum(len(numbers) for numbers in self.committed.values())

    def check(self) -> dict[str, int]:
        """``lost``, ``duplicated``, ``out_of_order`` and ``unexpected`` messages."""
        found = collections.Counter[str]()
        for stream in {*self.committed, *self.received}:
            want, got = self.committed.get(stream, []), self.received.get(stream, [])
            found["lost"] += len(set(want) - set(got))
            found["duplicated"] += len(got) - len(set(got))
            found["unexpected"] += len(set(got) - set(want))
            found["out_of_order"] += sum(1 for a, b in itertools.pairwise(got) if b < a)
        return {key: found[key] for key in ("lost", "duplicated", "out_of_order", "unexpected")}


class Load:
    """Sources and consumers over one fleet (see the module's docstring)."""

    def __init__(self, fleet: Fleet, destinations: dict[str, list[str]], seed: int) -> None:
        self.fleet = fleet
        self.destinations = destinations
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self._numbers: collections.Counter[tuple[str, str]] = collections.Counter()
        #: The last lookup id each consumer has recorded (a page re-read after a
        #: reconnect is not counted twice).
        self._after: collections.Counter[str] = collections.Counter()
        #: Set while commit times are kept for latency.
        self.measuring = False

    def _address(self, name: str) -> str:
        return self.fleet.daemons[name].address

    async def source(
        self, name: str, until: float, rate: float | None = None, only: Sequence[str] = ()
    ) -> int:
        """Commit transactions on ``name`` until ``until`` (``time.perf_counter``), at
        ``rate`` transactions/s if given, to its destinations (or ``only`` these); the
        messages committed."""
        targets = list(only) or self.destinations[name]
        rng = random.Random(self.rng.random())
        sent = 0
        async with open_client(self._address(name), client_name="bench-source") as qm:
            next_at = time.perf_counter()
            if rate:
                # Each paced source starts at its own moment in the first period:
                # started together, they would all commit at once, every period.
                next_at += rng.random() / rate
            while time.perf_counter() < until:
                if rate:
                    await trio.sleep(max(0.0, next_at - time.perf_counter()))
                    next_at += 1.0 / rate
                batch = []
                async with qm.begin() as tx:
                    for _ in range(rng.randint(1, 10)):
                        destination = rng.choice(targets)
                        stream = (name, destination)
                        self._numbers[stream] += 1
                        number = self._numbers[stream]
                        body = f"{name}>{destination}#{number}".encode().ljust(BODY_BYTES, b".")
                        await tx.send(self.fleet.queue(destination, QUEUE), body)
                        batch.append((stream, number))
                committed = time.perf_counter()
                for stream, number in batch:
                    self.ledger.committed[stream].append(number)
                    if self.measuring:
                        self.ledger.commit_times[(*stream, number)] = committed
                sent += len(batch)
        return sent

    async def send_each(self, name: str, destinations: Sequence[str]) -> None:
        """One transaction on ``name`` with one message to each of ``destinations``."""
        async with open_client(self._address(name), client_name="bench-source") as qm:
            batch = []
            async with qm.begin() as tx:
                for destination in destinations:
                    stream = (name, destination)
                    self._numbers[stream] += 1
                    body = f"{name}>{destination}#{self._numbers[stream]}".encode()
                    body = body.ljust(BODY_BYTES, b".")
                    await tx.send(self.fleet.queue(destination, QUEUE), body)
                    batch.append((stream, self._numbers[stream]))
            for stream, number in batch:
                self.ledger.committed[stream].append(number)

    async def consumer(self, name: str, stop: trio.Event) -> None:
        """Take what arrives at ``name`` until ``stop`` is set (reconnecting after a kill)."""
        while not stop.is_set():
            try:
                async with open_client(self._address(name), client_name="bench-consumer") as qm:
                    await self._consume(name, qm, stop)
            except (ConnectionLost, OSError):
                await trio.sleep(0.05)  # its queue manager is down: try again

    async def _consume(self, name: str, qm: AsyncQueueManager, stop: trio.Event) -> None:
        while not stop.is_set():
            if await qm.peek(QUEUE, timeout=0.5) is None:
                continue
            page = await qm.peek_range(QUEUE, after=self._after[name], max=PAGE)
            if not page:
                continue
            now = time.perf_counter()
            for message in page:
                label = bytes(message.body[:64]).split(b".", 1)[0].decode()
                source, _, rest = label.partition(">")
                destination, _, number_text = rest.partition("#")
                number = int(number_text)
                self.ledger.received[(source, destination)].append(number)
                committed = self.ledger.commit_times.pop((source, destination, number), None)
                if committed is not None:
                    hops = self.fleet.hops(source, destination)
                    self.ledger.latencies[hops].append(now - committed)
            self._after[name] = page[-1].lookup_id
            self.ledger.received_count += len(page)
            self.ledger.arrivals.append((now, len(page)))
            await qm.remove_through(QUEUE, page[-1].lookup_id)
