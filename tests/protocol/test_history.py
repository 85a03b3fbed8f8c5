"""The history of non-transactional message keys (``qmgr.protocol.history``)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from qmgr.protocol.history import MessageHistory, message_keys

SOURCE = uuid.UUID("a0000000-0000-4000-8000-00000000000a").bytes
T0 = 1_700_000_000.0


def keys(count: int) -> list[bytes]:
    return [message_keys(SOURCE, number, "plain")[0] for number in range(1, count + 1)]


def test_a_key_names_the_source_the_ordinal_and_the_destination() -> None:
    key, bare = message_keys(SOURCE, 7, "Plain")
    assert bare == SOURCE + (7).to_bytes(4, "big")
    assert key[:20] == bare
    assert len(key) == 24
    assert key == message_keys(SOURCE, 7, "pLAIN")[0]  # the destination in any case
    assert key != message_keys(SOURCE, 7, "other")[0]
    assert message_keys(SOURCE, 7 + (1 << 32), "plain")[1] == bare  # the low 32 bits


def test_pending_and_persisted_keys_are_known_and_a_failure_releases_one() -> None:
    first, second = keys(2)
    history = MessageHistory((), size=10, seconds=60.0, now=T0)
    history.add_pending(first)
    history.add_pending(second)
    assert first in history
    assert (history.pending, len(history)) == (2, 0)
    history.persisted(first, T0)
    history.failed(second)
    assert first in history
    assert second not in history
    assert (history.pending, len(history)) == (0, 1)


def test_keys_from_the_store_are_known_from_the_start() -> None:
    history = MessageHistory(keys(3), size=10, seconds=60.0, now=T0)
    assert all(key in history for key in keys(3))
    assert len(history) == 3


def test_evictions_keep_the_size_and_the_age() -> None:
    stored = keys(4)
    history = MessageHistory(stored[:3], size=3, seconds=60.0, now=T0)
    assert history.evictions(T0) == (stored[0],)  # room for one more
    history.persisted(stored[3], T0 + 30)
    assert history.evictions(T0 + 61, adding=0) == (stored[1], stored[2])  # too old
    assert history.evictions(T0 + 61, adding=0) == ()
    assert list(keys(4)[3:]) == [key for key in stored if key in history]


@given(st.lists(st.integers(0, 40), max_size=120), st.integers(1, 8))
def test_the_history_never_holds_more_than_its_size(steps: list[int], size: int) -> None:
    history = MessageHistory((), size=size, seconds=1e9, now=T0)
    for number in steps:
        key = message_keys(SOURCE, number, "plain")[0]
        if key in history:
            continue
        history.add_pending(key)
        history.evictions(T0)
        history.persisted(key, T0)
        assert len(history) <= size
        assert key in history
