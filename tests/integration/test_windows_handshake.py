"""A Windows initiator's handshake, as raw bytes against a real daemon's peer
port: the EstablishConnection of [MS-MQQB] §4.1.3 (its ServerGuid names another
queue manager) is answered with CS set before the close; with a NULL ServerGuid
the handshake goes on with the §4.1.5 ConnectionParameters; and beyond
``peers.max_connections`` the answer is CS as well (§3.1.5.3, reference §9)."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

from helpers import DaemonProcess, log_events, settings, wait_until

import wire
from qmgr.client import connect

VECTORS = Path(__file__).resolve().parents[1] / "wire" / "msmq" / "vectors"
REQUEST = bytes.fromhex((VECTORS / "4.1.3-establish-connection-request.hex").read_text())
PARAMETERS = bytes.fromhex((VECTORS / "4.1.5-connection-parameters-request.hex").read_text())


def _read_packet(sock: socket.socket) -> bytes | None:
    """One whole packet (its BaseHeader says how long), or None at the close."""
    data = b""
    while len(data) < 16 or len(data) < struct.unpack_from("<I", data, 8)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(3)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


def _null_server(request: bytes) -> bytes:
    """The §4.1.3 request with a NULL ServerGuid (as for a direct format name)."""
    return request[:36] + bytes(16) + request[52:]


def _guid(daemon: DaemonProcess) -> uuid.UUID:
    with connect(daemon.address) as qm:
        return qm.status().qm_guid


def test_a_request_for_another_queue_manager_is_answered_refused(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(name="qm-windows")
    ours = _guid(daemon)
    with socket.create_connection(("127.0.0.1", daemon.peer_port), timeout=10) as sock:
        sock.sendall(REQUEST)
        answer = _read_packet(sock)
        assert answer is not None, "closed without an answer"
        assert _closed(sock)
    assert len(answer) == 572
    packet = wire.parse_packet(answer)
    assert isinstance(packet, wire.EstablishConnection)
    assert packet.refused  # CS
    sent = wire.parse_packet(REQUEST)
    assert isinstance(sent, wire.EstablishConnection)
    assert (packet.client_qm, packet.timestamp) == (sent.client_qm, sent.timestamp)  # echoed
    assert packet.server_qm == ours
    assert answer[60:] == b"\x5a" * 512  # the server's padding
    # Logged as the connection ends, which may be just after the answer is read.
    wait_until(lambda: bool(log_events(daemon, "peer_session_closed")), timeout=10)
    [closed] = log_events(daemon, "peer_session_closed")
    assert "asked for queue manager" in str(closed["reason"])


def test_a_request_for_any_queue_manager_goes_on_to_its_parameters(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(name="qm-windows-open")
    with socket.create_connection(("127.0.0.1", daemon.peer_port), timeout=10) as sock:
        sock.sendall(_null_server(REQUEST))
        answer = _read_packet(sock)
        assert answer is not None
        accepted = wire.parse_packet(answer)
        assert isinstance(accepted, wire.EstablishConnection)
        assert not accepted.refused
        sock.sendall(PARAMETERS)
        reply = _read_packet(sock)
        assert reply is not None
        parameters = wire.parse_packet(reply)
        asked = wire.parse_packet(PARAMETERS)
    assert isinstance(parameters, wire.ConnectionParameters)
    assert isinstance(asked, wire.ConnectionParameters)
    # The timeouts are echoed; the window is the acceptor's own.
    assert parameters.ack_timeout == asked.ack_timeout
    assert parameters.recoverable_ack_timeout == asked.recoverable_ack_timeout
    assert parameters.window_size >= 1


def test_beyond_max_connections_the_answer_is_a_refusal(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(name="qm-windows-full", extra_args=settings("peers.max_connections=1"))
    with socket.create_connection(("127.0.0.1", daemon.peer_port), timeout=10) as first:
        first.sendall(_null_server(REQUEST))
        assert _read_packet(first) is not None
        first.sendall(PARAMETERS)
        assert _read_packet(first) is not None  # open: the one session allowed
        with socket.create_connection(("127.0.0.1", daemon.peer_port), timeout=10) as second:
            second.sendall(_null_server(REQUEST))
            answer = _read_packet(second)
            assert answer is not None, "closed without an answer"
            assert _closed(second)
        refused = wire.parse_packet(answer)
        assert isinstance(refused, wire.EstablishConnection)
        assert refused.refused
    reasons = [str(e["reason"]) for e in log_events(daemon, "peer_refused")]
    assert any("peers.max_connections" in reason for reason in reasons)


def _udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int, datagram: bytes) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        sock.sendto(datagram, ("127.0.0.1", port))
        try:
            return sock.recv(512)
        except TimeoutError:
            return None


def test_pings_are_answered_when_asked_for_and_say_who_would_be_refused(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    ping = bytes.fromhex((VECTORS / "4.1.1-ping-request.hex").read_text())
    port = _udp_port()
    daemon = daemon_factory(
        name="qm-pings", extra_args=settings("peers.ping=true", f"peers.ping_port={port}")
    )
    ours = _guid(daemon)
    answer = _ping(port, ping)
    assert answer is not None
    parsed = wire.parse_ping(answer)
    assert (parsed.qm, parsed.cookie) == (ours, wire.parse_ping(ping).cookie)
    assert not parsed.flags & wire.PingFlags.REFUSE
    # Not a ping: no answer, and the daemon goes on.
    assert _ping(port, b"\x00" * 24) is None
    assert _ping(port, ping) is not None
    # A daemon that would refuse this address says so.
    other_port = _udp_port()
    refusing = daemon_factory(
        name="qm-pings-refusing",
        extra_args=settings(
            "peers.ping=true", f"peers.ping_port={other_port}", 'peers.accept_from=["10.0.0.0/8"]'
        ),
    )
    assert refusing.running
    refused = _ping(other_port, ping)
    assert refused is not None
    assert wire.parse_ping(refused).flags & wire.PingFlags.REFUSE


def test_without_peers_ping_nothing_listens_for_pings(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(name="qm-no-pings")
    [started] = log_events(daemon, "queue_manager_started")
    assert started["ping_listen"] is None
