"""Prepared (two-phase) transactions and their outcomes: preparing, committing
and aborting by xid (alone, in one batch, atomically by several), the
reservations and pins that keep a commit from failing, what survives a
reopening, a commit in the headroom of a full store, pruning outcomes in
bounded steps, and the migration of a schema-3 store."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import lmdb
import pytest
from conftest import (
    BODY,
    KIB,
    MIB,
    NOW,
    Reopener,
    StoreOpener,
    append,
    commit,
    commit_ok,
    counters,
    create_queue,
    fill,
    fill_until_full,
    lookups,
    payloads,
    raw_lmdb,
    remove,
    unit,
)

from storage import (
    SCHEMA_VERSION,
    SKIPPED,
    Appended,
    AppendMessage,
    AppendOutgoing,
    DeleteQueue,
    Done,
    Failed,
    InvalidOperation,
    InvalidRecord,
    MessageMissing,
    OutcomeInfo,
    OutgoingState,
    Prepared,
    PreparedInfo,
    PrepareTransaction,
    Pruned,
    PruneOutcomes,
    QueueDeleted,
    QueueMissing,
    QueueRecord,
    QuotaExceeded,
    RecordOutcome,
    Resolution,
    Resolved,
    ResolvePrepared,
    Store,
    StoreCorrupt,
    StoreFull,
    UnitOutcome,
    XidInUse,
    XidResolved,
    XidUnknown,
    message_header,
    message_payload,
)
from storage._keys import (
    DB_CONFIRMATIONS,
    DB_EXPIRY,
    DB_FINAL_ACKS,
    DB_LISTS,
    DB_META,
    DB_OUTCOME_TIMES,
    DB_OUTCOMES,
    DB_PREPARED,
    META_SCHEMA_VERSION,
    prepared_key,
    u32,
)
from storage._prepared import PreparedHeader, decode_header, encode_header

PREPARED_DBS = (DB_PREPARED, DB_OUTCOMES, DB_OUTCOME_TIMES)
#: The databases schema 5 added.
SCHEMA_5_DBS = (DB_EXPIRY, DB_CONFIRMATIONS, DB_FINAL_ACKS, DB_LISTS)
#: When the test's transactions are resolved.
LATER = NOW + 60.0
ORDERS = "outgoing$;tcp:127.0.0.1:1902\\orders"


def send(queue: QueueRecord | int, body: bytes = BODY, *, priority: int = 3) -> AppendMessage:
    return append(queue, body, priority=priority)


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


# --------------------------------------------------------------------------- commit and abort


def test_commit_appends_in_commit_order_and_removes_the_receives(store: Store) -> None:
    src = create_queue(store, "src", journal=True)
    dst = create_queue(store, "dst", transactional=True)
    fill(store, src, 3, b"r")
    parts = (b"he", memoryview(b"ll"), bytearray(b"o"))
    receives = ((src.queue_id, 1), (src.queue_id, 2))
    a = prepare("a", (AppendMessage(dst.queue_id, parts, 5, 5), send(dst, b"a2")), receives)
    b = prepare("b", (send(dst, b"b1"),))
    assert run(store, a, b) == [Prepared("a"), Prepared("b")]
    # Prepared: nothing is visible yet and the received messages stay.
    assert lookups(store, dst) == []
    assert lookups(store, src) == [1, 2, 3]
    fill(store, dst, 1, b"plain")
    # b commits first: its send is appended before a's, whatever the prepare order.
    [b_done] = run(store, resolve("b"))
    assert b_done == Resolved("b", Resolution.COMMITTED, (), (Appended(dst.queue_id, 2),))
    [a_done] = run(store, resolve("a"))
    assert a_done == Resolved(
        "a",
        Resolution.COMMITTED,
        receives,
        (Appended(dst.queue_id, 3), Appended(dst.queue_id, 4)),
    )
    assert payloads(store, dst) == [b"plain", b"b1", b"hello", b"a2"]
    assert priority(store, dst, 3) == 5
    assert counters(store, "dst") == (5, 4, 5 + 5 + 2 + 2)
    # The receives left src, and src journals: copies went to its journal queue.
    assert lookups(store, src) == [3]
    assert payloads(store, journal(store, "src")) == [b"r", b"r"]
    assert counters(store, "src") == (4, 1, 1)
    assert store.prepared("a") is None
    assert store.prepared_transactions() == []
    assert store.outcome("a") == OutcomeInfo("a", True, LATER)
    assert store.reservation(dst.queue_id) == (0, 0)


def test_commit_does_not_journal_a_queue_without_journal(store: Store) -> None:
    src = create_queue(store, "src")
    fill(store, src, 2)
    run(store, prepare("x", receives=((src.queue_id, 2),)))
    run(store, resolve("x"))
    assert lookups(store, src) == [1]
    assert lookups(store, journal(store, "src")) == []


def test_commit_passes_over_received_messages_already_gone(store: Store) -> None:
    src = create_queue(store, "src", journal=True)
    fill(store, src, 3)
    run(store, prepare("x", receives=((src.queue_id, 1), (src.queue_id, 2))))
    run(store, remove(src, 1))
    [done] = run(store, resolve("x"))
    assert done.resolution is Resolution.COMMITTED
    assert done.receives == ((src.queue_id, 1), (src.queue_id, 2))
    assert lookups(store, src) == [3]
    assert lookups(store, journal(store, "src")) == [1]  # only message 2 was journaled


def test_abort_drops_the_sends_and_leaves_the_receives(store: Store) -> None:
    src = create_queue(store, "src", journal=True)
    dst = create_queue(store, "dst", quota=1000)
    fill(store, src, 2)
    run(store, prepare("x", (send(dst, b"s" * 600),), ((src.queue_id, 2),)))
    assert store.reservation(dst.queue_id) == (600, 1)
    [done] = run(store, resolve("x", commit=False))
    assert done == Resolved("x", Resolution.ABORTED, ((src.queue_id, 2),), ())
    assert lookups(store, dst) == []
    assert lookups(store, src) == [1, 2]
    assert lookups(store, journal(store, "src")) == []
    assert store.outcome("x") == OutcomeInfo("x", False, LATER)
    assert store.reservation(dst.queue_id) == (0, 0)
    assert store.reservation(src.queue_id) == (0, 0)
    assert fill(store, dst, 1, b"s" * 1000) == [1]  # the reservation is gone
    store.close()
    with raw_lmdb(store.path) as env:
        prepared = env.open_db(DB_PREPARED, create=False)
        with env.begin() as txn:
            assert list(txn.cursor(db=prepared)) == []


def test_resolving_again_reports_what_happened_and_changes_nothing(store: Store) -> None:
    dst = create_queue(store, "dst")
    run(store, prepare("c", (send(dst),)), prepare("a", (send(dst),)))
    run(store, resolve("c"), resolve("a", commit=False))
    before = store.get_queue("dst")
    again = run(store, resolve("c", at=LATER + 5), resolve("a", commit=False, at=LATER + 5))
    assert again == [
        Resolved("c", Resolution.ALREADY_COMMITTED, (), ()),
        Resolved("a", Resolution.ALREADY_ABORTED, (), ()),
    ]
    assert store.get_queue("dst") == before
    assert store.outcome("c") == OutcomeInfo("c", True, LATER)  # the first time is kept


def test_resolving_the_other_way_fails_with_the_outcome(store: Store) -> None:
    run(store, prepare("c"), prepare("a"))
    run(store, resolve("c"), resolve("a", commit=False))
    aborting = error(store, resolve("c", commit=False))
    assert isinstance(aborting, XidResolved)
    assert (aborting.xid, aborting.committed, aborting.resolved_at) == ("c", True, LATER)
    assert "already committed" in str(aborting)
    committing = error(store, resolve("a"))
    assert isinstance(committing, XidResolved)
    assert (committing.xid, committing.committed) == ("a", False)
    assert "already aborted" in str(committing)


def test_an_unknown_xid_cannot_be_resolved(store: Store) -> None:
    for commit_ in (True, False):
        unknown = error(store, resolve("nobody", commit=commit_))
        assert isinstance(unknown, XidUnknown)
        assert unknown.xid == "nobody"
        assert "'nobody'" in str(unknown)
    assert store.outcome("nobody") is None


def test_an_xid_is_used_once(store: Store) -> None:
    run(store, prepare("p"), prepare("c"))
    run(store, resolve("c"))
    for op, state in (
        (prepare("p"), "prepared"),
        (RecordOutcome("p", committed=True, resolved_at=LATER), "prepared"),
        (prepare("c"), "committed"),
        (RecordOutcome("c", committed=False, resolved_at=LATER), "committed"),
    ):
        in_use = error(store, op)
        assert isinstance(in_use, XidInUse)
        assert (in_use.xid, in_use.state) == (op.xid, state)
        assert f"({state})" in str(in_use)
    # Two prepares of one xid in a batch: the second sees the first.
    outcomes = commit(store, unit(prepare("twice")), unit(prepare("twice")))
    assert outcomes[0].results == (Prepared("twice"),)
    assert isinstance(outcomes[1].error, XidInUse)


def test_a_one_phase_commit_records_its_outcome(store: Store) -> None:
    assert run(store, RecordOutcome("one", committed=True, resolved_at=NOW)) == [Done()]
    assert store.outcome("one") == OutcomeInfo("one", True, NOW)
    assert run(store, resolve("one")) == [Resolved("one", Resolution.ALREADY_COMMITTED, (), ())]
    assert isinstance(error(store, prepare("one")), XidInUse)
    assert isinstance(error(store, resolve("one", commit=False)), XidResolved)


@pytest.mark.parametrize("xid", ["", "x" * 201, "é" * 100 + "a", "a\x00b", "\udc80"])
def test_a_malformed_xid_is_refused(store: Store, xid: str) -> None:
    for op in (prepare(xid), resolve(xid), RecordOutcome(xid, committed=True, resolved_at=NOW)):
        assert isinstance(error(store, op), InvalidRecord)
    assert store.prepared(xid) is None
    assert store.outcome(xid) is None


def test_the_longest_xid_is_200_bytes(store: Store) -> None:
    xid = "é" * 100
    assert run(store, prepare(xid), resolve(xid)) == [
        Prepared(xid),
        Resolved(xid, Resolution.COMMITTED, (), ()),
    ]


def test_prepare_checks_everything_first_and_writes_nothing_when_it_fails(store: Store) -> None:
    q = create_queue(store, "q", quota=100)
    fill(store, q, 1, b"m")
    gone = create_queue(store, "gone")
    run(store, DeleteQueue(gone.queue_id))
    normal = create_queue(store, "normal")
    failures = [
        (prepare("x", (send(gone),)), QueueMissing),
        (prepare("x", receives=((gone.queue_id, 1),)), QueueMissing),
        (prepare("x", receives=((q.queue_id, 1), (q.queue_id, 7))), MessageMissing),
        (prepare("x", (send(q, b"m" * 100),)), QuotaExceeded),
        (prepare("x", (send(q, priority=8),)), InvalidRecord),
        (prepare("x", (AppendOutgoing("", "", b"", 0),)), InvalidRecord),
        (prepare("x", (AppendOutgoing("normal", "n", b"", 0),)), InvalidOperation),
        (prepare("x", (remove(q, 1),)), InvalidRecord),  # type: ignore[arg-type]
    ]
    for op, kind in failures:
        assert isinstance(error(store, op), kind), op
    assert store.prepared("x") is None
    assert store.reservation(q.queue_id) == (0, 0)
    assert store.reservation(normal.queue_id) == (0, 0)
    # A prepare in an atomic unit that fails later is rolled back with it.
    [outcome] = commit(store, unit(prepare("y", (send(q, b"m"),)), remove(q, 99)))
    assert isinstance(outcome.error, MessageMissing)
    assert store.prepared("y") is None
    assert store.reservation(q.queue_id) == (0, 0)
    assert run(store, prepare("y")) == [Prepared("y")]


def test_a_batch_sees_its_own_prepare_and_resolve(store: Store) -> None:
    dst = create_queue(store, "dst")
    src = create_queue(store, "src", journal=True)
    fill(store, src, 1)
    receives = ((src.queue_id, 1),)
    outcomes = commit_ok(
        store,
        unit(prepare("x", (send(dst, b"one"), AppendOutgoing(ORDERS, "O", b"out", 3)), receives)),
        unit(resolve("x")),
        unit(prepare("y", (send(dst, b"two"),))),
        unit(resolve("y", commit=False)),
        unit(resolve("y", commit=False)),
    )
    results = [only(outcome) for outcome in outcomes]
    orders = store.get_queue(ORDERS)
    assert orders is not None
    assert results[1] == Resolved(
        "x",
        Resolution.COMMITTED,
        receives,
        (Appended(dst.queue_id, 1), Appended(orders.queue_id, 1)),
    )
    assert results[3].resolution is Resolution.ABORTED
    assert results[4].resolution is Resolution.ALREADY_ABORTED
    assert payloads(store, dst) == [b"one"]
    assert payloads(store, orders) == [b"out"]
    assert lookups(store, src) == []
    assert lookups(store, journal(store, "src")) == [1]
    assert store.reservation(dst.queue_id) == (0, 0)
    assert store.prepared_transactions() == []


def test_commit_appends_outgoing_sends_as_append_outgoing_does(store: Store) -> None:
    run(store, prepare("x", (AppendOutgoing(ORDERS, "ORDERS", (b"o", b"ut"), 3),)))
    assert store.get_queue(ORDERS) is None  # created at commit, not at prepare
    [done] = run(store, resolve("x", at=LATER))
    queue = store.get_queue(ORDERS)
    assert queue is not None
    assert done.appended == (Appended(queue.queue_id, 1),)
    assert payloads(store, queue) == [b"out"]
    assert queue.display_name == "ORDERS"
    assert store.outgoing_state(queue.queue_id) == OutgoingState(
        queue.queue_id, int(NOW), 1, 0, paused=False
    )


# --------------------------------------------------------------------------- atomic resolves


def test_an_atomic_resolve_of_several_fails_entirely_when_one_fails(store: Store) -> None:
    dst = create_queue(store, "dst", quota=1000)
    src = create_queue(store, "src")
    fill(store, src, 2)
    run(
        store,
        prepare("a", (send(dst, b"a" * 100),), ((src.queue_id, 1),)),
        prepare("b", (send(dst, b"b" * 200),), ((src.queue_id, 2),)),
    )
    [outcome] = commit(store, unit(resolve("a"), resolve("nobody"), resolve("b")))
    assert outcome.results[0] is SKIPPED
    assert isinstance(outcome.results[1], Failed)
    assert isinstance(outcome.results[1].error, XidUnknown)
    assert outcome.results[2] is SKIPPED
    assert [info.xid for info in store.prepared_transactions()] == ["a", "b"]
    assert store.outcome("a") is None
    assert lookups(store, dst) == []
    assert lookups(store, src) == [1, 2]
    assert store.reservation(dst.queue_id) == (300, 2)
    [outcome] = commit_ok(store, unit(resolve("a"), resolve("b")))
    assert [result.resolution for result in outcome.results] == [Resolution.COMMITTED] * 2
    assert payloads(store, dst) == [b"a" * 100, b"b" * 200]
    assert lookups(store, src) == []
    assert store.reservation(dst.queue_id) == (0, 0)


# --------------------------------------------------------------------------- reopening


def test_prepared_transactions_and_reservations_survive_a_reopening(
    store: Store, reopen: Reopener
) -> None:
    dst = create_queue(store, "dst", quota=1000)
    src = create_queue(store, "src", journal=True)
    fill(store, src, 2, b"r")
    big = b"B" * (64 * KIB)  # a payload on overflow pages
    sends = (
        send(dst, b"d" * 300, priority=7),
        AppendOutgoing(ORDERS, "ORDERS", big, len(big)),
        AppendMessage(dst.queue_id, (b"p1", b"p2"), 0, 4),
    )
    run(store, prepare("x", sends, ((src.queue_id, 2),), created_at=5.0), prepare("y"))
    run(store, RecordOutcome("z", committed=False, resolved_at=7.0))
    before = store.prepared_transactions()
    store = reopen(store)
    assert store.prepared_transactions() == before
    assert store.prepared("x") == PreparedInfo(
        xid="x",
        created_at=5.0,
        sends=3,
        send_bytes=300 + len(big) + 4,
        receives=((src.queue_id, 2),),
        queue_ids=frozenset({dst.queue_id}),
    )
    assert store.reservation(dst.queue_id) == (304, 1)
    assert store.reservation(src.queue_id) == (0, 1)
    assert store.outcome("z") == OutcomeInfo("z", False, 7.0)
    # The reservation still counts, and the pins still hold.
    assert isinstance(error(store, append(dst, b"x" * 697)), QuotaExceeded)
    assert isinstance(error(store, DeleteQueue(src.queue_id)), InvalidOperation)
    # Commit after the reopening: the sends are read back from the file.
    [done] = run(store, resolve("x"))
    assert done.appended[0] == Appended(dst.queue_id, 1)
    assert payloads(store, dst) == [b"d" * 300, b"p1p2"]
    assert [priority(store, dst, i) for i in (1, 2)] == [7, 0]
    orders = store.get_queue(ORDERS)
    assert orders is not None
    assert payloads(store, orders) == [big]
    assert lookups(store, src) == [1]
    assert payloads(store, journal(store, "src")) == [b"r"]
    store = reopen(store)
    assert [info.xid for info in store.prepared_transactions()] == ["y"]
    assert store.reservation(dst.queue_id) == (0, 0)
    assert store.outcome("x") == OutcomeInfo("x", True, LATER)


# --------------------------------------------------------------------------- quota reservations


def test_a_reservation_counts_against_the_quota(store: Store) -> None:
    q = create_queue(store, "q", quota=1000)
    # One transaction's sends count together.
    too_much = error(store, prepare("x", (send(q, b"s" * 600), send(q, b"s" * 500))))
    assert isinstance(too_much, QuotaExceeded)
    assert too_much.would_be == 1100
    run(store, prepare("x", (send(q, b"s" * 600),)))
    refused = error(store, append(q, b"a" * 500))
    assert isinstance(refused, QuotaExceeded)
    assert refused.would_be == 1100
    assert isinstance(error(store, prepare("y", (send(q, b"s" * 401),))), QuotaExceeded)
    fill(store, q, 1, b"a" * 400)
    assert counters(store, "q")[2] == 400
    # At its quota with the reservation, the queue takes nothing more...
    assert isinstance(error(store, append(q, b"a")), QuotaExceeded)
    # ...but the prepared sends commit.
    [done] = run(store, resolve("x"))
    assert done.appended == (Appended(q.queue_id, 2),)
    assert counters(store, "q")[2] == 1000
    assert store.reservation(q.queue_id) == (0, 0)


def test_a_reservation_in_a_batch_counts_for_later_units(store: Store) -> None:
    q = create_queue(store, "q", quota=100)
    outcomes = commit(store, unit(prepare("x", (send(q, b"s" * 60),))), unit(append(q, b"a" * 50)))
    assert outcomes[0].error is None
    assert isinstance(outcomes[1].error, QuotaExceeded)
    outcomes = commit(store, unit(resolve("x", commit=False)), unit(append(q, b"a" * 100)))
    assert [outcome.error for outcome in outcomes] == [None, None]


# --------------------------------------------------------------------------- pinned queues


def test_a_queue_prepared_transactions_use_cannot_be_deleted(store: Store) -> None:
    dst = create_queue(store, "dst")
    src = create_queue(store, "src", journal=True)
    fill(store, src, 1)
    run(store, remove(src, 1, journal=True))
    jrn = journal(store, "src")
    run(
        store,
        prepare("a", (send(dst), send(dst))),
        prepare("b", (send(dst),), ((jrn.queue_id, 1),)),  # pins src, which its journal dies with
        prepare("c", receives=((jrn.queue_id, 1),)),
    )
    refused = error(store, DeleteQueue(dst.queue_id))
    assert isinstance(refused, InvalidOperation)
    assert "used by 2 prepared transaction(s)" in str(refused)
    refused = error(store, DeleteQueue(src.queue_id))
    assert isinstance(refused, InvalidOperation)
    assert "used by 2 prepared transaction(s)" in str(refused)
    assert store.get_queue("dst") is not None
    run(store, resolve("a"), resolve("b", commit=False))
    assert "used by 1 prepared" in str(error(store, DeleteQueue(src.queue_id)))
    assert run(store, DeleteQueue(dst.queue_id)) == [
        QueueDeleted((dst.queue_id, dst.queue_id + 1), 2)
    ]
    run(store, resolve("c"))
    [deleted] = run(store, DeleteQueue(src.queue_id))
    assert deleted.queue_ids == (src.queue_id, jrn.queue_id)


def test_a_prepare_pins_for_later_units_of_its_batch(store: Store) -> None:
    q = create_queue(store, "q")
    outcomes = commit(store, unit(prepare("x", (send(q),))), unit(DeleteQueue(q.queue_id)))
    assert isinstance(outcomes[1].error, InvalidOperation)
    outcomes = commit(store, unit(resolve("x")), unit(DeleteQueue(q.queue_id)))
    assert outcomes[1].results == (QueueDeleted((q.queue_id, q.queue_id + 1), 1),)


# --------------------------------------------------------------------------- a full store


def test_a_commit_uses_the_headroom_of_a_full_store(open_store: StoreOpener) -> None:
    store = open_store(initial_map_size=1 * MIB, max_map_size=4 * MIB, reserve_size=512 * KIB)
    q = create_queue(store, "q", transactional=True)
    body = b"P" * (64 * KIB)
    run(store, prepare("x", (send(q, body), send(q, body))))
    fill_until_full(store, q)
    stored = counters(store, "q")[1]
    # The same bytes as a plain append do not fit; the commit, in the same batch, does.
    outcomes = commit(store, unit(append(q, body)), unit(resolve("x")))
    assert isinstance(outcomes[0].error, StoreFull)
    assert only(outcomes[1]).resolution is Resolution.COMMITTED
    assert counters(store, "q")[1] == stored + 2
    assert store.map_size <= 4 * MIB
    found = store.read_range(q.queue_id, after=stored)
    assert [lookup_id for lookup_id, _ in found] == [stored + 1, stored + 2]
    assert [bytes(message_payload(record)) for _, record in found] == [body, body]


def test_resolve_and_prune_free_space_prepare_and_record_do_not() -> None:
    assert resolve("x").frees_space
    assert resolve("x", commit=False).frees_space
    assert PruneOutcomes(before=NOW, limit=1).frees_space
    assert not prepare("x").frees_space
    assert not RecordOutcome("x", committed=True, resolved_at=NOW).frees_space


# --------------------------------------------------------------------------- outcomes


def test_outcomes_are_pruned_oldest_first_in_bounded_steps(store: Store) -> None:
    for i in range(8):
        run(store, RecordOutcome(f"x{7 - i}", committed=i % 2 == 0, resolved_at=100.0 + i))
    # Outcomes resolved before 105 (to the millisecond): 100..104, five of them.
    steps = [only(commit_ok(store, unit(PruneOutcomes(105.0, 2)))[0]) for _ in range(4)]
    assert steps == [Pruned(2, False), Pruned(2, False), Pruned(1, True), Pruned(0, True)]
    assert [(o.xid, o.resolved_at) for o in store.outcomes()] == [
        ("x0", 107.0),
        ("x1", 106.0),
        ("x2", 105.0),
    ]
    # A pruned xid may be used again.
    assert run(store, prepare("x7")) == [Prepared("x7")]
    assert run(store, PruneOutcomes(1e12, 0)) == [Pruned(0, False)]


def test_prunes_in_one_batch_do_not_count_an_outcome_twice(store: Store) -> None:
    for i in range(3):
        run(store, RecordOutcome(f"x{i}", committed=True, resolved_at=10.0 + i))
    outcomes = commit_ok(
        store,
        unit(PruneOutcomes(100.0, 2)),
        unit(RecordOutcome("new", committed=True, resolved_at=1.0)),
        unit(PruneOutcomes(100.0, 5)),
    )
    assert [only(outcome) for outcome in outcomes] == [Pruned(2, False), Done(), Pruned(1, True)]
    assert [o.xid for o in store.outcomes()] == ["new"]  # recorded in the batch: left
    assert run(store, PruneOutcomes(100.0, 5)) == [Pruned(1, True)]
    assert store.outcomes() == []
    store.close()
    with raw_lmdb(store.path) as env:
        times = env.open_db(DB_OUTCOME_TIMES, create=False)
        with env.begin() as txn:
            assert list(txn.cursor(db=times)) == []


def test_listings_are_in_xid_order_by_prefix(store: Store) -> None:
    q = create_queue(store, "q")
    xids = ["b", "a", "ab", "a\x01", "é", "aa"]
    run(store, *(prepare(xid, (send(q),) * 3) for xid in xids))
    ordered = ["a", "a\x01", "aa", "ab", "b", "é"]
    assert [info.xid for info in store.prepared_transactions()] == ordered
    assert [info.xid for info in store.prepared_transactions("a")] == ordered[:4]
    assert [info.xid for info in store.prepared_transactions("a", 2)] == ordered[:2]
    assert store.prepared_transactions("a", 0) == []
    assert store.prepared_transactions("c") == []
    assert store.prepared_transactions("a\x00") == []
    assert {info.sends for info in store.prepared_transactions()} == {3}
    run(store, *(resolve(xid, commit=xid < "b") for xid in xids))
    assert [(o.xid, o.committed) for o in store.outcomes("a")] == [
        (xid, True) for xid in ordered[:4]
    ]
    assert [o.xid for o in store.outcomes(limit=5)] == ordered[:5]
    assert store.outcome("é") == OutcomeInfo("é", False, LATER)


def test_the_owner_is_kept_with_the_transaction_and_its_outcome(
    store: Store, reopen: Reopener
) -> None:
    q = create_queue(store, "q")
    run(
        store,
        PrepareTransaction("bobs", (send(q),), (), created_at=NOW, owner="bob"),
        PrepareTransaction("roots", (send(q),), (), created_at=NOW, owner="root"),
        prepare("nobodys", (send(q),)),
        RecordOutcome("one-phase", committed=True, resolved_at=NOW, owner="bob"),
    )
    store = reopen(store)
    assert [(i.xid, i.owner) for i in store.prepared_transactions()] == [
        ("bobs", "bob"),
        ("nobodys", ""),
        ("roots", "root"),
    ]
    assert [i.xid for i in store.prepared_transactions(owner="bob")] == ["bobs"]
    assert [i.xid for i in store.prepared_transactions(limit=1, owner="root")] == ["roots"]
    run(store, resolve("bobs"), resolve("nobodys", commit=False))
    assert store.outcome("bobs") == OutcomeInfo("bobs", True, LATER, "bob")
    assert store.outcome("nobodys") == OutcomeInfo("nobodys", False, LATER)
    assert [o.xid for o in store.outcomes(owner="bob")] == ["bobs", "one-phase"]


def test_headers_without_an_owner_keep_format_version_1() -> None:
    header = PreparedHeader(NOW, 1, 10, ((1, 2),), ((1, 10),), (1,))
    data = encode_header(header)
    assert data[0] == 1
    assert decode_header(data) == header
    owned = encode_header(dataclasses.replace(header, owner="bob"))
    assert owned[0] == 2
    assert owned.endswith(b"\x00\x03bob")
    assert decode_header(owned).owner == "bob"
    with pytest.raises(StoreCorrupt):
        decode_header(owned[:-1])
    with pytest.raises(InvalidRecord):
        encode_header(dataclasses.replace(header, owner="x" * 1025))


# --------------------------------------------------------------------------- corruption


def test_a_garbled_header_is_corrupt_at_opening(store: Store, reopen: Reopener) -> None:
    run(store, prepare("x"))
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_PREPARED)
        with env.begin(write=True) as txn:
            txn.put(prepared_key(b"x", 0), b"\x01garbage", db=db)
    with pytest.raises(StoreCorrupt, match="prepared header"):
        reopen(store)


# --------------------------------------------------------------------------- schema 3 -> 5


def make_schema_3(path: Path) -> None:
    """Turn a closed store into what schema 3 wrote: no databases of prepared transactions."""
    with raw_lmdb(path) as env:
        dbs = [env.open_db(name) for name in (*PREPARED_DBS, *SCHEMA_5_DBS)]
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            for db in dbs:
                txn.drop(db, delete=True)
            txn.put(META_SCHEMA_VERSION, u32(3), db=meta)
    with raw_lmdb(path) as env:
        for name in PREPARED_DBS:
            with pytest.raises(lmdb.NotFoundError):
                env.open_db(name, create=False)


def schema_version(path: Path) -> bytes | None:
    with raw_lmdb(path) as env:
        meta = env.open_db(DB_META, create=False)
        with env.begin() as txn:
            value = txn.get(META_SCHEMA_VERSION, db=meta)
    return None if value is None else bytes(value)


def test_a_schema_3_store_is_migrated_at_opening(store: Store, reopen: Reopener) -> None:
    guid = store.qm_guid
    q = create_queue(store, "q", quota=1000)
    fill(store, q, 2)
    run(store, AppendOutgoing(ORDERS, "O", b"o", 1))
    queues = store.list_queues()
    states = store.outgoing_states()
    store.close()
    make_schema_3(store.path)
    store = reopen(store)
    assert (store.qm_guid, store.list_queues(), store.outgoing_states()) == (guid, queues, states)
    assert payloads(store, q) == [BODY, BODY]
    assert (store.prepared_transactions(), store.outcomes()) == ([], [])
    run(store, prepare("x", (send(q),), ((q.queue_id, 1),)))
    assert store.reservation(q.queue_id) == (100, 1)
    store.close()
    assert schema_version(store.path) == u32(SCHEMA_VERSION)
    store = reopen(store)
    assert [info.xid for info in store.prepared_transactions()] == ["x"]
    assert run(store, resolve("x"))[0].resolution is Resolution.COMMITTED
    assert lookups(store, q) == [2, 3]
