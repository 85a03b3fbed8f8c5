"""Incoming streams and the message history (``storage.ops.peering``):
``RecordIncoming`` and ``RememberMessageIds``, read back whole, and their records."""

from __future__ import annotations

import pytest
from store_kit import (
    SOURCE_A,
    SOURCE_B,
    Reopener,
    append,
    commit,
    commit_ok,
    hkey,
    raw_items,
    raw_lmdb,
    raw_meta,
    unit,
)

from storage import (
    Done,
    IncomingState,
    IncomingStreamMoved,
    InvalidRecord,
    QueueMissing,
    RecordIncoming,
    RememberMessageIds,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_HISTORY, DB_INCOMING, META_HISTORY_COUNTER, unpack_u64
from storage.ops.peering import decode_incoming, encode_incoming

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


def test_a_record_that_follows_where_the_stream_no_longer_stands_fails_whole(
    store: Store,
) -> None:
    # A new stream follows (0, 0); its next write follows the state it wrote.
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "orders", 7, 1, 0, 1.0, follows=(0, 0))))
    # Message 2 was accepted on one connection, whose write failed; message 3,
    # accepted on another connection after it, follows (7, 2): it may not be
    # stored over the hole, nor anything written with it.
    hole = unit(
        RememberMessageIds((hkey(SOURCE_A, 3),)),
        RecordIncoming(SOURCE_A, "orders", 7, 3, 0, 2.0, follows=(7, 2)),
    )
    [outcome] = commit(store, hole)
    assert isinstance(outcome.error, IncomingStreamMoved)
    assert "stands at (7, 1), not at (7, 2)" in str(outcome.error)
    assert store.incoming_states() == [IncomingState(SOURCE_A, "orders", 7, 1, 0, 1.0)]
    assert store.message_history() == []
    # In one batch, a write follows what the writes before it in the batch left.
    commit_ok(
        store,
        unit(RecordIncoming(SOURCE_A, "orders", 7, 2, 0, 3.0, follows=(7, 1))),
        unit(RecordIncoming(SOURCE_A, "orders", 7, 3, 0, 3.0, follows=(7, 2))),
    )
    assert store.incoming_states() == [IncomingState(SOURCE_A, "orders", 7, 3, 0, 3.0)]
    # A stream never stored does not stand at a later mark.
    [outcome] = commit(
        store, unit(RecordIncoming(SOURCE_B, "orders", 9, 4, 0, 4.0, follows=(9, 3)))
    )
    assert isinstance(outcome.error, IncomingStreamMoved)


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
        RecordIncoming(SOURCE_A, "q" * 492, 1, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "é" * 246, 1, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "q", 1 << 64, 1, 0, 1.0),
        RecordIncoming(SOURCE_A, "q", 1, 1 << 32, 0, 1.0),
        RecordIncoming(SOURCE_A, "q", 1, 1, -1, 1.0),
        RecordIncoming(SOURCE_A, "q", 1, 1, 0, 1.0, via=SOURCE_A[:15]),
    ],
    ids=["short guid", "long guid", "key", "utf8 key", "sequence id", "number", "rejects", "via"],
)
def test_bad_incoming_state_is_invalid_record(store: Store, op: RecordIncoming) -> None:
    [outcome] = commit(store, unit(op))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.incoming_states() == []


def test_longest_incoming_key_is_accepted(store: Store) -> None:
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "q" * 491, 1, 1, 0, 1.0), atomic=False))
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "", 2, 2, 0, 2.0)))
    assert [(len(s.queue_key), s.sequence_id) for s in store.incoming_states()] == [
        (0, 2),
        (491, 1),
    ]


def test_streams_of_one_source_and_queue_are_kept_apart_by_sequence_timestamp(
    store: Store, reopen: Reopener
) -> None:
    old, new = (5 << 32) | 2, (9 << 32) | 1
    commit_ok(
        store,
        unit(RecordIncoming(SOURCE_A, "orders", new, 3, 0, 1.0, follows=(0, 0))),
        unit(RecordIncoming(SOURCE_A, "orders", old, 7, 0, 2.0, follows=(0, 0))),
    )
    commit_ok(store, unit(RecordIncoming(SOURCE_A, "orders", old, 8, 0, 3.0, follows=(old, 7))))
    # A new ordinal of one timestamp is the same stream: it follows its mark.
    [outcome] = commit(
        store, unit(RecordIncoming(SOURCE_A, "orders", old + 1, 1, 0, 4.0, follows=(0, 0)))
    )
    assert isinstance(outcome.error, IncomingStreamMoved)
    expected = [
        IncomingState(SOURCE_A, "orders", old, 8, 0, 3.0),
        IncomingState(SOURCE_A, "orders", new, 3, 0, 1.0),
    ]
    assert store.incoming_states() == expected
    assert reopen(store).incoming_states() == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (SOURCE_A + bytes(4) + b"q", b"\x01garbage"),
        (SOURCE_A + bytes(4) + b"\xff", encode_incoming(1, 1, 0, 1.0)),
        (SOURCE_A + b"q", encode_incoming(1, 1, 0, 1.0)),
        (SOURCE_A + bytes.fromhex("00000005") + b"q", encode_incoming(1, 1, 0, 1.0)),
    ],
    ids=["value", "utf8", "short key", "another timestamp"],
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


def test_a_state_that_names_the_router_its_message_came_through(
    store: Store, reopen: Reopener
) -> None:
    router = bytes(range(16))
    data = encode_incoming(0x0102030405060708, 9, 10, 0.5, via=router)
    # Format 3: format 1, a flags byte, the router's GUID.
    assert data == bytes.fromhex("030102030405060708000000090000000a3fe000000000000000") + router
    assert decode_incoming(SOURCE_A, "q", data) == IncomingState(
        SOURCE_A, "q", 0x0102030405060708, 9, 10, 0.5, via=router
    )
    flagged = encode_incoming(1 << 32, 1, 0, 0.5, resync=True, via=router)
    assert decode_incoming(SOURCE_A, "q", flagged).resync
    with pytest.raises(StoreCorrupt):
        decode_incoming(SOURCE_A, "q", data[:-1])
    through = RecordIncoming(SOURCE_A, "q", 5 << 32 | 1, 3, 0, 2.0, via=router)
    commit_ok(store, unit(through))
    assert reopen(store).incoming_states() == [
        IncomingState(SOURCE_A, "q", 5 << 32 | 1, 3, 0, 2.0, via=router)
    ]
