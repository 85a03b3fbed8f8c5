"""Record and key codecs: round trips, layouts, and garbage in -> StoreCorrupt out.

Every decoder must turn bytes that are not a record of its kind into
:class:`StoreCorrupt`, never into another exception; every encoder must turn
an out-of-range field into :class:`InvalidRecord`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import (
    MESSAGE_HEADER_SIZE,
    AppendMessage,
    AppendOutgoing,
    InvalidRecord,
    OutcomeInfo,
    QueueKind,
    QueueRecord,
    StoreCorrupt,
    decode_queue,
    encode_message_record,
    encode_queue,
    message_arrived_time,
    message_header,
    message_payload,
)
from storage._keys import (
    counters_key,
    message_key,
    message_range,
    outcome_time_key,
    prepared_key,
    priority_key,
    priority_range,
    setting_key,
    split_message_key,
    split_outcome_time_key,
    split_prepared_key,
    split_priority_key,
    xid_key,
)
from storage._prepared import (
    PreparedHeader,
    decode_header,
    decode_outcome,
    decode_send,
    encode_header,
    encode_outcome,
    encode_send,
    milliseconds,
)
from storage._records import decode_counters, encode_counters

u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
priorities = st.integers(0, 7)
times = st.floats(allow_nan=False)
payloads = st.binary(max_size=512)

queues = st.builds(
    QueueRecord,
    queue_id=u32,
    name=st.text(min_size=1, max_size=60),
    display_name=st.text(max_size=60),
    kind=st.sampled_from(QueueKind),
    transactional=st.booleans(),
    journal=st.booleans(),
    quota=st.none() | u64,
    parent_id=st.none() | u32,
    journal_id=st.none() | u32,
    created_at=times,
)


def sample_queue(**changes: object) -> QueueRecord:
    record = QueueRecord(
        queue_id=7,
        name="orders",
        display_name="Orders",
        kind=QueueKind.NORMAL,
        transactional=True,
        journal=True,
        quota=4096,
        parent_id=None,
        journal_id=8,
        created_at=12.5,
    )
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- message records


@given(payloads, priorities, u32, times)
def test_message_record_round_trips_header_and_payload(
    payload: bytes, priority: int, size: int, arrived: float
) -> None:
    record = encode_message_record(payload, priority=priority, size=size, arrived_time=arrived)
    assert len(record) == MESSAGE_HEADER_SIZE + len(payload)
    assert message_header(record) == (priority, size)
    assert message_header(memoryview(record)) == (priority, size)
    assert message_arrived_time(record) == arrived
    assert bytes(message_payload(record)) == payload


@given(st.lists(payloads, max_size=5), priorities)
def test_payload_in_parts_is_stored_as_one(parts: list[bytes], priority: int) -> None:
    mixed = [
        memoryview(part) if i % 3 == 0 else bytearray(part) if i % 3 == 1 else part
        for i, part in enumerate(parts)
    ]
    joined = b"".join(parts)
    whole = encode_message_record(joined, priority=priority, size=9, arrived_time=1.0)
    assert encode_message_record(mixed, priority=priority, size=9, arrived_time=1.0) == whole
    assert encode_message_record(memoryview(joined), priority=priority, size=9, arrived_time=1.0)


def test_message_record_layout() -> None:
    record = encode_message_record(b"payload", priority=5, size=0x01020304, arrived_time=2.5)
    assert MESSAGE_HEADER_SIZE == 16
    assert record[0] == 2  # format version
    assert record[1] == 5  # priority
    assert record[2:4] == b"\x00\x00"  # reserved
    assert record[4:8] == b"\x01\x02\x03\x04"  # size, big-endian
    assert struct.unpack_from(">d", record, 8)[0] == 2.5
    assert record[16:] == b"payload"
    # The payload is returned without a copy.
    view = message_payload(record)
    assert isinstance(view, memoryview)
    assert view.obj is record


@pytest.mark.parametrize(
    ("priority", "size"), [(8, 0), (-1, 0), (255, 0), (0, -1), (0, 1 << 32), (3, 1 << 40)]
)
def test_out_of_range_priority_or_size_is_invalid_record(priority: int, size: int) -> None:
    with pytest.raises(InvalidRecord):
        encode_message_record(b"", priority=priority, size=size, arrived_time=0.0)


def test_record_shorter_than_the_header_is_corrupt() -> None:
    record = encode_message_record(b"abc", priority=1, size=3, arrived_time=0.0)
    for cut in range(MESSAGE_HEADER_SIZE):
        with pytest.raises(StoreCorrupt):
            message_header(record[:cut])
    assert message_header(record[:MESSAGE_HEADER_SIZE]) == (1, 3)


@pytest.mark.parametrize(("offset", "value"), [(0, 1), (0, 3), (0, 0xFF), (1, 8), (1, 0xFF)])
def test_unknown_version_or_priority_is_corrupt(offset: int, value: int) -> None:
    record = bytearray(encode_message_record(b"abc", priority=1, size=3, arrived_time=0.0))
    record[offset] = value
    with pytest.raises(StoreCorrupt):
        message_header(bytes(record))


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_garbage_message_header_is_corrupt_or_in_range(data: bytes) -> None:
    try:
        priority, size = message_header(data)
    except StoreCorrupt:
        return
    assert data[0] == 2
    assert 0 <= priority <= 7
    assert 0 <= size <= 0xFFFFFFFF


# --------------------------------------------------------------------------- queue records


@given(queues)
def test_queue_record_round_trips_without_counters(record: QueueRecord) -> None:
    decoded = decode_queue(encode_queue(record))
    assert decoded == record
    assert (decoded.next_lookup_id, decoded.depth, decoded.bytes) == (1, 0, 0)
    assert (decoded.purged_below, decoded.erasing) == (0, False)


@given(queues, u64, u64, u64, u64, st.booleans())
def test_queue_counters_round_trip(
    record: QueueRecord, next_lookup_id: int, depth: int, size: int, purged: int, erasing: bool
) -> None:
    counted = record.with_counters(
        next_lookup_id=next_lookup_id, depth=depth, size=size, purged_below=purged, erasing=erasing
    )
    assert counted == dataclasses.replace(
        record,
        next_lookup_id=next_lookup_id,
        depth=depth,
        bytes=size,
        purged_below=purged,
        erasing=erasing,
    )
    assert decode_counters(record, encode_counters(counted)) == counted


def test_queue_record_layout() -> None:
    data = encode_queue(sample_queue())
    assert data[0] == 2  # format version
    assert struct.unpack_from(">I", data, 1)[0] == 7  # queue id
    assert data[5] == QueueKind.NORMAL
    assert data[6] == 0x01 | 0x02 | 0x04 | 0x10  # transactional, journal, quota, journal id
    assert struct.unpack_from(">Q", data, 7)[0] == 4096
    assert struct.unpack_from(">HH", data, 31) == (6, 6)
    assert data[35:] == b"ordersOrders"


@settings(max_examples=300)
@given(st.binary(max_size=120))
def test_garbage_queue_bytes_raise_only_store_corrupt(data: bytes) -> None:
    with contextlib.suppress(StoreCorrupt):
        decode_queue(data)
    with contextlib.suppress(StoreCorrupt):
        decode_counters(sample_queue(), data)


@settings(max_examples=100)
@given(queues, st.data())
def test_truncated_or_extended_queue_record_is_corrupt(
    record: QueueRecord, data: st.DataObject
) -> None:
    encoded = encode_queue(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(StoreCorrupt):
        decode_queue(encoded[:cut])
    with pytest.raises(StoreCorrupt):
        decode_queue(encoded + data.draw(st.binary(min_size=1, max_size=8)))


@settings(max_examples=100)
@given(queues, st.data())
def test_mutated_queue_record_decodes_or_is_corrupt(
    record: QueueRecord, data: st.DataObject
) -> None:
    encoded = bytearray(encode_queue(record))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(StoreCorrupt):
        decode_queue(bytes(encoded))


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [(0, 1, "version"), (5, 9, "kind"), (6, 0x20, "flags"), (35, 0xFF, "UTF-8")],
)
def test_bad_version_kind_flags_or_name_is_corrupt(offset: int, value: int, match: str) -> None:
    data = bytearray(encode_queue(sample_queue()))
    data[offset] = value
    with pytest.raises(StoreCorrupt, match=match):
        decode_queue(bytes(data))


def test_counters_of_wrong_length_version_or_flags_are_corrupt() -> None:
    good = encode_counters(sample_queue())
    assert len(good) == 34
    for bad in (good[:-1], good + b"\x00", b"\x01" + good[1:], good[:1] + b"\x02" + good[2:]):
        with pytest.raises(StoreCorrupt):
            decode_counters(sample_queue(), bad)


@pytest.mark.parametrize(
    "changes",
    [
        {"queue_id": 1 << 32},
        {"queue_id": -1},
        {"quota": 1 << 64},
        {"parent_id": 1 << 32},
        {"journal_id": 1 << 32},
        {"name": "n" * 70_000},
    ],
)
def test_queue_record_out_of_range_is_invalid_record(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidRecord):
        encode_queue(sample_queue(**changes))


@pytest.mark.parametrize("counter", ["next_lookup_id", "depth", "bytes", "purged_below"], ids=str)
def test_counters_out_of_range_are_invalid_record(counter: str) -> None:
    with pytest.raises(InvalidRecord):
        encode_counters(sample_queue(**{counter: 1 << 64}))


# --------------------------------------------------------------------------- prepared transactions

pairs = st.lists(st.tuples(u32, u64), max_size=8)
headers = st.builds(
    PreparedHeader,
    created_at=times,
    sends=u32,
    send_bytes=u64,
    receives=pairs.map(tuple),
    reserved=pairs.map(tuple),
    pinned=st.lists(u32, max_size=8).map(tuple),
)
xids = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)


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


@given(u32, st.lists(payloads, max_size=4), priorities, u32)
def test_a_local_send_round_trips_with_its_parts_joined(
    queue_id: int, parts: list[bytes], priority: int, size: int
) -> None:
    sent = decode_send(encode_send(AppendMessage(queue_id, parts, priority, size)))
    assert isinstance(sent, AppendMessage)
    assert (sent.queue_id, sent.priority, sent.size) == (queue_id, priority, size)
    assert bytes(sent.payload) == b"".join(parts)  # type: ignore[arg-type]


@given(st.text(min_size=1, max_size=40), st.text(max_size=40), payloads, u32)
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


@given(st.booleans(), times)
def test_outcome_round_trips(committed: bool, resolved_at: float) -> None:
    data = encode_outcome(committed, resolved_at)
    assert len(data) == 9
    assert decode_outcome("x", data) == OutcomeInfo("x", committed, resolved_at)
    for bad in (data[:-1], b"\x00" + data[1:], b"\x03" + data[1:]):
        with pytest.raises(StoreCorrupt):
            decode_outcome("x", bad)


@given(st.lists(st.tuples(xids, st.integers(0, 5)), max_size=20))
def test_prepared_keys_keep_each_xid_contiguous_header_first(
    entries: list[tuple[str, int]],
) -> None:
    entries = [(xid, index) for xid, index in entries if len(xid.encode()) <= 200]
    keys = sorted(prepared_key(xid.encode(), index) for xid, index in entries)
    expected = sorted(entries, key=lambda entry: (entry[0].encode(), entry[1]))
    assert keys == [prepared_key(xid.encode(), index) for xid, index in expected]
    for xid, index in entries:
        assert split_prepared_key(prepared_key(xid_key(xid), index)) == (xid.encode(), index)


@given(st.lists(st.tuples(st.floats(-1e3, 1e12), xids), max_size=20))
def test_outcome_time_keys_sort_by_time(entries: list[tuple[float, str]]) -> None:
    keys = [outcome_time_key(milliseconds(at), xid.encode()) for at, xid in entries]
    for (at, xid), key in zip(entries, keys, strict=True):
        assert split_outcome_time_key(key) == (milliseconds(at), xid.encode())
    times_in_order = [split_outcome_time_key(key)[0] for key in sorted(keys)]
    assert times_in_order == sorted(times_in_order)
    assert milliseconds(float("nan")) == milliseconds(-5.0) == 0
    assert milliseconds(float("inf")) == 0xFFFFFFFFFFFFFFFF


@pytest.mark.parametrize("xid", ["", "x" * 201, "é" * 100 + "a", "a\x00", "\udc80"])
def test_a_malformed_xid_is_invalid_record(xid: str) -> None:
    with pytest.raises(InvalidRecord):
        xid_key(xid)
    assert xid_key("é" * 100) == "é".encode() * 100


# --------------------------------------------------------------------------- keys


@given(st.lists(st.tuples(u32, u64.filter(lambda n: n < 0xFFFFFFFFFFFFFFFF)), max_size=20))
def test_message_keys_sort_by_queue_then_lookup_id(pairs: list[tuple[int, int]]) -> None:
    keys = [message_key(q, lookup) for q, lookup in pairs]
    assert sorted(keys) == [message_key(q, lookup) for q, lookup in sorted(pairs)]
    for (q, lookup), key in zip(pairs, keys, strict=True):
        assert split_message_key(key) == (q, lookup)
        start, end = message_range(q)
        assert start <= key < end
        # The counters sort just past every message of the queue.
        assert key < counters_key(q) == end


@given(u32.filter(lambda n: n < 0xFFFFFFFF))
def test_counters_key_sorts_before_the_next_queue(q: int) -> None:
    assert counters_key(q) < message_range(q + 1)[0]
    assert len(counters_key(q)) == len(message_key(q, 1)) == 13


@given(st.lists(st.tuples(u32, priorities, u64), max_size=20))
def test_priority_keys_sort_by_queue_highest_priority_then_lookup_id(
    entries: list[tuple[int, int, int]],
) -> None:
    keys = sorted(priority_key(q, p, lookup) for q, p, lookup in entries)
    expected = sorted(entries, key=lambda e: (e[0], 7 - e[1], e[2]))
    assert keys == [priority_key(q, p, lookup) for q, p, lookup in expected]
    for q, p, lookup in entries:
        key = priority_key(q, p, lookup)
        assert split_priority_key(key) == (q, 7 - p, lookup)
        start, end = priority_range(q)
        assert start <= key < end


def test_priority_range_of_the_last_queue_id_is_bounded() -> None:
    start, end = priority_range(0xFFFFFFFF)
    assert start < priority_key(0xFFFFFFFF, 0, 0xFFFFFFFFFFFFFFFF) < end


@pytest.mark.parametrize("key", ["", "k" * 504])
def test_empty_or_too_long_setting_key_is_invalid_record(key: str) -> None:
    with pytest.raises(InvalidRecord):
        setting_key(key)
    assert setting_key("k" * 503) == b"setting:" + b"k" * 503
