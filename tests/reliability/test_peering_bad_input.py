"""Garbage on the peer port: the bad connection is closed, clients and real peers are served.

A real queue manager B runs, and a second real queue manager A delivers to
it all along: a producer commits small transactions on A for B's queue
``in``, a consumer on B's client port receives them, and a third client
sends to and receives from B's local queue ``local``. Each test opens raw
TCP connections to B's peer port and sends what a peer should not: random
bytes, a BaseHeader declaring a huge PacketSize, packets out of session
order (a UserMessage before ConnectionParameters, ...), half a packet and
then a close. For each, B must close that connection (at once, without
waiting for bytes that will never come) and log why; meanwhile and
afterwards the three clients keep going, and at the end every message A
committed arrived exactly once, in commit order, and nothing the raw
connections sent was stored.

A and B, their queues and the traffic are set up once for the module (two
daemons and three clients take longer to start than most tests take to run);
each test is checked to leave them as it found them: after it, A's producer
pauses until every message it committed has arrived once, in order, A has
nothing left to send again, and the raw queue is empty (the control test
takes its message back out).

The last two tests start queue managers of their own. One starts B with a
``peers.accept_from`` that excludes loopback: a connection from 127.0.0.1 is
closed at once with ``peer_refused`` in the log, and A's messages for B stay
in A's outgoing queue (waiting, not lost) until B is restarted with loopback
allowed, when they arrive exactly once. The other holds fifty silent
connections to B's peer port while A opens its session.

Packets are built with the ``wire`` package, as a real peer would build them.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from helpers import PEER_FAST, DaemonProcess, log_events, settings  # type: ignore[import-not-found, unused-ignore]

import wire
from qmgr.client import QueueManager, connect

#: How soon a bad connection must be closed.
CLOSE_WITHIN = 3.0
#: The queue raw peers address; only the well-behaved raw peer's message may land in it.
RAW_QUEUE = "raw"


def wait_for(predicate: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
    """Poll ``predicate`` until true; fail with ``what()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s: {what()}")
        time.sleep(0.02)


def closes_for(daemon: DaemonProcess, peer: str) -> list[str]:
    """The reasons logged for closing the peer connection from ``peer`` (HOST:PORT)."""
    return [
        str(entry.get("reason"))
        for entry in log_events(daemon, "peer_session_closed")
        if entry.get("peer") == peer
    ]


# --------------------------------------------------------------------------
# A raw peer connection
# --------------------------------------------------------------------------


class RawPeer:
    """A plain TCP connection to a daemon's peer port, speaking wire packets by hand."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.sock = socket.create_connection(("127.0.0.1", daemon.peer_port), timeout=5.0)
        host, port = self.sock.getsockname()[:2]
        #: ``HOST:PORT`` as the daemon sees (and logs) us.
        self.local = f"{host}:{port}"
        self.decoder = wire.FrameDecoder()
        self.qm = uuid.uuid4()
        self.remote_qm: uuid.UUID | None = None

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_packet(self, timeout: float = 5.0) -> wire.Packet | None:
        """The next packet from the daemon, or None if it closed the connection."""
        self.sock.settimeout(timeout)
        while True:
            packet = self.decoder.next_packet()
            if packet is not None:
                return packet
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.decoder.receive_data(data)

    def closed_by_daemon(self, timeout: float = CLOSE_WITHIN) -> bool:
        """Whether the daemon closes the connection within ``timeout`` (what it sends
        meanwhile is read and dropped)."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.sock.settimeout(left)
                if not self.sock.recv(65536):
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def establish(self) -> wire.EstablishConnection:
        """Send an EstablishConnection and return the daemon's answer."""
        self.send(
            wire.build_packet(
                wire.EstablishConnection(
                    client_qm=self.qm, timestamp=int(time.monotonic() * 1000) & 0xFFFFFFFF
                )
            )
        )
        answer = self.read_packet()
        assert isinstance(answer, wire.EstablishConnection), f"answer: {answer!r}"
        assert not answer.refused, "the daemon refused a valid EstablishConnection"
        assert answer.client_qm == self.qm
        self.remote_qm = answer.server_qm
        return answer

    def parameters(self) -> wire.ConnectionParameters:
        """Send ConnectionParameters and return the daemon's answer (the session is open)."""
        self.send(wire.build_packet(CONNECTION_PARAMETERS))
        answer = self.read_packet()
        assert isinstance(answer, wire.ConnectionParameters), f"answer: {answer!r}"
        assert not answer.refused
        return answer

    def handshake(self) -> None:
        self.establish()
        self.parameters()

    def user_message(self, body: bytes, number: int = 1, queue: str = RAW_QUEUE) -> bytes:
        """A built transactional UserMessage from this peer for ``queue`` on the daemon,
        number ``number`` of a fresh sequence."""
        return user_message(self.daemon, queue, body, source_qm=self.qm, number=number)


CONNECTION_PARAMETERS = wire.ConnectionParameters(
    recoverable_ack_timeout=500, ack_timeout=20000, window_size=64
)
#: One sequence for every raw peer (each has its own source GUID, so its own stream).
SEQUENCE = wire.TxSequenceId(ordinal=1, timestamp=int(time.time()))


def user_message(
    daemon: DaemonProcess, queue: str, body: bytes, *, source_qm: uuid.UUID, number: int
) -> bytes:
    message = wire.MessageProperties(
        body=body,
        label="raw",
        transactional=True,
        priority=0,
        source_qm=source_qm,
        ordinal=number,
        sent_time=time.time(),
    )
    packet = wire.message_to_packet(
        message,
        destination=wire.DirectQueue(name=f"TCP:127.0.0.1:{daemon.peer_port}\\private$\\{queue}"),
        transaction=wire.TransactionHeader(
            flags=wire.TransactionFlags.FIRST | wire.TransactionFlags.LAST,
            transaction_id=number,
            sequence_id=SEQUENCE,
            sequence_number=number,
            previous_sequence_number=number - 1,
        ),
    )
    return wire.build_packet(packet)


# --------------------------------------------------------------------------
# Traffic that must go on throughout
# --------------------------------------------------------------------------


class Traffic:
    """Three clients at work while raw peers misbehave.

    * the producer commits transactions of 1-3 messages on A for B's ``in``;
    * the consumer receives from ``in`` on B (so A -> B delivery is watched);
    * the echo client sends to B's ``local`` and receives the message back.

    :meth:`checkpoint` holds the producer between two transactions (it holds
    ``_producing`` for each) and, once A has nothing left to send, the
    consumer between two receives (:meth:`_hold_consumer`), to compare what
    was committed with what arrived.
    """

    def __init__(self, a: DaemonProcess, b: DaemonProcess) -> None:
        self.a = a
        self.b = b
        self.produced: list[bytes] = []
        self.consumed: list[bytes] = []
        self.echoes = 0
        self.slowest_echo = 0.0
        self.errors: list[str] = []
        self._stop_producing = threading.Event()
        self._stop = threading.Event()
        self._producing = threading.Lock()
        #: Set to hold the consumer; it sets ``_consumer_held`` and waits for ``_release``.
        self._hold = threading.Event()
        self._consumer_held = threading.Event()
        self._release = threading.Event()
        self._threads = [
            threading.Thread(target=self._guard, args=(self._produce,), name="producer"),
            threading.Thread(target=self._guard, args=(self._consume,), name="consumer"),
            threading.Thread(target=self._guard, args=(self._echo,), name="echo"),
        ]

    def start(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def _guard(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:
            self.errors.append(f"{threading.current_thread().name}: {exc!r}")

    def _produce(self) -> None:
        destination = f"DIRECT=TCP:127.0.0.1:{self.b.peer_port}\\private$\\in"
        rng = random.Random(7)
        tx = 0
        with connect(self.a.address, client_name="producer") as qa:
            while not self._stop_producing.is_set():
                with self._producing:
                    tx += 1
                    bodies = [b"T%06d:%d" % (tx, i) for i in range(rng.randint(1, 3))]
                    with qa.begin() as transaction:
                        for data in bodies:
                            transaction.send(destination, data)
                    self.produced.extend(bodies)
                time.sleep(0.01)  # a pace, not a wait for anything

    def _consume(self) -> None:
        with connect(self.b.address, client_name="consumer") as qb:
            while not self._stop.is_set():
                if self._hold.is_set():
                    self._consumer_held.set()
                    self._release.wait()
                    self._release.clear()
                    continue
                message = qb.receive("in", timeout=0.05)  # (a hold waits for it)
                if message is not None:
                    self.consumed.append(message.body)

    def _echo(self) -> None:
        with connect(self.b.address, client_name="echo") as qb:
            while not self._stop.is_set():
                data = b"echo-%d" % self.echoes
                started = time.monotonic()
                qb.send("local", data)
                message = qb.receive("local", timeout=10.0)
                assert message is not None, f"{data!r} sent to local did not come back"
                assert message.body == data, f"sent {data!r}, received {message.body!r}"
                self.slowest_echo = max(self.slowest_echo, time.monotonic() - started)
                self.echoes += 1
                time.sleep(0.01)  # a pace, not a wait for anything

    def stop(self) -> None:
        """Stop every client (without checking anything)."""
        self._stop_producing.set()
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def progress(self) -> tuple[int, int, int]:
        return len(self.produced), len(self.consumed), self.echoes

    def expect_progress(self, after: str, timeout: float = 20.0) -> None:
        """Every client makes progress from now on (B serves clients and A's deliveries)."""
        start = self.progress()
        wait_for(
            lambda: (
                all(now >= then + 3 for now, then in zip(self.progress(), start, strict=True))
                or bool(self.errors)
            ),
            timeout,
            lambda: (
                f"after {after}, (produced, consumed, echoes) went from {start} to "
                f"{self.progress()}; errors {self.errors}\n{_tail(self.b)}"
            ),
        )
        assert not self.errors, f"after {after}: {self.errors}"

    def checkpoint(self, after: str, timeout: float = 60.0) -> None:
        """With the producer held: every message committed on A so far reached B
        exactly once, in order, and A has nothing left that it could send again."""
        with self._producing:
            self._settle(after, timeout)
            with self._hold_consumer():
                assert _depth(self.b, "in") == 0, f"after {after}: more arrived than was sent"
                self._check(after)

    def finish(self, timeout: float = 60.0) -> None:
        """Stop producing; every message committed on A reaches B exactly once, in
        order; stop every client."""
        self._stop_producing.set()
        self._threads[0].join(30)
        self._settle("the end", timeout)
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        assert _depth(self.b, "in") == 0, "at the end: more arrived than was sent"
        self._check("the end")

    @contextlib.contextmanager
    def _hold_consumer(self) -> Iterator[None]:
        """Hold the consumer between two receives (everything it took is in ``consumed``)."""
        self._hold.set()
        try:
            assert self._consumer_held.wait(10.0) or self.errors, "the consumer did not pause"
            yield
        finally:
            self._hold.clear()
            self._consumer_held.clear()
            self._release.set()

    def _settle(self, after: str, timeout: float) -> None:
        """Wait until what A committed arrived and A has nothing waiting or
        unacknowledged: nothing more can come."""
        wait_for(
            lambda: bool(self.errors) or self._delivered(),
            timeout,
            lambda: (
                f"after {after}, {len(self.consumed)} of {len(self.produced)} messages from A "
                f"arrived\n{_tail(self.a)}\n{_tail(self.b)}"
            ),
        )

    def _delivered(self) -> bool:
        """Everything committed on A arrived, and A has nothing left to send."""
        if len(self.consumed) < len(self.produced):
            return False
        with connect(self.a.address) as qa:
            return _outgoing_empty(qa)

    def _check(self, after: str) -> None:
        assert not self.errors, f"after {after}: {self.errors}"
        assert self.consumed == self.produced, (
            f"after {after}: A committed {len(self.produced)} messages, B delivered "
            f"{len(self.consumed)}; first difference at "
            f"{_first_difference(self.consumed, self.produced)}"
        )
        assert self.echoes > 0
        assert self.slowest_echo < 5.0, f"a local send+receive on B took {self.slowest_echo} s"


def _first_difference(got: list[bytes], expected: list[bytes]) -> str:
    for index, (x, y) in enumerate(zip(got, expected, strict=False)):
        if x != y:
            return f"{index}: got {got[index : index + 3]}, expected {expected[index : index + 3]}"
    return f"{min(len(got), len(expected))} (one list is a prefix of the other)"


def _tail(daemon: DaemonProcess, lines: int = 20) -> str:
    return f"--- {daemon.name} log tail:\n" + "\n".join(daemon.log().splitlines()[-lines:])


@dataclass
class Peers:
    a: DaemonProcess
    b: DaemonProcess
    traffic: Traffic

    def raw_stored(self) -> list[bytes]:
        with connect(self.b.address) as qb:
            return [message.body for message in qb.peek_range(RAW_QUEUE)]

    def check_healthy(self, after: str) -> None:
        """Both daemons run, every client goes on, nothing raw is stored, and what A
        committed so far arrived exactly once, in order."""
        for daemon in (self.a, self.b):
            assert daemon.running, f"after {after}, {daemon.name} is gone\n{_tail(daemon)}"
        self.traffic.expect_progress(after)
        assert self.raw_stored() == [], f"after {after}, raw messages were stored"
        self.traffic.checkpoint(after)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    """B with queues ``in``, ``local`` and ``raw``; A delivering to B; traffic running
    (for the whole module: see the module's docstring)."""
    directory = tmp_path_factory.mktemp("peers")
    b = DaemonProcess(directory / "qm-b", name="qm-b", extra_args=PEER_FAST)
    a = DaemonProcess(directory / "qm-a", name="qm-a", extra_args=PEER_FAST)
    traffic: Traffic | None = None
    try:
        b.start()
        a.start()
        with connect(b.address) as qb:
            qb.create_queue("in", transactional=True)
            qb.create_queue("local")
            qb.create_queue(RAW_QUEUE, transactional=True)
        traffic = Traffic(a, b).start()
        traffic.expect_progress("start-up")
        yield Peers(a, b, traffic)
        traffic.finish()
    finally:
        if traffic is not None:
            traffic.stop()
        a.close()
        b.close()


@pytest.fixture
def peers(deployment: Peers, request: pytest.FixtureRequest) -> Iterator[Peers]:
    """The module's deployment, checked healthy after the test (which the next
    one relies on)."""
    yield deployment
    deployment.check_healthy(request.node.name)


def _close_logged(daemon: DaemonProcess, peer: str, case: str) -> str:
    """Wait for the daemon to log the close of the connection from ``peer``; its reason."""
    wait_for(
        lambda: bool(closes_for(daemon, peer)),
        5.0,
        lambda: f"{case}: no peer_session_closed logged for {peer}\n{_tail(daemon)}",
    )
    return closes_for(daemon, peer)[-1]


def _expect_closed(peers: Peers, raw: RawPeer, case: str, reason: str = "") -> str:
    """The daemon closed ``raw`` at once and logged why (containing ``reason``)."""
    assert raw.closed_by_daemon(), f"{case}: the daemon kept the connection open"
    logged = _close_logged(peers.b, raw.local, case)
    assert reason in logged, f"{case}: closed with reason {logged!r}, expected {reason!r}"
    return logged


# --------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------


def test_a_peer_that_follows_the_protocol_is_served(peers: Peers) -> None:
    """The control: a hand-made peer's handshake and message are accepted and stored,
    so the refusals below are about what they send, not how it is built."""
    with RawPeer(peers.b) as raw:
        raw.handshake()
        raw.send(raw.user_message(b"well-behaved"))
        deadline = time.monotonic() + 10
        acked = False
        while not acked and time.monotonic() < deadline:
            packet = raw.read_packet(timeout=max(0.1, deadline - time.monotonic()))
            assert packet is not None, f"closed: {closes_for(peers.b, raw.local)}"
            acked = isinstance(packet, wire.SessionAck) or (
                isinstance(packet, wire.UserMessage) and packet.session is not None
            )
        assert acked, "no SessionAck for the message"
    wait_for(
        lambda: peers.raw_stored() == [b"well-behaved"],
        10,
        lambda: f"raw queue holds {peers.raw_stored()}",
    )
    peers.traffic.expect_progress("a well-behaved raw peer")
    with connect(peers.b.address) as qb, qb.begin() as transaction:
        taken = transaction.receive(RAW_QUEUE, timeout=0)
    assert taken is not None
    assert taken.body == b"well-behaved"


def test_random_bytes_are_refused_and_hurt_nobody(peers: Peers) -> None:
    rng = random.Random(1801)
    for index in range(30):
        payload = rng.randbytes(rng.randint(1, 4096))
        case = f"random payload {index} ({len(payload)} bytes, starts {payload[:8].hex()})"
        with RawPeer(peers.b) as raw:
            try:
                raw.send(payload)
                if len(payload) < 16:
                    raw.sock.shutdown(socket.SHUT_WR)  # less than a BaseHeader: only EOF ends it
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while we were still writing: fine
            _expect_closed(peers, raw, case)
    peers.traffic.expect_progress("random bytes")
    assert peers.raw_stored() == []


@pytest.mark.parametrize("declared", [wire.MAX_PACKET_SIZE + 1, 0x7FFFFFF0, 0xFFFFFFFF])
@pytest.mark.parametrize("when", ["first packet", "after the handshake"])
def test_a_huge_declared_packet_size_is_refused_at_once(
    peers: Peers, declared: int, when: str
) -> None:
    with RawPeer(peers.b) as raw:
        if when == "after the handshake":
            raw.handshake()
        packet = bytearray(raw.user_message(b"x" * 64))
        packet[8:12] = declared.to_bytes(4, "little")  # BaseHeader.PacketSize
        started = time.monotonic()
        raw.send(bytes(packet))  # and no more: the daemon must not wait for the rest
        reason = _expect_closed(peers, raw, f"PacketSize {declared} {when}", "PacketSize")
        took = time.monotonic() - started
    assert took < CLOSE_WITHIN, took
    peers.traffic.expect_progress(f"a declared PacketSize of {declared} ({reason})")
    assert peers.raw_stored() == []


#: Packets a peer sends out of the session order (the handshake of [MS-MQQB] §3.1).
OUT_OF_ORDER = [
    "UserMessage before ConnectionParameters",
    "UserMessage as the first packet",
    "ConnectionParameters before EstablishConnection",
    "SessionAck before ConnectionParameters",
    "a second EstablishConnection in an open session",
    "a second ConnectionParameters in an open session",
]


@pytest.mark.parametrize("case", OUT_OF_ORDER)
def test_packets_out_of_session_order_close_the_session(peers: Peers, case: str) -> None:
    with RawPeer(peers.b) as raw:
        offending: bytes
        if case == "UserMessage before ConnectionParameters":
            raw.establish()
            offending, expected = raw.user_message(b"out of order"), "UserMessage"
        elif case == "UserMessage as the first packet":
            offending, expected = raw.user_message(b"out of order"), "UserMessage"
        elif case == "ConnectionParameters before EstablishConnection":
            offending = wire.build_packet(CONNECTION_PARAMETERS)
            expected = "ConnectionParameters"
        elif case == "SessionAck before ConnectionParameters":
            raw.establish()
            offending = wire.build_packet(wire.SessionAck(session=wire.SessionHeader()))
            expected = "SessionAck"
        elif case == "a second EstablishConnection in an open session":
            raw.handshake()
            offending = wire.build_packet(wire.EstablishConnection(client_qm=raw.qm, timestamp=1))
            expected = "EstablishConnection"
        else:
            raw.handshake()
            offending, expected = wire.build_packet(CONNECTION_PARAMETERS), "ConnectionParameters"
        # The offending packet, then a valid message that must not be stored either.
        raw.send(offending + raw.user_message(b"after the offence", number=2))
        reason = _expect_closed(peers, raw, case, expected)
    peers.traffic.expect_progress(f"{case} ({reason})")
    assert peers.raw_stored() == [], "a message from a broken session was stored"


@pytest.mark.parametrize("packet", ["EstablishConnection", "UserMessage after the handshake"])
def test_half_a_packet_then_close(peers: Peers, packet: str) -> None:
    b = peers.b
    # One connection holds half a packet open all along: it must block nobody.
    with RawPeer(b) as holder:
        holder.handshake()
        whole = holder.user_message(b"held")
        holder.send(whole[: len(whole) // 2])
        for index in range(5):
            with RawPeer(b) as raw:
                if packet == "EstablishConnection":
                    data = wire.build_packet(
                        wire.EstablishConnection(client_qm=raw.qm, timestamp=index)
                    )
                else:
                    raw.handshake()
                    data = raw.user_message(b"half %d" % index)
                cut = random.Random(index).randint(1, len(data) - 1)
                raw.send(data[:cut])
            # Closed by us mid-packet (the bytes sent come before the close):
            # the daemon notices and says so.
            reason = _close_logged(b, raw.local, f"half a {packet}")
            assert "middle of a packet" in reason, reason
        peers.traffic.expect_progress(f"half a {packet}, while another half packet is held")
        assert not closes_for(b, holder.local), "the holder's connection was closed early"
    assert peers.raw_stored() == []


def test_a_peer_not_in_accept_from_is_refused_and_its_messages_wait(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    b = daemon_factory(
        name="qm-b", extra_args=[*PEER_FAST, "--set", 'peers.accept_from=["10.255.255.0/24"]']
    )
    a = daemon_factory(name="qm-a", extra_args=PEER_FAST)
    with connect(b.address) as qb:
        qb.create_queue("in", transactional=True)
    # A raw connection from 127.0.0.1 is closed at once, before it says anything.
    with RawPeer(b) as raw:
        started = time.monotonic()
        assert raw.closed_by_daemon(), "a peer outside accept_from was kept connected"
        assert time.monotonic() - started < CLOSE_WITHIN
    wait_for(
        lambda: any(e.get("peer") == raw.local for e in log_events(b, "peer_refused")),
        5.0,
        lambda: f"no peer_refused for {raw.local}\n{_tail(b)}",
    )
    # A's messages for B wait in A's outgoing queue, and none reaches B.
    destination = f"DIRECT=TCP:127.0.0.1:{b.peer_port}\\private$\\in"
    sent: list[bytes] = []
    with connect(a.address) as qa:
        for tx in range(5):
            with qa.begin() as transaction:
                for index in range(3):
                    sent.append(b"T%d:%d" % (tx, index))
                    transaction.send(destination, sent[-1])
        refusals = len(log_events(b, "peer_refused"))
        wait_for(
            lambda: len(log_events(b, "peer_refused")) >= refusals + 3,
            10.0,
            lambda: f"A did not keep trying: {_outgoing(qa)}\n{_tail(a)}",
        )
        for _ in range(2):  # over A's next attempts: waiting, never delivered, never dropped
            refusals = len(log_events(b, "peer_refused"))
            wait_for(
                lambda n=refusals: len(log_events(b, "peer_refused")) > n,
                10.0,
                lambda: f"A did not keep trying: {_outgoing(qa)}\n{_tail(a)}",
            )
            (info,) = qa.outgoing()
            assert info.state in ("waiting", "connecting"), _outgoing(qa)
            assert info.waiting + info.unacknowledged == len(sent), _outgoing(qa)
            assert _depth(b, "in") == 0
        assert info.last_error, "A does not say why it cannot deliver"
    # Allowed again, B gets every message exactly once, in order.
    b.stop()
    b.extra_args = [*PEER_FAST]
    b.start()
    with connect(b.address) as qb, connect(a.address) as qa:
        wait_for(
            lambda: _depth(b, "in") >= len(sent) and _outgoing_empty(qa),
            30.0,
            lambda: f"B holds {_depth(b, 'in')} of {len(sent)}; {_outgoing(qa)}\n{_tail(a)}",
        )
        got = [message.body for message in qb.peek_range("in")]
    assert got == sent


def _depth(daemon: DaemonProcess, queue: str) -> int:
    with connect(daemon.address) as qm:
        return next(info.depth for info in qm.list_queues() if info.name == queue)


def _outgoing(qm: QueueManager) -> str:
    return "; ".join(
        f"{info.destination}: state={info.state} waiting={info.waiting} "
        f"unacknowledged={info.unacknowledged} last_error={info.last_error!r}"
        for info in qm.outgoing()
    )


def _outgoing_empty(qm: QueueManager) -> bool:
    return all(info.waiting == 0 and info.unacknowledged == 0 for info in qm.outgoing())


def test_silent_connections_cannot_keep_a_queue_manager_out(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    """Fifty connections to B's peer port that never open a session (within
    peers.init_timeout, a minute): A still opens its session and delivers at
    once, and B keeps at most peers.max_unauthenticated_per_address of them,
    closing the oldest (``peer_evicted``)."""
    b = daemon_factory(
        name="qm-b",
        extra_args=[
            *PEER_FAST,
            *settings("peers.max_connections=8", "peers.max_unauthenticated_per_address=4"),
        ],
    )
    a = daemon_factory(name="qm-a", extra_args=list(PEER_FAST))
    with connect(b.address) as qb:
        qb.create_queue("in", transactional=True)
    silent = [socket.create_connection(("127.0.0.1", b.peer_port), timeout=10) for _ in range(50)]
    try:
        wait_for(
            lambda: b.log().count('"peer_evicted"') >= 46,
            timeout=10,
            what=lambda: f"{b.log().count('peer_evicted')} evicted",
        )
        with connect(a.address) as qa:
            qa.send(
                f"DIRECT=TCP:127.0.0.1:{b.peer_port}\\private$\\in", b"through", transactional=True
            )
        with connect(b.address) as qb:
            message = qb.receive("in", timeout=10)
            assert message is not None
            assert message.body == b"through"
        assert '"peer_refused"' not in b.log()
    finally:
        for sock in silent:
            sock.close()
