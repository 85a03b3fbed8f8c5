"""What prepared transactions hold on queues (``storage.reservations``): the
header record, quota bytes reserved, queues pinned, and both rebuilt at opening."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_kit import (
    KIB,
    LATER,
    NOW,
    ORDERS,
    Reopener,
    append,
    commit,
    counters,
    create_queue,
    error,
    fill,
    journal,
    lookups,
    payloads,
    prepare,
    priority,
    raw_lmdb,
    remove,
    resolve,
    run,
    times,
    u32s,
    u64s,
    unit,
)

from storage import (
    Appended,
    AppendMessage,
    AppendOutgoing,
    DeleteQueue,
    InvalidOperation,
    InvalidRecord,
    OutcomeInfo,
    PreparedInfo,
    QueueDeleted,
    QuotaExceeded,
    RecordOutcome,
    Store,
    StoreCorrupt,
)
from storage.keys import DB_PREPARED, prepared_key
from storage.reservations import PreparedHeader, decode_header, encode_header

# --------------------------------------------------------------------------- reopening


def test_prepared_transactions_and_reservations_survive_a_reopening(
    store: Store, reopen: Reopener
) -> None:
    dst = create_queue(store, "dst", quota=1000)
    src = create_queue(store, "src", journal=True)
    fill(store, src, 2, b"r")
    big = b"B" * (64 * KIB)  # a payload on overflow pages
    sends = (
        append(dst, b"d" * 300, priority=7),
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
    too_much = error(store, prepare("x", (append(q, b"s" * 600), append(q, b"s" * 500))))
    assert isinstance(too_much, QuotaExceeded)
    assert too_much.would_be == 1100
    run(store, prepare("x", (append(q, b"s" * 600),)))
    refused = error(store, append(q, b"a" * 500))
    assert isinstance(refused, QuotaExceeded)
    assert refused.would_be == 1100
    assert isinstance(error(store, prepare("y", (append(q, b"s" * 401),))), QuotaExceeded)
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
    outcomes = commit(
        store, unit(prepare("x", (append(q, b"s" * 60),))), unit(append(q, b"a" * 50))
    )
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
        prepare("a", (append(dst), append(dst))),
        prepare("b", (append(dst),), ((jrn.queue_id, 1),)),  # pins src, which its journal dies with
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
    outcomes = commit(store, unit(prepare("x", (append(q),))), unit(DeleteQueue(q.queue_id)))
    assert isinstance(outcomes[1].error, InvalidOperation)
    outcomes = commit(store, unit(resolve("x")), unit(DeleteQueue(q.queue_id)))
    assert outcomes[1].results == (QueueDeleted((q.queue_id, q.queue_id + 1), 1),)


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


# --------------------------------------------------------------------------- the header record


pairs = st.lists(st.tuples(u32s, u64s), max_size=8)


headers = st.builds(
    PreparedHeader,
    created_at=times,
    sends=u32s,
    send_bytes=u64s,
    receives=pairs.map(tuple),
    reserved=pairs.map(tuple),
    pinned=st.lists(u32s, max_size=8).map(tuple),
)


@given(headers)
def test_prepared_header_round_trips(header: PreparedHeader) -> None:
    assert decode_header(encode_header(header)) == header
    assert decode_header(memoryview(encode_header(header))) == header


def test_prepared_header_refuses_garbage_and_out_of_range_fields() -> None:
    data = encode_header(PreparedHeader(1.5, 2, 99, ((1, 2),), ((4, 10),), (4, 1)))
    for bad in (data[:-1], data + b"\0", b"\x02" + data[1:], b""):
        with pytest.raises(StoreCorrupt):
            decode_header(bad)
    with pytest.raises(InvalidRecord):
        encode_header(PreparedHeader(0.0, 1 << 32, 0, (), (), ()))
    with pytest.raises(InvalidRecord):
        encode_header(PreparedHeader(0.0, 0, 0, ((1, 1 << 64),), (), ()))
