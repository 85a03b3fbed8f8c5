"""The world of the exactly-once model test (``test_eod_model.py``): one
:class:`OutgoingSequence` with the sender's store simulated around it and one
:class:`IncomingSequences` with the receiver's store, exchanging data packets,
SessionAcks and OrderAcks through a hostile network (``model_kit.Network``),
with the checks made at every step and at the end.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Sequence
from typing import TypeAlias

import pytest

import wire
from qmgr.protocol import (
    EntryKind,
    IncomingSequences,
    OutgoingSequence,
    StreamKey,
    StreamState,
)

from .model_kit import Network, Op, run_model

SOURCE_QM = bytes(range(16))
STAMP = 1_700_000_000
#: The one stream: the sender's outgoing queue has sequence timestamp STAMP.
KEY: StreamKey = ("private$\\orders", SOURCE_QM, STAMP)
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
            sequence_id=self.sequence_id(),
            base=self.base,
            resend_intervals=INTERVALS,
            sent_before=self.next_lookup,  # an earlier run may have sent any of them
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
            ids = self.sender.order_ack(packet.sequence_id, packet.number, self.now) or ()
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
        assert self.sender.never_sent_waiting + self.sender.unacknowledged == len(self.sender)
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
