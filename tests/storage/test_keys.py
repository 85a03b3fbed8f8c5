"""Key codecs (``storage.keys``): order, ranges, and keys refused for their size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_kit import (
    SOURCE_A,
    SOURCE_B,
    T,
    hkey,
    priorities,
    u32s,
    u64s,
)

from storage import (
    InvalidRecord,
)
from storage.keys import (
    counters_key,
    history_key,
    incoming_key,
    message_key,
    message_range,
    outcome_time_key,
    prepared_key,
    priority_key,
    priority_range,
    setting_key,
    split_incoming_key,
    split_message_key,
    split_outcome_time_key,
    split_prepared_key,
    split_priority_key,
    xid_key,
)
from storage.ops.outcomes import milliseconds


def test_a_deadline_is_never_due_early() -> None:
    # Rounded up to the millisecond: due at or after the deadline, never before.
    from storage.keys import decode_expiry_key, expiry_key

    for deadline in (T + 0.0001, T + 0.9999, 1.0005, T + 123.4567):
        decoded = decode_expiry_key(expiry_key(deadline, 1, 1))[0]
        assert decoded >= deadline
        assert expiry_key(decoded, 1, 1) == expiry_key(deadline, 1, 1)


def test_peering_keys() -> None:
    stamp = b"\x65\x53\xf1\x00"
    assert incoming_key(SOURCE_A, 0x6553F100, "ü") == SOURCE_A + stamp + "ü".encode()
    assert split_incoming_key(SOURCE_A + stamp + "ü".encode()) == (SOURCE_A, 0x6553F100, "ü")
    assert split_incoming_key(SOURCE_A + stamp) == (SOURCE_A, 0x6553F100, "")
    assert len(incoming_key(SOURCE_A, 0xFFFFFFFF, "q" * 491)) == 511
    with pytest.raises(InvalidRecord):
        incoming_key(SOURCE_A, 1, "q" * 492)
    for stamp_value in (-1, 1 << 32):
        with pytest.raises(InvalidRecord):
            incoming_key(SOURCE_A, stamp_value, "q")
    with pytest.raises(ValueError):
        split_incoming_key(SOURCE_A + b"\x00\x00\x01")
    assert history_key(hkey(SOURCE_B, 7)) == SOURCE_B + b"\x00\x00\x00\x07"
    tagged = hkey(SOURCE_B, 7) + b"tag!"
    assert history_key(tagged) == tagged
    with pytest.raises(InvalidRecord):
        history_key(SOURCE_B)
    with pytest.raises(InvalidRecord):
        history_key(tagged + b"x")


# --------------------------------------------------------------------------- prepared transactions


xids = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)


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


@given(st.lists(st.tuples(u32s, u64s.filter(lambda n: n < 0xFFFFFFFFFFFFFFFF)), max_size=20))
def test_message_keys_sort_by_queue_then_lookup_id(pairs: list[tuple[int, int]]) -> None:
    keys = [message_key(q, lookup) for q, lookup in pairs]
    assert sorted(keys) == [message_key(q, lookup) for q, lookup in sorted(pairs)]
    for (q, lookup), key in zip(pairs, keys, strict=True):
        assert split_message_key(key) == (q, lookup)
        start, end = message_range(q)
        assert start <= key < end
        # The counters sort just past every message of the queue.
        assert key < counters_key(q) == end


@given(u32s.filter(lambda n: n < 0xFFFFFFFF))
def test_counters_key_sorts_before_the_next_queue(q: int) -> None:
    assert counters_key(q) < message_range(q + 1)[0]
    assert len(counters_key(q)) == len(message_key(q, 1)) == 13


@given(st.lists(st.tuples(u32s, priorities, u64s), max_size=20))
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
