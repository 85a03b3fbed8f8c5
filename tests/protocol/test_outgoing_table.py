"""The sender's entry table (``qmgr.protocol.outgoing_table``): each entry's life and
the indexes kept in step with it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmgr.protocol import EntryKind
from qmgr.protocol.outgoing_table import LIVE, TRANSITIONS, EntryTable, Event, State

TX = EntryKind.TRANSACTIONAL
PLAIN = EntryKind.RECOVERABLE


def table_of(*kinds: EntryKind, base: int = 0) -> EntryTable:
    table = EntryTable(base)
    for offset, kind in enumerate(kinds, start=1):
        table.add(base + offset, kind)
    return table


def test_the_life_of_an_entry() -> None:
    assert TRANSITIONS[Event.TRANSMIT] == {State.WAITING: State.SENT}
    assert TRANSITIONS[Event.UNSEND] == {State.SENT: State.WAITING}
    assert set(TRANSITIONS[Event.ACK]) == LIVE
    assert set(TRANSITIONS[Event.FORGET_START]) == {State.WAITING, State.SENT, State.DONE}
    assert TRANSITIONS[Event.FORGET_FAIL] == {State.FORGETTING: State.DONE}
    with pytest.raises(AssertionError, match="no transition for UNSEND in WAITING"):
        table_of(TX).move(table_of(TX).entries[1], Event.UNSEND)


def test_waiting_entries_come_out_in_lookup_order_by_kind() -> None:
    table = table_of(PLAIN, TX, PLAIN, TX, base=10)
    assert table.first_waiting(transactional=True) == 12
    assert table.first_waiting(transactional=False) == 11
    sent = table.transmit(12)
    assert (sent.state, sent.transmitted) == (State.SENT, True)
    assert table.first_waiting(transactional=True) == 14
    table.unsend(sent)
    assert table.first_waiting(transactional=True) == 12
    assert (table.waiting, table.sent_tx, table.highest) == (4, 0, 14)


def test_live_transactional_entries_are_cut_by_an_order_ack() -> None:
    table = table_of(TX, PLAIN, TX, TX)
    assert table.live_tx == [1, 3, 4]
    table.transmit(1)
    assert table.end_live_through(3) == (1, 3)
    assert table.live_tx == [4]
    assert table.entries[1].state is table.entries[3].state is State.DONE
    assert table.sent_tx == 0


def test_dropped_entries_leave_every_index() -> None:
    table = table_of(TX, TX, PLAIN, TX)
    table.move(table.entries[2], Event.FORGET_START)
    table.unlive({2})  # as the sequence does when a live entry starts being forgotten
    assert table.is_forgetting(2)
    assert table.live_tx == [1, 4]
    table.drop([1, 2, 3, 99])
    assert (len(table), table.tx_count, table.forgetting, table.waiting) == (1, 1, 0, 1)
    assert table.live_tx == [4]
    assert table.first_waiting(transactional=False) is None


@given(st.sets(st.integers(1, 40)))
def test_unlive_keeps_the_live_list_sorted_whatever_it_takes(gone: set[int]) -> None:
    table = table_of(*[TX] * 40)
    table.unlive(gone)
    assert table.live_tx == [i for i in range(1, 41) if i not in gone]
