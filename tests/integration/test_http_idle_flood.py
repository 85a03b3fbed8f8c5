"""Ten thousand idle HTTP connections to a real daemon: each newcomer closes the
one idle the longest, so the daemon holds at most ``http.max_connections`` of
them (its file descriptors stay bounded), and meanwhile a scrape, a console
page, a client's send and receive and a peer's message are all served."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

import trio
from helpers import PEER_FAST, DaemonProcess, log_events, remote_queue, settings

from qmgr.client import connect

FLOOD = 10_000
LIMIT = 32


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_ten_thousand_idle_connections_are_bounded_and_the_daemon_serves_on(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FLOOD + 1000
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    daemon = daemon_factory(
        name="qm-flood", extra_args=[*settings(f"http.max_connections={LIMIT}"), *PEER_FAST]
    )
    sender = daemon_factory(name="qm-flood-sender", extra_args=list(PEER_FAST))
    assert daemon.process is not None
    pid = daemon.process.pid
    before = _descriptors(pid)
    peak = [0]

    async def flood() -> list[trio.SocketStream]:
        opened: list[trio.SocketStream] = []
        for start in range(0, FLOOD, 500):
            async with trio.open_nursery() as nursery:
                for _ in range(start, min(FLOOD, start + 500)):

                    async def one() -> None:
                        opened.append(await trio.open_tcp_stream("127.0.0.1", daemon.http_port))

                    nursery.start_soon(one)
            peak[0] = max(peak[0], _descriptors(pid))
        return opened

    streams = trio.run(flood)
    try:
        assert len(streams) == FLOOD
        # Served all the while: a scrape, the console, a client.
        status, body = daemon.http_get("/metrics")
        assert status == 200
        assert b'qmgr_connections{kind="http"}' in body
        assert daemon.http_get("/healthz") == (200, b"ok\n")
        assert daemon.http_get("/console")[0] in (200, 303)
        with connect(daemon.address) as qm, connect(sender.address) as other:
            qm.create_queue("still", transactional=True)
            qm.send("still", b"served")
            with other.begin() as tx:  # and a peer: exactly once, over its session
                tx.send(remote_queue(daemon, "still"), b"from a peer")
            bodies = []
            for _ in range(2):
                received = qm.receive("still", timeout=30)
                assert received is not None
                bodies.append(received.body)
            assert sorted(bodies) == [b"from a peer", b"served"]
        # Never more than the limit (and the listeners, the store, the log...).
        assert peak[0] <= before + LIMIT + 8
        assert _descriptors(pid) <= before + LIMIT + 8
        evicted = log_events(daemon, "http_connection_evicted")
        assert len(evicted) >= FLOOD - LIMIT
    finally:

        async def close_all() -> None:
            for stream in streams:
                await trio.aclose_forcefully(stream)

        trio.run(close_all)
