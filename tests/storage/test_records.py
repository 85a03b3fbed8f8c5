"""Message and queue records (``storage.records``): round trips, layouts, timed
records, poison settings, and garbage in -> StoreCorrupt out."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_kit import (
    SETTINGS,
    T,
    commit,
    create_queue,
    payload_bytes,
    priorities,
    times,
    u32s,
    u64s,
    unit,
)

from storage import (
    MESSAGE_HEADER_SIZE,
    InvalidRecord,
    PoisonSettings,
    QueueKind,
    QueueRecord,
    SetPoisonSettings,
    Store,
    StoreCorrupt,
    decode_queue,
    encode_message_record,
    encode_queue,
    message_arrived_time,
    message_deadline,
    message_header,
    message_note,
    message_payload,
)
from storage.records import decode_counters, encode_counters

# --------------------------------------------------------------------------- timed message records


def test_a_record_without_deadline_or_note_keeps_version_2() -> None:
    record = encode_message_record(b"abc", priority=5, size=3, arrived_time=T)
    assert record[0] == 2
    assert len(record) == 16 + 3
    assert (message_deadline(record), message_note(record)) == (None, b"")
    assert bytes(message_payload(record)) == b"abc"


@pytest.mark.parametrize(
    ("deadline", "note"), [(T + 5, b""), (None, b"n" * 255), (T + 0.001, b"x")]
)
def test_a_timed_record_round_trips(deadline: float | None, note: bytes) -> None:
    record = encode_message_record(
        [b"ab", b"c"], priority=7, size=99, arrived_time=T, deadline=deadline, note=note
    )
    assert record[0] == 3
    assert message_header(record) == (7, 99)
    assert message_arrived_time(record) == T
    assert (message_deadline(record), message_note(record)) == (deadline, note)
    assert bytes(message_payload(record)) == b"abc"


@pytest.mark.parametrize(
    ("deadline", "note"),
    [(0.0, b""), (-1.0, b""), (float("inf"), b""), (float("nan"), b""), (T, b"n" * 256)],
)
def test_bad_deadlines_and_notes_are_refused(deadline: float, note: bytes) -> None:
    with pytest.raises(InvalidRecord):
        encode_message_record(b"", priority=0, size=0, arrived_time=T, deadline=deadline, note=note)


# --------------------------------------------------------------- queue records with poison settings


def test_a_queue_without_poison_settings_keeps_the_version_2_record() -> None:
    fields: dict[str, Any] = {
        "display_name": "Q",
        "kind": QueueKind.NORMAL,
        "journal_id": 4,
        "created_at": 1.5,
    }
    record = QueueRecord(queue_id=3, name="q", transactional=True, **fields)
    data = encode_queue(record)
    assert data[0] == 2
    with_settings = encode_queue(
        record.with_counters(next_lookup_id=1, depth=0, size=0, purged_below=0, erasing=False)
    )
    assert with_settings == data
    poisoned = dataclasses.replace(record, poison=SETTINGS)
    encoded = encode_queue(poisoned)
    assert encoded[0] == 3
    assert len(encoded) == len(data) + 16
    assert decode_queue(encoded) == poisoned
    assert decode_queue(data) == record
    # The counters keep their own format whatever the record's version.
    assert (
        poisoned.with_counters(
            next_lookup_id=2, depth=1, size=3, purged_below=0, erasing=False
        ).poison
        == SETTINGS
    )


@pytest.mark.parametrize("cut", [1, 10, 16, 17])
def test_a_truncated_version_3_record_is_corrupt(cut: int) -> None:
    fields: dict[str, Any] = {
        "display_name": "q",
        "kind": QueueKind.NORMAL,
        "created_at": 0.0,
        "poison": SETTINGS,
    }
    record = QueueRecord(queue_id=3, name="q", transactional=False, **fields)
    data = encode_queue(record)
    with pytest.raises(StoreCorrupt):
        decode_queue(data[:-cut])


@pytest.mark.parametrize(
    "settings",
    [
        PoisonSettings(-1, 0, 0.0),
        PoisonSettings(0, 1 << 32, 0.0),
        PoisonSettings(0, 0, -1.0),
        PoisonSettings(0, 0, float("nan")),
        PoisonSettings(0, 0, float("inf")),
    ],
)
def test_settings_out_of_range_are_invalid_records(store: Store, settings: PoisonSettings) -> None:
    create_queue(store, "q")
    [outcome] = commit(store, unit(SetPoisonSettings("q", settings)))
    assert isinstance(outcome.error, InvalidRecord)
    assert store.get_queue("q").poison is None  # type: ignore[union-attr]


queues = st.builds(
    QueueRecord,
    queue_id=u32s,
    name=st.text(min_size=1, max_size=60),
    display_name=st.text(max_size=60),
    kind=st.sampled_from(QueueKind),
    transactional=st.booleans(),
    journal=st.booleans(),
    quota=st.none() | u64s,
    parent_id=st.none() | u32s,
    journal_id=st.none() | u32s,
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
    return dataclasses.replace(record, **changes)


# --------------------------------------------------------------------------- message records


@given(payload_bytes, priorities, u32s, times)
def test_message_record_round_trips_header_and_payload(
    payload: bytes, priority: int, size: int, arrived: float
) -> None:
    record = encode_message_record(payload, priority=priority, size=size, arrived_time=arrived)
    assert len(record) == MESSAGE_HEADER_SIZE + len(payload)
    assert message_header(record) == (priority, size)
    assert message_header(memoryview(record)) == (priority, size)
    assert message_arrived_time(record) == arrived
    assert bytes(message_payload(record)) == payload


@given(st.lists(payload_bytes, max_size=5), priorities)
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


@given(queues, u64s, u64s, u64s, u64s, st.booleans())
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
