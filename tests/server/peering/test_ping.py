"""Answering MSMQ pings on UDP (``qmgr.server.peering.ping``): what is logged of a sender."""

from __future__ import annotations

import socket
import uuid

import structlog
import trio
import trio.testing
from peer_kit import wait_until

from qmgr.protocol.ping import PingResponder
from qmgr.server.peering.ping import serve_pings


async def test_an_ipv6_sender_is_named_in_brackets() -> None:
    responder = PingResponder(uuid.uuid4())
    with (
        trio.socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as server,
        trio.socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sender,
        structlog.testing.capture_logs() as logs,
        trio.fail_after(10),
    ):
        await server.bind(("::1", 0))
        await sender.bind(("::1", 0))
        port = sender.getsockname()[1]
        log = structlog.get_logger("test")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_pings, [server], responder, lambda _: None, log)
            await sender.sendto(b"not a ping", server.getsockname())
            # Read and logged (on a loaded host, not always before the next look).
            await wait_until(lambda: responder.malformed > 0, within=10, step=0.01)
            nursery.cancel_scope.cancel()
    assert responder.malformed == 1
    [ignored] = [entry for entry in logs if entry["event"] == "ping_ignored"]
    assert ignored["peer"] == f"[::1]:{port}"
