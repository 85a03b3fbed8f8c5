"""The source's side of confirmations (``qmgr.server.peering.final_acks``), with the
core's confirmations, the store, the queues and the connection played by fakes: what
settling an arriving FinalAck stores, when it counts in our SessionAck, and which
outgoing queues the watch marks as awaiting FinalAcks; and, with queue managers in one
process, that a FinalAck another peer makes up settles nothing."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import structlog
import structlog.testing
import trio
import trio.testing
from peer_kit import Network, Node, wait_until

import storage
import wire
from qmgr.config import Config
from qmgr.core.confirmation import Confirmations
from qmgr.core.names import LocalIdentity
from qmgr.core.outcomes import Outcomes
from qmgr.protocol import Role
from qmgr.server.committer import Committer
from qmgr.server.peering.connection import PeerConnection
from qmgr.server.peering.final_acks import WATCH_SECONDS, ConfirmationWatch, FinalAckArrivals
from qmgr.server.peering.outgoing_queue import OutgoingQueue
from qmgr.server.peering.parts import PeeringParts
from qmgr.server.signals import QueueSignals

from .conftest import QUEUE, deliver, receipts, settled, start_pair

WALL = 1_700_000_000.0
ACK = wire.FinalAck(
    source_qm=uuid.UUID("b0000000-0000-4000-8000-00000000000b"),
    message_id=3,
    sent_time=1_700_000_000,
    message_class=wire.MessageClass.ACK_RECEIVE,
    sequence_id=wire.TxSequenceId(ordinal=1, timestamp=5),
    sequence_number=1,
    previous_sequence_number=0,
    acked_source_qm=uuid.UUID("a0000000-0000-4000-8000-00000000000a"),
    acked_message_id=42,
)


@dataclass
class FakeConfirmations:
    """``Confirmations.settle``: a unit while the copy waits, then None."""

    waiting: bool = True
    #: The queue manager whose OrderAck covered the copy (None: not known).
    acknowledged_by: uuid.UUID | None = None
    calls: list[tuple[int, int, float, str | None, str]] = field(default_factory=list)

    def _mine(self, sender: uuid.UUID | None) -> bool:
        return sender is None or self.acknowledged_by in (None, sender)

    def refused(self, ordinal: int, sender: uuid.UUID, *, destination: str | None = None) -> bool:
        return self.waiting and not self._mine(sender)

    def settle(
        self,
        ordinal: int,
        message_class: int,
        *,
        wall: float,
        destination: str | None = None,
        endpoint: str = "",
        sender: uuid.UUID | None = None,
    ) -> storage.Unit | None:
        self.calls.append((ordinal, message_class, wall, destination, endpoint))
        if not self.waiting or not self._mine(sender):
            return None
        return storage.Unit((storage.SettleConfirmation(ordinal, 0),))


@dataclass
class FakeConnection:
    """What the settling asks of a connection: store, then acknowledge."""

    role: Role = Role.INITIATOR
    peer: str = "127.0.0.1:1902"
    stored: list[tuple[tuple[storage.Operation, ...], Callable[[list[Any]], None]]] = field(
        default_factory=list
    )
    acknowledged: list[int | None] = field(default_factory=list)
    log: Any = field(default_factory=structlog.get_logger)

    @property
    def persister(self) -> FakeConnection:
        return self  # stores what the settling writes

    def store(self, ops: tuple[storage.Operation, ...], after: Callable[[list[Any]], None]) -> None:
        self.stored.append((ops, after))

    def acknowledge(self, recoverable_number: int | None) -> None:
        self.acknowledged.append(recoverable_number)


@dataclass(eq=False)
class NamedQueue:
    """An outgoing queue, as the settling knows one: by its name, and the queue
    manager its OrderAcks came from."""

    name: str


#: ACK's sequence timestamp names this outgoing queue of ours.
BY_STAMP = {ACK.sequence_id.timestamp: NamedQueue("outgoing$;tcp:10.0.0.9:1801\\orders")}


def arrivals(
    confirmations: FakeConfirmations, by_stamp: dict[int, NamedQueue] | None = None
) -> tuple[FinalAckArrivals, list[list[int]]]:
    signals = QueueSignals()
    notified: list[list[int]] = []
    signals.listeners.append(lambda ids: notified.append(list(ids)))
    parts = PeeringParts(
        config=cast(Config, None),
        store=cast(storage.Store, None),  # not read: a settlement appends to no queue here
        committer=cast(Committer, None),
        signals=signals,
        identity=cast(LocalIdentity, None),
        outcomes=cast(Outcomes, None),
        confirmations=cast(Confirmations, confirmations),
        log=structlog.get_logger("test"),
        wall=lambda: WALL,
    )
    queues = cast(dict[int, OutgoingQueue], BY_STAMP if by_stamp is None else by_stamp)
    return FinalAckArrivals(parts, queues), notified


def test_a_final_ack_settles_its_copy_in_the_next_write_and_counts_once_persisted() -> None:
    confirmations = FakeConfirmations()
    settling, notified = arrivals(confirmations)
    connection = FakeConnection()
    settling.arrived(cast(PeerConnection, connection), ACK, 7)
    # The copy of the outgoing queue the FinalAck's sequence names.
    destination = BY_STAMP[ACK.sequence_id.timestamp].name
    assert confirmations.calls == [
        (42, wire.MessageClass.ACK_RECEIVE, WALL, destination, connection.peer)
    ]
    [(ops, after)] = connection.stored
    # One operation that does nothing if the copy's deadline settled it first.
    [op] = ops
    assert isinstance(op, storage.Attempt)
    assert op.otherwise == storage.Together(())
    assert connection.acknowledged == []
    after([])
    assert connection.acknowledged == [7]
    assert settling.settled == 1
    assert notified == [[]]


@pytest.mark.parametrize("sender", ["destination", "another"])
def test_only_the_queue_manager_that_acknowledged_a_copy_settles_it(sender: str) -> None:
    # B's OrderAck covered the copy: a FinalAck made up by another peer (under
    # its own GUID) settles nothing, and is said so.
    confirmations = FakeConfirmations(acknowledged_by=ACK.source_qm)
    settling, _ = arrivals(confirmations)
    connection = FakeConnection()
    ack = ACK if sender == "destination" else dataclasses.replace(ACK, source_qm=uuid.uuid4())
    with structlog.testing.capture_logs() as logged:
        settling.arrived(cast(PeerConnection, connection), ack, 7)
    [(ops, after)] = connection.stored
    refused = [e for e in logged if e["event"] == "final_ack_refused"]
    if sender == "destination":
        assert ops
        assert not refused
    else:
        assert ops == ()
        assert settling.refused == 1
        assert [(e["log_level"], e["from_qm"]) for e in refused] == [
            ("warning", str(ack.source_qm))
        ]
    after([])
    assert connection.acknowledged == [7]


@pytest.mark.parametrize("role", [Role.ACCEPTOR, Role.INITIATOR])
def test_a_repeat_stores_nothing_and_counts_after_the_writes_before_it(role: Role) -> None:
    confirmations = FakeConfirmations(waiting=False)
    # Of a sequence no outgoing queue has now (removed, or renewed by a restore).
    settling, notified = arrivals(confirmations, {})
    connection = FakeConnection(role=role)
    settling.arrived(cast(PeerConnection, connection), ACK, None)
    # Only a session we opened knows the destination's address.
    assert confirmations.calls[0][3:] == (
        None,
        connection.peer if role is Role.INITIATOR else "",
    )
    [(ops, after)] = connection.stored
    assert ops == ()
    after([])
    assert connection.acknowledged == [None]
    assert settling.settled == 0
    assert notified == []


# --------------------------------------------------------------------------- the watch


@dataclass(eq=False)
class FakeQueue:
    """What the watch sets and calls on an outgoing queue."""

    awaiting_confirmation: bool = False
    wakes: int = 0

    def wake(self) -> None:
        self.wakes += 1


@dataclass
class FakeStore:
    """The store's count of copies by destination, and its queue records."""

    awaited: dict[str, int] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    corrupt: bool = False
    kept: dict[str, str] = field(default_factory=dict)

    def settings(self, prefix: str) -> list[tuple[str, str]]:
        return sorted((k, v) for k, v in self.kept.items() if k.startswith(prefix))

    def awaited_confirmations(self) -> dict[str, int]:
        if self.corrupt:
            raise storage.StoreCorrupt("a count of copies awaiting confirmation is corrupt")
        return dict(self.awaited)

    def get_queue(self, name: str) -> Any:
        queue_id = self.ids.get(name)
        if queue_id is None:
            return None
        return storage.QueueRecord(
            queue_id=queue_id,
            name=name,
            display_name=name,
            kind=storage.QueueKind.OUTGOING,
            transactional=False,
            created_at=WALL,
        )


def test_the_watch_marks_the_queues_whose_copies_await_and_wakes_them_once() -> None:
    store = FakeStore(ids={"to-b": 1, "to-c": 2, "gone": 3})
    queues = {1: FakeQueue(), 2: FakeQueue()}
    watch = ConfirmationWatch(
        cast(storage.Store, store),
        cast(dict[int, OutgoingQueue], queues),
        structlog.get_logger(),
        wall=lambda: WALL,
    )
    watch.look()
    assert [(q.awaiting_confirmation, q.wakes) for q in queues.values()] == [(False, 0), (False, 0)]
    # Copies await from b, from a queue the store no longer has, and from one
    # this side does not hold (removed meanwhile): only b's queue is marked.
    store.awaited = {"to-b": 2, "removed": 1, "gone": 1}
    watch.look()
    watch.look()
    assert [(q.awaiting_confirmation, q.wakes) for q in queues.values()] == [(True, 1), (False, 0)]
    store.awaited = {"to-c": 1}
    watch.look()
    assert [(q.awaiting_confirmation, q.wakes) for q in queues.values()] == [(False, 1), (True, 1)]
    store.awaited = {}
    watch.look()
    assert [q.awaiting_confirmation for q in queues.values()] == [False, False]


def test_the_watch_marks_a_routers_queue_until_its_relayed_messages_deadline() -> None:
    # A router holds no copies: the deadlines of the messages it relayed keep
    # the session to their next hop, each until the latest of its queue.
    store = FakeStore(ids={"to-b": 1})
    queues = {1: FakeQueue(), 2: FakeQueue()}
    now = [WALL]
    watch = ConfirmationWatch(
        cast(storage.Store, store),
        cast(dict[int, OutgoingQueue], queues),
        structlog.get_logger(),
        wall=lambda: now[0],
    )
    watch.relayed(1, WALL + 60, "to-b")
    watch.relayed(1, WALL + 30, "to-b")  # an earlier deadline does not shorten it
    watch.relayed(3, WALL + 90, "to-d")  # a queue not held yet: marked once it is
    watch.look()
    assert [(q.awaiting_confirmation, q.wakes) for q in queues.values()] == [(True, 1), (False, 0)]
    queues[3] = FakeQueue()
    now[0] = WALL + 59
    watch.look()
    assert [q.awaiting_confirmation for q in queues.values()] == [True, False, True]
    now[0] = WALL + 60
    watch.look()
    assert [q.awaiting_confirmation for q in queues.values()] == [False, False, True]
    # A copy of our own keeps it marked past a relayed deadline.
    store.awaited = {"to-b": 1}
    now[0] = WALL + 91
    watch.look()
    assert [q.awaiting_confirmation for q in queues.values()] == [True, False, False]


@dataclass(eq=False)
class LoadedQueue(FakeQueue):
    """An outgoing queue as the watch's restore sees one: its id and name."""

    queue_id: int = 0
    name: str = ""


async def test_a_routers_deadlines_are_kept_in_the_store_and_cleared_once_passed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = FakeStore()
    now = [WALL]
    cleared: list[tuple[storage.Operation, ...]] = []

    class Writes:
        async def submit(self, unit: storage.Unit) -> Any:
            cleared.append(unit.ops)
            for op in unit.ops:
                assert isinstance(op, storage.ClearSetting)
                store.kept.pop(op.key, None)
            return storage.UnitOutcome(results=tuple(storage.Done() for _ in unit.ops))

    def watch_over(queues: dict[int, Any]) -> ConfirmationWatch:
        return ConfirmationWatch(
            cast(storage.Store, store),
            cast(dict[int, OutgoingQueue], queues),
            structlog.get_logger(),
            wall=lambda: now[0],
            committer=cast(Committer, Writes()),
        )

    watch = watch_over({})
    # Asked with each relayed message until a persisted write holds a deadline
    # late enough (a write that failed leaves it to the next message).
    op = watch.relayed_setting("outgoing$;to-c", WALL + 60)
    assert isinstance(op, storage.SetSetting)
    again = watch.relayed_setting("outgoing$;to-c", WALL + 50)
    assert again == op  # the highest asked so far
    watch.relayed(4, WALL + 60, "outgoing$;to-c")  # its write persisted
    store.kept[op.key] = op.value
    assert watch.relayed_setting("outgoing$;to-c", WALL + 60.5) is None
    later = watch.relayed_setting("outgoing$;to-c", WALL + 90)
    assert isinstance(later, storage.SetSetting)
    assert later.key == op.key
    store.kept["relayed-until:junk"] = "not a time"
    # After a restart: the live deadline comes back; the others are cleared.
    queue = LoadedQueue(queue_id=4, name="outgoing$;to-c")
    restarted = watch_over({4: queue})
    restarted.restore(cast(list[OutgoingQueue], [queue]))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(restarted.run)
        await trio.sleep(WATCH_SECONDS / 2)
        assert (queue.awaiting_confirmation, queue.wakes) == (True, 1)
        assert set(store.kept) == {op.key}
        # Once the deadline passes, the queue is let go and its setting cleared.
        now[0] = WALL + 61
        await trio.sleep(WATCH_SECONDS)
        assert not queue.awaiting_confirmation
        assert store.kept == {}
        nursery.cancel_scope.cancel()
    assert len(cleared) == 2


async def test_a_count_the_store_cannot_read_is_logged_once_and_the_watch_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = FakeStore(awaited={"to-b": 1}, ids={"to-b": 1})
    queue = FakeQueue()
    with structlog.testing.capture_logs() as logged:
        watch = ConfirmationWatch(
            cast(storage.Store, store),
            cast(dict[int, OutgoingQueue], {1: queue}),
            structlog.get_logger(),
            wall=lambda: WALL,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            await trio.sleep(WATCH_SECONDS / 2)
            assert queue.awaiting_confirmation
            store.corrupt = True
            await trio.sleep(WATCH_SECONDS * 5)
            # The marks stay as they were while the store cannot say.
            assert queue.awaiting_confirmation
            store.corrupt, store.awaited = False, {}
            await trio.sleep(WATCH_SECONDS)
            assert not queue.awaiting_confirmation
            nursery.cancel_scope.cancel()
    failures = [e for e in logged if e["event"] == "confirmation_watch_failed"]
    assert [(e["log_level"], e["error"]) for e in failures] == [
        ("error", "a count of copies awaiting confirmation is corrupt")
    ]


# --------------------------------------------------------------------------- a made-up FinalAck


@pytest.mark.parametrize("stamp", ["the-queues", "made-up"])
async def test_a_third_peer_cannot_settle_a_copy_it_never_received(
    network: Network, autojump_clock: trio.testing.MockClock, stamp: str
) -> None:
    """A sends B a message asking for confirmation; B has it, unread. M, which
    has a session with A, sends A a FinalAck about it under its own GUID (as
    mutual TLS makes it), naming A's queue to B's sequence or one made up: A's
    copy still awaits B's FinalAck, and B's settles it."""
    a, b = await start_pair(network)
    m = await network.start("qm-m", 1903)
    await a.create_queue("inbox")
    await a.send(b.remote(QUEUE), [b"order-1"], journal=0x03, time_to_be_received=3600)
    await deliver(a, b, [b"order-1"])
    [message] = b.messages(QUEUE)
    [copy] = a.store.confirmations(message.ordinal)
    assert copy.delivered  # B's OrderAck covered it
    await m.send(a.remote("inbox"), [b"hello"])
    await wait_until(lambda: a.bodies("inbox") == [b"hello"], what="M's session with A")
    connection = m.link(a).connection
    assert connection is not None
    state = a.outgoing_state()
    timestamp = state.sequence_timestamp if stamp == "the-queues" else 0x1234
    for message_class in (wire.MessageClass.NACK_Q_PURGED, wire.MessageClass.ACK_RECEIVE):
        made_up = wire.FinalAck(
            source_qm=m.store.qm_guid,
            destination=wire.ORDER_QUEUE,
            destination_qm=a.store.qm_guid,
            message_id=77,
            sent_time=1_700_000_000,
            message_class=message_class,
            sequence_id=wire.TxSequenceId(ordinal=state.sequence_ordinal, timestamp=timestamp),
            sequence_number=1,
            previous_sequence_number=0,
            acked_source_qm=a.store.qm_guid,
            acked_message_id=message.ordinal,
        )
        connection.send_user_packet(wire.build_packet(made_up.to_message()), recoverable=True)
    await trio.sleep(5)
    assert a.store.confirmations(message.ordinal) == [copy]
    assert a.messages("system$;deadxact") == a.messages("system$;journal") == []
    # B's own FinalAck, when B's reader has the message, settles it.
    [(_, op)] = receipts(b)
    assert (await b.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: not a.store.confirmations(message.ordinal), what="A settled")
    assert len(a.messages("system$;journal")) == 1


@pytest.mark.parametrize("restart", [False, True], ids=["", "source-restarted"])
async def test_a_final_ack_of_the_queue_manager_an_address_moved_from_still_counts(
    network: Network, autojump_clock: trio.testing.MockClock, restart: bool
) -> None:
    """B has a message (its OrderAck covered it); the address then moves to D,
    which acknowledges the next one (A restarted meanwhile, or not). B's reader
    takes the first later: B's FinalAck settles its copy, which keeps whose
    OrderAck covered it."""
    a, b = await start_pair(network)
    await a.create_queue("inbox")
    await a.send(b.remote(QUEUE), [b"order-1"], journal=0x03, time_to_be_received=3600)
    await deliver(a, b, [b"order-1"])
    [message] = b.messages(QUEUE)
    await b.stop()
    if restart:
        await a.stop()
        await a.start()
    d = network.node("qm-d", b.port)
    await d.start()
    await d.create_queue(QUEUE)
    await a.send(d.remote(QUEUE), [b"order-2"])
    await wait_until(lambda: d.bodies(QUEUE) == [b"order-2"], what="D has it")
    await wait_until(settled(a), what="D's OrderAck")
    await b_confirms_from_elsewhere(network, a, b, message.ordinal)


async def b_confirms_from_elsewhere(network: Network, a: Node, b: Node, ordinal: int) -> None:
    """B, back at another address, opens a session with A (a message of its
    own), and its reader takes the message: its FinalAck settles A's copy."""
    b.port = 1904
    network.nodes[b.address] = b
    await b.start()
    await b.send(a.remote("inbox"), [b"hello"])
    await wait_until(lambda: a.bodies("inbox") == [b"hello"], what="B's session with A")
    [(_, op)] = receipts(b)
    assert (await b.committer.submit(storage.Unit((op,)))).error is None
    await wait_until(lambda: not a.store.confirmations(ordinal), what="A settled")
    assert a.peering.final_ack_arrivals.refused == 0


async def test_a_copy_keeps_the_queue_manager_whose_order_ack_covered_it(
    network: Network, autojump_clock: trio.testing.MockClock
) -> None:
    """B's OrderAck covers "order-1", but the forget that marks its copy
    delivered waits (the store fails it for a while: it is tried again every
    second). The address moves to D meanwhile, which acknowledges "order-2".
    The copy keeps B, whose OrderAck covered it, not D: B's FinalAck settles it."""
    a, b = await start_pair(network)
    await a.create_queue("inbox")
    committer = a.committer
    real_submit = committer.submit
    failing = True

    async def submit(unit: storage.Unit) -> storage.UnitOutcome:
        if failing and any(isinstance(op, storage.ForgetOutgoing) for op in unit.ops):
            raise storage.StoreError("the store cannot write now")
        return await real_submit(unit)

    committer.submit = submit  # type: ignore[method-assign]
    await a.send(b.remote(QUEUE), [b"order-1"], journal=0x03, time_to_be_received=3600)
    await wait_until(lambda: b.bodies(QUEUE) == [b"order-1"], what="B has it")
    [queue] = a.peering.outgoing.values()
    b_qm, d_qm = b.store.qm_guid, None
    await wait_until(lambda: b_qm in queue.acknowledged_by.values(), what="B's OrderAck")
    [message] = b.messages(QUEUE)
    await b.stop()
    d = network.node("qm-d", b.port)
    await d.start()
    d_qm = d.store.qm_guid
    await d.create_queue(QUEUE)
    await a.send(d.remote(QUEUE), [b"order-2"])
    await wait_until(lambda: d.bodies(QUEUE) == [b"order-2"], what="D has it")
    await wait_until(lambda: d_qm in queue.acknowledged_by.values(), what="D's OrderAck")
    failing = False
    await wait_until(settled(a), what="A forgot both")
    [copy] = a.store.confirmations(message.ordinal)
    assert copy.acknowledged_by == b_qm.bytes
    await b_confirms_from_elsewhere(network, a, b, message.ordinal)


# ----------------------------------------------------------- clearing relayed deadlines


class _Writes:
    """A committer applying SetSetting/ClearSetting to a FakeStore; ``fail`` the
    next N units (an error outcome), or ``raise_`` the next one."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.fail = 0
        self.raise_: Exception | None = None
        self.units = 0

    def apply(self, op: storage.Operation) -> None:
        if isinstance(op, storage.SetSetting):
            self.store.kept[op.key] = op.value
        elif isinstance(op, storage.ClearSetting):
            self.store.kept.pop(op.key, None)

    async def submit(self, unit: storage.Unit) -> Any:
        self.units += 1
        if self.raise_ is not None:
            exc, self.raise_ = self.raise_, None
            raise exc
        if self.fail:
            self.fail -= 1
            return storage.UnitOutcome.failed(unit, storage.StoreError("disk full"))
        for op in unit.ops:
            self.apply(op)
        return storage.UnitOutcome(results=tuple(storage.Done() for _ in unit.ops))


def _watch(
    store: FakeStore, writes: _Writes, now: list[float], queues: dict[int, Any]
) -> ConfirmationWatch:
    return ConfirmationWatch(
        cast(storage.Store, store),
        cast(dict[int, OutgoingQueue], queues),
        structlog.get_logger(),
        wall=lambda: now[0],
        committer=cast(Committer, writes),
    )


#: The outgoing queue the relayed deadlines below are of.
NAME = "outgoing$;to-c"


def relayed_for_a_minute() -> tuple[FakeStore, _Writes, list[float], ConfirmationWatch]:
    """A watch whose queue 4 has a relayed deadline of WALL+60, persisted."""
    store, now = FakeStore(), [WALL]
    writes = _Writes(store)
    watch = _watch(store, writes, now, {4: LoadedQueue(queue_id=4, name=NAME)})
    first = watch.relayed_setting(NAME, WALL + 60)
    assert isinstance(first, storage.SetSetting)
    writes.apply(first)
    watch.relayed(4, WALL + 60, NAME)
    return store, writes, now, watch


async def test_a_deadline_moved_later_just_before_it_passes_is_not_cleared() -> None:
    # The queue's deadline is WALL+60 (persisted). Just before it passes, a
    # second relayed message moves it to WALL+120: its write (SetSetting) is
    # committed, but its connection's persister has not run its ``after``
    # (relayed()) yet when the watch looks at WALL+60.
    store, writes, now, watch = relayed_for_a_minute()
    now[0] = WALL + 59.9
    second = watch.relayed_setting(NAME, WALL + 120)
    assert isinstance(second, storage.SetSetting)
    writes.apply(second)  # committed (submitted before the watch's clear)
    now[0] = WALL + 60
    watch.look()
    await watch._clear()
    watch.relayed(4, WALL + 120, NAME)  # its after runs
    # A restart now must find the deadline of the second message.
    assert store.kept.get(second.key) == repr(WALL + 120)


async def test_a_retried_clear_does_not_delete_a_deadline_written_since() -> None:
    store, writes, now, watch = relayed_for_a_minute()
    now[0] = WALL + 60
    watch.look()
    writes.fail = 1
    await watch._clear()  # fails: retried at the next look
    # A new relayed message through the same queue, persisted meanwhile.
    now[0] = WALL + 60.5
    again = watch.relayed_setting(NAME, WALL + 120)
    assert isinstance(again, storage.SetSetting)
    writes.apply(again)
    watch.relayed(4, WALL + 120, NAME)
    now[0] = WALL + 61
    watch.look()
    await watch._clear()  # the retry
    assert store.kept.get(again.key) == repr(WALL + 120)


async def test_a_store_error_while_clearing_does_not_end_the_watch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Committer.submit raises StoreError when a whole batch fails (other
    # workers turn that into a failed outcome, submit_unit).
    store, now = FakeStore(), [WALL]
    writes = _Writes(store)
    queue = LoadedQueue(queue_id=4, name="outgoing$;to-c")
    store.kept["relayed-until:stale"] = repr(WALL - 1)
    watch = _watch(store, writes, now, {4: queue})
    watch.restore(cast(list[OutgoingQueue], [queue]))
    writes.raise_ = storage.StoreError("the whole batch failed")
    ended: list[BaseException] = []

    async def watched() -> None:
        try:
            await watch.run()
        except Exception as exc:
            ended.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watched)
        await trio.sleep(WATCH_SECONDS * 3.5)
        nursery.cancel_scope.cancel()
    assert ended == []
    assert store.kept == {}  # cleared by a later look
