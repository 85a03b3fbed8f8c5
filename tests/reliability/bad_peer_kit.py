"""A hand-made peer and the traffic that must go on, for the peering bad-input tests.

:class:`RawPeer` is a plain TCP connection to a daemon's peer port that
speaks ``wire`` packets by hand (as a real peer would build them), so a test
can send what a peer should not. :class:`Traffic` keeps three clients at work
meanwhile (a producer on A for B, a consumer on B, an echo client on B) and
checks that everything A committed arrived exactly once, in order.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from helpers import DaemonProcess  # type: ignore[import-not-found, unused-ignore]

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


def depth(daemon: DaemonProcess, queue: str) -> int:
    with connect(daemon.address) as qm:
        return next(info.depth for info in qm.list_queues() if info.name == queue)


def outgoing_text(qm: QueueManager) -> str:
    return "; ".join(
        f"{info.destination}: state={info.state} waiting={info.waiting} "
        f"unacknowledged={info.unacknowledged} last_error={info.last_error!r}"
        for info in qm.outgoing()
    )


def outgoing_empty(qm: QueueManager) -> bool:
    return all(info.waiting == 0 and info.unacknowledged == 0 for info in qm.outgoing())


def _first_difference(got: list[bytes], expected: list[bytes]) -> str:
    for index, (x, y) in enumerate(zip(got, expected, strict=False)):
        if x != y:
            return f"{index}: got {got[index : index + 3]}, expected {expected[index : index + 3]}"
    return f"{min(len(got), len(expected))} (one list is a prefix of the other)"


def log_tail(daemon: DaemonProcess, lines: int = 20) -> str:
    return f"--- {daemon.name} log tail:\n" + "\n".join(daemon.log().splitlines()[-lines:])


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
        #: Where the daemon's log stood once connected: what it says of ``local``
        #: before is of an earlier connection from the same port.
        self.log_start = len(daemon.log())
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
                f"{self.progress()}; errors {self.errors}\n{log_tail(self.b)}"
            ),
        )
        assert not self.errors, f"after {after}: {self.errors}"

    def checkpoint(self, after: str, timeout: float = 60.0) -> None:
        """With the producer held: every message committed on A so far reached B
        exactly once, in order, and A has nothing left that it could send again."""
        with self._producing:
            self._settle(after, timeout)
            with self._hold_consumer():
                assert depth(self.b, "in") == 0, f"after {after}: more arrived than was sent"
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
        assert depth(self.b, "in") == 0, "at the end: more arrived than was sent"
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
                f"arrived\n{log_tail(self.a)}\n{log_tail(self.b)}"
            ),
        )

    def _delivered(self) -> bool:
        """Everything committed on A arrived, and A has nothing left to send."""
        if len(self.consumed) < len(self.produced):
            return False
        with connect(self.a.address) as qa:
            return outgoing_empty(qa)

    def _check(self, after: str) -> None:
        assert not self.errors, f"after {after}: {self.errors}"
        assert self.consumed == self.produced, (
            f"after {after}: A committed {len(self.produced)} messages, B delivered "
            f"{len(self.consumed)}; first difference at "
            f"{_first_difference(self.consumed, self.produced)}"
        )
        assert self.echoes > 0
        assert self.slowest_echo < 5.0, f"a local send+receive on B took {self.slowest_echo} s"
