"""IncomingSequences, the EOD receiver of every stream, one rule at a time."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from qmgr.protocol import IncomingSequences, OrderAckDue, SequenceError, StreamKey, StreamState

SEQ = wire.TxSequenceId(ordinal=1, timestamp=1_700_000_000)
SEQ2 = wire.TxSequenceId(ordinal=2, timestamp=1_700_000_000)
SEQ3 = wire.TxSequenceId(ordinal=3, timestamp=1_700_000_000)
#: A sequence of another outgoing queue of the same source (an older timestamp).
OLDER = wire.TxSequenceId(ordinal=9, timestamp=1_600_000_000)
#: ... and of one created after SEQ's (a newer timestamp).
NEWER = wire.TxSequenceId(ordinal=1, timestamp=1_800_000_000)
SOURCE = bytes(range(16))
KEY: StreamKey = ("private$\\orders", SOURCE, SEQ.timestamp)
OLDER_KEY: StreamKey = ("private$\\orders", SOURCE, OLDER.timestamp)
NEWER_KEY: StreamKey = ("private$\\orders", SOURCE, NEWER.timestamp)
OTHER_SOURCE: StreamKey = ("private$\\orders", bytes(range(1, 17)), SEQ.timestamp)
OTHER_QUEUE: StreamKey = ("private$\\invoices", SOURCE, SEQ.timestamp)
T0 = 1_000.0


def header(
    number: int, previous: int, sequence_id: wire.TxSequenceId = SEQ
) -> wire.TransactionHeader:
    return wire.TransactionHeader(
        sequence_id=sequence_id, sequence_number=number, previous_sequence_number=previous
    )


def mark(state: StreamState | None) -> tuple[int, int] | None:
    return None if state is None else (state.sequence_id, state.last_number)


def at(number: int, sequence_id: wire.TxSequenceId = SEQ) -> tuple[int, int]:
    return (sequence_id.value, number)


def stored(
    number: int,
    sequence_id: wire.TxSequenceId = SEQ,
    *,
    max_streams: int | None = None,
    max_unannounced: int = 1024,
) -> IncomingSequences:
    """A receiver whose stream ``KEY`` has everything up to ``number`` durable."""
    state = StreamState(sequence_id.value, number, 0, T0)
    return IncomingSequences({KEY: state}, max_streams=max_streams, max_unannounced=max_unannounced)


def deliver(
    incoming: IncomingSequences,
    number: int,
    previous: int,
    sequence_id: wire.TxSequenceId = SEQ,
    now: float = T0,
    key: StreamKey = KEY,
) -> bool:
    """Present a message and, if accepted, report it durable at once."""
    accepted = incoming.accept(key, header(number, previous, sequence_id), now)
    if accepted:
        incoming.persisted(key, sequence_id, number, now)
    return accepted


# --------------------------------------------------------------------------
# The acceptance rule
# --------------------------------------------------------------------------


def test_a_new_stream_starts_with_a_message_whose_previous_is_zero() -> None:
    incoming = IncomingSequences()
    assert not incoming.accept(KEY, header(5, 4), T0)
    assert incoming.streams() == []  # a rejected stranger leaves no state
    assert incoming.accept(KEY, header(5, 0), T0)
    assert mark(incoming.accepted_state(KEY)) == at(5)


def test_in_order_messages_are_accepted_and_gaps_are_bridged_by_previous() -> None:
    incoming = stored(3)
    assert incoming.accept(KEY, header(4, 3), T0)
    assert incoming.accept(KEY, header(9, 2), T0)  # previous <= last: 5..8 are gone
    assert mark(incoming.accepted_state(KEY)) == at(9)


def test_duplicates_and_out_of_order_messages_are_rejected() -> None:
    incoming = stored(3)
    assert not incoming.accept(KEY, header(3, 2), T0)  # duplicate
    assert not incoming.accept(KEY, header(2, 1), T0)  # older duplicate
    assert not incoming.accept(KEY, header(5, 4), T0)  # 4 is missing
    assert not incoming.accept(KEY, header(0, 0), T0)  # numbers start at 1
    assert mark(incoming.accepted_state(KEY)) == at(3)


def test_the_state_changes_only_on_accept() -> None:
    # The errata: a reject that updated the state would make 4 (the message
    # the receiver needs) a reject and 6 an accept, losing 4 and 5.
    incoming = stored(3)
    assert not incoming.accept(KEY, header(6, 5), T0)
    assert not incoming.accept(KEY, header(7, 6, SEQ2), T0)
    assert mark(incoming.accepted_state(KEY)) == at(3)
    assert incoming.accept(KEY, header(4, 3), T0)
    assert not incoming.accept(KEY, header(6, 5), T0)
    assert incoming.accept(KEY, header(5, 4), T0)


def test_a_new_sequence_is_accepted_only_from_nothing() -> None:
    incoming = stored(7)
    assert not incoming.accept(KEY, header(1, 1, SEQ2), T0)
    assert not incoming.accept(KEY, header(2, 1, SEQ2), T0)
    assert incoming.accept(KEY, header(2, 0, SEQ2), T0)
    assert mark(incoming.accepted_state(KEY)) == at(2, SEQ2)


def test_messages_of_an_older_sequence_are_rejected() -> None:
    # An older ordinal of the same timestamp: the same outgoing queue, rolled since.
    incoming = stored(2, SEQ2)
    assert not incoming.accept(KEY, header(9, 0, SEQ), T0)
    assert not incoming.accept(KEY, header(1, 0, SEQ), T0)
    assert incoming.accept(KEY, header(1, 0, SEQ3), T0)
    assert mark(incoming.accepted_state(KEY)) == at(1, SEQ3)


def test_two_sequences_of_one_source_to_one_queue_are_two_streams() -> None:
    # One source reaching one queue under two names: two outgoing queues, two
    # timestamps. The newer must not shut the older out (nor the reverse).
    incoming = stored(2, SEQ)
    assert deliver(incoming, 1, 0, NEWER, key=NEWER_KEY)
    assert deliver(incoming, 3, 2, SEQ, key=KEY)
    assert deliver(incoming, 1, 0, OLDER, key=OLDER_KEY)
    assert deliver(incoming, 2, 1, NEWER, key=NEWER_KEY)
    assert deliver(incoming, 4, 3, SEQ, key=KEY)
    assert deliver(incoming, 2, 1, OLDER, key=OLDER_KEY)
    assert [(key, (state.sequence_id, state.last_number)) for key, state in incoming.streams()] == [
        (OLDER_KEY, at(2, OLDER)),
        (KEY, at(4)),
        (NEWER_KEY, at(2, NEWER)),
    ]


def test_each_stream_keeps_the_rule_within_it() -> None:
    incoming = stored(3, SEQ)
    assert deliver(incoming, 1, 0, NEWER, key=NEWER_KEY)
    # Each stream in order, independently: duplicates and gaps are its own.
    assert not deliver(incoming, 1, 0, NEWER, key=NEWER_KEY)
    assert not deliver(incoming, 3, 2, SEQ, key=KEY)
    assert not deliver(incoming, 6, 5, SEQ, key=KEY)
    assert not deliver(incoming, 3, 2, NEWER, key=NEWER_KEY)
    assert deliver(incoming, 4, 3, SEQ, key=KEY)
    assert deliver(incoming, 2, 1, NEWER, key=NEWER_KEY)
    # A new ordinal of one timestamp still needs previous == 0 and a higher value.
    assert not deliver(incoming, 1, 1, SEQ2, key=KEY)
    assert deliver(incoming, 1, 0, SEQ2, key=KEY)
    assert not deliver(incoming, 5, 0, SEQ, key=KEY)
    assert mark(incoming.state(KEY)) == at(1, SEQ2)
    assert mark(incoming.state(NEWER_KEY)) == at(2, NEWER)


def test_each_stream_has_its_own_order_ack() -> None:
    incoming = stored(0)
    deliver(incoming, 1, 0, SEQ, now=T0)
    deliver(incoming, 1, 0, NEWER, now=T0, key=NEWER_KEY)
    deliver(incoming, 2, 1, NEWER, now=T0, key=NEWER_KEY)
    assert incoming.due(T0 + 1) == [OrderAckDue(KEY, SEQ, 1), OrderAckDue(NEWER_KEY, NEWER, 2)]


def test_a_stream_key_names_the_timestamp_of_its_messages() -> None:
    incoming = stored(3)
    with pytest.raises(SequenceError, match="does not hold"):
        incoming.accept(KEY, header(1, 0, NEWER), T0)
    with pytest.raises(SequenceError, match="invalid state"):
        IncomingSequences({KEY: StreamState(NEWER.value, 1, 0, T0)})
    assert mark(incoming.accepted_state(KEY)) == at(3)


def test_reject_count_counts_rejects_since_the_last_accept() -> None:
    incoming = stored(3)
    for now in (T0 + 1, T0 + 2):
        assert not incoming.accept(KEY, header(3, 2), now)
    state = incoming.state(KEY)
    assert state is not None
    assert (state.reject_count, state.last_access) == (2, T0 + 2)
    assert incoming.accept(KEY, header(4, 3), T0 + 3)
    accepted = incoming.accepted_state(KEY)
    assert accepted is not None
    assert (accepted.reject_count, accepted.last_access) == (0, T0 + 3)


def test_streams_are_kept_apart_by_queue_and_source() -> None:
    incoming = stored(3)
    for key in (OTHER_SOURCE, OTHER_QUEUE):
        assert not incoming.accept(key, header(4, 3), T0)
        assert incoming.accept(key, header(1, 0), T0)
    assert mark(incoming.accepted_state(KEY)) == at(3)


@settings(max_examples=500)
@given(
    last=st.tuples(st.sampled_from([SEQ, SEQ2]), st.integers(0, 6)),
    arriving=st.tuples(st.sampled_from([SEQ, SEQ2, SEQ3]), st.integers(0, 8), st.integers(0, 8)),
)
def test_the_rule_is_the_reference_rule(
    last: tuple[wire.TxSequenceId, int], arriving: tuple[wire.TxSequenceId, int, int]
) -> None:
    last_id, last_number = last
    sequence_id, number, previous = arriving
    incoming = stored(last_number, last_id)
    expected = number >= 1 and (
        (sequence_id == last_id and number > last_number and previous <= last_number)
        or (sequence_id > last_id and previous == 0)
    )
    assert incoming.accept(KEY, header(number, previous, sequence_id), T0) is expected
    after = at(number, sequence_id) if expected else at(last_number, last_id)
    assert mark(incoming.accepted_state(KEY)) == after
    assert mark(incoming.state(KEY)) == at(last_number, last_id)


# --------------------------------------------------------------------------
# Accepted and persisted
# --------------------------------------------------------------------------


def test_accepted_runs_ahead_of_persisted() -> None:
    incoming = stored(3)
    assert incoming.accept(KEY, header(4, 3), T0)
    assert incoming.accept(KEY, header(5, 4), T0)  # accepted against the accepted mark
    assert mark(incoming.state(KEY)) == at(3)
    assert mark(incoming.accepted_state(KEY)) == at(5)
    incoming.persisted(KEY, SEQ, 4, T0)
    assert mark(incoming.state(KEY)) == at(4)
    incoming.persisted(KEY, SEQ, 5, T0)
    assert mark(incoming.state(KEY)) == at(5)


def test_a_rollback_returns_to_the_persisted_mark_and_the_resends_get_in() -> None:
    incoming = stored(3)
    assert incoming.accept(KEY, header(4, 3), T0)
    assert incoming.accept(KEY, header(5, 4), T0)
    incoming.rolled_back(KEY)
    assert mark(incoming.accepted_state(KEY)) == at(3)
    assert incoming.accept(KEY, header(4, 3), T0)


def test_a_rollback_of_a_new_stream_forgets_it() -> None:
    incoming = IncomingSequences()
    assert incoming.accept(KEY, header(1, 0), T0)
    incoming.rolled_back(KEY)
    assert incoming.accepted_state(KEY) is None
    assert incoming.state(KEY) is None
    incoming.rolled_back(KEY)  # unknown streams are ignored
    assert incoming.accept(KEY, header(1, 0), T0)


def test_persists_must_follow_the_persisted_mark_of_a_known_stream() -> None:
    incoming = stored(3)
    with pytest.raises(SequenceError, match="does not follow"):
        incoming.persisted(OTHER_SOURCE, SEQ, 1, T0)
    with pytest.raises(SequenceError, match="does not follow"):
        incoming.persisted(KEY, SEQ, 3, T0)
    with pytest.raises(SequenceError, match="does not follow"):
        incoming.persisted(KEY, SEQ2, 0, T0)
    assert mark(incoming.state(KEY)) == at(3)


def test_a_persist_reported_after_a_rollback_still_counts() -> None:
    incoming = stored(3)
    assert incoming.accept(KEY, header(4, 3), T0)
    incoming.rolled_back(KEY)
    incoming.persisted(KEY, SEQ, 4, T0)  # the store says it has it after all
    assert mark(incoming.accepted_state(KEY)) == at(4)
    assert not incoming.accept(KEY, header(4, 3), T0)


def test_the_persisted_states_come_back_after_a_restart() -> None:
    incoming = stored(3)
    assert incoming.accept(KEY, header(4, 3), T0)  # accepted, never stored
    restarted = IncomingSequences(dict(incoming.streams()))
    assert not restarted.accept(KEY, header(3, 2), T0)
    assert restarted.accept(KEY, header(4, 3), T0)


def restored(number: int) -> IncomingSequences:
    """A receiver whose stream ``KEY`` stood at ``number`` in a backup put back."""
    state = StreamState(SEQ.value, number, 0, T0, resync=True)
    return IncomingSequences({KEY: state})


def test_a_restored_stream_takes_its_next_message_whatever_came_before_it_once() -> None:
    # The backup stood at 50; the original took up to 100 since, and its
    # sender forgot them: 101 says it follows 100.
    incoming = restored(50)
    assert not incoming.accept(KEY, header(50, 49), T0)  # not after the mark
    assert not incoming.accept(KEY, header(7, 0), T0)
    assert incoming.state(KEY) == StreamState(SEQ.value, 50, 2, T0, resync=True)
    assert incoming.accept(KEY, header(101, 100), T0)
    # From then on, the rule: the next follows 101, not any other.
    assert not incoming.accept(KEY, header(103, 102), T0)
    assert incoming.accept(KEY, header(102, 101), T0)
    incoming.persisted(KEY, SEQ, 101, T0)
    incoming.persisted(KEY, SEQ, 102, T0)
    assert incoming.state(KEY) == StreamState(SEQ.value, 102, 0, T0)
    assert incoming.accepted_state(KEY) == StreamState(SEQ.value, 102, 0, T0)
    assert not incoming.accept(KEY, header(200, 199), T0)


def test_a_restored_stream_takes_a_later_sequence_whatever_its_previous() -> None:
    incoming = restored(50)
    # The sender rolled to a new sequence since the backup, and went on in it.
    assert incoming.accept(KEY, header(5, 4, SEQ2), T0)
    incoming.persisted(KEY, SEQ2, 5, T0)
    assert mark(incoming.state(KEY)) == at(5, SEQ2)


def test_a_rollback_after_the_taken_message_is_stored_gives_no_resync_back() -> None:
    incoming = restored(50)
    assert incoming.accept(KEY, header(101, 100), T0)  # taken by the resync (write 1)
    assert incoming.accept(KEY, header(102, 101), T0)  # on another connection (write 2)
    incoming.rolled_back(KEY)  # write 2 failed ...
    incoming.persisted(KEY, SEQ, 101, T0)  # ... write 1 was stored
    # 102 is not stored: 103 does not follow what is.
    assert not incoming.accept(KEY, header(103, 102), T0)
    assert incoming.accept(KEY, header(102, 101), T0)


def test_a_message_the_rule_takes_anyway_ends_the_resync_too() -> None:
    incoming = restored(50)
    assert incoming.accept(KEY, header(1, 0, SEQ2), T0)  # a new sequence, from 1
    assert not incoming.accept(KEY, header(9, 8, SEQ2), T0)  # no second pass
    incoming.persisted(KEY, SEQ2, 1, T0)
    assert incoming.state(KEY) == StreamState(SEQ2.value, 1, 1, T0)  # one rejected since


def test_a_failed_write_gives_the_resync_back() -> None:
    incoming = restored(50)
    assert incoming.accept(KEY, header(101, 100), T0)
    incoming.rolled_back(KEY)
    assert incoming.state(KEY) == StreamState(SEQ.value, 50, 0, T0, resync=True)
    assert incoming.accept(KEY, header(101, 100), T0)  # the resend gets in
    # After a restart, a stream still to resync is as it was stored.
    again = IncomingSequences(dict(restored(50).streams()))
    assert again.accept(KEY, header(101, 100), T0)


def test_streams_lists_durable_streams_by_key() -> None:
    incoming = stored(3)
    assert incoming.accept(OTHER_QUEUE, header(1, 0), T0)  # not durable yet
    assert [key for key, _ in incoming.streams()] == [KEY]
    incoming.persisted(OTHER_QUEUE, SEQ, 1, T0)
    assert [key for key, _ in incoming.streams()] == [OTHER_QUEUE, KEY]
    assert incoming.streams()[1][1] == StreamState(SEQ.value, 3, 0, T0)


# --------------------------------------------------------------------------
# OrderAcks
# --------------------------------------------------------------------------


def test_an_order_ack_is_due_after_the_delay_once() -> None:
    incoming = stored(3)
    assert incoming.next_deadline() is None
    deliver(incoming, 4, 3, now=T0)
    assert incoming.next_deadline() == T0 + 0.5
    assert incoming.due(T0 + 0.4) == []
    assert incoming.due(T0 + 0.5) == [OrderAckDue(KEY, SEQ, 4)]
    assert incoming.due(T0 + 5) == []
    assert incoming.next_deadline() is None


def test_order_acks_batch_but_never_wait_longer_than_the_maximum() -> None:
    incoming = stored(0)
    now = T0
    for number in range(1, 40):
        deliver(incoming, number, number - 1, now=now)
        assert incoming.due(now) == []
        now += 0.4
        if now >= T0 + 10:
            break
    assert incoming.next_deadline() == T0 + 10
    (due,) = incoming.due(T0 + 10)
    assert due.number == number


def test_an_order_ack_carries_the_persisted_mark_not_the_accepted_one() -> None:
    incoming = stored(3)
    deliver(incoming, 4, 3)
    assert incoming.accept(KEY, header(5, 4), T0)  # accepted, not yet durable
    assert incoming.due(T0 + 1) == [OrderAckDue(KEY, SEQ, 4)]


def test_a_reject_re_announces_the_persisted_mark() -> None:
    incoming = stored(3, SEQ2)
    assert incoming.next_deadline() is None
    assert not incoming.accept(KEY, header(2, 1, SEQ2), T0)
    assert incoming.due(T0 + 0.5) == [OrderAckDue(KEY, SEQ2, 3)]


def test_a_replay_of_what_is_held_is_answered_at_its_first_duplicate() -> None:
    # A sender replaying messages the receiver holds, 1 ms apart, on sessions a
    # path cuts within a second: each must hear of the mark.
    incoming = stored(1000)
    assert not incoming.accept(KEY, header(1, 0), T0)
    assert incoming.next_deadline() == T0  # at once
    for number in range(2, 400):  # the rest of the run does not put it off
        assert not incoming.accept(KEY, header(number, number - 1), T0 + number * 0.001)
    assert incoming.next_deadline() == T0
    assert incoming.due(T0 + 0.4) == [OrderAckDue(KEY, SEQ, 1000)]
    # Announced: the next reject arms it again, no sooner than the delay after.
    assert not incoming.accept(KEY, header(400, 399), T0 + 0.45)
    assert incoming.next_deadline() == pytest.approx(T0 + 0.9)
    assert incoming.due(T0 + 0.9) == [OrderAckDue(KEY, SEQ, 1000)]
    assert not incoming.accept(KEY, header(1, 0), T0 + 11)  # a later session's replay
    assert incoming.next_deadline() == T0 + 11


def test_a_reject_with_nothing_persisted_announces_nothing() -> None:
    incoming = IncomingSequences()
    assert incoming.accept(KEY, header(1, 0), T0)
    assert not incoming.accept(KEY, header(1, 0), T0)
    assert incoming.next_deadline() is None


def test_many_unannounced_persists_make_the_order_ack_due_at_once() -> None:
    incoming = stored(0, max_unannounced=3)
    deliver(incoming, 1, 0, now=T0)
    deliver(incoming, 2, 1, now=T0 + 0.1)
    assert incoming.next_deadline() == T0 + 0.6
    deliver(incoming, 3, 2, now=T0 + 0.2)
    assert incoming.next_deadline() == T0
    assert incoming.due(T0 + 0.2) == [OrderAckDue(KEY, SEQ, 3)]
    deliver(incoming, 4, 3, now=T0 + 0.3)
    assert incoming.next_deadline() == T0 + 0.8  # counted afresh


def test_order_acks_of_several_streams() -> None:
    incoming = IncomingSequences(order_ack_delay=1.0, max_order_ack_delay=2.0)
    deliver(incoming, 1, 0, now=T0, key=KEY)
    deliver(incoming, 1, 0, now=T0 + 0.5, key=OTHER_SOURCE)
    assert incoming.next_deadline() == T0 + 1.0
    assert incoming.due(T0 + 1.2) == [OrderAckDue(KEY, SEQ, 1)]
    assert incoming.next_deadline() == T0 + 1.5
    assert incoming.due(T0 + 2) == [OrderAckDue(OTHER_SOURCE, SEQ, 1)]


# --------------------------------------------------------------------------
# Inputs and limits
# --------------------------------------------------------------------------


def test_max_streams_rejects_a_message_that_would_start_one_more() -> None:
    incoming = stored(3, max_streams=1)
    assert not incoming.accept(OTHER_SOURCE, header(1, 0), T0)
    assert incoming.accept(KEY, header(4, 3), T0)
    assert [key for key, _ in incoming.streams()] == [KEY]


def test_rejected_strangers_take_no_room() -> None:
    incoming = IncomingSequences(max_streams=1)
    for number in range(2, 100):
        source = number.to_bytes(16, "big")
        key = ("q", source, SEQ.timestamp)
        assert not incoming.accept(key, header(number, number - 1), T0)
    assert incoming.accept(KEY, header(1, 0), T0)


@pytest.mark.parametrize(
    "key",
    [
        ("q", b"short", 1),
        ("q",),
        (b"q", bytes(16), 1),
        ("q", bytes(16)),
        ("q", bytes(16), -1),
        ("q", bytes(16), 1 << 32),
        ("q", bytes(16), True),
        ("q", bytes(16), 1, 2),
    ],
)
def test_malformed_stream_keys_are_refused(key: object) -> None:
    incoming = IncomingSequences()
    with pytest.raises(SequenceError, match="stream key"):
        incoming.accept(key, header(1, 0), T0)  # type: ignore[arg-type]
    with pytest.raises(SequenceError, match="stream key"):
        IncomingSequences({key: StreamState(1 << 32, 1, 0, T0)})  # type: ignore[dict-item]


def test_construction_is_checked() -> None:
    with pytest.raises(SequenceError, match="order_ack_delay"):
        IncomingSequences(order_ack_delay=2.0, max_order_ack_delay=1.0)
    with pytest.raises(SequenceError, match="max_streams"):
        IncomingSequences(max_streams=-1)
    with pytest.raises(SequenceError, match="invalid state"):
        IncomingSequences({KEY: StreamState(SEQ.value, 1 << 32, 0, T0)})
    with pytest.raises(SequenceError, match="invalid state"):
        IncomingSequences({KEY: StreamState(-1, 1, 0, T0)})


def test_states_and_due_acks_are_values() -> None:
    state = StreamState(SEQ.value, 3, 0, T0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.last_number = 4  # type: ignore[misc]
    assert OrderAckDue(KEY, SEQ, 3) == OrderAckDue(KEY, SEQ, 3)
