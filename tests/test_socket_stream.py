"""RawConnection, the client socket as a trio stream that skips the scheduler when the
kernel can answer at once: reads and writes, fairness, closing, and a broken peer."""

from __future__ import annotations

import socket
from functools import partial

import pytest
import trio
import trio.testing

from qmgr import socket_stream as connection_module
from qmgr.socket_stream import RawConnection


def pair() -> tuple[RawConnection, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return RawConnection(trio.SocketStream(trio.socket.from_stdlib_socket(ours))), theirs


async def test_bytes_go_both_ways() -> None:
    connection, peer = pair()
    with peer:
        peer.sendall(b"hello")
        assert await connection.receive_some(100) == b"hello"
        big = b"x" * (1 << 22)  # more than the kernel's buffer: the write waits
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.send_all, big)
            received = bytearray()
            peer.setblocking(False)
            while len(received) < len(big):
                await trio.lowlevel.wait_readable(peer)
                received += peer.recv(1 << 20)
        assert bytes(received) == big
        peer.close()
        assert await connection.receive_some() == b""
    await connection.aclose()


async def test_a_read_that_must_wait_waits_for_the_kernel() -> None:
    connection, peer = pair()
    with peer:
        async with trio.open_nursery() as nursery:
            got: list[bytes] = []

            async def read() -> None:
                got.append(await connection.receive_some(10))

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            peer.sendall(b"later")
        assert got == [b"later"]
    await connection.aclose()


async def test_a_run_of_ready_reads_yields_to_the_other_tasks() -> None:
    connection, peer = pair()
    others = 0

    async def other() -> None:
        nonlocal others
        while True:
            others += 1
            await trio.lowlevel.checkpoint()

    with peer:
        peer.sendall(b"x" * (connection_module.READS_BEFORE_YIELD * 2))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            await trio.lowlevel.checkpoint()  # it runs
            before = others
            for _ in range(connection_module.READS_BEFORE_YIELD - 1):
                assert await connection.receive_some(1) == b"x"
            assert others == before  # data was waiting: no pass through the scheduler
            for _ in range(connection_module.READS_BEFORE_YIELD + 1):
                assert await connection.receive_some(1) == b"x"
            # It yielded once (at most twice): the other task ran in between,
            # whichever order the scheduler picked.
            assert others > before
            nursery.cancel_scope.cancel()
    await connection.aclose()


async def test_a_closed_connection_refuses_reads_and_writes() -> None:
    connection, peer = pair()
    with peer:
        await connection.aclose()
        await connection.aclose()  # twice is fine
        with pytest.raises(trio.ClosedResourceError):
            await connection.receive_some()
        with pytest.raises(trio.ClosedResourceError):
            await connection.send_all(b"x")


async def test_a_broken_peer_breaks_the_connection() -> None:
    connection, peer = pair()
    peer.close()
    with pytest.raises(trio.BrokenResourceError, match="connection broken"):
        for _ in range(100):  # the first writes may still be buffered
            await connection.send_all(b"x" * 65536)
    await connection.aclose()


async def test_options_and_the_peer_name() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _echo, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        connection = RawConnection(stream)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        assert connection.peer_name() == f"127.0.0.1:{port}"
        await connection.send_all(b"ping")
        assert await connection.receive_some(4) == b"ping"
        await connection.wait_send_all_might_not_block()
        await connection.aclose()
        assert connection.peer_name() == "unknown"
        nursery.cancel_scope.cancel()


async def test_an_ipv6_peer_is_named_in_brackets() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _echo, 0, host="::1"))
        port = listeners[0].socket.getsockname()[1]
        connection = RawConnection(await trio.open_tcp_stream("::1", port))
        assert connection.peer_name() == f"[::1]:{port}"
        await connection.aclose()
        nursery.cancel_scope.cancel()


async def _echo(stream: trio.SocketStream) -> None:
    async with stream:
        async for data in stream:
            await stream.send_all(data)
