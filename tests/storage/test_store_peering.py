"""The receiver's peering state (``RecordIncoming``, ``RememberMessageIds``),
the peering records and keys, and the peering part of the schema: new
stores, and the migration of a schema-2 store at opening (to the current
schema, 5; the migration of a schema-3 store is in ``test_store_prepared``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import lmdb
import pytest
from conftest import (
    BODY,
    NOW,
    Reopener,
    StoreOpener,
    append,
    commit,
    commit_ok,
    counters,
    create_queue,
    fill,
    payloads,
    raw_lmdb,
    unit,
)

from storage import (
    SCHEMA_VERSION,
    Appended,
    AppendOutgoing,
    Done,
    IncomingState,
    InvalidRecord,
    OutgoingState,
    QueueMissing,
    RecordIncoming,
    RememberMessageIds,
    SchemaMismatch,
    Store,
    StoreCorrupt,
)
from storage._keys import (
    DB_CONFIRMATIONS,
    DB_EXPIRY,
    DB_FINAL_ACKS,
    DB_HISTORY,
    DB_INCOMING,
    DB_LISTS,
    DB_META,
    DB_OUTCOME_TIMES,
    DB_OUTCOMES,
    DB_OUTGOING,
    DB_PREPARED,
    META_HISTORY_COUNTER,
    META_SCHEMA_VERSION,
    META_SEQUENCE_STAMP,
    history_key,
    incoming_key,
    split_incoming_key,
    u32,
    unpack_u32,
    unpack_u64,
)
from storage._records import (
    decode_incoming,
    decode_outgoing,
    encode_incoming,
    encode_outgoing,
)

SOURCE_A = uuid.UUID("00000000-0000-0000-0000-00000000000a").bytes
SOURCE_B = uuid.UUID("ffffffff-0000-0000-0000-00000000000b").bytes
PEERING_DBS = (DB_OUTGOING, DB_INCOMING, DB_HISTORY)
#: What schema 2 lacked besides the peering databases (schemas 4 and 5 added them).
PREPARED_DBS = (
    DB_PREPARED,
    DB_OUTCOMES,
    DB_OUTCOME_TIMES,
    DB_EXPIRY,
    DB_CONFIRMATIONS,
    DB_FINAL_ACKS,
    DB_LISTS,
)


def hkey(source: bytes, ordinal: int) -> bytes:
    """A message history key: source GUID + ordinal u32."""
    return source + ordinal.to_bytes(4, "big")


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


def put_meta(path: Path, key: bytes, value: bytes | None) -> None:
    """Write (or with ``None`` delete) one ``meta`` value of a closed store."""
    with raw_lmdb(path) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            if value is None:
                assert txn.delete(key, db=meta)
            else:
                txn.put(key, value, db=meta)


# --------------------------------------------------------------------------- incoming streams


def test_incoming_states_round_trip_in_key_order(store: Store, reopen: Reopener) -> None:
    [outcome] = commit_ok(
        store,
        unit(
            RecordIncoming(SOURCE_B, "orders", 7, 3, 0, 10.5),
            RecordIncoming(SOURCE_A, "zeta", 1 << 63, 0xFFFFFFFF, 2, 11.0),
            RecordIncoming(SOURCE_A, "alpha", 5, 1, 0, 12.25),
        ),
    )
    assert outcome.results == (Done(), Done(), Done())
    expected = [
        IncomingState(SOURCE_A, "alpha", 5, 1, 0, 12.25),
        IncomingState(SOURCE_A, "zeta", 1 << 63, 0xFFFFFFFF, 2, 11.0),
        IncomingState(SOURCE_B, "orders", 7, 3, 0, 10.5),
    ]
    assert store.incoming_states() == expected
    # The queue keys name no queue here: the streams are kept all the same.
    assert store.list_queues() == []
    assert reopen(store).incoming_states() == expected


def test_a_later_record_of_a_stream_replaces_it(store: Store) -> None:
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "orders", 1, 1, 0, 1.0)))
    commit_ok(
        store,
        unit(RecordIncoming(SOURCE_A, "orders", 1, 2, 0, 2.0)),
        unit(RecordIncoming(SOURCE_A, "orders", 2, 1, 4, 3.0)),
        unit(RecordIncoming(SOURCE_A, "Orders", 9, 9, 9, 9.0)),
    )
    assert store.incoming_states() == [
        IncomingState(SOURCE_A, "Orders", 9, 9, 9, 9.0),
        IncomingState(SOURCE_A, "orders", 2, 1, 4, 3.0),
    ]


def test_record_in_a_failed_unit_is_not_kept(store: Store) -> None:
    [outcome] = commit(store, unit(RecordIncoming(SOURCE_A, "q", 1, 1, 0, 1.0), append(99)))
    assert isinstance(outcome.error, QueueMissing)
    assert store.incoming_states() == []


@pytest.mark.parametrize(
    "op",
    [
        RecordIncoming(SOURCE_A[:15], "q", 1, 1, 0, 1.0),
        RecordIncoming(SOURCE_A + b"\x00", "q", 1, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "q" * 496, 1, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "é" * 248, 1, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "q", 1 << 64, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "q", 1, 1 << 32, 0, 1.0),
        RecordIncoming(SOURCE_A, "q", 1, 1, -1, 1.0),
    ],
    ids=["short guid", "long guid", "key", "utf8 key", "sequence id", "number", "rejects"],
)
def test_bad_incoming_state_is_invalid_record(store: Store, op: RecordIncoming) -> None:
    [outcome] = commit(store, unit(op))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.incoming_states() == []


def test_longest_incoming_key_is_accepted(store: Store) -> None:
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "q" * 495, 1, 1, 0, 1.0), atomic=False))
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "", 2, 2, 0, 2.0)))
    assert [(len(s.queue_key), s.sequence_id) for s in store.incoming_states()] == [
        (0, 2),
        (495, 1),
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (SOURCE_A + b"q", b"\x01garbage"),
        (SOURCE_A + b"\xff", encode_incoming(1, 1, 0, 1.0)),
        (b"short", encode_incoming(1, 1, 0, 1.0)),
    ],
    ids=["value", "utf8", "short key"],
)
def test_stored_incoming_state_that_does_not_decode_is_corrupt(
    store: Store, reopen: Reopener, key: bytes, value: bytes
) -> None:
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_INCOMING)
        with env.begin(write=True) as txn:
            txn.put(key, value, db=db)
    # Opening does not read the streams; reading them finds the damage.
    store = reopen(store)
    with pytest.raises(StoreCorrupt):
        store.incoming_states()


# --------------------------------------------------------------------------- message history


def test_history_reads_back_in_insertion_order(store: Store, reopen: Reopener) -> None:
    a1, a2, b1, b2 = hkey(SOURCE_A, 1), hkey(SOURCE_A, 2), hkey(SOURCE_B, 1), hkey(SOURCE_B, 2)
    [outcome] = commit_ok(store, unit(RememberMessageIds((b2, a2))))
    assert outcome.results == (Done(),)
    commit_ok(store, unit(RememberMessageIds((b1,))), unit(RememberMessageIds((a1,))))
    assert store.message_history() == [b2, a2, b1, a1]
    store = reopen(store)
    assert store.message_history() == [b2, a2, b1, a1]
    # The counter goes on after a reopen: a new entry is the newest.
    commit_ok(store, unit(RememberMessageIds((hkey(SOURCE_A, 0),))))
    assert store.message_history() == [b2, a2, b1, a1, hkey(SOURCE_A, 0)]
    store.close()
    values = dict(raw_items(store.path, DB_HISTORY))
    assert {key: unpack_u64(value) for key, value in values.items()} == {
        b2: 1,
        a2: 2,
        b1: 3,
        a1: 4,
        hkey(SOURCE_A, 0): 5,
    }
    assert unpack_u64(raw_meta(store.path, META_HISTORY_COUNTER) or b"") == 5


def test_forgetting_history_is_idempotent_and_happens_before_adding(store: Store) -> None:
    a1, a2, a3 = hkey(SOURCE_A, 1), hkey(SOURCE_A, 2), hkey(SOURCE_A, 3)
    commit_ok(store, unit(RememberMessageIds((a1, a2, a3))))
    commit_ok(store, unit(RememberMessageIds((), (a2, hkey(SOURCE_B, 9)))))
    assert store.message_history() == [a1, a3]
    commit_ok(store, unit(RememberMessageIds((), (a2,))))
    assert store.message_history() == [a1, a3]
    # Added and forgotten by one operation: forgotten first, so it stays (as the newest).
    commit_ok(store, unit(RememberMessageIds((a1,), (a1,))))
    assert store.message_history() == [a3, a1]
    # Added by one operation and forgotten by the next, in one batch: gone.
    commit_ok(store, unit(RememberMessageIds((a2,))), unit(RememberMessageIds((), (a2, a3))))
    assert store.message_history() == [a1]


def test_adding_a_key_again_moves_it_to_the_end(store: Store) -> None:
    a1, a2 = hkey(SOURCE_A, 1), hkey(SOURCE_A, 2)
    commit_ok(store, unit(RememberMessageIds((a1, a2))))
    commit_ok(store, unit(RememberMessageIds((a1,))))
    assert store.message_history() == [a2, a1]


def test_history_in_a_failed_unit_gives_its_counters_back(store: Store) -> None:
    a1, a2 = hkey(SOURCE_A, 1), hkey(SOURCE_A, 2)
    failed, kept = commit(
        store, unit(RememberMessageIds((a1,)), append(99)), unit(RememberMessageIds((a2,)))
    )
    assert isinstance(failed.error, QueueMissing)
    assert kept.error is None
    assert store.message_history() == [a2]
    store.close()
    assert [(key, unpack_u64(value)) for key, value in raw_items(store.path, DB_HISTORY)] == [
        (a2, 1)
    ]


@pytest.mark.parametrize(
    "op",
    [
        RememberMessageIds((b"x" * 19,)),
        RememberMessageIds((b"x" * 21,)),
        RememberMessageIds((hkey(SOURCE_A, 1),), (b"",)),
    ],
    ids=["short", "long", "forget"],
)
def test_history_key_of_another_length_is_invalid_record(
    store: Store, op: RememberMessageIds
) -> None:
    [outcome] = commit(store, unit(op))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.message_history() == []


def test_only_forgetting_history_may_use_the_headroom() -> None:
    assert RememberMessageIds((), (hkey(SOURCE_A, 1),)).frees_space
    assert not RememberMessageIds((hkey(SOURCE_A, 1),)).frees_space


def test_history_value_that_does_not_decode_is_corrupt(store: Store, reopen: Reopener) -> None:
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_HISTORY)
        with env.begin(write=True) as txn:
            txn.put(hkey(SOURCE_A, 1), b"\x01", db=db)
    with pytest.raises(StoreCorrupt, match="history"):
        reopen(store).message_history()


# --------------------------------------------------------------------------- records and keys


def test_outgoing_state_layout_and_round_trip() -> None:
    state = OutgoingState(7, 0x01020304, 5, 9, paused=True)
    data = encode_outgoing(state)
    assert data == bytes.fromhex("010101020304000000050000000000000009")
    assert decode_outgoing(7, data) == state
    assert encode_outgoing(OutgoingState(7, 1, 2, 3, paused=False))[1] == 0


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes.fromhex("020000000001000000010000000000000000"),
        bytes.fromhex("010200000001000000010000000000000000"),
        bytes.fromhex("01000000000100000001000000000000000000"),
    ],
    ids=["empty", "version", "flags", "trailing"],
)
def test_outgoing_state_that_does_not_decode_is_corrupt(data: bytes) -> None:
    with pytest.raises(StoreCorrupt):
        decode_outgoing(1, data)


@pytest.mark.parametrize(
    "state",
    [
        OutgoingState(1, 1 << 32, 1, 0, paused=False),
        OutgoingState(1, 1, -1, 0, paused=False),
        OutgoingState(1, 1, 1, 1 << 64, paused=False),
    ],
)
def test_outgoing_state_out_of_range_is_invalid_record(state: OutgoingState) -> None:
    with pytest.raises(InvalidRecord):
        encode_outgoing(state)


def test_incoming_state_layout_and_round_trip() -> None:
    data = encode_incoming(0x0102030405060708, 9, 10, 0.5)
    assert data == bytes.fromhex("010102030405060708000000090000000a3fe0000000000000")
    assert decode_incoming(SOURCE_A, "q", data) == IncomingState(
        SOURCE_A, "q", 0x0102030405060708, 9, 10, 0.5
    )
    with pytest.raises(StoreCorrupt):
        decode_incoming(SOURCE_A, "q", b"\x02" + data[1:])
    with pytest.raises(StoreCorrupt):
        decode_incoming(SOURCE_A, "q", data[:-1])


def test_peering_keys() -> None:
    assert incoming_key(SOURCE_A, "ü") == SOURCE_A + "ü".encode()
    assert split_incoming_key(SOURCE_A + "ü".encode()) == (SOURCE_A, "ü")
    assert len(incoming_key(SOURCE_A, "q" * 495)) == 511
    with pytest.raises(InvalidRecord):
        incoming_key(SOURCE_A, "q" * 496)
    assert history_key(hkey(SOURCE_B, 7)) == SOURCE_B + b"\x00\x00\x00\x07"
    tagged = hkey(SOURCE_B, 7) + b"tag!"
    assert history_key(tagged) == tagged
    with pytest.raises(InvalidRecord):
        history_key(SOURCE_B)
    with pytest.raises(InvalidRecord):
        history_key(tagged + b"x")


# --------------------------------------------------------------------------- schema


def test_new_store_is_the_current_schema_with_empty_peering_state(store: Store) -> None:
    assert SCHEMA_VERSION == 6
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


def make_schema_2(path: Path) -> None:
    """Turn a closed store into what schema 2 wrote: no peering databases or
    counters, and no databases of prepared transactions."""
    with raw_lmdb(path) as env:
        dbs = [env.open_db(name) for name in PEERING_DBS + PREPARED_DBS]
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            for db in dbs:
                txn.drop(db, delete=True)
            assert txn.delete(META_SEQUENCE_STAMP, db=meta)
            assert txn.delete(META_HISTORY_COUNTER, db=meta)
            txn.put(META_SCHEMA_VERSION, u32(2), db=meta)
    with raw_lmdb(path) as env:
        for name in PEERING_DBS + PREPARED_DBS:
            with pytest.raises(lmdb.NotFoundError):
                env.open_db(name, create=False)


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
    for name in PREPARED_DBS:
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


@pytest.mark.parametrize("found", [1, 7, 0xFFFFFFFF])
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
        for name in PEERING_DBS + PREPARED_DBS:
            with pytest.raises(lmdb.NotFoundError):
                env.open_db(name, create=False)


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
