"""Opening a store of every older schema (2 to 7): the databases the later
schemas added are created in the opening write, the meta values they need are
written, the version becomes the current one, and what was stored is kept.
Other versions are refused and left alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lmdb
import pytest
from store_kit import (
    BODY,
    NOW,
    ORDERS,
    SETTINGS,
    SOURCE_A,
    SOURCE_B,
    Reopener,
    StoreOpener,
    T,
    abort,
    append,
    commit_ok,
    counters,
    counters_of,
    create_queue,
    due,
    fill,
    hkey,
    lookups,
    move,
    payloads,
    prepare,
    put_raw,
    raw_items,
    raw_lmdb,
    raw_meta,
    resolve,
    run,
    timed,
    unit,
)

from storage import (
    SCHEMA_VERSION,
    AddConfirmation,
    Appended,
    AppendMessage,
    AppendOutgoing,
    Confirmation,
    CreateSubqueues,
    IncomingState,
    MoveReason,
    OutgoingState,
    QueueKind,
    RecordIncoming,
    RememberMessageIds,
    Resolution,
    SchemaMismatch,
    SetPoisonSettings,
    SettleConfirmation,
    Store,
    StoreCorrupt,
)
from storage.keys import (
    DB_AWAITED,
    DB_CONFIRMATIONS,
    DB_EXPIRY,
    DB_FINAL_ACKS,
    DB_HISTORY,
    DB_INCOMING,
    DB_LISTS,
    DB_MESSAGE_COUNTERS,
    DB_META,
    DB_OUTCOME_TIMES,
    DB_OUTCOMES,
    DB_OUTGOING,
    DB_PREPARED,
    DB_QUEUES,
    DB_RELAYED,
    DB_RETIRED,
    DB_RETRY_DUE,
    META_HISTORY_COUNTER,
    META_SCHEMA_VERSION,
    META_SEQUENCE_STAMP,
    u32,
    unpack_u32,
    unpack_u64,
)
from storage.ops.peering import encode_incoming
from storage.records import encode_queue

#: The databases of peering (schema 3 added them).
PEERING_DBS = (DB_OUTGOING, DB_INCOMING, DB_HISTORY)
#: What schema 2 lacked besides the peering databases (schemas 4 and 5 added them).
AFTER_PEERING_DBS = (
    DB_PREPARED,
    DB_OUTCOMES,
    DB_OUTCOME_TIMES,
    DB_EXPIRY,
    DB_CONFIRMATIONS,
    DB_FINAL_ACKS,
    DB_LISTS,
    DB_RELAYED,
    DB_RETIRED,
    DB_AWAITED,
)

#: The databases of prepared transactions (schema 4 added them).
PREPARED_DBS = (DB_PREPARED, DB_OUTCOMES, DB_OUTCOME_TIMES)
#: The databases schema 5 added.
SCHEMA_5_DBS = (DB_EXPIRY, DB_CONFIRMATIONS, DB_FINAL_ACKS, DB_LISTS)
#: The databases of poison handling (schema 6 added them).
POISON_DBS = (DB_MESSAGE_COUNTERS, DB_RETRY_DUE)
#: The index of relayed entries (schema 8 added it).
RELAY_DBS = (DB_RELAYED,)
#: The sequences of removed outgoing queues (schema 9 added them).
RETIRED_DBS = (DB_RETIRED,)
#: The count of copies awaiting confirmation by destination (schema 10 added it).
AWAITED_DBS = (DB_AWAITED,)


def downgrade(
    path: Path, version: int, dropped: tuple[bytes, ...], forgotten: tuple[bytes, ...] = ()
) -> None:
    """Turn a closed store into what schema ``version`` wrote: without the
    databases ``dropped`` and the meta values ``forgotten``."""
    with raw_lmdb(path) as env:
        dbs = [env.open_db(name) for name in dropped]
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            for db in dbs:
                txn.drop(db, delete=True)
            for key in forgotten:
                assert txn.delete(key, db=meta)
            txn.put(META_SCHEMA_VERSION, u32(version), db=meta)
    with raw_lmdb(path) as env:
        for name in dropped:
            with pytest.raises(lmdb.NotFoundError):
                env.open_db(name, create=False)


def put_meta(path: Path, key: bytes, value: bytes | None) -> None:
    """Write (or with ``None`` delete) one ``meta`` value of a closed store."""
    with raw_lmdb(path) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            if value is None:
                assert txn.delete(key, db=meta)
            else:
                txn.put(key, value, db=meta)


# -------------------------------------------------------------- the current schema, other versions


def test_new_store_is_the_current_schema_with_empty_peering_state(store: Store) -> None:
    assert SCHEMA_VERSION == 11
    assert (store.incoming_states(), store.message_history(), store.outgoing_states()) == (
        [],
        [],
        {},
    )
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    assert raw_meta(store.path, META_SEQUENCE_STAMP) == u32(0)
    assert raw_meta(store.path, META_HISTORY_COUNTER) == bytes(8)
    for name in PEERING_DBS:
        assert raw_items(store.path, name) == []


@pytest.mark.parametrize("found", [1, 12, 0xFFFFFFFF])
def test_other_versions_are_refused_and_left_alone(
    open_store: StoreOpener, store_dir: Path, found: int
) -> None:
    open_store().close()
    make_schema_2(store_dir)
    put_meta(store_dir, META_SCHEMA_VERSION, u32(found))
    with pytest.raises(SchemaMismatch) as caught:
        open_store()
    assert (caught.value.found, caught.value.supported) == (found, SCHEMA_VERSION)
    # The refused open created nothing.
    assert raw_meta(store_dir, META_SCHEMA_VERSION) == u32(found)
    assert raw_meta(store_dir, META_SEQUENCE_STAMP) is None
    with raw_lmdb(store_dir) as env:
        for name in PEERING_DBS + AFTER_PEERING_DBS:
            with pytest.raises(lmdb.NotFoundError):
                env.open_db(name, create=False)


# ----------------------------------------------------------------------- schema 2 -> now (peering)


def make_schema_2(path: Path) -> None:
    """Turn a closed store into what schema 2 wrote: no peering databases or
    counters, and no databases of prepared transactions."""
    downgrade(path, 2, PEERING_DBS + AFTER_PEERING_DBS, (META_SEQUENCE_STAMP, META_HISTORY_COUNTER))


def test_schema_2_store_is_migrated_at_opening(store: Store, reopen: Reopener) -> None:
    guid = store.qm_guid
    queue = create_queue(store, "orders", created_at=5.0)
    fill(store, queue, 3)
    queues = store.list_queues()
    store.close()
    make_schema_2(store.path)

    store = reopen(store)
    assert store.qm_guid == guid
    assert store.list_queues() == queues
    assert payloads(store, queue) == [BODY] * 3
    assert counters(store, "orders") == (4, 3, 300)
    assert (store.incoming_states(), store.message_history(), store.outgoing_states()) == (
        [],
        [],
        {},
    )
    outcomes = commit_ok(
        store,
        unit(AppendOutgoing("outgoing$;x", "x", b"abc", 3)),
        unit(RecordIncoming(SOURCE_A, "orders", 1, 1, 0, 1.0)),
        unit(RememberMessageIds((hkey(SOURCE_A, 1),))),
    )
    assert outcomes[0].results == (Appended(3, 1),)
    assert store.outgoing_states() == {3: OutgoingState(3, int(NOW), 1, 0, paused=False)}
    assert store.prepared_transactions() == []
    assert store.outcomes() == []
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    for name in AFTER_PEERING_DBS:
        assert raw_items(store.path, name) == []
    assert unpack_u32(raw_meta(store.path, META_SEQUENCE_STAMP) or b"") == int(NOW)
    assert unpack_u64(raw_meta(store.path, META_HISTORY_COUNTER) or b"") == 1
    store = reopen(store)
    assert store.incoming_states() == [IncomingState(SOURCE_A, "orders", 1, 1, 0, 1.0)]
    assert store.message_history() == [hkey(SOURCE_A, 1)]


def test_migrated_store_opens_again_at_the_current_schema(store: Store, reopen: Reopener) -> None:
    store.close()
    make_schema_2(store.path)
    reopen(store).close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    store = reopen(store)
    assert store.outgoing_states() == {}


@pytest.mark.parametrize("key", [META_SEQUENCE_STAMP, META_HISTORY_COUNTER])
def test_missing_or_garbled_peering_counter_is_corrupt(
    open_store: StoreOpener, store_dir: Path, key: bytes
) -> None:
    open_store().close()
    put_meta(store_dir, key, b"\x01")
    with pytest.raises(StoreCorrupt, match="do not decode"):
        open_store()
    put_meta(store_dir, key, None)
    with pytest.raises(StoreCorrupt, match="incomplete"):
        open_store()


# --------------------------------------------------------- schema 3 -> now (prepared transactions)


def make_schema_3(path: Path) -> None:
    """Turn a closed store into what schema 3 wrote: no databases of prepared transactions."""
    downgrade(path, 3, PREPARED_DBS + SCHEMA_5_DBS + RELAY_DBS + RETIRED_DBS + AWAITED_DBS)


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
    run(store, prepare("x", (append(q),), ((q.queue_id, 1),)))
    assert store.reservation(q.queue_id) == (100, 1)
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    store = reopen(store)
    assert [info.xid for info in store.prepared_transactions()] == ["x"]
    assert run(store, resolve("x"))[0].resolution is Resolution.COMMITTED
    assert lookups(store, q) == [2, 3]


# -------------------------------------------------------------- schema 4 -> now (the expiry index)


def test_a_schema_4_store_is_migrated_at_opening(store: Store, reopen: Reopener) -> None:
    q = create_queue(store, "q")
    commit_ok(store, unit(AppendMessage(q.queue_id, BODY, 3, len(BODY))))
    store.close()
    downgrade(store.path, 4, SCHEMA_5_DBS + RELAY_DBS + RETIRED_DBS + AWAITED_DBS)
    store = reopen(store)
    assert payloads(store, q) == [BODY]
    commit_ok(store, unit(timed(q, T + 1)))
    assert due(store) == [(T + 1, q.queue_id, 2)]
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)


# --------------------------------------------------------------- schema 5 -> now (poison handling)


def make_schema_5(path: Path) -> None:
    """Turn a closed store into what schema 5 wrote: no poison databases."""
    downgrade(path, 5, POISON_DBS + RELAY_DBS + RETIRED_DBS + AWAITED_DBS)


def test_a_schema_5_store_is_migrated_at_opening(store: Store, reopen: Reopener) -> None:
    assert SCHEMA_VERSION == 11
    queue = create_queue(store, "old", transactional=True)
    fill(store, queue, 2)
    queues = store.list_queues()
    store.close()
    make_schema_5(store.path)
    store = reopen(store)
    assert store.list_queues() == queues
    assert payloads(store, queue) == [BODY, BODY]
    # Queues of schema 5 have no subqueues until asked for.
    assert store.get_queue("old;retry") is None
    commit_ok(store, unit(CreateSubqueues("old")), unit(SetPoisonSettings("old", SETTINGS)))
    assert abort(store, queue, 1) == 1
    retry = store.get_queue("old;retry")
    assert retry is not None
    move(store, queue, 2, retry, reason=MoveReason.RETRY)
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    store = reopen(store)
    assert counters_of(store, queue, 1).abort_count == 1
    assert len(store.retries_due(None, 10)) == 1
    assert store.get_queue("old").poison == SETTINGS  # type: ignore[union-attr]


def test_the_early_schema_5_of_development_builds_gets_its_subqueues_back(
    store: Store, reopen: Reopener
) -> None:
    """Builds of 23 November 2026 wrote a schema 5 of their own, with subqueues of
    kind 5 (``system$;journal``'s kind here) and the poison databases: opening
    it gives them the subqueue kind, and what they hold goes on as poison handling
    says (a message due back from ``;retry`` returns)."""
    queue = create_queue(store, "early", transactional=True)
    commit_ok(store, unit(CreateSubqueues("early")), unit(SetPoisonSettings("early", SETTINGS)))
    fill(store, queue, 2)
    retry = store.get_queue("early;retry")
    assert retry is not None
    move(store, queue, 2, retry, reason=MoveReason.RETRY)
    subqueues = {name: store.get_queue(name) for name in ("early;retry", "early;poison")}
    store.close()
    downgrade(store.path, 5, RELAY_DBS + RETIRED_DBS + AWAITED_DBS)
    with raw_lmdb(store.path) as env:
        queues = env.open_db(DB_QUEUES)
        with env.begin(write=True) as txn:
            for name, record in subqueues.items():
                assert record is not None
                assert record.kind is QueueKind.SUBQUEUE
                early = encode_queue(dataclasses.replace(record, kind=QueueKind.SYSTEM_JOURNAL))
                txn.put(name.encode(), early, db=queues)
    store = reopen(store)
    for name in subqueues:
        record = store.get_queue(name)
        assert record is not None
        assert record.kind is QueueKind.SUBQUEUE, name
    assert len(store.retries_due(None, 10)) == 1
    assert payloads(store, store.get_queue("early;retry")) == [BODY]  # type: ignore[arg-type]


# ------------------------------------------------------------------- schema 6 -> 7 (stream keys)

#: Two sequence ids of two stamps, as a sender's outgoing queues have them.
_SEQ_OLD = (1_600_000_000 << 32) | 3
_SEQ_NEW = (1_700_000_000 << 32) | 1


def make_schema_6(path: Path, states: list[tuple[bytes, str, int, int]]) -> None:
    """Turn a closed store into what schema 6 wrote: its ``incoming`` holds
    ``states`` (source, queue key, sequence id, last number) keyed by source
    GUID + queue key, without the sequence timestamp."""
    downgrade(path, 6, RELAY_DBS + RETIRED_DBS + AWAITED_DBS)
    with raw_lmdb(path) as env:
        incoming = env.open_db(DB_INCOMING)
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            txn.drop(incoming, delete=False)
            for source, queue_key, sequence_id, number in states:
                value = encode_incoming(sequence_id, number, 2, 5.0)
                txn.put(source + queue_key.encode(), value, db=incoming)
            txn.put(META_SCHEMA_VERSION, u32(6), db=meta)


def test_a_schema_6_store_gets_the_sequence_timestamp_in_its_incoming_keys(
    store: Store, reopen: Reopener
) -> None:
    store.close()
    long_key = "q" * 493  # fits without the timestamp, not with it
    make_schema_6(
        store.path,
        [
            (SOURCE_A, "orders", _SEQ_NEW, 4),
            (SOURCE_B, "orders", _SEQ_OLD, 9),
            (SOURCE_A, "zeta", _SEQ_OLD, 1),
            (SOURCE_A, long_key, _SEQ_OLD, 1),
        ],
    )
    store = reopen(store)
    assert store.incoming_states() == [
        IncomingState(SOURCE_A, "zeta", _SEQ_OLD, 1, 2, 5.0),
        IncomingState(SOURCE_A, "orders", _SEQ_NEW, 4, 2, 5.0),
        IncomingState(SOURCE_B, "orders", _SEQ_OLD, 9, 2, 5.0),
    ]
    # Each stream goes on where it stood, under its new key; a second
    # sequence of the same source to the same queue is a stream of its own.
    commit_ok(
        store,
        unit(RecordIncoming(SOURCE_A, "orders", _SEQ_NEW, 5, 0, 6.0, follows=(_SEQ_NEW, 4))),
        unit(RecordIncoming(SOURCE_A, "orders", _SEQ_OLD, 1, 0, 6.0, follows=(0, 0))),
    )
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    keys = [key for key, _ in raw_items(store.path, DB_INCOMING)]
    assert keys == [
        SOURCE_A + u32(_SEQ_OLD >> 32) + b"orders",
        SOURCE_A + u32(_SEQ_OLD >> 32) + b"zeta",
        SOURCE_A + u32(_SEQ_NEW >> 32) + b"orders",
        SOURCE_B + u32(_SEQ_OLD >> 32) + b"orders",
    ]
    store = reopen(store)
    assert [(s.queue_key, s.sequence_id, s.last_number) for s in store.incoming_states()][:3] == [
        ("orders", _SEQ_OLD, 1),
        ("zeta", _SEQ_OLD, 1),
        ("orders", _SEQ_NEW, 5),
    ]


def test_a_corrupt_incoming_state_of_schema_6_is_corrupt(
    open_store: StoreOpener, store_dir: Path
) -> None:
    open_store().close()
    make_schema_6(store_dir, [])
    with raw_lmdb(store_dir) as env:
        incoming = env.open_db(DB_INCOMING)
        with env.begin(write=True) as txn:
            txn.put(SOURCE_A + b"q", b"\x01", db=incoming)
    with pytest.raises(StoreCorrupt, match="incoming state"):
        open_store()
    assert raw_meta(store_dir, META_SCHEMA_VERSION) == u32(6)


# ------------------------------------------------------------- schema 7 -> 8 (the relayed index)


def test_a_schema_7_store_gets_the_relayed_index_and_keeps_its_stream_keys(
    store: Store, reopen: Reopener
) -> None:
    relay_id = bytes(range(33))
    commit_ok(
        store,
        unit(AppendOutgoing(ORDERS, "O", b"held before", 11)),  # schema 7: no relay id
        unit(RecordIncoming(SOURCE_A, "orders", _SEQ_NEW, 4, 0, 5.0)),
    )
    states = store.incoming_states()
    store.close()
    keys = raw_items(store.path, DB_INCOMING)
    downgrade(store.path, 7, RELAY_DBS + RETIRED_DBS + AWAITED_DBS)
    store = reopen(store)
    # Nothing is rewritten: the stream keys were schema 7's already.
    assert store.incoming_states() == states
    (queue,) = store.outgoing_states()
    assert payloads(store, queue) == [b"held before"]
    assert store.relayed_entry(queue, relay_id) is None  # entries of schema 7 are not indexed
    commit_ok(store, unit(AppendOutgoing(ORDERS, "O", b"relayed", 7, relay=relay_id)))
    assert store.relayed_entry(queue, relay_id) == 2
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    assert raw_items(store.path, DB_INCOMING) == keys
    assert len(raw_items(store.path, DB_RELAYED)) == 1


# ---------------------------------------------------------- schema 8 -> 9 (retired sequences)


def test_a_schema_8_store_gets_the_retired_sequences(store: Store, reopen: Reopener) -> None:
    commit_ok(store, unit(AppendOutgoing(ORDERS, "O", b"held", 4)))
    (queue,) = store.outgoing_states()
    states = store.outgoing_states()
    store.close()
    downgrade(store.path, 8, RETIRED_DBS + AWAITED_DBS)
    store = reopen(store)
    assert store.outgoing_states() == states
    assert payloads(store, queue) == [b"held"]
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    assert raw_items(store.path, DB_RETIRED) == []


# ------------------------------------------------- schema 9 -> 10 (copies counted by destination)


def test_a_schema_9_store_counts_its_copies_awaiting_confirmation(
    store: Store, reopen: Reopener
) -> None:
    def kept(ordinal: int, index: int, destination: str, deadline: float | None) -> AddConfirmation:
        return AddConfirmation(
            Confirmation(ordinal, index, False, 0, deadline, destination, b"message")
        )

    commit_ok(
        store,
        unit(kept(7, 0, "a", T), kept(7, 1, "b", T), kept(8, 0, "a", T), kept(9, 0, "b", None)),
    )
    commit_ok(store, unit(SettleConfirmation(7, 1)))
    store.close()
    downgrade(store.path, 9, AWAITED_DBS)
    store = reopen(store)
    assert store.awaited_confirmations() == {"a": 2}
    assert [c.destination for c in store.confirmations(7)] == ["a"]
    commit_ok(store, unit(SettleConfirmation(7, 0)), unit(SettleConfirmation(8, 0)))
    assert store.awaited_confirmations() == {}
    assert [c.destination for c in store.confirmations(9)] == ["b"]
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
    assert raw_items(store.path, DB_AWAITED) == []


def test_a_schema_9_store_with_a_corrupt_copy_is_corrupt_and_left_alone(
    store: Store, store_dir: Path
) -> None:
    store.close()
    downgrade(store_dir, 9, AWAITED_DBS)
    put_raw(store_dir, DB_CONFIRMATIONS, b"\x00\x00\x00\x07\x00", b"\x01")
    with pytest.raises(StoreCorrupt):
        Store(store_dir)
    assert raw_meta(store_dir, META_SCHEMA_VERSION) == u32(9)


# ------------------------------------------ schema 10 -> 11 (acknowledgments bound)


def test_a_schema_10_store_is_marked_11_and_keeps_everything(
    store: Store, reopen: Reopener
) -> None:
    copy = Confirmation(7, 0, False, 0, T, "a", b"message")
    commit_ok(store, unit(AddConfirmation(copy)))
    store.close()
    downgrade(store.path, 10, ())
    store = reopen(store)
    assert store.confirmations(7) == [copy]
    assert store.awaited_confirmations() == {"a": 1}
    store.close()
    assert raw_meta(store.path, META_SCHEMA_VERSION) == u32(SCHEMA_VERSION)
