"""OutgoingSequence, the EOD sender of one outgoing queue, one rule at a time (forgetting and
rolling: ``test_outgoing_forgets``)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from qmgr.protocol import (
    MAX_SEQUENCE_NUMBER,
    RESEND_INTERVALS,
    EntryKind,
    OutgoingSequence,
    SequenceError,
    Transmission,
)

from .outgoing_kit import OTHER_QUEUE, SEQ, SEQ2, T0, TX, drain, numbers, sequence

# --------------------------------------------------------------------------
# Numbering
# --------------------------------------------------------------------------


def test_a_transactional_entry_is_numbered_lookup_id_minus_base_after_the_previous_one() -> None:
    machine = sequence(TX, TX, TX, base=10)
    sent = drain(machine)
    assert numbers(sent) == [(11, 1, 0), (12, 2, 1), (13, 3, 2)]
    assert all(t.header is not None and t.header.sequence_id == SEQ for t in sent)
    assert all(t.header is not None and t.header.flags == 0 for t in sent)


def test_other_kinds_have_no_header_and_leave_gaps_the_previous_number_bridges() -> None:
    kinds = (TX, EntryKind.EXPRESS, EntryKind.RECOVERABLE, EntryKind.RELAYED, TX)
    sent = drain(sequence(*kinds))
    assert [t.kind for t in sent] == list(kinds)
    assert [t.header is None for t in sent] == [False, True, True, True, False]
    assert numbers([sent[0], sent[4]]) == [(1, 1, 0), (5, 5, 1)]


def test_the_first_entry_in_the_table_has_previous_zero_whatever_its_number() -> None:
    machine = sequence(TX, TX, first=41)
    assert numbers(drain(machine)) == [(41, 41, 0), (42, 42, 41)]


def test_entries_go_out_in_lookup_order_and_once_per_connection() -> None:
    machine = sequence(TX, EntryKind.EXPRESS, TX)
    assert [t.lookup_id for t in drain(machine)] == [1, 2, 3]
    assert machine.next_transmission(T0) is None
    machine.add(4, EntryKind.RECOVERABLE)
    assert [t.lookup_id for t in drain(machine)] == [4]


def test_lookup_ids_must_increase_and_exceed_the_base() -> None:
    machine = sequence(TX, TX, base=5)
    with pytest.raises(SequenceError, match="must increase"):
        machine.add(7, TX)
    with pytest.raises(SequenceError, match="must increase"):
        OutgoingSequence(sequence_id=SEQ, base=5).add(5, TX)


def test_a_number_beyond_the_u32_range_is_refused() -> None:
    machine = OutgoingSequence(sequence_id=SEQ, base=0)
    machine.add(MAX_SEQUENCE_NUMBER, TX)
    machine.add(MAX_SEQUENCE_NUMBER + 1, TX)
    first = machine.next_transmission(T0)
    assert first is not None
    assert numbers([first]) == [(MAX_SEQUENCE_NUMBER, MAX_SEQUENCE_NUMBER, 0)]
    with pytest.raises(SequenceError, match="would be number"):
        machine.next_transmission(T0)


def test_construction_is_checked() -> None:
    with pytest.raises(SequenceError):
        OutgoingSequence(sequence_id=SEQ, base=-1)
    with pytest.raises(SequenceError):
        OutgoingSequence(sequence_id=SEQ, base=0, resend_intervals=())
    with pytest.raises(SequenceError):
        OutgoingSequence(sequence_id=SEQ, base=0, resend_intervals=(30.0, 0.0))


def test_transmissions_are_values() -> None:
    transmission = drain(sequence(EntryKind.EXPRESS))[0]
    assert transmission == Transmission(1, EntryKind.EXPRESS, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        transmission.lookup_id = 2  # type: ignore[misc]


# --------------------------------------------------------------------------
# Resending keeps numbers and bridges what left the table
# --------------------------------------------------------------------------


def test_a_resend_keeps_numbers_and_skips_order_acked_entries_for_previous() -> None:
    machine = sequence(TX, TX, TX)
    drain(machine)
    assert machine.order_ack(SEQ, 1, T0) == (1,)
    machine.connection_lost()
    # 1 is done at the receiver (it is being forgotten): 2 now follows nothing.
    assert numbers(drain(machine)) == [(2, 2, 0), (3, 3, 2)]


def test_a_resend_bridges_removed_entries() -> None:
    machine = sequence(TX, TX, TX, TX)
    drain(machine)
    machine.removed([2, 3])
    machine.connection_lost()
    assert numbers(drain(machine)) == [(1, 1, 0), (4, 4, 1)]


def test_a_first_transmission_after_a_purge_bridges_too() -> None:
    machine = sequence(TX, TX, TX)
    machine.removed([1, 2])
    assert numbers(drain(machine)) == [(3, 3, 0)]


def test_an_entry_forgotten_without_acknowledgement_is_bridged_and_never_sent() -> None:
    machine = sequence(TX, TX, TX)
    machine.forget_started([2])  # e.g. the adapter could not build its packet
    assert numbers(drain(machine)) == [(1, 1, 0), (3, 3, 1)]


def test_connection_lost_resends_everything_not_acknowledged() -> None:
    machine = sequence(TX, EntryKind.EXPRESS, EntryKind.RECOVERABLE, TX)
    drain(machine)
    assert machine.session_acked(2, persisted=False) == (2,)
    assert machine.waiting == 0
    assert machine.unacknowledged == 4
    machine.connection_lost()
    assert machine.waiting == 3
    assert [t.lookup_id for t in drain(machine)] == [1, 3, 4]


# --------------------------------------------------------------------------
# Acknowledgements
# --------------------------------------------------------------------------


def test_session_acks_end_express_at_once_and_recoverable_or_relayed_when_persisted() -> None:
    machine = sequence(EntryKind.EXPRESS, EntryKind.RECOVERABLE, EntryKind.RELAYED, TX)
    drain(machine)
    assert machine.session_acked(1, persisted=False) == (1,)
    assert machine.session_acked(2, persisted=False) == ()
    assert machine.session_acked(3, persisted=False) == ()
    assert machine.session_acked(2, persisted=True) == (2,)
    assert machine.session_acked(3, persisted=True) == (3,)
    assert machine.session_acked(2, persisted=True) == ()  # never twice


def test_a_session_ack_never_ends_a_transactional_entry() -> None:
    machine = sequence(TX)
    drain(machine)
    assert machine.session_acked(1, persisted=True) == ()
    machine.connection_lost()
    assert [t.lookup_id for t in drain(machine)] == [1]


def test_acks_of_forgotten_entries_are_ignored_and_of_unknown_ones_refused() -> None:
    machine = sequence(EntryKind.EXPRESS, EntryKind.EXPRESS)
    drain(machine)
    machine.forgotten((1,), SEQ, 0)
    assert machine.session_acked(1, persisted=True) == ()
    with pytest.raises(SequenceError, match="never added"):
        machine.session_acked(3, persisted=True)


def test_an_order_ack_ends_the_transactional_entries_it_covers_once() -> None:
    machine = sequence(TX, EntryKind.EXPRESS, TX, TX, base=100)
    drain(machine)
    assert machine.order_ack(SEQ, 3, T0 + 1) == (101, 103)
    assert machine.order_ack(SEQ, 3, T0 + 2) == ()
    assert machine.last_order_ack == 3
    assert machine.last_order_ack_time == T0 + 2
    assert machine.order_ack(SEQ, 1, T0 + 3) == ()  # an older mark changes nothing
    assert machine.last_order_ack == 3
    assert machine.order_ack(SEQ, 4, T0 + 4) == (104,)


def test_an_order_ack_also_ends_entries_waiting_to_be_resent() -> None:
    machine = sequence(TX, TX)
    drain(machine)
    machine.connection_lost()
    assert machine.order_ack(SEQ, 2, T0) == (1, 2)
    assert drain(machine) == []


def test_order_acks_of_another_sequence_are_ignored() -> None:
    machine = sequence(TX, TX)
    drain(machine)
    wire_older = wire.TxSequenceId(ordinal=0, timestamp=SEQ.timestamp)
    for sequence_id in (wire_older, SEQ2, OTHER_QUEUE):
        assert machine.order_ack(sequence_id, 2, T0) == ()
    assert machine.last_order_ack == 0
    assert machine.last_order_ack_time is None


def test_an_order_ack_past_every_number_sent_is_refused_and_changes_nothing() -> None:
    machine = sequence(TX, TX, TX, base=100)
    assert machine.sent_number == 0
    assert machine.order_ack(SEQ, 1, T0) is None  # nothing went out: no receiver has any
    assert machine.waiting == 3
    [first] = [t.lookup_id for t in drain(machine)][:1]
    assert (first, machine.sent_number) == (101, 3)
    assert machine.order_ack(SEQ, 4, T0 + 1) is None
    assert (machine.last_order_ack, machine.last_order_ack_time) == (0, None)
    assert machine.order_ack(SEQ, 3, T0 + 2) == (101, 102, 103)


def test_after_a_restart_an_order_ack_may_cover_what_an_earlier_run_sent() -> None:
    """Entries in the store at start may have gone out before: their OrderAck counts."""
    machine = OutgoingSequence(sequence_id=SEQ, base=100, sent_before=103)
    for lookup_id in (101, 102, 103):
        machine.add(lookup_id, TX)
    assert machine.sent_number == 2
    assert machine.order_ack(SEQ, 3, T0) is None
    assert machine.order_ack(SEQ, 2, T0) == (101, 102)


def test_after_a_roll_order_acks_of_the_old_sequence_are_ignored() -> None:
    machine = sequence(TX)
    drain(machine)
    machine.forget_started(machine.order_ack(SEQ, 1, T0))
    machine.add(2, TX)
    machine.forgotten((1,), SEQ2, 1)
    assert machine.sequence_id == SEQ2
    assert machine.last_order_ack == 0
    sent = drain(machine)
    assert numbers(sent) == [(2, 1, 0)]
    assert machine.order_ack(SEQ, 5, T0) == ()
    assert machine.order_ack(SEQ2, 1, T0) == (2,)


# --------------------------------------------------------------------------
# The Transactional Ack Wait timer and its backoff
# --------------------------------------------------------------------------


def test_the_ack_wait_starts_with_the_first_transactional_transmission() -> None:
    machine = sequence(EntryKind.EXPRESS, TX, TX)
    assert machine.next_deadline() is None
    machine.next_transmission(T0)
    assert machine.next_deadline() is None  # express waits for no OrderAck
    machine.next_transmission(T0 + 1)
    machine.next_transmission(T0 + 2)
    assert machine.next_deadline() == T0 + 1 + RESEND_INTERVALS[0]


def test_a_timeout_resends_every_sent_transactional_entry_and_advances_the_backoff() -> None:
    machine = sequence(TX, EntryKind.RECOVERABLE, TX)
    drain(machine)
    deadline = machine.next_deadline()
    assert deadline == T0 + 30
    machine.timer(deadline - 0.001)
    assert machine.waiting == 0
    machine.timer(deadline)
    assert machine.resend_index == 1
    assert machine.next_deadline() is None  # until they are sent again
    resent = drain(machine, deadline)
    assert numbers(resent) == [(1, 1, 0), (3, 3, 1)]  # not the recoverable one
    assert machine.next_deadline() == deadline + 30


def test_timeouts_without_progress_walk_the_intervals_and_stop_at_the_last() -> None:
    machine = sequence(TX)
    now = T0
    seen = []
    for _ in range(len(RESEND_INTERVALS) + 2):
        drain(machine, now)
        deadline = machine.next_deadline()
        assert deadline is not None
        seen.append(deadline - now)
        now = deadline
        machine.timer(now)
    assert seen == [*RESEND_INTERVALS, RESEND_INTERVALS[-1], RESEND_INTERVALS[-1]]
    assert machine.resend_index == len(RESEND_INTERVALS) - 1


def test_progress_resets_the_backoff_and_restarts_the_wait() -> None:
    machine = sequence(TX, TX, TX)
    now = T0
    for _ in range(3):
        drain(machine, now)
        now = machine.next_deadline() or now
        machine.timer(now)
    assert machine.resend_index == 3
    drain(machine, now)
    assert machine.order_ack(SEQ, 1, now + 5) == (1,)
    assert machine.resend_index == 0
    assert machine.next_deadline() == now + 5 + RESEND_INTERVALS[0]


def test_an_order_ack_without_progress_neither_resets_nor_advances_the_backoff() -> None:
    machine = sequence(TX, TX)
    drain(machine)
    machine.timer(T0 + 30)
    drain(machine, T0 + 30)
    assert machine.order_ack(SEQ, 0, T0 + 40) == ()  # a re-announcement of nothing
    assert machine.resend_index == 1
    assert machine.next_deadline() == T0 + 60


def test_the_backoff_resets_when_no_transactional_entry_is_left() -> None:
    machine = sequence(TX, TX)
    drain(machine)
    machine.timer(T0 + 30)
    assert machine.resend_index == 1
    machine.removed([1, 2])
    assert machine.resend_index == 0
    assert machine.next_deadline() is None


def test_the_wait_ends_when_nothing_transactional_is_sent() -> None:
    machine = sequence(TX, TX)
    drain(machine)
    machine.order_ack(SEQ, 2, T0 + 1)
    assert machine.next_deadline() is None
    machine.add(3, TX)
    drain(machine, T0 + 50)
    assert machine.next_deadline() == T0 + 80
    machine.connection_lost()
    assert machine.next_deadline() is None


def test_custom_resend_intervals() -> None:
    machine = OutgoingSequence(sequence_id=SEQ, base=0, resend_intervals=(1, 5))
    machine.add(1, TX)
    drain(machine)
    assert machine.next_deadline() == T0 + 1
    machine.timer(T0 + 1)
    drain(machine, T0 + 1)
    assert machine.next_deadline() == T0 + 6


# --------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------


def test_status_counts() -> None:
    machine = sequence(TX, EntryKind.EXPRESS, TX, base=4)
    assert (len(machine), machine.waiting, machine.unacknowledged) == (3, 3, 0)
    assert machine.next_number == 4
    machine.next_transmission(T0)
    assert (machine.waiting, machine.unacknowledged) == (2, 1)
    machine.forget_started(machine.order_ack(SEQ, 1, T0))
    assert (len(machine), machine.waiting, machine.unacknowledged) == (3, 2, 1)
    machine.forgotten((5,), SEQ, 4)
    assert (len(machine), machine.waiting, machine.unacknowledged) == (2, 2, 0)


def test_what_went_out_on_a_closed_session_or_an_earlier_run_is_unacknowledged() -> None:
    """``waiting`` counts what never went out; what waits to go *again* (sent on a
    session that closed, or perhaps by an earlier run) is unacknowledged: the
    receiver may hold it, so an address cannot be moved while any is counted."""
    machine = sequence(TX, TX, TX)
    machine.next_transmission(T0)
    machine.next_transmission(T0)
    machine.connection_lost()
    assert (machine.waiting, machine.never_sent_waiting, machine.unacknowledged) == (3, 1, 2)
    restarted = OutgoingSequence(sequence_id=SEQ, base=0, sent_before=3)
    for lookup_id in (1, 2, 3):
        restarted.add(lookup_id, TX)
    assert (restarted.never_sent_waiting, restarted.unacknowledged) == (1, 2)
    restarted.next_transmission(T0)  # 1 goes again: still unacknowledged, once
    assert (restarted.never_sent_waiting, restarted.unacknowledged) == (1, 2)


def test_next_number_starts_at_one_and_after_a_roll() -> None:
    machine = OutgoingSequence(sequence_id=SEQ, base=7)
    assert machine.next_number == 1
    machine.add(9, EntryKind.EXPRESS)
    assert machine.next_number == 3
    machine.forgotten((9,), SEQ2, 9)
    assert machine.next_number == 1


# --------------------------------------------------------------------------
# Properties over random use
# --------------------------------------------------------------------------

actions = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "send", "session_ack", "order_ack", "forget", "lost", "timer", "remove"]
        ),
        st.integers(0, 40),
        st.sampled_from(list(EntryKind)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(actions)
def test_headers_and_counts_stay_consistent_under_any_use(
    steps: list[tuple[str, int, EntryKind]],
) -> None:
    """Numbers are lookup - base, previous is the nearest earlier live entry, counts add up."""
    machine = OutgoingSequence(sequence_id=SEQ, base=0, resend_intervals=(10.0, 20.0))
    kinds: dict[int, EntryKind] = {}
    gone: set[int] = set()  # forgotten, removed, or ended (never counts again)
    sent_tx: set[int] = set()  # TRANSACTIONAL entries that went out
    next_id, now = 1, T0
    for action, value, kind in steps:
        now += 1
        if action == "add":
            machine.add(next_id, kind)
            kinds[next_id] = kind
            next_id += 1
        elif action == "send":
            transmission = machine.next_transmission(now)
            if transmission is not None and transmission.header is not None:
                header = transmission.header
                lookup_id = transmission.lookup_id
                live_before = [
                    i for i in kinds if i < lookup_id and kinds[i] is TX and i not in gone
                ]
                assert header.sequence_number == lookup_id
                sent_tx.add(lookup_id)
                assert header.previous_sequence_number == max(live_before, default=0)
        elif action == "session_ack" and value < next_id:
            ended = machine.session_acked(value, persisted=value % 2 == 0)
            assert all(kinds[i] is not TX for i in ended)
            gone.update(ended)
        elif action == "order_ack":
            result = machine.order_ack(SEQ, value, now)
            if value > max(sent_tx, default=0):
                assert result is None  # past every number that went out: nothing ends
            else:
                assert result is not None
                assert all(kinds[i] is TX and i <= value for i in result)
                gone.update(result)
        elif action == "forget" and value in kinds:
            machine.forget_started((value,))
            gone.add(value)
            machine.forgotten((value,), SEQ, 0)
            del kinds[value]
        elif action == "lost":
            machine.connection_lost()
        elif action == "timer":
            machine.timer(now + value)
        elif action == "remove" and value < next_id:
            machine.removed((value,))
            kinds.pop(value, None)
            gone.add(value)
        assert machine.never_sent_waiting + machine.unacknowledged == len(machine) == len(kinds)
        assert machine.never_sent_waiting <= machine.waiting
        assert 0 <= machine.resend_index < 2
