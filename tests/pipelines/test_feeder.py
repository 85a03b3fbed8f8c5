"""The sample order events (``pipelines.feeder``): what an order looks like, the share of
malformed ones, the queues it creates, and what it sends where, to a stand-in for the
client SDK. (The feeder against a real queue manager: ``tests/spark/test_pipelines.py``.)"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pipelines import feeder
from qmgr.client import QueueExists


def test_an_order_event() -> None:
    rng = random.Random(5)
    events = [feeder.order(rng, f"7-{number:06d}", customers=12) for number in range(2000)]
    valid = []
    for number, body in enumerate(events):
        try:
            event = json.loads(body)
        except ValueError:
            continue
        if set(event) == {"order_id", "customer", "amount", "placed_at"}:
            assert event["order_id"] == f"o-7-{number:06d}"
            valid.append(event)
    malformed = len(events) - len(valid)
    assert 0 < malformed < 60  # about one in a hundred
    assert {event["customer"] for event in valid} == {f"c-{c:03d}" for c in range(12)}
    assert all(1 <= event["amount"] <= 200 for event in valid)
    assert all(round(event["amount"], 2) == event["amount"] for event in valid)
    now = dt.datetime.now(dt.UTC)
    for event in valid:
        placed = dt.datetime.fromisoformat(event["placed_at"])
        assert placed.tzinfo is not None
        assert placed.microsecond == 0
        assert now - dt.timedelta(hours=1, minutes=1) < placed <= now


def test_the_same_seed_gives_the_same_orders() -> None:
    def orders(seed: int) -> list[bytes]:
        rng = random.Random(seed)
        return [feeder.order(rng, str(number), customers=50) for number in range(200)]

    def without_times(bodies: list[bytes]) -> list[object]:
        parsed: list[object] = []
        for body in bodies:
            try:
                event = json.loads(body)
            except ValueError:
                parsed.append(body)
                continue
            if isinstance(event, dict):
                event.pop("placed_at", None)
            parsed.append(event)
        return parsed

    assert without_times(orders(1)) == without_times(orders(1))
    assert without_times(orders(1)) != without_times(orders(2))


class Transaction:
    def __init__(self, sent: list[list[tuple[str, bytes, str]]]) -> None:
        self.sends: list[tuple[str, bytes, str]] = []
        self.committed = sent

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.committed.append(self.sends)

    def send(self, destination: str, body: bytes, *, label: str) -> None:
        self.sends.append((destination, body, label))


class QueueManager:
    """What the feeder uses of the SDK's ``QueueManager``."""

    def __init__(self, address: str, existing: set[str]) -> None:
        self.address = address
        self.existing = existing
        self.created: list[tuple[str, bool, bool]] = []
        self.transactions: list[list[tuple[str, bytes, str]]] = []
        self.sent: list[tuple[str, bytes, str, bool]] = []

    def create_queue(self, name: str, *, transactional: bool, journal: bool) -> None:
        if name in self.existing:
            raise QueueExists(f"{name} exists")
        self.existing.add(name)
        self.created.append((name, transactional, journal))

    def begin(self) -> Transaction:
        return Transaction(self.transactions)

    def send(self, destination: str, body: bytes, *, label: str, transactional: bool) -> None:
        self.sent.append((destination, body, label, transactional))


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[QueueManager]:
    """The stand-ins ``feeder.connect`` returned, one per connection, in order."""
    opened: list[QueueManager] = []

    @contextmanager
    def connect(address: str) -> Iterator[Any]:
        opened.append(QueueManager(address, {"orders"}))
        yield opened[-1]

    monkeypatch.setattr(feeder, "connect", connect)
    return opened


def test_create_queues_keeps_those_that_exist() -> None:
    qm = QueueManager("qm", existing={"customer-totals"})
    feeder.create_queues(qm)  # type: ignore[arg-type]
    assert qm.created == [("orders", True, True), ("orders-rejected", True, False)]


def test_orders_are_sent_a_hundred_per_transaction(connections: list[QueueManager]) -> None:
    assert feeder.feed("127.0.0.1:1802", 250, customers=3, seed=9) == 250
    [qm] = connections
    assert qm.address == "127.0.0.1:1802"
    assert [name for name, _, _ in qm.created] == ["customer-totals", "orders-rejected"]
    assert [len(sends) for sends in qm.transactions] == [100, 100, 50]
    sends = [send for sends in qm.transactions for send in sends]
    assert {(destination, label) for destination, _, label in sends} == {("orders", "order")}
    events = [json.loads(body) for _, body, _ in sends if body != b"{not json"]
    ids = [event["order_id"] for event in events if "amount" in event]
    assert len(ids) > 240
    numbers = [int(order_id.rsplit("-", 1)[1]) for order_id in ids]
    assert numbers == sorted(set(numbers))
    assert all(0 <= number < 250 for number in numbers)
    assert qm.sent == []  # nothing misaddressed without a partner and a peer


def test_a_partner_sends_misaddressed_orders_to_the_peer(
    connections: list[QueueManager],
) -> None:
    feeder.feed("qm:1802", 1, partner="partner:1802", peer="qm:1801")
    _, partner = connections
    assert partner.address == "partner:1802"
    assert partner.transactions == []
    assert len(partner.sent) == feeder.MISADDRESSED
    for number, (destination, _, label, transactional) in enumerate(partner.sent):
        assert destination == "DIRECT=TCP:qm:1801\\private$\\ordres"
        assert label == "misaddressed"
        assert transactional is (number % 2 == 0)
    # One without the other sends nothing misaddressed.
    feeder.feed("qm:1802", 1, partner="partner:1802")
    feeder.feed("qm:1802", 1, peer="qm:1801")
    assert len(connections) == 4
