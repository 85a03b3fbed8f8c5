"""Garbage on the client port: the bad connection is refused, everyone else is served.

Each case opens a raw TCP connection to the real daemon and sends something
a client should not: random bytes, frames cut short, frames whose declared
size is over the limit, requests before Hello, unknown kinds. The daemon
answers a malformed frame with ``ErrorReply(BAD_REQUEST)`` naming what was
wrong and closes that connection; meanwhile, and afterwards, a normal client
still sends and receives, and the stored data is unchanged.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Callable

import pytest
from helpers import DaemonProcess

from qmgr.client import connect
from wire import MessageProperties
from wire import client as cf


class RawSocket(socket.socket):
    """A plain TCP connection to the daemon, with its own reply decoder."""

    decoder: cf.ClientFrameDecoder


def _raw(daemon: DaemonProcess) -> RawSocket:
    host, port = daemon.address.rsplit(":", 1)
    sock = RawSocket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(5.0)
    sock.connect((host, int(port)))
    sock.decoder = cf.ClientFrameDecoder()
    return sock


def _read_reply(sock: RawSocket) -> cf.Frame | None:
    """Read one frame, or None if the daemon closed the connection first."""
    decoder = sock.decoder
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            return frame
        data = sock.recv(65536)
        if not data:
            return None
        decoder.receive_data(data)


def _closed_by_daemon(sock: socket.socket) -> bool:
    sock.settimeout(5.0)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


HELLO = cf.encode_frame(1, cf.Hello(client_name="bad-input"))


def _error_reply(sock: RawSocket, payload: bytes) -> cf.ErrorReply | None:
    """Send ``payload``; the ErrorReply the daemon answers (the replies before it
    passed over), or None if it closed the connection without one."""
    sock.sendall(payload)
    while (frame := _read_reply(sock)) is not None:
        if isinstance(frame.value, cf.ErrorReply):
            return frame.value
    return None


def _bad_request(sock: RawSocket, payload: bytes) -> str:
    error = _error_reply(sock, payload)
    assert error is not None, "the daemon closed without saying why"
    assert error.code == cf.ErrorCode.BAD_REQUEST
    assert _closed_by_daemon(sock)
    return error.message


@pytest.fixture
def seeded(shared_daemon: DaemonProcess, queue_name: str) -> tuple[DaemonProcess, str]:
    with connect(shared_daemon.address) as qm:
        qm.create_queue(queue_name, transactional=True)
        with qm.begin() as tx:
            for index in range(5):
                tx.send(queue_name, f"kept-{index}".encode())
    return shared_daemon, queue_name


def _still_serves(daemon: DaemonProcess, queue_name: str) -> None:
    with connect(daemon.address) as qm:
        kept = [m.body for m in qm.peek_range(queue_name)]
        assert kept == [f"kept-{index}".encode() for index in range(5)]
        qm.send(queue_name, b"after")
        assert [m.body for m in qm.peek_range(queue_name)][-1] == b"after"
        with qm.begin() as tx:
            last = None
            while (message := tx.receive(queue_name)) is not None:
                last = message
            assert last is not None
            assert last.body == b"after"
            tx.abort()


def test_oversized_declared_frame_is_refused_before_it_is_sent(
    seeded: tuple[DaemonProcess, str],
) -> None:
    daemon, queue = seeded
    with _raw(daemon) as sock:
        message = _bad_request(sock, HELLO + struct.pack("<IHHI", 1 << 31, cf.FrameKind.SEND, 0, 2))
    assert "limit" in message
    _still_serves(daemon, queue)


@pytest.mark.parametrize(
    ("name", "payload", "reason"),
    [
        ("request before hello", cf.encode_frame(1, cf.ListQueues()), "Hello"),
        ("reply sent as request", HELLO + cf.encode_frame(2, cf.Ok()), "not a request"),
        ("unknown kind", HELLO + struct.pack("<IHHI", 0, 0x70, 0, 2), "kind"),
        (
            "reserved flags",
            HELLO + struct.pack("<IHHI", 0, cf.FrameKind.LIST_QUEUES, 8, 2),
            "flags",
        ),
        (
            "send body shorter than declared",
            HELLO + struct.pack("<IHHI", 40, cf.FrameKind.SEND, 0, 2) + b"\x00" * 40,
            "Send",
        ),
        ("bad magic", cf.encode_frame(1, cf.Hello()).replace(b"QMGR", b"QMGX"), "Hello"),
        (
            "unsupported version",
            cf.encode_frame(
                1,
                cf.Hello(min_version=cf.PROTOCOL_VERSION + 1, max_version=cf.PROTOCOL_VERSION + 2),
            ),
            "",
        ),
    ],
    ids=lambda value: value.replace(" ", "-") if isinstance(value, str) else "",
)
def test_malformed_frames_get_a_clear_error_and_a_close(
    seeded: tuple[DaemonProcess, str], name: str, payload: bytes, reason: str
) -> None:
    daemon, queue = seeded
    with _raw(daemon) as sock:
        error = _error_reply(sock, payload)
        assert error is not None, f"{name}: closed without an error reply"
        assert error.code in (cf.ErrorCode.BAD_REQUEST, cf.ErrorCode.UNSUPPORTED_VERSION)
        assert reason in error.message, error.message
        assert _closed_by_daemon(sock)
    _still_serves(daemon, queue)


def test_random_and_truncated_bytes_never_hurt_other_clients(
    seeded: tuple[DaemonProcess, str],
) -> None:
    daemon, queue = seeded
    rng = random.Random(1802)
    message = MessageProperties(destination=queue, body=b"never committed" * 10)
    valid = HELLO + cf.encode_frame(2, cf.Send(message=message))
    payloads = [rng.randbytes(rng.randint(1, 4096)) for _ in range(25)]
    payloads += [valid[: rng.randint(1, len(valid) - 1)] for _ in range(15)]
    payloads += [HELLO + rng.randbytes(rng.randint(1, 600)) for _ in range(25)]
    # A client that holds a partial frame open must not block anyone.
    with _raw(daemon) as holder:
        holder.sendall(HELLO + struct.pack("<IHHI", 1000, cf.FrameKind.SEND, 0, 2) + b"\x00" * 10)
        for payload in payloads:
            with _raw(daemon) as sock:
                try:
                    sock.sendall(payload)
                    sock.shutdown(socket.SHUT_WR)
                    _closed_by_daemon(sock)
                except (ConnectionResetError, BrokenPipeError):
                    pass
        _still_serves(daemon, queue)


def test_a_connection_flood_is_survived(seeded: tuple[DaemonProcess, str]) -> None:
    daemon, queue = seeded
    sockets = [_raw(daemon) for _ in range(200)]
    try:
        _still_serves(daemon, queue)
    finally:
        for sock in sockets:
            sock.close()


def test_a_silent_connection_is_told_why_and_closed_after_the_hello_timeout(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=["--set", "server.hello_timeout=1"])
    with _raw(daemon) as sock:
        sock.settimeout(10.0)
        started = time.monotonic()
        frame = _read_reply(sock)
        assert frame is not None, "the daemon closed without saying why"
        assert isinstance(frame.value, cf.ErrorReply)
        assert frame.value.code == cf.ErrorCode.LIMIT_EXCEEDED
        assert "no Hello within 1 s" in frame.value.message
        assert _closed_by_daemon(sock)
        assert 0.9 <= time.monotonic() - started < 5.0
    assert "connection_deadline" in daemon.log()
    with connect(daemon.address) as qm:
        assert qm.status().connections == 1
