"""Connection slots, slow senders and memory: what one client can make the daemon hold.

Each case reproduces a way an outsider could starve the daemon: many
connections that say Hello and then nothing, connections holding half-sent
large frames, a sender that trickles a frame, open transactions full of
large messages. The daemon must bound each, say so with an error frame, and
go on serving everyone else.
"""

from __future__ import annotations

import fcntl
import select
import socket
import struct
import sys
import termios
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest
from helpers import DaemonProcess, wait_until

from qmgr.client import ConnectionLost, LimitExceeded, QueueError, QueueManager, connect
from wire import client as cf

HELLO = cf.encode_frame(1, cf.Hello(client_name="raw"))


@contextmanager
def raw(daemon: DaemonProcess) -> Iterator[socket.socket]:
    host, port = daemon.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10.0)
    try:
        yield sock
    finally:
        sock.close()


def greeted(daemon: DaemonProcess, stack: ExitStack) -> socket.socket:
    sock = stack.enter_context(raw(daemon))
    sock.sendall(HELLO)
    decoder = cf.ClientFrameDecoder()
    while (frame := decoder.next_frame()) is None:
        decoder.receive_data(sock.recv(4096))
    assert isinstance(frame.value, cf.HelloOk)
    return sock


def rss_bytes(daemon: DaemonProcess) -> int:
    assert daemon.process is not None
    with open(f"/proc/{daemon.process.pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def unsent(sock: socket.socket) -> int:
    """Bytes written to ``sock`` that the other end has not received yet."""
    outq = bytearray(4)
    fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, outq)
    return int.from_bytes(outq, sys.byteorder)


def with_slots(daemon_factory: Callable[..., DaemonProcess], slots: int) -> DaemonProcess:
    """A daemon that serves ``slots`` client connections at once, and may evict any
    idle one as soon as it needs the room."""
    return daemon_factory(
        extra_args=["--set", f"server.max_connections={slots}", "--set", "server.evictable_after=0"]
    )


def works(qm: QueueManager) -> None:
    qm.create_queue(f"probe-{time.monotonic_ns()}")


def test_silent_greeted_connections_make_room_for_new_clients(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = with_slots(daemon_factory, 20)
    with ExitStack() as stack:
        silent = [greeted(daemon, stack) for _ in range(30)]
        with connect(daemon.address) as qm:
            works(qm)
        # The evicted ones were told why before their connection closed.
        first = silent[0]
        decoder = cf.ClientFrameDecoder()
        decoder.receive_data(first.recv(65536))
        frame = decoder.next_frame()
        assert frame is not None
        assert isinstance(frame.value, cf.ErrorReply)
        assert frame.value.code == cf.ErrorCode.LIMIT_EXCEEDED
        assert "make room" in frame.value.message


def test_an_evicted_sdk_connection_says_why(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = with_slots(daemon_factory, 2)
    with connect(daemon.address) as oldest, connect(daemon.address):
        with connect(daemon.address) as newest:
            works(newest)
        with pytest.raises(QueueError, match="make room"):
            oldest.status()
        with pytest.raises(ConnectionLost):
            oldest.status()


def test_busy_connections_are_kept_and_a_refused_client_is_told_why(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = with_slots(daemon_factory, 3)
    with ExitStack() as stack:
        clients = [stack.enter_context(connect(daemon.address)) for _ in range(3)]
        clients[0].create_queue("busy", transactional=True)
        for qm in clients:
            tx = qm.begin()
            assert tx.receive("busy") is None  # the transaction is open in the daemon
        with pytest.raises(LimitExceeded, match="at most 3 client connections"):
            connect(daemon.address)
        for qm in clients:
            works(qm)


def test_one_address_cannot_take_every_slot(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=["--set", "limits.max_connections_per_address=2"])
    with ExitStack() as stack:
        clients = [stack.enter_context(connect(daemon.address)) for _ in range(2)]
        with pytest.raises(LimitExceeded, match=r"from 127\.0\.0\.1: at most 2"):
            connect(daemon.address)
        clients.pop().close()
        wait_until(lambda: _connects(daemon), timeout=10)
        for qm in clients:
            works(qm)


def _connects(daemon: DaemonProcess) -> bool:
    try:
        with connect(daemon.address) as qm:
            qm.list_queues()
    except LimitExceeded:
        return False
    return True


def test_a_trickling_sender_is_dropped_at_the_frame_deadline(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    daemon = daemon_factory(extra_args=["--set", "server.frame_timeout=1"])
    with ExitStack() as stack:
        sock = greeted(daemon, stack)
        frame = cf.encode_frame(2, cf.ListQueues())
        started = time.monotonic()
        sock.sendall(frame[:5])  # and never the rest
        decoder = cf.ClientFrameDecoder()
        while (reply := decoder.next_frame()) is None:
            data = sock.recv(4096)
            assert data, "closed without saying why"
            decoder.receive_data(data)
        assert isinstance(reply.value, cf.ErrorReply)
        assert "did not arrive whole within 1 s" in reply.value.message
        assert sock.recv(4096) == b""
        assert 0.9 <= time.monotonic() - started < 5
    with connect(daemon.address) as qm:
        works(qm)


def test_half_sent_large_frames_cannot_grow_the_daemon_without_bound(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    budget = 24 << 20
    daemon = daemon_factory(extra_args=["--set", f"limits.max_frame_bytes={budget}"])
    body = 4 << 20
    header = struct.pack("<IHHI", body, cf.FrameKind.SEND, 0, 2)
    before = rss_bytes(daemon)
    expected = 20 - budget // body
    first = 64 << 10  # the header and a little: the daemon decides on the header
    with ExitStack() as stack:
        sockets = [greeted(daemon, stack) for _ in range(20)]
        for sock in sockets:
            sock.sendall(header + b"\x00" * first)
        # The refusals come as the daemon reads the headers; the others get no answer.
        refusals: dict[socket.socket, bytes] = {}
        deadline = time.monotonic() + 10
        while len(refusals) < expected and time.monotonic() < deadline:
            ready, _, _ = select.select([s for s in sockets if s not in refusals], [], [], 0.1)
            for sock in ready:
                refusals[sock] = sock.recv(65536)
        for data in refusals.values():
            decoder = cf.ClientFrameDecoder()
            decoder.receive_data(data)
            frame = decoder.next_frame()
            assert frame is not None
            assert isinstance(frame.value, cf.ErrorReply)
            assert "frames being received" in frame.value.message
        # The accepted ones send the rest of their half, and the daemon takes it all in.
        accepted = [sock for sock in sockets if sock not in refusals]
        for sock in accepted:
            sock.sendall(b"\x00" * (body // 2 - first))
        wait_until(lambda: all(unsent(sock) == 0 for sock in accepted), timeout=10)
        grown = rss_bytes(daemon) - before
        with connect(daemon.address) as qm:
            works(qm)
    assert len(refusals) >= expected
    # What it holds stays near its budget: 20 half-frames of 4 MB would be 40 MB.
    assert grown < budget + (16 << 20), grown


def test_open_transactions_cannot_hold_more_than_the_uncommitted_budget(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    budget = 32 << 20
    daemon = daemon_factory(extra_args=["--set", f"limits.max_uncommitted_bytes={budget}"])
    big = b"m" * (4 << 20)
    with ExitStack() as stack:
        clients = [stack.enter_context(connect(daemon.address)) for _ in range(4)]
        clients[0].create_queue("big", transactional=True)
        before = rss_bytes(daemon)
        refusals = 0
        for qm in clients:
            tx = qm.begin()
            try:
                for _ in range(12):  # 48 MiB per client, 192 MiB in all
                    tx.send("big", big)
                tx.receive("big")  # anything that waits for a reply reports a failed send
            except LimitExceeded:
                refusals += 1
        assert refusals >= 1
        grown = rss_bytes(daemon) - before
        # Unbounded, it would hold all 192 MiB. Bounded: the budget, plus each
        # connection's receive buffer (up to two 4 MiB frames while one is
        # joined) and what the allocator keeps of the freed frames.
        assert grown < budget + (64 << 20), grown
        status = clients[0].status()
        assert status.uncommitted_bytes <= budget
