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

import json
import random
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from bad_peer_kit import (
    CLOSE_WITHIN,
    CONNECTION_PARAMETERS,
    RAW_QUEUE,
    RawPeer,
    Traffic,
    depth,
    log_tail,
    outgoing_empty,
    outgoing_text,
    wait_for,
)
from helpers import PEER_FAST, DaemonProcess, log_events, settings  # type: ignore[import-not-found, unused-ignore]

import wire
from qmgr.client import connect


def closes_for(raw: RawPeer) -> list[str]:
    """The reasons logged for closing ``raw``'s connection (not an earlier one that
    came from the same port)."""
    found = []
    for line in raw.daemon.log()[raw.log_start :].splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "peer_session_closed" and entry.get("peer") == raw.local:
            found.append(str(entry.get("reason")))
    return found


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
            assert daemon.running, f"after {after}, {daemon.name} is gone\n{log_tail(daemon)}"
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


def _close_logged(raw: RawPeer, case: str) -> str:
    """Wait for the daemon to log the close of ``raw``'s connection; its reason."""
    wait_for(
        lambda: bool(closes_for(raw)),
        5.0,
        lambda: f"{case}: no peer_session_closed logged for {raw.local}\n{log_tail(raw.daemon)}",
    )
    return closes_for(raw)[-1]


def _expect_closed(peers: Peers, raw: RawPeer, case: str, reason: str = "") -> str:
    """The daemon closed ``raw`` at once and logged why (containing ``reason``)."""
    assert raw.closed_by_daemon(), f"{case}: the daemon kept the connection open"
    logged = _close_logged(raw, case)
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
            assert packet is not None, f"closed: {closes_for(raw)}"
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


def test_a_peer_announcing_this_queue_managers_own_guid_cannot_deliver(peers: Peers) -> None:
    """A queue manager's sessions to itself carry nothing (they close once they see
    its GUID); a peer announcing that GUID and sending is another (a copied data
    directory, an impostor), whose messages would pass for this one's own."""
    with connect(peers.b.address) as qb:
        own = qb.status().qm_guid
    with RawPeer(peers.b) as raw:
        raw.qm = own
        raw.handshake()
        raw.send(raw.user_message(b"not-ours"))
        _expect_closed(peers, raw, "own GUID", "announced this queue manager's own GUID")
    assert peers.raw_stored() == []
    assert '"peer_claims_our_guid"' in peers.b.log()
    peers.traffic.expect_progress("a peer with our own GUID")


def test_two_sessions_announcing_one_guid_are_reported(peers: Peers) -> None:
    """Two queue managers started from copies of one data directory share its GUID
    and lose each other's messages (each one's are taken for the other's resends):
    the receiver cannot tell them apart, but it says when both are connected."""
    with RawPeer(peers.b) as first, RawPeer(peers.b) as second:
        second.qm = first.qm
        first.handshake()
        assert '"peer_guid_twice"' not in peers.b.log()
        second.handshake()
        wait_for(
            lambda: '"peer_guid_twice"' in peers.b.log(),
            5.0,
            lambda: f"no peer_guid_twice logged\n{log_tail(peers.b)}",
        )
    peers.traffic.expect_progress("two sessions with one GUID")


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
            reason = _close_logged(raw, f"half a {packet}")
            assert "middle of a packet" in reason, reason
        peers.traffic.expect_progress(f"half a {packet}, while another half packet is held")
        assert not closes_for(holder), "the holder's connection was closed early"
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
        lambda: f"no peer_refused for {raw.local}\n{log_tail(b)}",
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
            lambda: f"A did not keep trying: {outgoing_text(qa)}\n{log_tail(a)}",
        )
        for _ in range(2):  # over A's next attempts: waiting, never delivered, never dropped
            refusals = len(log_events(b, "peer_refused"))
            wait_for(
                lambda n=refusals: len(log_events(b, "peer_refused")) > n,
                10.0,
                lambda: f"A did not keep trying: {outgoing_text(qa)}\n{log_tail(a)}",
            )
            (info,) = qa.outgoing()
            assert info.state in ("waiting", "connecting"), outgoing_text(qa)
            assert info.waiting + info.unacknowledged == len(sent), outgoing_text(qa)
            assert depth(b, "in") == 0
        assert info.last_error, "A does not say why it cannot deliver"
    # Allowed again, B gets every message exactly once, in order.
    b.stop()
    b.extra_args = [*PEER_FAST]
    b.start()
    with connect(b.address) as qb, connect(a.address) as qa:
        wait_for(
            lambda: depth(b, "in") >= len(sent) and outgoing_empty(qa),
            30.0,
            lambda: f"B holds {depth(b, 'in')} of {len(sent)}; {outgoing_text(qa)}\n{log_tail(a)}",
        )
        got = [message.body for message in qb.peek_range("in")]
    assert got == sent


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
