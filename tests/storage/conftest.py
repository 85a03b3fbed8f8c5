"""Fixtures and helpers shared by the storage tests.

Stores are opened with ``durable=False`` (no sync) unless a test is about
durability, and every store a test opens is closed when it ends. The
helpers build the operations and units tests commit (``append``,
``remove``, ``unit``), commit them (``commit``, ``commit_ok``) and read the
result back (``lookups``, ``counters``, ``payloads``); ``raw_lmdb`` opens a
closed store's environment directly, to damage it behind the store's back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import lmdb
import pytest

from storage import (
    Appended,
    AppendMessage,
    CreateQueue,
    Erased,
    EraseStep,
    Plan,
    QueueCreated,
    QueueRecord,
    RemoveMessage,
    Store,
    StoreError,
    StoreFull,
    Unit,
    UnitOutcome,
    message_payload,
)
from storage._keys import (
    DB_BY_PRIORITY,
    lookup_id_of,
    message_range,
    priority_range,
    split_priority_key,
)

KIB = 1 << 10
MIB = 1 << 20
#: The commit time of every batch unless a test says otherwise.
NOW = 1_700_000_000.0
#: The payload of an ordinary test message.
BODY = b"x" * 100


class StoreOpener(Protocol):
    """Opens a store (the test's own directory unless ``path`` is given)."""

    def __call__(self, path: Path | None = None, **options: Any) -> Store: ...


class Reopener(Protocol):
    """Closes a store and opens its directory again."""

    def __call__(self, store: Store, **options: Any) -> Store: ...


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """The directory of the test's store (not created yet)."""
    return tmp_path / "qm"


@pytest.fixture
def open_store(store_dir: Path) -> Iterator[StoreOpener]:
    """Open stores with ``durable=False`` by default; all are closed afterwards."""
    opened: list[Store] = []

    def open_(path: Path | None = None, **options: Any) -> Store:
        options.setdefault("durable", False)
        store = Store(store_dir if path is None else path, **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: StoreOpener) -> Store:
    """A new, empty, non-durable store."""
    return open_store()


@pytest.fixture
def reopen(open_store: StoreOpener) -> Reopener:
    """Close a store and open its directory again (``durable=False`` by default)."""

    def reopen_(store: Store, **options: Any) -> Store:
        store.close()
        return open_store(store.path, **options)

    return reopen_


# --------------------------------------------------------------------------- operations


def queue_id(queue: QueueRecord | int) -> int:
    """The id of a queue given as its record or its id."""
    return queue if isinstance(queue, int) else queue.queue_id


def append(
    queue: QueueRecord | int, body: bytes = BODY, *, priority: int = 3, size: int | None = None
) -> AppendMessage:
    """Append ``body`` to a queue; its size (for quotas) is its length unless given."""
    return AppendMessage(queue_id(queue), body, priority, len(body) if size is None else size)


def remove(queue: QueueRecord | int, lookup_id: int, *, journal: bool = False) -> RemoveMessage:
    """Remove a message (copying it to the journal queue with ``journal``)."""
    return RemoveMessage(queue_id(queue), lookup_id, journal)


def unit(*ops: Any, atomic: bool = True) -> Unit:
    """A unit of the given operations."""
    return Unit(tuple(ops), atomic=atomic)


# --------------------------------------------------------------------------- commits


def commit(store: Store, *units: Unit, now: float = NOW) -> list[UnitOutcome]:
    """Commit one batch of units and return the outcomes."""
    return store.commit(units, now=now)


def commit_ok(store: Store, *units: Unit, now: float = NOW) -> list[UnitOutcome]:
    """Commit one batch of units, all of which must succeed."""
    outcomes = store.commit(units, now=now)
    errors = [outcome.error for outcome in outcomes if outcome.error is not None]
    assert not errors, errors
    return outcomes


def drive(
    store: Store, units: Sequence[Unit], respond: Callable[[Plan], StoreError | None]
) -> list[UnitOutcome]:
    """Commit through ``store.committing``: each plan it yields is applied here,
    unless ``respond(plan)`` returns an error to send back in its place."""
    driver = store.committing(units, now=NOW)
    plan = next(driver)
    while True:
        error = respond(plan)
        if error is None:
            try:
                store.apply(plan)
            except StoreError as exc:
                error = exc
        try:
            plan = driver.send(error)
        except StopIteration as done:
            outcomes: list[UnitOutcome] = done.value
            return outcomes


def create_queue(store: Store, name: str, **options: Any) -> QueueRecord:
    """Create a queue (``display_name`` defaults to the name); returns its record."""
    options.setdefault("display_name", name)
    [outcome] = commit_ok(store, unit(CreateQueue(name, **options)))
    [result] = outcome.results
    assert isinstance(result, QueueCreated)
    return result.record


def appended(outcome: UnitOutcome) -> list[int]:
    """The lookup ids an outcome's appends got, in order."""
    return [result.lookup_id for result in outcome.results if isinstance(result, Appended)]


def fill(
    store: Store, queue: QueueRecord | int, count: int, body: bytes = BODY, *, priority: int = 3
) -> list[int]:
    """Append ``count`` messages in one unit; returns their lookup ids."""
    [outcome] = commit_ok(store, unit(*(append(queue, body, priority=priority),) * count))
    return appended(outcome)


def fill_until_full(store: Store, queue: QueueRecord | int, body: bytes = BODY) -> int:
    """Append units of 100, then 10, then 1 message until each is refused for
    lack of room; returns how many messages were stored."""
    stored = 0
    for count in (100, 10, 1):
        for _ in range(100_000):
            [outcome] = commit(store, unit(*(append(queue, body),) * count))
            if outcome.error is not None:
                assert isinstance(outcome.error, StoreFull), outcome.error
                break
            stored += count
        else:
            pytest.fail("the store never became full")
    return stored


def erase_all(
    store: Store, queue: QueueRecord | int, limit: int, keep: Iterable[int] = ()
) -> list[Erased]:
    """Run erase steps until one says it is done; returns every step's result."""
    steps: list[Erased] = []
    op = EraseStep(queue_id(queue), limit, frozenset(keep))
    for _ in range(10_000):
        [outcome] = commit_ok(store, unit(op))
        [result] = outcome.results
        assert isinstance(result, Erased)
        steps.append(result)
        if result.done:
            return steps
    pytest.fail("erasing never finished")


# --------------------------------------------------------------------------- reads


def lookups(store: Store, queue: QueueRecord | int, **options: Any) -> list[int]:
    """Lookup ids of the visible messages (``read_range`` options apply)."""
    options.setdefault("limit", 100_000)
    return [lookup_id for lookup_id, _ in store.read_range(queue_id(queue), **options)]


def payloads(store: Store, queue: QueueRecord | int) -> list[bytes]:
    """Payloads of the visible messages, in lookup id order."""
    found = store.read_range(queue_id(queue), limit=100_000)
    return [bytes(message_payload(record)) for _, record in found]


def counters(store: Store, name: str) -> tuple[int, int, int]:
    """A queue's committed ``(next_lookup_id, depth, bytes)``."""
    record = store.get_queue(name)
    assert record is not None, name
    return record.next_lookup_id, record.depth, record.bytes


def ballast_in_place(store: Store) -> bool:
    """``store.has_ballast``, read through a call so that the type checker does
    not carry what one assert learned about the property over to the next."""
    return store.has_ballast


@contextlib.contextmanager
def raw_lmdb(path: Path) -> Iterator[lmdb.Environment]:
    """The LMDB environment of a closed store, opened directly."""
    env = lmdb.open(str(path), max_dbs=16, subdir=True)
    try:
        yield env
    finally:
        env.close()


def stored_keys(path: Path, queue: QueueRecord | int) -> tuple[list[int], list[int]]:
    """Lookup ids in a closed store's file for a queue: those of its message
    keys (the counters left out) and those of its priority index entries."""
    start, end = message_range(queue_id(queue))
    low, high = priority_range(queue_id(queue))
    with raw_lmdb(path) as env:
        by_priority = env.open_db(DB_BY_PRIORITY)
        with env.begin() as txn:
            messages = [lookup_id_of(key) for key, _ in txn.cursor() if start <= key < end]
            indexed = [
                split_priority_key(key)[2]
                for key, _ in txn.cursor(db=by_priority)
                if low <= key < high
            ]
    return messages, sorted(indexed)
