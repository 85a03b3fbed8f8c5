"""Peering's state in the catalog (``storage.peering_state``): outgoing state
records, distinct increasing sequence stamps, history counters given back by a
failed unit, and outgoing states that disagree with the queues."""

from __future__ import annotations

import pytest
from store_kit import (
    NOW,
    SOURCE_A,
    STAMP,
    Reopener,
    append,
    commit,
    commit_ok,
    fill_outgoing,
    hkey,
    raw_items,
    raw_lmdb,
    send_outgoing,
    unit,
)

from storage import (
    Appended,
    InvalidRecord,
    OutgoingState,
    QueueMissing,
    RememberMessageIds,
    Skipped,
    Store,
    StoreCorrupt,
)
from storage.keys import (
    DB_HISTORY,
    DB_META,
    DB_OUTGOING,
    META_SEQUENCE_STAMP,
    queue_id_key,
    unpack_u32,
    unpack_u64,
)
from storage.peering_state import decode_outgoing, encode_outgoing


def test_sequence_timestamps_are_distinct_and_increasing(store: Store, reopen: Reopener) -> None:
    commit_ok(
        store, unit(send_outgoing("outgoing$;a")), unit(send_outgoing("outgoing$;b")), now=NOW + 0.5
    )
    commit_ok(store, unit(send_outgoing("outgoing$;c")), now=NOW)
    commit_ok(store, unit(send_outgoing("outgoing$;d")), now=NOW + 100)
    commit_ok(store, unit(send_outgoing("outgoing$;e")), now=NOW - 50)  # the clock went back
    store = reopen(store)
    commit_ok(store, unit(send_outgoing("outgoing$;f")), now=NOW)
    stamps = {
        name: store.outgoing_state(queue.queue_id)
        for name, queue in ((q.name, q) for q in store.list_queues())
    }
    assert {name: state.sequence_timestamp for name, state in stamps.items() if state} == {
        "outgoing$;a": STAMP,
        "outgoing$;b": STAMP + 1,
        "outgoing$;c": STAMP + 2,
        "outgoing$;d": STAMP + 100,
        "outgoing$;e": STAMP + 101,
        "outgoing$;f": STAMP + 102,
    }
    store.close()
    with raw_lmdb(store.path) as env:
        meta = env.open_db(DB_META)
        with env.begin() as txn:
            assert unpack_u32(txn.get(META_SEQUENCE_STAMP, db=meta) or b"") == STAMP + 102


def test_failed_unit_gives_back_its_queue_id_and_stamp(store: Store) -> None:
    failed, created = commit(
        store,
        unit(send_outgoing("outgoing$;a"), append(99)),  # queue 99 does not exist
        unit(send_outgoing("outgoing$;b")),
    )
    assert isinstance(failed.error, QueueMissing)
    assert failed.results[0] == Skipped()
    assert created.results == (Appended(1, 1),)
    assert store.get_queue("outgoing$;a") is None
    assert store.outgoing_states() == {1: OutgoingState(1, STAMP, 1, 0, paused=False)}


@pytest.mark.parametrize("damage", ["missing", "orphan", "garbage"])
def test_state_that_disagrees_with_the_queues_is_corrupt(
    store: Store, reopen: Reopener, damage: str
) -> None:
    queue_id = fill_outgoing(store, 1)
    store.close()
    with raw_lmdb(store.path) as env:
        db = env.open_db(DB_OUTGOING)
        with env.begin(write=True) as txn:
            if damage == "missing":
                assert txn.delete(queue_id_key(queue_id), db=db)
            elif damage == "orphan":
                state = OutgoingState(7, STAMP, 1, 0, paused=False)
                txn.put(queue_id_key(7), encode_outgoing(state), db=db)
            else:
                txn.put(queue_id_key(queue_id), b"\x01garbage", db=db)
    match = {"missing": "no outgoing state", "orphan": "no outgoing queue", "garbage": "corrupt"}
    with pytest.raises(StoreCorrupt, match=match[damage]):
        reopen(store)


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
