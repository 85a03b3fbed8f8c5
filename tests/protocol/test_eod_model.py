"""Model test of exactly-once in-order delivery: both EOD machines over a hostile network.

One :class:`OutgoingSequence` (with the sender's store simulated around it)
and one :class:`IncomingSequences` (with the receiver's store) exchange data
packets, SessionAcks and OrderAcks through a network that loses, duplicates,
reorders and delays anything; packets of closed connections included, and
some held back for a long time (arriving after crashes and rolls).
Hypothesis interleaves commits, transmissions, deliveries, persists (and
failed persists), forgets (started, written by the store, reported back, or
failed), timer firings, connection losses, purges and crashes of either side;
a crash keeps only what that side's store has. The sender's store rolls the
sequence in the forget that leaves it empty, as ``storage.ForgetOutgoing``
does.

After the run the network turns reliable and time passes until nothing is
left to do. Then the receiver must have delivered every committed
transactional message that was not purged, none twice, all in commit order,
every non-transactional one at least once, and the sender's table must be
empty. Order, uniqueness, the sequence the sender uses and what OrderAcks
announce are checked at every step.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from qmgr.protocol import (
    EntryKind,
)

from .eod_world import (
    KEY,
    Data,
    OrderAck,
    Packet,
    World,
    run,
)
from .model_kit import Op, faults, indices, late, settled, step

# --------------------------------------------------------------------------
# The operations hypothesis interleaves
# --------------------------------------------------------------------------

forget_modes = st.sampled_from(["start", "write", "all"])
plain_kinds = st.sampled_from([EntryKind.RECOVERABLE, EntryKind.EXPRESS, EntryKind.RELAYED])


#: (weight, step): how often each kind of step comes, relative to the others.
WEIGHTED_STEPS: list[tuple[int, st.SearchStrategy[Op]]] = [
    # The traffic.
    (3, step("commit", st.integers(1, 20))),
    (1, step("commit_plain", plain_kinds)),
    (3, step("send", st.integers(1, 30))),
    (3, step("receive", st.integers(1, 20))),
    (2, step("persist", st.integers(1, 10))),
    (2, step("network", st.tuples(indices, faults, st.just(False)))),
    (2, step("acks", st.tuples(indices, faults, st.just(False)))),
    (2, step("tick", st.sampled_from([0.1, 0.5, 2.0, 11.0, 31.0, 400.0]))),
    (2, step("pump", forget_modes)),
    (2, step("cycle", forget_modes)),
    # The sender's store.
    (1, step("start_forget")),
    (1, step("write_forget")),
    (1, step("report_forget")),
    (1, step("fail_forget")),
    (1, step("purge", st.lists(indices, min_size=1, max_size=4))),
    # Stale packets.
    (1, step("network", late)),
    (1, step("acks", late)),
    (1, step("replay", indices)),
    (1, step("replay_order_ack", indices)),
    # Failures.
    (1, step("persist_fails")),
    (1, step("connection_lost")),
    (1, step("crash_sender")),
    (1, step("crash_receiver")),
]
operations: st.SearchStrategy[Op] = st.one_of(
    [strategy for weight, strategy in WEIGHTED_STEPS for _ in range(weight)]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=20, max_size=100))
def test_exactly_once_in_order_over_a_hostile_network(ops: list[Op]) -> None:
    run(ops)


@pytest.mark.soak
@pytest.mark.parametrize("part", range(4))
def test_exactly_once_in_order_soak(part: int) -> None:
    """20,000 runs as four parts of 5,000, each with a seed of its own, so that
    each part ends well inside pytest's ``faulthandler_timeout`` (5 min)."""

    @seed(part)
    @settings(
        max_examples=5_000, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(st.lists(operations, min_size=50, max_size=400))
    def runs(ops: list[Op]) -> None:
        run(ops)

    runs()


# --------------------------------------------------------------------------
# Scripted runs: each names a hazard the random runs must keep covering
# --------------------------------------------------------------------------


def headers_of(packets: Sequence[Packet]) -> list[tuple[int, int, int]]:
    """(ordinal, number, previous) of the transactional packets."""
    return [
        (p.header.sequence_id.ordinal, p.header.sequence_number, p.header.previous_sequence_number)
        for p in packets
        if isinstance(p, Data) and p.header is not None
    ]


def sent_world(count: int) -> World:
    """A world whose ``count`` transactional messages are committed and sent (in flight)."""
    world = World()
    world.commit(count)
    world.send(count)
    return world


def test_a_quiet_run_delivers_everything_and_rolls_when_the_queue_empties() -> None:
    world = run([("commit", 5), ("commit_plain", EntryKind.EXPRESS), ("commit", 3)])
    assert world.delivered == world.committed == [1, 2, 3, 4, 5, 7, 8, 9]
    assert world.plain_received == {6}
    assert world.rolls >= 1
    assert world.sender.sequence_id.ordinal == 1 + world.rolls


def test_a_lost_message_is_resent_after_the_ack_wait_and_the_rest_wait_for_it() -> None:
    world = sent_world(3)
    del world.forward.flight[0]  # message 1 is lost; 2 and 3 arrive and are rejected
    world.flush()
    assert world.delivered == []
    assert world.receiver.state(KEY) is None
    assert settled(world).delivered == [1, 2, 3]


def test_a_crash_of_both_sides_mid_stream_loses_and_duplicates_nothing() -> None:
    world = sent_world(10)
    world.receive(6)
    world.persist(4)  # 5 and 6 accepted, not yet durable
    world.crash_receiver()
    world.crash_sender()
    assert settled(world).delivered == list(range(1, 11))


def acknowledged_world(count: int) -> World:
    """A world whose ``count`` messages are delivered and order-acked, not yet forgotten."""
    world = World()
    world.commit(count)
    world.flush()
    world.tick(1.0)  # the OrderAck is due
    world.acks(0, "deliver")
    assert world.to_forget == list(range(1, count + 1))
    return world


def test_messages_committed_after_a_rolling_forget_start_the_new_sequence() -> None:
    world = acknowledged_world(2)
    world.start_forget()
    assert world.sender.roll_pending
    world.write_forget()  # the store is empty: it rolls
    assert world.rolls == 1
    world.commit(2)  # lookup ids 3 and 4: numbers 1 and 2 of the new sequence
    world.commit(1, EntryKind.EXPRESS)
    world.send(10)  # the express message goes, the transactional ones wait
    assert [p.lookup_id for p in world.forward.flight if isinstance(p, Data)] == [5]
    world.report_forget()
    world.send(10)
    assert headers_of(world.forward.flight) == [(2, 1, 0), (2, 2, 1)]
    assert settled(world).delivered == [1, 2, 3, 4]


def test_messages_committed_before_the_forget_is_written_continue_the_sequence() -> None:
    world = acknowledged_world(2)
    world.start_forget()
    world.commit(2)  # committed before the forget is written: no roll
    assert world.send(10) is False  # the machine cannot know that yet
    world.write_forget()
    world.report_forget()
    world.send(10)
    assert headers_of(world.forward.flight) == [(1, 3, 0), (1, 4, 3)]
    assert settled(world).delivered == [1, 2, 3, 4]


def test_a_purge_of_the_message_the_receiver_waits_for_unblocks_the_rest() -> None:
    world = sent_world(3)
    world.forward.flight.pop(0)  # 1 never arrives
    world.purge([0])  # and is purged at the sender
    world.flush()  # 2 (previous 1) and 3 were rejected
    assert settled(world).delivered == [2, 3]  # resent after the ack wait, 2 with previous 0


def test_a_late_order_ack_of_the_old_sequence_ends_nothing_of_the_new_one() -> None:
    world = acknowledged_world(2)
    world.backward.late.append(OrderAck(world.sequence_id(), 2))
    world.flush()  # forgotten, rolled
    assert world.rolls == 1
    world.commit(3)
    world.send(3)
    world.acks(0, "deliver", late=True)  # the old OrderAck for number 2
    assert world.to_forget == []
    assert settled(world).delivered == [1, 2, 3, 4, 5]


def test_a_session_ack_of_a_rejected_packet_does_not_end_it() -> None:
    world = sent_world(2)
    world.network(1, "deliver")  # 2 before 1: rejected, but session-acked
    world.acks(0, "deliver")
    assert world.to_forget == []
    assert settled(world).delivered == [1, 2]


def test_a_purge_that_leaves_only_entries_being_forgotten_holds_transactional_sends() -> None:
    world = acknowledged_world(2)
    world.commit(1)  # 3
    world.start_forget()  # 1 and 2: 3 keeps the queue from emptying
    before = world.sender.roll_pending
    world.purge([2])  # 3 is purged: now the forget in flight may empty the queue
    assert (before, world.sender.roll_pending) == (False, True)
    world.write_forget()  # and it does: the store rolls
    world.commit(1)  # 4: number 1 of the new sequence
    assert world.send(10) is False
    world.report_forget()
    world.send(10)
    assert headers_of(world.forward.flight) == [(2, 1, 0)]
    assert settled(world).delivered == [1, 2, 4]


def test_an_order_ack_announces_only_what_is_stored() -> None:
    world = sent_world(3)
    world.receive(1)
    world.persist(1)
    world.receive(2)  # 2 and 3 accepted, not stored
    world.tick(1.0)
    assert world.backward.flight[-1] == OrderAck(world.sequence_id(), 1)
    world.crash_receiver()
    assert settled(world).delivered == [1, 2, 3]


def test_a_failed_write_lets_the_resent_messages_in() -> None:
    world = sent_world(3)
    world.receive(3)
    world.persist_fails()
    assert world.receiver.accepted_state(KEY) is None
    assert settled(world).delivered == [1, 2, 3]


def test_a_recoverable_message_is_kept_until_the_receiver_stored_it() -> None:
    world = World()
    world.commit(1, EntryKind.RECOVERABLE)
    world.commit(1, EntryKind.EXPRESS)
    world.send(2)
    world.receive(2)  # counted in the session, the recoverable one not stored yet
    world.acks(0, "deliver")
    world.acks(0, "deliver")
    assert world.to_forget == [2]  # the express one only
    world.crash_receiver()
    assert settled(world).plain_received == {1, 2}
