"""OutgoingSequence (``qmgr.protocol.outgoing``): forgetting acknowledged entries and rolling
the sequence when the store's queue is left empty (the rest: ``test_outgoing``)."""

from __future__ import annotations

import pytest

import wire
from qmgr.protocol import EntryKind, OutgoingSequence, SequenceError

from .outgoing_kit import SEQ, SEQ2, T0, TX, drain, numbers, roll_pending, sequence

# --------------------------------------------------------------------------
# Forgetting and rolling
# --------------------------------------------------------------------------


def test_a_forget_covering_every_entry_holds_transactional_sends_until_its_result() -> None:
    machine = sequence(TX, TX)
    drain(machine)
    machine.forget_started(machine.order_ack(SEQ, 2, T0))
    assert roll_pending(machine)
    machine.add(3, TX)
    machine.add(4, EntryKind.EXPRESS)
    machine.add(5, TX)
    assert [t.lookup_id for t in drain(machine)] == [4]  # other kinds are not held
    machine.forgotten((1, 2), SEQ2, 2)  # the store wrote it before 3 committed: rolled
    assert not roll_pending(machine)
    assert (machine.sequence_id, machine.base) == (SEQ2, 2)
    sent = drain(machine)
    assert numbers(sent) == [(3, 1, 0), (5, 3, 1)]
    assert all(t.header is not None and t.header.sequence_id == SEQ2 for t in sent)


def test_a_forget_whose_store_write_found_new_entries_keeps_the_sequence() -> None:
    machine = sequence(TX)
    drain(machine)
    machine.forget_started(machine.order_ack(SEQ, 1, T0))
    machine.add(2, TX)
    assert drain(machine) == []
    machine.forgotten((1,), SEQ, 0)
    assert numbers(drain(machine)) == [(2, 2, 0)]


def forgetting_one_of_two() -> OutgoingSequence:
    """Two transactional entries sent, the first order-acked and being forgotten: the
    second keeps the table from emptying, so no roll is pending."""
    machine = sequence(TX, TX)
    drain(machine)
    machine.forget_started(machine.order_ack(SEQ, 1, T0))
    assert not roll_pending(machine)
    return machine


def test_a_forget_that_leaves_an_entry_behind_holds_nothing() -> None:
    machine = forgetting_one_of_two()
    machine.add(3, TX)
    assert numbers(drain(machine)) == [(3, 3, 2)]


def test_a_removal_that_leaves_only_entries_being_forgotten_makes_the_roll_pending() -> None:
    machine = forgetting_one_of_two()
    machine.removed([2])
    assert roll_pending(machine)
    machine.add(3, TX)
    assert drain(machine) == []


def test_a_forget_in_an_empty_table_makes_the_roll_pending_too() -> None:
    machine = OutgoingSequence(sequence_id=SEQ, base=0)
    machine.forget_started(())
    machine.add(1, TX)
    assert drain(machine) == []
    machine.forgotten((), SEQ2, 0)
    assert numbers(drain(machine)) == [(1, 1, 0)]


def test_a_roll_stays_pending_until_every_flagged_forget_reported() -> None:
    machine = sequence(EntryKind.EXPRESS, EntryKind.EXPRESS)
    drain(machine)
    machine.forget_started(machine.session_acked(1, persisted=False))
    machine.forget_started(machine.session_acked(2, persisted=False))
    machine.add(3, TX)
    machine.forgotten((1,), SEQ, 0)
    assert roll_pending(machine)  # the forget of 2 may still empty the queue
    assert drain(machine) == []
    machine.forgotten((2,), SEQ, 0)
    assert numbers(drain(machine)) == [(3, 3, 0)]


def test_a_failed_forget_settles_the_roll_and_its_entries_stay_done() -> None:
    machine = sequence(TX, EntryKind.EXPRESS)
    drain(machine)
    ids = machine.order_ack(SEQ, 1, T0) + machine.session_acked(2, persisted=False)
    machine.forget_started(ids)
    machine.add(3, TX)
    machine.forget_failed(ids)
    assert not roll_pending(machine)
    machine.connection_lost()
    assert [t.lookup_id for t in drain(machine)] == [3]  # 1 and 2 are not resent
    assert machine.waiting == 0
    machine.forget_started(ids)  # and can be forgotten again
    machine.forgotten(ids, SEQ, 0)
    assert len(machine) == 1


def test_forget_calls_are_checked() -> None:
    machine = sequence(TX, TX, TX)
    drain(machine)
    ids = machine.order_ack(SEQ, 2, T0)
    with pytest.raises(SequenceError, match="repeated"):
        machine.forget_started((1, 1))
    with pytest.raises(SequenceError, match="never added"):
        machine.forget_started((4,))
    machine.forget_started(ids)
    with pytest.raises(SequenceError, match="already being forgotten"):
        machine.forget_started((2,))
    with pytest.raises(SequenceError, match="part of a forget"):
        machine.forgotten((1,), SEQ, 0)
    with pytest.raises(SequenceError, match="no forget"):
        machine.forget_failed((1,))
    assert len(machine) == 3  # nothing changed


def test_the_reported_sequence_state_never_goes_backwards() -> None:
    machine = OutgoingSequence(sequence_id=SEQ2, base=10)
    machine.add(11, TX)
    older = wire.TxSequenceId(ordinal=1, timestamp=SEQ.timestamp)
    with pytest.raises(SequenceError, match="cannot go"):
        machine.forgotten((), older, 10)
    with pytest.raises(SequenceError, match="cannot go"):
        machine.forgotten((), SEQ2, 11)
    third = wire.TxSequenceId(ordinal=3, timestamp=SEQ.timestamp)
    with pytest.raises(SequenceError, match="cannot go"):
        machine.forgotten((), third, 9)
    assert (machine.sequence_id, machine.base, len(machine)) == (SEQ2, 10, 1)


def test_a_forget_whose_result_comes_after_a_later_rolling_one_only_ends() -> None:
    # Two forgets written in order (the second emptied the queue and rolled it);
    # their results handled in the other order.
    machine = sequence(TX, TX)
    drain(machine)
    first = machine.order_ack(SEQ, 1, T0)
    machine.forget_started(first)
    second = machine.order_ack(SEQ, 2, T0)
    machine.forget_started(second)
    machine.forgotten(second, SEQ2, 2)
    machine.forgotten(first, SEQ, 0)
    assert (machine.sequence_id, machine.base, len(machine)) == (SEQ2, 2, 0)
    assert not roll_pending(machine)
    machine.add(3, TX)
    assert numbers(drain(machine)) == [(3, 1, 0)]
    # Only for a forget in flight: the same result again is refused.
    with pytest.raises(SequenceError, match="cannot go"):
        machine.forgotten(first, SEQ, 0)


def test_a_roll_drops_entries_the_store_no_longer_has() -> None:
    # The result of a rolling forget arrives before the purge that emptied the
    # store was reported: entries at or below the new base are gone.
    machine = sequence(TX, TX, TX)
    drain(machine)
    machine.forget_started(machine.order_ack(SEQ, 1, T0))
    machine.forgotten((1,), SEQ2, 3)
    assert len(machine) == 0
    machine.removed([2, 3])  # the late report changes nothing
    machine.add(4, TX)
    assert numbers(drain(machine)) == [(4, 1, 0)]


def test_forgotten_without_a_forget_started_is_accepted() -> None:
    machine = sequence(EntryKind.RECOVERABLE, TX)
    machine.forgotten((1,), SEQ, 0)
    assert len(machine) == 1
    assert numbers(drain(machine)) == [(2, 2, 0)]


def test_removed_is_checked_and_ignores_what_is_gone() -> None:
    machine = sequence(TX, TX)
    machine.removed([1])
    machine.removed([1])
    with pytest.raises(SequenceError, match="never added"):
        machine.removed([3])
    assert len(machine) == 1
