"""Queue managers' peering layers in one process, connected by memory streams.

A :class:`Network` runs :class:`Node` s: each is one queue manager's peering
side as ``qmgr serve`` builds it (a real store in its own directory, a
committer with its writer on the event loop, queue signals, a core for
committing sends, and a :class:`~qmgr.server.peering.Peering` running with no
listener), but no socket is ever opened:

* ``trio.open_tcp_stream`` is replaced for the test: a node's link that
  connects to another node's peer port gets one end of a
  ``trio.testing.memory_stream_pair``, and the other end is served by that
  node's peer handler (``PeerPort.serve``, the listener's handler, so
  ``peers.accept_from`` and ``peers.max_connections`` apply). A node that is
  stopped refuses connections, as a closed port does. With
  ``Network.auto_connect`` off, links never connect, and a test makes its
  own pair of connections with :meth:`Network.connect`.
* Each end is a :class:`~fault_stream.FaultStream`, and what flows from one
  node to another passes through that direction's
  :class:`~fault_stream.Channel`, which the test sets (:mod:`fault_stream`).
* Each node's peering layer reads unix time (message-history ages, stored
  stream states, status) from a wall clock that follows trio's clock
  (``Peering``'s ``wall``), so that under ``MockClock(autojump_threshold=0)``
  wall time moves with the jumps; ``Network.clock.step(seconds)`` sets it
  forward or back as NTP may. Every timer runs on trio's clock, so nothing
  waits for real seconds.

Which node a link belongs to is known from a context variable that each
node's tasks carry; test code that commits on a node goes through its
helpers (:meth:`Node.send`, :meth:`Node.notify`), which set it.
"""

from __future__ import annotations

import contextvars
import errno
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import pytest
import structlog
import trio
import trio.testing
from fault_stream import Channel, FaultStream, is_data, is_order_ack, is_session_ack

import storage
import wire
from qmgr.config import Config, load_config
from qmgr.core.engine import QueueManagerCore
from qmgr.core.names import LocalIdentity
from qmgr.protocol import Role
from qmgr.server.committer import Committer
from qmgr.server.peering import Peering
from qmgr.server.peering.connection import PeerConnection
from qmgr.server.peering.link import Link
from qmgr.server.signals import QueueSignals
from qmgr.server.writer import Writer

__all__ = [
    "Channel",
    "Closed",
    "FaultStream",
    "Network",
    "Node",
    "StoreCommitter",
    "is_data",
    "is_order_ack",
    "is_session_ack",
    "open_network",
    "wait_until",
]

HOST = "127.0.0.1"
_T = TypeVar("_T")

_current: contextvars.ContextVar[Node | None] = contextvars.ContextVar(
    "peer_kit_node", default=None
)


# ---------------------------------------------------------------------- nodes


class StoreCommitter:
    """Just enough of a committer for a part tested alone: each unit written at once."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store

    async def submit(self, unit: storage.Unit) -> storage.UnitOutcome:
        [outcome] = self.store.commit([unit], now=0.0)
        return outcome


class _SilentListener(trio.abc.Listener[trio.abc.Stream]):
    """A peer listener nobody connects to (connections come through :class:`Network`)."""

    async def accept(self) -> trio.abc.Stream:
        await trio.sleep_forever()

    async def aclose(self) -> None:
        pass


class _WallClock:
    """Unix time for the nodes' peering layers: wall time that moves with trio's clock."""

    def __init__(self) -> None:
        self._origin: float | None = None
        self._step = 0.0

    def time(self) -> float:
        try:
            now = trio.current_time()
        except RuntimeError:
            return time.time() + self._step
        if self._origin is None:
            self._origin = time.time() - now
        return self._origin + now + self._step

    def step(self, seconds: float) -> None:
        """Set the wall clock forward (or back, if negative), as NTP may."""
        self._step += seconds


@dataclass(frozen=True)
class Closed:
    """A peer connection that ended (as ``Peering.connection_ended`` saw it)."""

    role: Role
    reason: str
    #: trio's clock when it ended.
    at: float
    #: Its session had opened.
    opened: bool


class _RecordingPeering(Peering):
    """A node's peering layer, which records every connection that ends."""

    def __init__(self, closed: list[Closed], **kwargs: Any) -> None:
        self._closed = closed
        super().__init__(**kwargs)

    def connection_ended(self, connection: PeerConnection) -> None:
        self._closed.append(
            Closed(
                connection.role,
                connection.close_reason,
                trio.current_time(),
                connection.opened.is_set(),
            )
        )
        super().connection_ended(connection)


class _Part(Generic[_T]):
    """A part of a running node (``node.store`` reads ``node._store``), or an
    AssertionError while the node is not running."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = "_" + name

    def __get__(self, node: Node, owner: type) -> _T:
        part: _T | None = getattr(node, self._attribute)
        assert part is not None, f"{node.name} is not running"
        return part


class Node:
    """One queue manager's peering side; see the module docstring.

    ``settings`` are ``SECTION.KEY=VALUE`` overrides for ``load_config``.
    """

    def __init__(self, network: Network, name: str, port: int, settings: Iterable[str]) -> None:
        self.network = network
        self.name = name
        self.port = port
        self.path = network.root / name
        self.settings = tuple(settings)
        self.config: Config = load_config(
            settings=self.settings, name=name, data_dir=self.path, listen=f"{HOST}:{port}"
        )
        self.identity = LocalIdentity(
            host_names=frozenset({"localhost", name}),
            addresses=frozenset({HOST}),
            peer_port=port,
            aliases=frozenset(self.config.aliases),
        )
        self._running = False
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._store: storage.Store | None = None
        self._peering: Peering | None = None
        self._core: QueueManagerCore | None = None
        self._committer: Committer | None = None
        self._signals: QueueSignals | None = None
        self._tx_ids = itertools.count(1)
        #: Times it was started.
        self.starts = 0
        #: Every peer connection that ended, over all starts, in order.
        self.closed: list[Closed] = []

    # ------------------------------------------------------------------ parts

    @property
    def running(self) -> bool:
        """Started and not stopped."""
        return self._running

    @property
    def address(self) -> tuple[str, int]:
        """Its peer address."""
        return HOST, self.port

    store = _Part[storage.Store]()
    peering = _Part[Peering]()
    core = _Part[QueueManagerCore]()
    committer = _Part[Committer]()
    signals = _Part[QueueSignals]()
    nursery = _Part[trio.Nursery]()

    # ------------------------------------------------------------------ life

    async def start(self) -> None:
        """Open the store (created on first start) and run the peering layer."""
        assert not self._running, f"{self.name} is already running"
        self._stopped = trio.Event()
        await self.network.nursery.start(self._run)

    async def stop(self) -> None:
        """Stop at once, as a crash would: tasks cancelled, nothing flushed
        beyond what was synced; the store is closed and can be reopened."""
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        _current.set(self)
        store = storage.Store(self.path, initial_map_size=1 << 22, durable=False)
        writer = Writer(store, thread=False)
        try:
            core = QueueManagerCore(store, identity=self.identity)
            committer = Committer(store, writer)
            signals = QueueSignals()
            # As the daemon: the peering layer reads the store (the last run's
            # sent marks among it) before the start's first write.
            peering = _RecordingPeering(
                self.closed,
                config=self.config,
                store=store,
                committer=committer,
                signals=signals,
                identity=self.identity,
                outcomes=core.outcomes,
                confirmations=core.confirmations,
                log=structlog.get_logger("peer_kit").bind(qm=self.name),
                wall=self.network.clock.time,
            )
            units = core.queues.system_queue_units(time.time())
            reservation = core.ordinal_reservation()
            if reservation is not None:
                units.append(reservation)
            outcomes = store.commit(units, now=time.time())
            if reservation is not None:
                core.ordinals_reserved(reservation, outcomes[-1])
            self._store, self._core, self._committer = store, core, committer
            self._signals, self._peering = signals, peering
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    await nursery.start(committer.run)
                    listeners = cast(list[trio.SocketListener], [_SilentListener()])
                    await nursery.start(peering.run, listeners)
                    self._nursery = nursery
                    self._running = True
                    self.starts += 1
                    task_status.started()
        finally:
            self._running = False
            self._nursery = None
            writer.close()
            store.close()
            self._stopped.set()

    @contextmanager
    def _as_me(self) -> Any:
        token = _current.set(self)
        try:
            yield
        finally:
            _current.reset(token)

    async def serve(self, stream: FaultStream) -> None:
        """Serve a connection to our peer port (the listener's handler)."""
        _current.set(self)
        await self.peering.port.serve(cast(trio.SocketStream, stream))

    # ------------------------------------------------------------------ queues and messages

    def remote(self, queue: str) -> str:
        """The format name other nodes send to for ``queue`` here."""
        return f"DIRECT=TCP:{HOST}:{self.port}\\private$\\{queue}"

    async def create_queue(self, name: str, *, transactional: bool = True) -> None:
        unit = self.core.queues.create(name, transactional=transactional, wall=time.time())
        outcome = await self.committer.submit(unit)
        assert outcome.error is None, outcome.error

    async def send(
        self,
        destination: str,
        bodies: Iterable[bytes],
        *,
        transactional: bool = True,
        delivery: int = 1,
        **properties: Any,
    ) -> None:
        """Commit sends as a client does: in one transaction, or (not
        ``transactional``) one unit each; ``delivery`` 1 recoverable, 0 express;
        ``properties``: more fields of the messages (``journal``, ...)."""
        core = self.core
        with self._as_me():
            if transactional:
                tx = core.begin(self, next(self._tx_ids), trio.current_time())
                for body in bodies:
                    message = wire.MessageProperties(
                        destination=destination, body=body, **properties
                    )
                    core.prepare_send(message, tx=tx, now=trio.current_time(), wall=time.time())
                unit = core.commit(tx)
                outcome = await self.committer.submit(unit)
                woken, error = core.commit_done(tx, unit, outcome)
                assert error is None, error
                self.signals.notify(woken)
                return
            for body in bodies:
                message = wire.MessageProperties(
                    destination=destination, body=body, delivery=delivery, **properties
                )
                prepared = core.prepare_send(
                    message, tx=None, now=trio.current_time(), wall=time.time()
                )
                assert prepared is not None
                assert prepared.unit is not None
                outcome = await self.committer.submit(prepared.unit)
                core.send_done(prepared, outcome)
                woken = {r.queue_id for r in outcome.results if isinstance(r, storage.Appended)}
                self.signals.notify(woken)

    def notify(self, queue_ids: Iterable[int]) -> None:
        """``OutgoingQueues.queues_changed`` after a unit written outside :meth:`send`."""
        with self._as_me():
            self.peering.outgoing_queues.queues_changed(queue_ids)

    def messages(self, queue: str) -> list[wire.MessageProperties]:
        """A queue's messages, in lookup order."""
        record = self.store.get_queue(queue)
        assert record is not None, f"no queue {queue!r} on {self.name}"
        rows = self.store.read_range(record.queue_id, limit=1 << 20)
        return [
            wire.MessageProperties.from_bytes(storage.message_payload(data)) for _, data in rows
        ]

    def bodies(self, queue: str) -> list[bytes]:
        """A queue's message bodies, in lookup order."""
        return [bytes(message.body) for message in self.messages(queue)]

    def outgoing_queue(self) -> storage.QueueRecord:
        """The one outgoing queue (the test sends to one destination)."""
        [record] = [q for q in self.store.list_queues() if q.kind is storage.QueueKind.OUTGOING]
        return record

    def depth(self, queue_id: int) -> int:
        """Messages in a queue (by id), as its record counts them."""
        record = self.store.get_queue_by_id(queue_id)
        assert record is not None, f"no queue {queue_id} on {self.name}"
        return record.depth

    def outgoing_state(self) -> storage.OutgoingState:
        state = self.store.outgoing_state(self.outgoing_queue().queue_id)
        assert state is not None
        return state

    def link(self, to: Node) -> Link:
        """The link to another node."""
        return self.peering.links[to.address]


# ---------------------------------------------------------------------- the network


@dataclass(eq=False)
class Pair:
    """A connection made with :meth:`Network.connect`."""

    initiator: PeerConnection
    acceptor: PeerConnection
    #: The initiator's end of the connection, and the acceptor's.
    near: FaultStream
    far: FaultStream
    #: Set once both have ended.
    done: trio.Event


class Network:
    """Nodes and the memory connections between them."""

    def __init__(self, root: Path, nursery: trio.Nursery, clock: _WallClock) -> None:
        self.root = root
        self.nursery = nursery
        #: The wall clock the peering modules read (``clock.step(seconds)``).
        self.clock = clock
        self.nodes: dict[tuple[str, int], Node] = {}
        self._channels: dict[tuple[str, str], Channel] = {}
        #: Links connect by themselves (else they wait forever to connect).
        self.auto_connect = True
        #: (initiator, acceptor) node names of every connection made, in order.
        self.connections: list[tuple[str, str]] = []
        self._ports = itertools.count(40000)

    def node(self, name: str, port: int, settings: Iterable[str] = ()) -> Node:
        """A node (not started)."""
        node = Node(self, name, port, settings)
        self.nodes[node.address] = node
        return node

    async def start(self, name: str, port: int, settings: Iterable[str] = ()) -> Node:
        """A started node."""
        node = self.node(name, port, settings)
        await node.start()
        return node

    def channel(self, sender: Node, receiver: Node) -> Channel:
        """The direction ``sender`` -> ``receiver``."""
        key = (sender.name, receiver.name)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = Channel()
        return channel

    def _pair(self, initiator: Node, acceptor: Node) -> tuple[FaultStream, FaultStream]:
        left, right = trio.testing.memory_stream_pair()
        forward = self.channel(initiator, acceptor)
        backward = self.channel(acceptor, initiator)
        near = FaultStream(left, sending=forward, receiving=backward, peer=acceptor.address)
        far = FaultStream(
            right, sending=backward, receiving=forward, peer=(HOST, next(self._ports))
        )
        self.connections.append((initiator.name, acceptor.name))
        return near, far

    async def open_tcp_stream(self, host: str, port: int, **_: Any) -> FaultStream:
        """``trio.open_tcp_stream`` for the nodes' links."""
        source = _current.get()
        assert source is not None, "a link connected outside any node's tasks"
        if not self.auto_connect:
            await trio.sleep_forever()
        target = self.nodes.get((host, port))
        if target is None or not target.running:
            raise OSError(errno.ECONNREFUSED, f"connection refused by {host}:{port}")
        near, far = self._pair(source, target)
        target.nursery.start_soon(target.serve, far)
        return near

    async def connect(self, initiator: Node, acceptor: Node) -> Pair:
        """A session between two nodes, made by hand (no link): the initiator carries
        the initiator's outgoing queues for ``acceptor``, as its link's would.

        Set ``auto_connect`` off first, so that the link does not connect too.
        """
        near, far = self._pair(initiator, acceptor)
        link = initiator.link(acceptor)
        outgoing = PeerConnection(
            initiator.peering.context,
            near,
            role=Role.INITIATOR,
            peer=link.name,
            queues=link.queues,
        )
        incoming = PeerConnection(
            acceptor.peering.context, far, role=Role.ACCEPTOR, peer=f"{HOST}:memory"
        )
        done = trio.Event()
        link.connection = outgoing

        async def run_initiator() -> None:
            try:
                await outgoing.run()
            finally:
                link.connection = None
                for queue in link.queues:
                    queue.machine.connection_lost()

        async def run_both() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_initiator)
                nursery.start_soon(incoming.run)
            done.set()

        self.nursery.start_soon(run_both)
        return Pair(outgoing, incoming, near, far, done)


@asynccontextmanager
async def open_network(root: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Network]:
    """A network with no node yet; every node is stopped at the end."""
    clock = _WallClock()
    async with trio.open_nursery() as nursery:
        network = Network(root, nursery, clock)
        monkeypatch.setattr(trio, "open_tcp_stream", network.open_tcp_stream)
        try:
            yield network
        finally:
            nursery.cancel_scope.cancel()


async def wait_until(
    predicate: Callable[[], bool], *, within: float = 600.0, step: float = 0.05, what: str = ""
) -> float:
    """Sleep (trio's clock) until ``predicate()``; returns the time it took.

    Raises:
        AssertionError: not within ``within`` seconds.
    """
    start = trio.current_time()
    deadline = start + within
    while not predicate():
        if trio.current_time() >= deadline:
            msg = f"not within {within:g} s: {what or predicate}"
            raise AssertionError(msg)
        await trio.sleep(step)
    return trio.current_time() - start
