"""Prepared (two-phase) transactions (``storage.ops.prepared``): preparing,
committing and aborting by xid (alone, in one batch, atomically by several), one
phase commits, listings, owners, a full store, and the send records."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_kit import (
    KIB,
    LATER,
    MIB,
    NOW,
    ORDERS,
    Reopener,
    StoreOpener,
    append,
    commit,
    commit_ok,
    counters,
    create_queue,
    error,
    fill,
    fill_until_full,
    journal,
    lookups,
    only,
    payload_bytes,
    payloads,
    prepare,
    priorities,
    priority,
    raw_lmdb,
    remove,
    resolve,
    run,
    u32s,
    unit,
)

from storage import (
    SKIPPED,
    AddConfirmation,
    Appended,
    AppendMessage,
    AppendOutgoing,
    Confirmation,
    DeleteQueue,
    Done,
    Failed,
    InvalidOperation,
    InvalidRecord,
    MessageMissing,
    OutcomeInfo,
    OutgoingState,
    Prepared,
    PrepareTransaction,
    PruneOutcomes,
    QueueMissing,
    QuotaExceeded,
    RecordOutcome,
    Resolution,
    Resolved,
    Store,
    StoreCorrupt,
    StoreFull,
    XidInUse,
    XidResolved,
    XidUnknown,
    message_payload,
)
from storage.keys import DB_PREPARED, DB_PREPARED_COPIES
from storage.ops.outcomes import decode_outcome
from storage.ops.prepared import decode_send, encode_send
from storage.reservations import decode_header

# --------------------------------------------------------------------------- commit and abort


def test_commit_appends_in_commit_order_and_removes_the_receives(store: Store) -> None:
    src = create_queue(store, "src", journal=True)
    dst = create_queue(store, "dst", transactional=True)
    fill(store, src, 3, b"r")
    parts = (b"he", memoryview(b"ll"), bytearray(b"o"))
    receives = ((src.queue_id, 1), (src.queue_id, 2))
    a = prepare("a", (AppendMessage(dst.queue_id, parts, 5, 5), append(dst, b"a2")), receives)
    b = prepare("b", (append(dst, b"b1"),))
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
    run(store, prepare("x", (append(dst, b"s" * 600),), ((src.queue_id, 2),)))
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
    run(store, prepare("c", (append(dst),)), prepare("a", (append(dst),)))
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
        (prepare("x", (append(gone),)), QueueMissing),
        (prepare("x", receives=((gone.queue_id, 1),)), QueueMissing),
        (prepare("x", receives=((q.queue_id, 1), (q.queue_id, 7))), MessageMissing),
        (prepare("x", (append(q, b"m" * 100),)), QuotaExceeded),
        (prepare("x", (append(q, priority=8),)), InvalidRecord),
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
    [outcome] = commit(store, unit(prepare("y", (append(q, b"m"),)), remove(q, 99)))
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
        unit(prepare("x", (append(dst, b"one"), AppendOutgoing(ORDERS, "O", b"out", 3)), receives)),
        unit(resolve("x")),
        unit(prepare("y", (append(dst, b"two"),))),
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


def kept_copy(ordinal: int, index: int = 0) -> AddConfirmation:
    """The copy a send to another queue manager keeps until confirmed."""
    confirmation = Confirmation(
        ordinal=ordinal,
        index=index,
        delivered=False,
        last_class=0,
        deadline=LATER + 60,
        destination=ORDERS,
        payload=b"raw message %d" % ordinal,
    )
    return AddConfirmation(confirmation)


def test_kept_copies_are_added_by_the_commit_and_dropped_by_the_abort(store: Store) -> None:
    """A prepared send to another queue manager is confirmed like any other."""
    sends = (AppendOutgoing(ORDERS, "ORDERS", b"out", 3),)
    copies = (kept_copy(7), kept_copy(7, 1))
    run(store, PrepareTransaction("c", sends, (), created_at=NOW, copies=copies))
    run(store, PrepareTransaction("a", sends, (), created_at=NOW, copies=(kept_copy(8),)))
    assert store.confirmations(7) == []  # not before the commit
    assert store.awaited_confirmations() == {}
    [listed, _] = store.prepared_transactions()
    assert (listed.xid, listed.sends, listed.send_bytes) == ("a", 1, 3)  # copies are not sends
    run(store, resolve("c"), resolve("a", commit=False))
    assert store.confirmations(7) == [copy.confirmation for copy in copies]
    assert store.confirmations(8) == []
    assert store.awaited_confirmations() == {ORDERS: 2}  # the commit's, not the abort's
    # The same batch: the copies come from the prepare's scratch state.
    commit_ok(
        store,
        unit(PrepareTransaction("s", sends, (), created_at=NOW, copies=(kept_copy(9),))),
        unit(resolve("s")),
    )
    assert store.confirmations(9) == [kept_copy(9).confirmation]
    assert store.awaited_confirmations() == {ORDERS: 3}
    store.close()
    with raw_lmdb(store.path) as env:
        for name in (DB_PREPARED, DB_PREPARED_COPIES):
            db = env.open_db(name, create=False)
            with env.begin() as txn:
                assert list(txn.cursor(db=db)) == []


def test_copies_a_release_without_them_left_behind_are_dropped_at_opening(
    open_store: StoreOpener,
) -> None:
    """Such a release resolves a transaction by deleting what ``prepared`` holds;
    the store then opens as before, without the copies of that transaction."""
    store = open_store()
    sends = (AppendOutgoing(ORDERS, "ORDERS", b"out", 3),)
    run(store, PrepareTransaction("gone", sends, (), created_at=NOW, copies=(kept_copy(7),)))
    run(store, PrepareTransaction("kept", sends, (), created_at=NOW, copies=(kept_copy(8),)))
    path = store.path
    store.close()
    with raw_lmdb(path) as env:  # as the older release resolves "gone"
        prepared = env.open_db(DB_PREPARED, create=False)
        with env.begin(write=True) as txn:
            for key, _ in list(txn.cursor(db=prepared)):
                if key.startswith(b"gone\x00"):
                    txn.delete(key, db=prepared)
    store = open_store()
    assert [info.xid for info in store.prepared_transactions()] == ["kept"]
    run(store, resolve("kept"))
    assert store.confirmations(8) == [kept_copy(8).confirmation]
    assert store.confirmations(7) == []
    store.close()
    with raw_lmdb(path) as env:
        copies = env.open_db(DB_PREPARED_COPIES, create=False)
        with env.begin() as txn:
            assert list(txn.cursor(db=copies)) == []


# --------------------------------------------------------------------------- atomic resolves


def test_an_atomic_resolve_of_several_fails_entirely_when_one_fails(store: Store) -> None:
    dst = create_queue(store, "dst", quota=1000)
    src = create_queue(store, "src")
    fill(store, src, 2)
    run(
        store,
        prepare("a", (append(dst, b"a" * 100),), ((src.queue_id, 1),)),
        prepare("b", (append(dst, b"b" * 200),), ((src.queue_id, 2),)),
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


# --------------------------------------------------------------------------- a full store


def test_a_commit_uses_the_headroom_of_a_full_store(open_store: StoreOpener) -> None:
    store = open_store(initial_map_size=1 * MIB, max_map_size=4 * MIB, reserve_size=512 * KIB)
    q = create_queue(store, "q", transactional=True)
    body = b"P" * (64 * KIB)
    run(store, prepare("x", (append(q, body), append(q, body))))
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


def test_listings_are_in_xid_order_by_prefix(store: Store) -> None:
    q = create_queue(store, "q")
    xids = ["b", "a", "ab", "a\x01", "é", "aa"]
    run(store, *(prepare(xid, (append(q),) * 3) for xid in xids))
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
        PrepareTransaction("bobs", (append(q),), (), created_at=NOW, owner="bob"),
        PrepareTransaction("roots", (append(q),), (), created_at=NOW, owner="root"),
        prepare("nobodys", (append(q),)),
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


# --------------------------------------------------------------------------- send records


@given(u32s, st.lists(payload_bytes, max_size=4), priorities, u32s)
def test_a_local_send_round_trips_with_its_parts_joined(
    queue_id: int, parts: list[bytes], priority: int, size: int
) -> None:
    sent = decode_send(encode_send(AppendMessage(queue_id, parts, priority, size)))
    assert isinstance(sent, AppendMessage)
    assert (sent.queue_id, sent.priority, sent.size) == (queue_id, priority, size)
    assert bytes(sent.payload) == b"".join(parts)  # type: ignore[arg-type]


@given(st.text(min_size=1, max_size=40), st.text(max_size=40), payload_bytes, u32s)
def test_an_outgoing_send_round_trips(name: str, display: str, payload: bytes, size: int) -> None:
    sent = decode_send(encode_send(AppendOutgoing(name, display, payload, size)))
    assert isinstance(sent, AppendOutgoing)
    assert (sent.name, sent.display_name, sent.size) == (name, display, size)
    assert bytes(sent.payload) == payload  # type: ignore[arg-type]


def test_a_send_of_another_kind_or_out_of_range_is_invalid_record() -> None:
    for send in (object(), AppendMessage(1, b"", 0, 1 << 32), AppendMessage(1 << 32, b"", 0, 0)):
        with pytest.raises(InvalidRecord):
            encode_send(send)


@settings(max_examples=300)
@given(st.binary(max_size=40))
def test_garbage_prepared_records_are_corrupt_or_decode(data: bytes) -> None:
    for decode in (decode_header, decode_send, lambda raw: decode_outcome("x", raw)):
        with contextlib.suppress(StoreCorrupt):
            decode(data)
