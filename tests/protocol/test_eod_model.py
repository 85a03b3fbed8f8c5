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

import collections
import dataclasses
import itertools
from collections.abc import Sequence
from typing import TypeAlias

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wire
from qmgr.protocol import (
    EntryKind,
    IncomingSequences,
    OutgoingSequence,
    StreamKey,
    StreamState,
)

from .model_kit import Network, Op, faults, indices, late, run_model, settled, step

SOURCE_QM = bytes(range(16))
KEY: StreamKey = ("private$\\orders", SOURCE_QM)
STAMP = 1_700_000_000
INTERVALS = (30.0, 30.0, 300.0, 1800.0)


@dataclasses.dataclass(frozen=True)
class Data:
    """A message packet, sender to receiver."""

    epoch: int
    lookup_id: int
    kind: EntryKind
    header: wire.TransactionHeader | None
    message: int


@dataclasses.dataclass(frozen=True)
class SessionAck:
    """A SessionAck of one packet, receiver to sender, meaningful in its connection only."""

    epoch: int
    lookup_id: int
    persisted: bool


@dataclasses.dataclass(frozen=True)
class OrderAck:
    """An OrderAck, receiver to sender (a message: it outlives connections)."""

    sequence_id: wire.TxSequenceId
    number: int


Packet: TypeAlias = Data | SessionAck | OrderAck


class World:
    """Both queue managers, their stores, and the network between them."""

    def __init__(self) -> None:
        # The sender's store: what survives a sender crash.
        self.store: dict[int, tuple[EntryKind, int]] = {}
        self.next_lookup = 1
        self.ordinal = 1
        self.base = 0
        # The sender's memory.
        self.sender = self.load_sender()
        self.to_forget: list[int] = []
        # Forgets started and not written; written and not reported.
        self.forgets: collections.deque[tuple[int, ...]] = collections.deque()
        self.written: collections.deque[tuple[tuple[int, ...], wire.TxSequenceId, int]] = (
            collections.deque()
        )
        self.epoch = 0
        # The receiver's store and memory.
        self.delivered: list[int] = []
        self.plain_received: set[int] = set()
        self.stream: StreamState | None = None
        self.receiver = IncomingSequences()
        #: Arrived and accepted, not yet stored: the packets, in order.
        self.pending: collections.deque[Data] = collections.deque()
        # The network.
        self.forward: Network[Packet] = Network()
        self.backward: Network[Packet] = Network()
        self.now = 0.0
        # What was committed, for the final check.
        self.committed: list[int] = []
        self.plain: set[int] = set()
        self.purged: set[int] = set()
        self.next_message = 1
        self.rolls = 0
        # Every packet ever sent each way, for replays of very old copies.
        self.sent_data: list[Data] = []
        self.sent_order_acks: list[OrderAck] = []

    # ------------------------------------------------------------------ sender

    def sequence_id(self) -> wire.TxSequenceId:
        return wire.TxSequenceId(ordinal=self.ordinal, timestamp=STAMP)

    def load_sender(self) -> OutgoingSequence:
        sender = OutgoingSequence(
            sequence_id=self.sequence_id(), base=self.base, resend_intervals=INTERVALS
        )
        for lookup_id in sorted(self.store):
            sender.add(lookup_id, self.store[lookup_id][0])
        return sender

    def commit(self, count: int, kind: EntryKind = EntryKind.TRANSACTIONAL) -> None:
        for _ in range(count):
            lookup_id, message = self.next_lookup, self.next_message
            self.next_lookup += 1
            self.next_message += 1
            self.store[lookup_id] = (kind, message)
            if kind is EntryKind.TRANSACTIONAL:
                self.committed.append(message)
            else:
                self.plain.add(message)
            self.sender.add(lookup_id, kind)

    def send(self, limit: int) -> bool:
        sent = False
        for _ in range(limit):
            transmission = self.sender.next_transmission(self.now)
            if transmission is None:
                break
            kind, message = self.store[transmission.lookup_id]
            assert transmission.kind is kind
            header = transmission.header
            if kind is EntryKind.TRANSACTIONAL:
                assert header is not None
                # The store's sequence, even while a forget result is on its way.
                assert header.sequence_id == self.sequence_id(), "sent on a stale sequence"
                assert header.sequence_number == transmission.lookup_id - self.base
                assert 0 <= header.previous_sequence_number < header.sequence_number
            else:
                assert header is None
            packet = Data(self.epoch, transmission.lookup_id, kind, header, message)
            self.forward.flight.append(packet)
            self.sent_data.append(packet)
            sent = True
        return sent

    def start_forget(self) -> bool:
        if not self.to_forget:
            return False
        ids = tuple(self.to_forget)
        self.to_forget.clear()
        self.sender.forget_started(ids)
        self.forgets.append(ids)
        return True

    def write_forget(self) -> bool:
        """The store writes the oldest forget (its result reaches the sender later)."""
        if not self.forgets:
            return False
        ids = self.forgets.popleft()
        for lookup_id in ids:
            self.store.pop(lookup_id, None)
        if not self.store:  # storage.ForgetOutgoing rolls the sequence here
            self.ordinal += 1
            self.base = self.next_lookup - 1
            self.rolls += 1
        self.written.append((ids, self.sequence_id(), self.base))
        return True

    def report_forget(self) -> bool:
        if not self.written:
            return False
        self.sender.forgotten(*self.written.popleft())
        return True

    def fail_forget(self) -> None:
        if self.forgets:
            ids = self.forgets.popleft()
            self.sender.forget_failed(ids)
            self.to_forget.extend(ids)

    def purge(self, picks: Sequence[int]) -> None:
        lookup_ids = sorted(self.store)
        if not lookup_ids:
            return
        gone = {lookup_ids[pick % len(lookup_ids)] for pick in picks}
        for lookup_id in gone:
            self.purged.add(self.store.pop(lookup_id)[1])
        self.sender.removed(gone)

    def connection_lost(self) -> None:
        self.epoch += 1
        self.sender.connection_lost()

    def crash_sender(self) -> None:
        self.epoch += 1
        self.sender = self.load_sender()
        self.to_forget.clear()
        self.forgets.clear()  # never written
        self.written.clear()  # written, but the sender never heard

    def sender_gets(self, packet: Packet) -> None:
        if isinstance(packet, OrderAck):
            ids = self.sender.order_ack(packet.sequence_id, packet.number, self.now)
        elif isinstance(packet, SessionAck) and packet.epoch == self.epoch:
            ids = self.sender.session_acked(packet.lookup_id, persisted=packet.persisted)
        else:
            ids = ()  # an acknowledgement of a closed session means nothing
        self.to_forget.extend(ids)

    # ------------------------------------------------------------------ receiver

    def receiver_gets(self, packet: Packet) -> None:
        assert isinstance(packet, Data)
        if packet.kind is EntryKind.EXPRESS:
            # Delivered at once (and lost from memory on a crash, as express is).
            self.plain_received.add(packet.message)
            self.session_ack(packet, persisted=False)
            return
        if packet.kind is not EntryKind.TRANSACTIONAL:
            # Counted at once; the persisted bit follows when it is stored.
            self.session_ack(packet, persisted=False)
            self.pending.append(packet)
            return
        header = packet.header
        assert header is not None
        if not self.receiver.accept(KEY, header, self.now):
            self.session_ack(packet, persisted=True)  # dropped, but it counts
            return
        state = self.receiver.accepted_state(KEY)
        assert state is not None
        assert (state.sequence_id, state.last_number) == (
            header.sequence_id.value,
            header.sequence_number,
        )
        self.pending.append(packet)

    def session_ack(self, packet: Data, *, persisted: bool) -> None:
        self.backward.flight.append(SessionAck(packet.epoch, packet.lookup_id, persisted))

    def persist(self, limit: int) -> bool:
        done = False
        for _ in range(min(limit, len(self.pending))):
            packet = self.pending.popleft()
            header = packet.header
            if header is None:
                self.plain_received.add(packet.message)
            else:
                self.delivered.append(packet.message)
                sequence_id, number = header.sequence_id, header.sequence_number
                self.stream = StreamState(sequence_id.value, number, 0, self.now)
                self.receiver.persisted(KEY, sequence_id, number, self.now)
            self.session_ack(packet, persisted=True)
            done = True
        return done

    def persist_fails(self) -> None:
        if self.pending:
            self.pending.clear()
            self.receiver.rolled_back(KEY)

    def crash_receiver(self) -> None:
        self.pending.clear()
        self.receiver = IncomingSequences({KEY: self.stream} if self.stream else {})
        self.connection_lost()

    # ------------------------------------------------------------------ time and network

    def tick(self, seconds: float) -> None:
        self.now += seconds
        self.sender.timer(self.now)
        self.order_acks()

    def order_acks(self) -> None:
        for due in self.receiver.due(self.now):
            assert due.key == KEY
            # An OrderAck announces exactly what the receiver's store holds.
            assert self.stream is not None
            assert (due.sequence_id.value, due.number) == (
                self.stream.sequence_id,
                self.stream.last_number,
            )
            order_ack = OrderAck(due.sequence_id, due.number)
            self.backward.flight.append(order_ack)
            self.sent_order_acks.append(order_ack)

    def network(self, index: int, action: str, *, late: bool = False) -> None:
        packet = self.forward.take(index, action, late=late)
        if packet is not None:
            self.receiver_gets(packet)

    def acks(self, index: int, action: str, *, late: bool = False) -> None:
        packet = self.backward.take(index, action, late=late)
        if packet is not None:
            self.sender_gets(packet)

    def replay(self, index: int) -> None:
        """A copy of some old data packet arrives (a duplicate, delayed for long)."""
        if self.sent_data:
            self.receiver_gets(self.sent_data[index % len(self.sent_data)])

    def replay_order_ack(self, index: int) -> None:
        """A copy of some old OrderAck arrives."""
        if self.sent_order_acks:
            self.sender_gets(self.sent_order_acks[index % len(self.sent_order_acks)])

    def receive(self, limit: int) -> None:
        """The receiver reads the oldest packets in order (and stores nothing yet)."""
        for _ in range(min(limit, len(self.forward.flight))):
            self.receiver_gets(self.forward.flight.pop(0))

    # ------------------------------------------------------------------ running

    def apply(self, op: Op) -> None:
        name, arg = op
        match name, arg:
            case "commit", int(count):
                self.commit(count)
            case "commit_plain", EntryKind() as kind:
                self.commit(1, kind)
            case "send", int(limit):
                self.send(limit)
            case "network", (int(index), str(action), bool(late)):
                self.network(index, action, late=late)
            case "acks", (int(index), str(action), bool(late)):
                self.acks(index, action, late=late)
            case "receive", int(limit):
                self.receive(limit)
            case "replay", int(index):
                self.replay(index)
            case "replay_order_ack", int(index):
                self.replay_order_ack(index)
            case "persist", int(limit):
                self.persist(limit)
            case "tick", float(seconds):
                self.tick(seconds)
            case "purge", list(picks):
                self.purge(picks)
            case "pump", str(forgets):
                self.flush(forgets=forgets)
            case "cycle", str(forgets):
                self.cycle(forgets=forgets)
            case _:
                {
                    "persist_fails": self.persist_fails,
                    "start_forget": self.start_forget,
                    "write_forget": self.write_forget,
                    "report_forget": self.report_forget,
                    "fail_forget": self.fail_forget,
                    "connection_lost": self.connection_lost,
                    "crash_sender": self.crash_sender,
                    "crash_receiver": self.crash_receiver,
                }[name]()
        self.check()

    def check(self) -> None:
        """What must hold after every step."""
        delivered = self.delivered
        assert all(a < b for a, b in itertools.pairwise(delivered)), (
            f"delivered out of order or twice: {delivered}"
        )
        # The table is the store, but for forgets written and not yet reported.
        assert len(self.sender) == len(self.store) or self.written
        assert self.sender.waiting + self.sender.unacknowledged == len(self.sender)
        if not self.written:
            assert self.sender.sequence_id == self.sequence_id()
        # The receiver's persisted mark is what its store holds.
        state = self.receiver.state(KEY)
        durable = None if state is None else (state.sequence_id, state.last_number)
        stream = self.stream
        assert durable == (None if stream is None else (stream.sequence_id, stream.last_number))

    def flush(self, *, forgets: str = "all") -> bool:
        """Everything that can happen now, without loss; whether anything did.

        ``forgets``: "start" leaves forgets in flight, "write" has the store
        write them but keeps their results from the sender, "all" completes them.
        """
        moved = False
        while self.start_forget() or (forgets != "start" and self.write_forget()):
            moved = True
        while forgets == "all" and self.report_forget():
            moved = True
        moved |= self.send(10_000)
        while self.forward.flight:
            self.receiver_gets(self.forward.flight.pop(0))
            moved = True
        moved |= self.persist(10_000)
        self.order_acks()
        while self.backward.flight:
            self.sender_gets(self.backward.flight.pop(0))
            moved = True
        moved |= self.start_forget()
        self.check()
        return moved

    def cycle(self, *, forgets: str = "all") -> None:
        """A good moment: everything in flight gets through, OrderAcks included."""
        self.flush(forgets=forgets)
        self.tick(0.6)
        self.flush(forgets=forgets)

    def settle(self) -> None:
        """Deliver everything reliably and let time pass until nothing is left to do."""
        for network in (self.forward, self.backward):
            network.flight.extend(network.late)
            network.late.clear()
        for _ in range(200):  # a correct run needs fewer than 20 rounds
            if self.flush():
                continue
            deadlines = [
                deadline
                for deadline in (self.sender.next_deadline(), self.receiver.next_deadline())
                if deadline is not None
            ]
            if deadlines:
                self.tick(max(0.0, min(deadlines) - self.now))
            elif any(kind is not EntryKind.TRANSACTIONAL for kind, _ in self.store.values()):
                # The session layer gives up on a connection whose SessionAcks
                # stop, and the sender reconnects.
                self.connection_lost()
            else:
                assert not self.store, "transactional entries stuck with no timer armed"
                return
        pytest.fail(
            f"no quiescence: {len(self.sender)} entries left, {self.sender.waiting} waiting"
        )

    def final_check(self) -> None:
        assert len(self.sender) == 0
        assert not self.store
        delivered = set(self.delivered)
        assert delivered <= set(self.committed)
        assert len(delivered) == len(self.delivered), "a message was delivered twice"
        missing = set(self.committed) - self.purged - delivered
        assert not missing, f"lost: {sorted(missing)}"
        assert not (self.plain - self.purged - self.plain_received)
        assert self.receiver.next_deadline() is None
        assert self.sender.next_deadline() is None


def run(ops: Sequence[Op]) -> World:
    return run_model(World(), ops)


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
@settings(max_examples=20_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(operations, min_size=50, max_size=400))
def test_exactly_once_in_order_soak(ops: list[Op]) -> None:
    run(ops)


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


def test_a_quiet_run_delivers_everything_and_rolls_when_the_queue_empties() -> None:
    world = run([("commit", 5), ("commit_plain", EntryKind.EXPRESS), ("commit", 3)])
    assert world.delivered == world.committed == [1, 2, 3, 4, 5, 7, 8, 9]
    assert world.plain_received == {6}
    assert world.rolls >= 1
    assert world.sender.sequence_id.ordinal == 1 + world.rolls


def test_a_lost_message_is_resent_after_the_ack_wait_and_the_rest_wait_for_it() -> None:
    world = World()
    world.commit(3)
    world.send(3)
    del world.forward.flight[0]  # message 1 is lost; 2 and 3 arrive and are rejected
    world.flush()
    assert world.delivered == []
    assert world.receiver.state(KEY) is None
    assert settled(world).delivered == [1, 2, 3]


def test_a_crash_of_both_sides_mid_stream_loses_and_duplicates_nothing() -> None:
    world = World()
    world.commit(10)
    world.send(10)
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
    world = World()
    world.commit(3)
    world.send(3)
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
    world = World()
    world.commit(2)
    world.send(2)
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
    world = World()
    world.commit(3)
    world.send(3)
    world.receive(1)
    world.persist(1)
    world.receive(2)  # 2 and 3 accepted, not stored
    world.tick(1.0)
    assert world.backward.flight[-1] == OrderAck(world.sequence_id(), 1)
    world.crash_receiver()
    assert settled(world).delivered == [1, 2, 3]


def test_a_failed_write_lets_the_resent_messages_in() -> None:
    world = World()
    world.commit(3)
    world.send(3)
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
