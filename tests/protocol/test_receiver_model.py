"""The Receiver of a peer's messages (``qmgr.protocol.receiver``) in a hostile model.

The model runs two source queue managers whose messages (transactional ones
to one queue, recoverable ones to another) reach one receiver through a
network that loses, duplicates, reorders and delays them; the adapter's part
is played here by the rules in ``qmgr.protocol.receiver``'s docstring (store
what is accepted in a run, acknowledge each outcome when it says), and the
receiver's store is a few dicts. Hypothesis interleaves commits, arrivals,
writes (persisted, failed, or cut off with their connection), crashes of the
receiver, resends and time. After every step: nothing stored twice, every
stream in order, the store's stream state is the receiver's persisted mark,
an OrderAck never announces more than the store holds, and a sender forgets
a message only once the store has it. At the end, with a reliable network,
every message is stored exactly once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wire
from qmgr.protocol import (
    Accepted,
    ArrivalKind,
    Dropped,
    Receiver,
    StreamKey,
    StreamState,
)

from .model_kit import T0, Network, Op, faults, indices, late, run_model, step
from .receiver_kit import (
    LOCAL,
    ORDERS,
    PLAIN,
    WALL,
    A,
    B,
    message,
    parse_order_ack,
)

# --------------------------------------------------------------------------
# The model: two sources, a hostile network, a store, crashes
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Sender:
    """One source queue manager: what it committed and has not forgotten."""

    name: str
    guid: uuid.UUID
    next_number: int = 1
    next_id: int = 1
    #: Transactional messages not yet covered by an OrderAck, by number.
    tx: dict[int, wire.UserMessage] = dataclasses.field(default_factory=dict)
    #: Recoverable messages not yet acknowledged as persisted, by id.
    plain: dict[int, wire.UserMessage] = dataclasses.field(default_factory=dict)
    committed_tx: list[int] = dataclasses.field(default_factory=list)
    committed_plain: list[int] = dataclasses.field(default_factory=list)
    #: The connection now (a new one after each loss).
    epoch: int = 0

    def path(self) -> str:
        return f"{self.name}-{self.epoch}"


@dataclasses.dataclass
class Item:
    """One packet in the receiver's run: what to write, and whom to acknowledge."""

    sender: Sender
    path: str
    packet: wire.UserMessage
    accepted: Accepted | None


class World:
    def __init__(self) -> None:
        self.senders = {"a": Sender("a", A), "b": Sender("b", B)}
        self.now = T0
        self.wall = WALL
        # The receiver's store.
        self.queues: dict[str, list[tuple[str, int]]] = {ORDERS: [], PLAIN: []}
        self.records: dict[StreamKey, StreamState] = {}
        self.keys: dict[bytes, None] = {}
        self.receiver = self.load()
        self.run: list[Item] = []
        # The network: (sender, path, packet) in flight, and held back for long.
        self.net: Network[tuple[Sender, str, wire.UserMessage]] = Network()
        self.sent: list[tuple[Sender, wire.UserMessage]] = []

    def load(self) -> Receiver[str]:
        return Receiver(
            LOCAL,
            streams=self.records,
            history=self.keys,
            wall=self.wall,
            history_size=1_000_000,
            history_seconds=1e9,
            order_ack_delay=0.5,
            max_order_ack_delay=10.0,
            max_unannounced=8,
        )

    # ------------------------------------------------------------------ senders

    def commit(self, name: str, count: int, transactional: bool) -> None:
        sender = self.senders[name]
        for _ in range(count):
            message_id = sender.next_id
            sender.next_id += 1
            if transactional:
                number = sender.next_number
                sender.next_number += 1
                packet = message(sender.guid, message_id, number=number)
                sender.tx[number] = packet
                sender.committed_tx.append(message_id)
            else:
                packet = message(sender.guid, message_id, PLAIN)
                sender.plain[message_id] = packet
                sender.committed_plain.append(message_id)
            self.transmit(sender, packet)

    def transmit(self, sender: Sender, packet: wire.UserMessage) -> None:
        self.net.flight.append((sender, sender.path(), packet))
        self.sent.append((sender, packet))

    def resend(self, name: str) -> None:
        sender = self.senders[name]
        for number in sorted(sender.tx):
            self.transmit(sender, sender.tx[number])
        for message_id in sorted(sender.plain):
            self.transmit(sender, sender.plain[message_id])

    def acknowledge(self, item_sender: Sender, path: str, packet: wire.UserMessage) -> None:
        """A SessionAck marking ``packet`` persisted reaches its sender (if its
        connection still stands): a recoverable message is forgotten."""
        if path != item_sender.path() or packet.transaction is not None:
            return
        message_id = packet.user.message_id
        if item_sender.plain.pop(message_id, None) is not None:
            assert (item_sender.name, message_id) in self.queues[PLAIN], "forgotten, not stored"

    def order_ack_arrives(self, path: str, data: bytes) -> None:
        ack = parse_order_ack(data)
        sender = next(s for s in self.senders.values() if s.guid == ack.destination_qm)
        stored = [i for name, i in self.queues[ORDERS] if name == sender.name]
        # It announces no more than the store holds.
        assert ack.sequence_number <= len(stored)
        if path != sender.path():
            return  # its connection is gone
        for number in [n for n in sender.tx if n <= ack.sequence_number]:
            del sender.tx[number]

    # ------------------------------------------------------------------ receiver

    def arrive(self, sender: Sender, path: str, packet: wire.UserMessage) -> None:
        receiver = self.receiver
        assert receiver.arrive(packet, path) is ArrivalKind.MESSAGE
        queue = ORDERS if packet.transaction is not None else PLAIN
        decision = receiver.accept(
            packet, queue_key=queue, relayed=False, now=self.now, wall=self.wall
        )
        if decision is Dropped.REJECTED:
            self.acknowledge(sender, path, packet)
        elif decision is Dropped.DUPLICATE:
            self.run.append(Item(sender, path, packet, None))
        else:
            assert isinstance(decision, Accepted)
            self.run.append(Item(sender, path, packet, decision))

    def persist(self, count: int, *, only: Sender | None = None, ack: bool = True) -> None:
        """The next ``count`` items of the run are written and synced."""
        chosen = [item for item in self.run if only is None or item.sender is only][:count]
        for item in chosen:
            self.run.remove(item)
            accepted = item.accepted
            if accepted is not None:
                queue = ORDERS if accepted.stream is not None else PLAIN
                self.queues[queue].append((item.sender.name, item.packet.user.message_id))
                if accepted.stream is not None and accepted.state is not None:
                    self.records[accepted.stream] = accepted.state
                if accepted.remember:
                    self.keys[accepted.remember] = None
                for key in accepted.forget:
                    self.keys.pop(key, None)
                self.receiver.persisted(accepted, now=self.now, wall=self.wall)
            if ack:
                self.acknowledge(item.sender, item.path, item.packet)

    def fail_write(self) -> None:
        """The run's write fails: it is rolled back and its connections close."""
        self.receiver.rolled_back([i.accepted for i in self.run if i.accepted is not None])
        for sender in {item.sender.name: item.sender for item in self.run}.values():
            self.lose(sender.name, write=False)
        self.run.clear()

    def lose(self, name: str, write: bool) -> None:
        """A connection breaks: its run is written (no acknowledgment gets out) or rolled back."""
        sender = self.senders[name]
        mine = [item for item in self.run if item.sender is sender]
        if write:
            self.persist(len(mine), only=sender, ack=False)
        else:
            self.receiver.rolled_back([i.accepted for i in mine if i.accepted is not None])
            self.run = [item for item in self.run if item.sender is not sender]
        self.receiver.return_paths.path_closed(sender.path())
        sender.epoch += 1

    def crash(self) -> None:
        self.run.clear()
        for sender in self.senders.values():
            sender.epoch += 1
        self.records = {
            key: dataclasses.replace(state, last_access=self.now)
            for key, state in self.records.items()
        }
        self.receiver = self.load()

    def tick(self, seconds: float) -> None:
        self.now += seconds
        self.wall += seconds
        for path, data in self.receiver.order_acks(self.now, self.wall):
            self.order_ack_arrives(path, data)

    def network(self, index: int, action: str, late: bool = False) -> None:
        entry = self.net.take(index, action, late=late)
        if entry is not None:
            self.arrive(*entry)

    def replay(self, index: int) -> None:
        if self.sent:
            sender, packet = self.sent[index % len(self.sent)]
            self.arrive(sender, sender.path(), packet)

    # ------------------------------------------------------------------ running

    def apply(self, op: Op) -> None:
        """Run the step: the method of its name, with its arguments."""
        name, arg = op
        arguments = () if arg is None else arg if isinstance(arg, tuple) else (arg,)
        getattr(self, name)(*arguments)
        self.check()

    def receive(self, count: int) -> None:
        """The oldest packets in flight arrive, in order."""
        for _ in range(min(count, len(self.net.flight))):
            self.arrive(*self.net.flight.pop(0))

    def check(self) -> None:
        for queue in (ORDERS, PLAIN):
            stored = self.queues[queue]
            assert len(set(stored)) == len(stored), f"stored twice in {queue}: {stored}"
        for sender in self.senders.values():
            ids = [i for name, i in self.queues[ORDERS] if name == sender.name]
            assert ids == sender.committed_tx[: len(ids)], f"out of order: {ids}"
            key = (ORDERS, sender.guid.bytes)
            record = self.records.get(key)
            state = self.receiver.stream_state(key)
            assert (None if state is None else (state.sequence_id, state.last_number)) == (
                None if record is None else (record.sequence_id, record.last_number)
            )

    def settle(self) -> None:
        """A reliable network and time, until every sender has forgotten everything."""
        self.net.flight.extend(self.net.late)
        self.net.late.clear()
        for _ in range(50):
            if not any(s.tx or s.plain for s in self.senders.values()) and not self.run:
                return
            for name in self.senders:
                self.resend(name)
            while self.net.flight:
                self.arrive(*self.net.flight.pop(0))
            self.persist(len(self.run))
            self.tick(11.0)
            self.check()
        pytest.fail("no quiescence")

    def final_check(self) -> None:
        for sender in self.senders.values():
            assert [i for name, i in self.queues[ORDERS] if name == sender.name] == (
                sender.committed_tx
            )
            assert sorted(i for name, i in self.queues[PLAIN] if name == sender.name) == (
                sender.committed_plain
            )


def run(ops: Sequence[Op]) -> World:
    return run_model(World(), ops)


sources = st.sampled_from(["a", "b"])


operations: st.SearchStrategy[Op] = st.one_of(
    step("commit", st.tuples(sources, st.integers(1, 6), st.booleans())),
    step("commit", st.tuples(sources, st.integers(1, 6), st.booleans())),
    step("network", st.tuples(indices, faults, st.just(False))),
    step("network", st.tuples(indices, faults, st.just(False))),
    step("network", late),
    step("receive", st.integers(1, 10)),
    step("persist", st.integers(1, 8)),
    step("persist", st.integers(1, 8)),
    step("lose", st.tuples(sources, st.booleans())),
    step("resend", sources),
    step("tick", st.sampled_from([0.1, 0.6, 11.0])),
    step("replay", indices),
    step("fail_write"),
    step("crash"),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operations, min_size=10, max_size=80))
def test_exactly_once_in_order_whatever_the_network_and_the_crashes(ops: list[Op]) -> None:
    run(ops)


def test_a_message_accepted_but_never_written_is_taken_again_from_its_resend() -> None:
    """The connection breaks between the acceptance and the write: rolled back,
    the resend is accepted (a pending history key would drop it as a
    duplicate, and its acknowledgment would lose it)."""
    world = run(
        [
            ("commit", ("a", 1, False)),
            ("commit", ("a", 1, True)),
            ("receive", 2),
            ("lose", ("a", False)),
        ]
    )
    assert world.queues == {ORDERS: [("a", 2)], PLAIN: [("a", 1)]}


def test_writes_cut_off_with_their_connection_still_count() -> None:
    """Written, but the acknowledgments never got out: the resends are dropped."""
    world = run(
        [
            ("commit", ("a", 2, True)),
            ("commit", ("a", 2, False)),
            ("receive", 4),
            ("lose", ("a", True)),
        ]
    )
    assert world.receiver.rejected == 2
    assert world.receiver.duplicates == 2
    assert len(world.queues[ORDERS]) == len(world.queues[PLAIN]) == 2


def test_a_crash_before_the_write_loses_nothing() -> None:
    world = run(
        [
            ("commit", ("a", 3, True)),
            ("commit", ("b", 2, False)),
            ("receive", 5),
            ("persist", 1),
            ("crash", None),
        ]
    )
    assert [i for _, i in world.queues[ORDERS]] == [1, 2, 3]


def test_the_model_sees_a_receiver_that_forgets_nothing_on_rollback() -> None:
    """The model catches the bug the rollback of history keys prevents."""

    class Forgetful(Receiver[str]):
        def rolled_back(self, accepted: object) -> None:
            pass

    world = World()
    world.receiver = Forgetful(LOCAL, wall=WALL)
    world.load = lambda: Forgetful(LOCAL, wall=WALL)  # type: ignore[method-assign]
    with pytest.raises(AssertionError, match="forgotten, not stored"):
        run_model(world, [("commit", ("a", 1, False)), ("receive", 1), ("lose", ("a", False))])
