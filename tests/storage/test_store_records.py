"""Record codecs: round trips, and garbage in -> StoreCorrupt out (never another exception)."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage import (
    InvalidRecord,
    MessageRecord,
    QueueKind,
    QueueRecord,
    StoreCorrupt,
    decode_message,
    decode_queue,
    encode_message,
    encode_queue,
    format_message_id,
)
from storage._records import encode_message_as, finish_message, message_accounting

GUID = uuid.UUID("6f1c2a3b-4d5e-4f60-8172-839405a6b7c8")
u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
floats = st.floats(allow_nan=False)
uuids = st.uuids()
short_text = st.text(max_size=40)


def sample_message(**changes: object) -> MessageRecord:
    record = MessageRecord(
        message_id_qm=GUID,
        message_id_ordinal=42,
        label="label",
        body=b"body" * 64,
        correlation_id=b"",
        app_specific=7,
        priority=3,
        delivery=1,
        acknowledge=0,
        journal_level=0,
        admin_queue="",
        response_queue="DIRECT=OS:host\\private$\\replies",
        time_to_reach_queue=0xFFFFFFFF,
        time_to_be_received=60,
        message_class=0,
        sent_time=1700000000.25,
        arrived_time=1700000001.5,
        source_qm=GUID,
        transactional=True,
        destination="DIRECT=OS:host\\private$\\orders",
    )
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


messages = st.builds(
    MessageRecord,
    message_id_qm=uuids,
    message_id_ordinal=u32,
    label=st.text(max_size=250),
    body=st.binary(max_size=2048),
    correlation_id=st.one_of(st.just(b""), st.binary(min_size=20, max_size=20)),
    app_specific=u32,
    priority=st.integers(0, 7),
    delivery=st.integers(0, 1),
    acknowledge=u8,
    journal_level=st.integers(0, 3),
    admin_queue=short_text,
    response_queue=short_text,
    time_to_reach_queue=u32,
    time_to_be_received=u32,
    message_class=u16,
    sent_time=floats,
    arrived_time=floats,
    source_qm=uuids,
    transactional=st.booleans(),
    destination=short_text,
    extension=st.binary(max_size=64),
)

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
    created_at=floats,
    next_lookup_id=u64,
    depth=u64,
    bytes=u64,
)


@given(messages)
def test_message_round_trip(record: MessageRecord) -> None:
    data = encode_message(record)
    decoded = decode_message(data)
    assert decoded == record
    assert type(decoded) is MessageRecord
    assert message_accounting(data) == (record.priority, len(record.body))


@given(queues)
def test_queue_round_trip(record: QueueRecord) -> None:
    assert decode_queue(encode_queue(record)) == record


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_garbage_message_bytes_raise_only_store_corrupt(data: bytes) -> None:
    with contextlib.suppress(StoreCorrupt):
        decode_message(data)
    with contextlib.suppress(StoreCorrupt):
        message_accounting(data)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_garbage_queue_bytes_raise_only_store_corrupt(data: bytes) -> None:
    with contextlib.suppress(StoreCorrupt):
        decode_queue(data)


@settings(max_examples=100)
@given(messages, st.data())
def test_truncated_or_extended_message_is_corrupt(
    record: MessageRecord, data: st.DataObject
) -> None:
    encoded = encode_message(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(StoreCorrupt):
        decode_message(encoded[:cut])
    with pytest.raises(StoreCorrupt):
        decode_message(encoded + data.draw(st.binary(min_size=1, max_size=8)))


@settings(max_examples=100)
@given(messages, st.data())
def test_mutated_message_decodes_or_is_corrupt(record: MessageRecord, data: st.DataObject) -> None:
    encoded = bytearray(encode_message(record))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(StoreCorrupt):
        decode_message(bytes(encoded))


@settings(max_examples=100)
@given(queues, st.data())
def test_truncated_queue_is_corrupt(record: QueueRecord, data: st.DataObject) -> None:
    encoded = encode_queue(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(StoreCorrupt):
        decode_queue(encoded[:cut])


def test_every_prefix_of_a_message_is_corrupt() -> None:
    encoded = encode_message(sample_message(extension=b"ext"))
    for cut in range(len(encoded)):
        with pytest.raises(StoreCorrupt):
            decode_message(encoded[:cut])


def test_layout_offsets() -> None:
    record = sample_message(correlation_id=bytes(range(20)))
    data = encode_message(record)
    assert data[0] == 1
    assert data[1:17] == GUID.bytes
    assert struct.unpack_from(">I", data, 17)[0] == 42
    assert data[25] == 3
    assert data[29] == 0x03  # transactional, correlation id present
    assert struct.unpack_from(">d", data, 48)[0] == record.arrived_time
    assert data[72:92] == bytes(range(20))
    assert struct.unpack_from(">I", data, 104)[0] == len(record.body)
    assert data.endswith(record.body)
    assert data[108 : 108 + len("label")] == b"label"


def test_unknown_format_version_is_corrupt() -> None:
    data = bytearray(encode_message(sample_message()))
    data[0] = 2
    with pytest.raises(StoreCorrupt, match="version"):
        decode_message(bytes(data))


def test_bad_utf8_is_corrupt() -> None:
    data = bytearray(encode_message(sample_message(label="ab")))
    data[108] = 0xFF
    with pytest.raises(StoreCorrupt, match="UTF-8"):
        decode_message(bytes(data))


@pytest.mark.parametrize(
    "changes",
    [
        {"priority": 8},
        {"priority": -1},
        {"correlation_id": b"short"},
        {"label": "x" * 251},
        {"body": bytes((4 << 20) + 1)},
        {"app_specific": 1 << 32},
        {"message_class": 1 << 16},
        {"admin_queue": "x" * 70000},
    ],
)
def test_encoding_out_of_range_fields_is_invalid_record(changes: dict[str, object]) -> None:
    with pytest.raises(InvalidRecord):
        encode_message(sample_message(**changes))
    assert issubclass(InvalidRecord, ValueError)


def test_queue_record_out_of_range_is_invalid_record() -> None:
    record = QueueRecord(
        queue_id=1 << 32,
        name="q",
        display_name="q",
        kind=QueueKind.NORMAL,
        transactional=False,
        journal=False,
        quota=None,
        parent_id=None,
        journal_id=None,
        created_at=0.0,
        next_lookup_id=1,
        depth=0,
        bytes=0,
    )
    with pytest.raises(InvalidRecord):
        encode_queue(record)


def test_fast_built_records_are_ordinary_frozen_records() -> None:
    record = sample_message()
    final = finish_message(record, ordinal=9, arrived_time=5.0)
    assert type(final) is MessageRecord
    assert final == dataclasses.replace(record, message_id_ordinal=9, arrived_time=5.0)
    assert hash(final) == hash(dataclasses.replace(final))
    with pytest.raises(dataclasses.FrozenInstanceError):
        final.label = "changed"  # type: ignore[misc]
    assert encode_message_as(record, ordinal=9, arrived_time=5.0) == encode_message(final)


def test_format_message_id() -> None:
    assert format_message_id(GUID, 42) == "{6f1c2a3b-4d5e-4f60-8172-839405a6b7c8}\\42"
    assert storage.format_message_id is format_message_id
