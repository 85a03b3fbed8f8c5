"""Helpers shared by the storage tests (fixtures are in ``conftest.py``).

Tests import them with ``from store_kit import ...`` (a name no other test
folder uses, so the tests of ``tests/storage/ops`` find the same module).
The helpers build the operations and units tests commit (``append``,
``remove``, ``unit``), commit them (``commit``, ``commit_ok``, ``drive``) and
read the result back (``lookups``, ``counters``, ``payloads``); ``raw_lmdb``
and the ``raw_*`` helpers open a closed store's environment directly, to
look at or damage it behind the store's back. The last sections hold the
helpers of the concerns whose tests sit in more than one file (outgoing
queues, incoming streams, expiry, poison handling, prepared transactions)
and the Hypothesis strategies of the record tests.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import lmdb
import pytest
from hypothesis import strategies as st

from storage import (
    NO_COUNTERS,
    AbortCounted,
    Appended,
    AppendMessage,
    AppendOutgoing,
    CreateQueue,
    CreateSubqueues,
    Erased,
    EraseStep,
    ForgetOutgoing,
    Forgotten,
    MessageCounters,
    Moved,
    MoveMessage,
    MoveReason,
    Plan,
    PoisonSettings,
    PrepareTransaction,
    QueueCreated,
    QueueRecord,
    RecordAbort,
    RemoveMessage,
    ResolvePrepared,
    Store,
    StoreError,
    StoreFull,
    Unit,
    UnitOutcome,
    message_header,
    message_payload,
)
from storage.keys import (
    DB_BY_PRIORITY,
    DB_MESSAGE_COUNTERS,
    DB_META,
    DB_OUTGOING,
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


def put_raw(path: Path, db_name: bytes | None, key: bytes, value: bytes) -> None:
    """Write one key of a closed store directly."""
    with raw_lmdb(path) as env:
        db = env.open_db(db_name)
        with env.begin(write=True) as txn:
            txn.put(key, value, db=db)


def delete_raw(path: Path, db_name: bytes | None, key: bytes) -> None:
    """Delete one key of a closed store directly."""
    with raw_lmdb(path) as env:
        db = env.open_db(db_name)
        with env.begin(write=True) as txn:
            assert txn.delete(key, db=db)


def raw_items(path: Path, name: bytes) -> list[tuple[bytes, bytes]]:
    """Every key and value of a named database of a closed store."""
    with raw_lmdb(path) as env:
        db = env.open_db(name, create=False)
        with env.begin() as txn:
            return [(bytes(k), bytes(v)) for k, v in txn.cursor(db=db)]


def raw_meta(path: Path, key: bytes) -> bytes | None:
    """One ``meta`` value of a closed store."""
    with raw_lmdb(path) as env:
        meta = env.open_db(DB_META, create=False)
        with env.begin() as txn:
            value = txn.get(key, db=meta)
    return None if value is None else bytes(value)


# --------------------------------------------------------------------------- strategies

u32s = st.integers(0, 0xFFFFFFFF)
u64s = st.integers(0, 0xFFFFFFFFFFFFFFFF)
priorities = st.integers(0, 7)
times = st.floats(allow_nan=False)
payload_bytes = st.binary(max_size=512)


# --------------------------------------------------------------------------- outgoing queues

#: An outgoing queue's canonical name, as the daemon makes them.
ORDERS = "outgoing$;tcp:127.0.0.1:1902\\orders"
STAMP = int(NOW)


def send_outgoing(name: str = ORDERS, body: bytes = BODY) -> AppendOutgoing:
    """Append ``body`` to the outgoing queue ``name`` (display name: upper case)."""
    return AppendOutgoing(name, name.upper(), body, len(body))


def appended_to(outcome: UnitOutcome) -> list[tuple[int, int]]:
    """``(queue_id, lookup_id)`` of every append of an outcome."""
    return [(r.queue_id, r.lookup_id) for r in outcome.results if isinstance(r, Appended)]


def fill_outgoing(store: Store, count: int, name: str = ORDERS) -> int:
    """Append ``count`` entries to an outgoing queue in one unit; returns its id."""
    [outcome] = commit_ok(store, unit(*(send_outgoing(name),) * count))
    ids = {queue_id for queue_id, _ in appended_to(outcome)}
    [queue_id] = ids
    return queue_id


def raw_outgoing_keys(path: Path) -> list[bytes]:
    """Keys of ``outgoing`` (the outgoing queues' sequence states) in a closed store's file."""
    return [key for key, _ in raw_items(path, DB_OUTGOING)]


def forget(store: Store, queue_id: int, *lookup_ids: int) -> Forgotten:
    """Forget entries of an outgoing queue in a batch of their own; returns the result."""
    [outcome] = commit_ok(store, unit(ForgetOutgoing(queue_id, lookup_ids)))
    [result] = outcome.results
    assert isinstance(result, Forgotten)
    return result


# --------------------------------------------------------------------------- incoming streams

SOURCE_A = uuid.UUID("00000000-0000-0000-0000-00000000000a").bytes
SOURCE_B = uuid.UUID("ffffffff-0000-0000-0000-00000000000b").bytes


def hkey(source: bytes, ordinal: int) -> bytes:
    """A message history key: source GUID + ordinal u32."""
    return source + ordinal.to_bytes(4, "big")


# --------------------------------------------------------------------------- expiry

#: The expiry tests' clock (the same instant as ``NOW``).
T = NOW


def timed(
    queue: QueueRecord, deadline: float | None, *, note: bytes = b"", body: bytes = BODY
) -> AppendMessage:
    return AppendMessage(queue.queue_id, body, 3, len(body), deadline=deadline, note=note)


def due(
    store: Store, before: float = float("inf"), limit: int = 1000
) -> list[tuple[float, int, int]]:
    return [tuple(entry) for entry in store.due_messages(before=before, limit=limit)]  # type: ignore[misc]


# --------------------------------------------------------------------------- poison handling

SETTINGS = PoisonSettings(retry_count=1, retry_cycles=2, retry_delay=30.0)


def family(
    store: Store, name: str, **options: object
) -> tuple[QueueRecord, QueueRecord, QueueRecord]:
    """A queue with its subqueues: ``(queue, ;retry, ;poison)``."""
    queue = create_queue(store, name, **options)
    commit_ok(store, unit(CreateSubqueues(name, created_at=7.0)))
    retry = store.get_queue(name + ";retry")
    poison = store.get_queue(name + ";poison")
    assert retry is not None
    assert poison is not None
    return queue, retry, poison


def move(
    store: Store,
    source: QueueRecord,
    lookup_id: int,
    target: QueueRecord,
    reason: MoveReason = MoveReason.REQUEST,
) -> Moved:
    op = MoveMessage(source.queue_id, lookup_id, target.queue_id, reason)
    [outcome] = commit_ok(store, unit(op))
    [result] = outcome.results
    assert isinstance(result, Moved)
    return result


def abort(store: Store, queue: QueueRecord, lookup_id: int) -> int | None:
    [outcome] = commit_ok(store, unit(RecordAbort(queue.queue_id, lookup_id)))
    [result] = outcome.results
    assert isinstance(result, AbortCounted)
    return result.abort_count


def counters_of(store: Store, queue: QueueRecord, lookup_id: int) -> MessageCounters:
    return store.message_counters(queue.queue_id, [lookup_id]).get(lookup_id, NO_COUNTERS)


def raw_keys(store: Store, name: bytes) -> list[bytes]:
    """Every key of one of the poison databases of an open store."""
    dbs = store._catalog.dbs
    db = dbs.message_counters if name == DB_MESSAGE_COUNTERS else dbs.retry_due
    with store._env.read("test") as txn:
        return [bytes(key) for key, _ in txn.cursor(db=db)]


# --------------------------------------------------------------------------- prepared transactions

#: When the test's transactions are resolved.
LATER = NOW + 60.0


def prepare(
    xid: str,
    sends: tuple[AppendMessage | AppendOutgoing, ...] = (),
    receives: tuple[tuple[int, int], ...] = (),
    created_at: float = NOW,
) -> PrepareTransaction:
    return PrepareTransaction(xid, sends, receives, created_at=created_at)


def resolve(xid: str, *, commit: bool = True, at: float = LATER) -> ResolvePrepared:
    return ResolvePrepared(xid, commit=commit, resolved_at=at)


def only(outcome: UnitOutcome) -> Any:
    [result] = outcome.results
    return result


def run(store: Store, *ops: Any) -> list[Any]:
    """Commit each operation in its own unit of one batch; every one must succeed."""
    return [only(outcome) for outcome in commit_ok(store, *(unit(op) for op in ops))]


def error(store: Store, op: Any) -> Exception:
    """Commit one operation that must fail; returns its error."""
    [outcome] = commit(store, unit(op))
    assert outcome.error is not None
    return outcome.error


def priority(store: Store, queue: QueueRecord, lookup_id: int) -> int:
    record = store.read_message(queue.queue_id, lookup_id)
    assert record is not None
    return message_header(record)[0]


def journal(store: Store, name: str) -> QueueRecord:
    record = store.get_queue(name + ";journal")
    assert record is not None
    return record
