"""The client port's accepting side over loopback TCP, in-process: room at
``server.max_connections`` (an unauthenticated connection first, then an idle one,
else a refusal), per-address admission, shutdown, failures counted, and the
Unix-domain socket's local users."""

from __future__ import annotations

import os
import pwd
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import structlog
import trio
import trio.testing
from kit import FrameClient, error

from qmgr.config import load_config
from qmgr.server.client.accept import ClientPort
from qmgr.server.client.services import Services
from qmgr.socket_stream import RawConnection
from qmgr.tcp import KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES
from wire import client as cf


def port_for(services: Services, *settings: str) -> ClientPort:
    config = load_config(settings=settings)
    return ClientPort(config, services, None, structlog.get_logger("test"))


class Loopback:
    """Clients of a port served on loopback (closed when it stops)."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.clients: list[FrameClient] = []

    async def connect(self, *, greet: bool = True) -> FrameClient:
        client = FrameClient(await trio.open_tcp_stream("127.0.0.1", self.number))
        self.clients.append(client)
        if greet:
            await client.hello()
        else:
            await trio.testing.wait_all_tasks_blocked(0.01)  # the port has taken it in
        return client


@asynccontextmanager
async def serving(port: ClientPort) -> AsyncIterator[Loopback]:
    """The port served on loopback, and a way to connect to it."""
    async with trio.open_nursery() as nursery:
        serve = partial(trio.serve_tcp, port.handle_connection, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        loopback = Loopback(listeners[0].socket.getsockname()[1])
        try:
            yield loopback
        finally:
            for client in loopback.clients:
                await client.stream.aclose()
            nursery.cancel_scope.cancel()


async def test_a_connection_is_served_until_it_closes(services: Services) -> None:
    port = port_for(services)
    async with serving(port) as loopback:
        client = await loopback.connect()
        assert isinstance(await client.call(cf.ListQueues()), cf.QueueList)
        [session] = port.sessions.values()
        assert session.peer.startswith("127.0.0.1:")
        assert port.admission.connections("127.0.0.1") == 1
        assert port.admission.unauthenticated() == 0
        await client.stream.aclose()
        await trio.testing.wait_all_tasks_blocked(0.01)
        assert port.sessions == {}
        assert port.admission.connections("127.0.0.1") == 0


async def test_a_connection_is_kept_alive_by_tcp(services: Services) -> None:
    """A client whose host vanishes while it waits (a receive without a timeout
    keeps its connection busy, so no idle timeout ends it) is found by keepalive."""
    port = port_for(services)
    async with serving(port) as loopback:
        await loopback.connect()
        [session] = port.sessions.values()
        assert isinstance(session.stream, RawConnection)
        sock = session.stream._sock  # the socket the port took over from the listener's stream
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == KEEPALIVE_INTERVAL
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == KEEPALIVE_PROBES
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


async def test_at_the_limit_the_oldest_unauthenticated_connection_makes_room(
    services: Services,
) -> None:
    port = port_for(services, "server.max_connections=2")
    async with serving(port) as loopback:
        waiting = await loopback.connect(greet=False)
        served = await loopback.connect()
        newcomer = await loopback.connect()
        farewell = error(await waiting.error(), cf.ErrorCode.LIMIT_EXCEEDED)
        assert "which has not authenticated, to make room" in farewell.message
        assert "at most 2 client connections" in farewell.message
        assert await waiting.reply() is None
        for client in (served, newcomer):
            assert isinstance(await client.call(cf.ListQueues()), cf.QueueList)


async def test_at_the_limit_the_longest_idle_connection_makes_room(services: Services) -> None:
    port = port_for(services, "server.max_connections=2", "server.evictable_after=0")
    async with serving(port) as loopback:
        oldest = await loopback.connect()
        busy = await loopback.connect()
        await busy.send(cf.Begin(tx_id=1))  # an open transaction: not idle
        await trio.testing.wait_all_tasks_blocked(0.01)
        newcomer = await loopback.connect()
        farewell = error(await oldest.error(), cf.ErrorCode.LIMIT_EXCEEDED)
        assert farewell.message.startswith("closing this idle connection to make room")
        for client in (busy, newcomer):
            assert isinstance(await client.call(cf.ListQueues()), cf.QueueList)


async def test_each_newcomer_at_the_limit_evicts_a_connection_of_its_own(
    services: Services,
) -> None:
    # An evicted connection is served until it has said why: until then it is
    # no longer idle, so that the next newcomer evicts another (or is refused)
    # rather than being let in on the same eviction past server.max_connections.
    port = port_for(services, "server.max_connections=2", "server.evictable_after=0")
    async with serving(port) as loopback:
        await loopback.connect()
        await loopback.connect()
        assert port._make_room() is None
        assert port._make_room() is None
        assert [s.context.closing for s in port.sessions.values()] == [True, True]
        refused = port._make_room()
        assert refused is not None
        assert "none is idle" in refused.message


async def test_at_the_limit_with_nobody_to_evict_the_newcomer_is_refused(
    services: Services,
) -> None:
    port = port_for(services, "server.max_connections=1")
    async with serving(port) as loopback:
        busy = await loopback.connect()
        await busy.send(cf.Begin(tx_id=1))
        await trio.testing.wait_all_tasks_blocked(0.01)
        with structlog.testing.capture_logs() as logs:
            refused = await loopback.connect(greet=False)
            frame = await refused.reply()
        assert frame is not None
        assert frame.request_id == 0
        message = error(frame.value, cf.ErrorCode.LIMIT_EXCEEDED).message
        assert "serves at most 1 client connections and none is idle" in message
        assert await refused.reply() is None
        assert [e["event"] for e in logs] == ["connection_refused"]
        assert isinstance(await busy.call(cf.ListQueues()), cf.QueueList)


async def test_connections_per_address_are_bounded(services: Services) -> None:
    port = port_for(services, "limits.max_connections_per_address=1")
    async with serving(port) as loopback:
        first = await loopback.connect()
        second = await loopback.connect(greet=False)
        refused = error(await second.error(), cf.ErrorCode.LIMIT_EXCEEDED)
        assert "too many connections from 127.0.0.1" in refused.message
        assert isinstance(await first.call(cf.ListQueues()), cf.QueueList)


async def test_a_stopping_daemon_refuses_new_connections(services: Services) -> None:
    port = port_for(services)
    services.stopping = True
    async with serving(port) as loopback:
        client = await loopback.connect(greet=False)
        refused = error(await client.error(), cf.ErrorCode.SHUTTING_DOWN)
        assert refused.message == "the queue manager is shutting down"


async def test_failed_tokens_count_against_the_address(services: Services) -> None:
    port = port_for(services, "auth.failure_limit=2", "auth.failure_delay=3")
    assert services.authentication_failed == port.authentication_failed
    for _ in range(2):
        services.authentication_failed("10.1.2.3:5000")
    assert port.admission.delay("10.1.2.3", trio.current_time()) == 3.0
    assert port.admission.delay("10.1.2.4", trio.current_time()) == 0.0


async def test_a_local_connection_is_its_user(services: Services) -> None:
    port = port_for(services)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    client = FrameClient(trio.SocketStream(trio.socket.from_stdlib_socket(theirs)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(port.handle_local_connection, stream)
        await client.hello()
        [session] = port.sessions.values()
        user = pwd.getpwuid(os.getuid()).pw_name
        assert session.principal == user
        assert session.peer == f"unix:{user}(pid {os.getpid()})"
        await client.stream.aclose()
    assert port.sessions == {}
