"""The TCP options of every connection (``qmgr/tcp.py``), the daemon's and the SDK's."""

from __future__ import annotations

import socket
from pathlib import Path

from helpers import DaemonProcess

from qmgr.client import connect
from qmgr.tcp import KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, bytes_acked, tune_tcp


def keepalive_of(sock: socket.socket) -> tuple[int, int, int, int, int]:
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
    )


TUNED = (1, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, 1)


def test_tcp_connections_are_kept_alive_and_unix_ones_left_alone(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as tcp:
            tune_tcp(tcp)
            assert keepalive_of(tcp) == TUNED
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        tune_tcp(left)  # no error: a Unix-domain socket takes no TCP option
        assert left.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0


def test_the_sdk_finds_a_cut_path_as_the_daemon_does(shared_daemon: DaemonProcess) -> None:
    """A client waiting in a receive learns that its path was cut within about two
    minutes, not the kernel's default two hours."""
    with connect(shared_daemon.address) as qm:
        assert keepalive_of(qm._conn.sock) == TUNED


def test_bytes_acked_grows_as_the_peer_takes_what_was_written(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as tcp:
            peer, _ = server.accept()
            with peer:
                start = bytes_acked(tcp)
                assert start is not None
                tcp.sendall(b"x" * 100_000)
                received = 0
                while received < 100_000:
                    received += len(peer.recv(65536))
                end = bytes_acked(tcp)
                for _ in range(100):  # the last acknowledgement may trail the read
                    if end is not None and end[0] - start[0] >= 100_000:
                        break
                    end = bytes_acked(tcp)
                assert end is not None
                assert end[0] - start[0] == 100_000
                assert end[1] == 0  # nothing in flight any more
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
        assert bytes_acked(unix) is None
