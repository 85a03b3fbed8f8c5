"""TLS on a ``RawConnection`` without ``trio.SSLStream`` (``RawConnection.start_tls``),
over a real socket pair: the handshake and the client certificate's name, bodies
larger than any buffer both ways, the end of the stream, a peer that goes away
during the handshake, and a handshake that does not come in time."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trio

from qmgr.certs import init_ca, issue
from qmgr.config import load_config
from qmgr.server.tls import TlsFailed, common_name, load_contexts, start_tls
from qmgr.socket_stream import RawConnection

BIG = 5 * 1024 * 1024 + 17


@pytest.fixture
def contexts(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The daemon's client-port context, and a client's with a certificate of ``alice``."""
    pki = tmp_path / "pki"
    init_ca(pki)
    server = issue(pki, "qm-a", kind="qm", hosts=("127.0.0.1",), force=True)
    alice = issue(pki, "alice", kind="client", force=True)
    settings = [
        f"tls.certificate={server.cert}",
        f"tls.key={server.key}",
        f"tls.ca={pki / 'ca.crt'}",
        "auth.required=true",
    ]
    served = load_contexts(load_config(settings=settings)).clients
    assert served is not None
    client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(pki / "ca.crt"))
    client.load_cert_chain(alice.cert, alice.key)
    return served, client


async def _pair() -> tuple[RawConnection, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return RawConnection(trio.SocketStream(a)), trio.SocketStream(b)


async def test_a_tls_connection_carries_large_bodies_both_ways_and_names_its_client(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    served, client_context = contexts
    server, plain = await _pair()
    client = trio.SSLStream(plain, client_context, server_hostname="127.0.0.1")
    body = bytes(range(256)) * (BIG // 256) + b"x" * (BIG % 256)
    received = bytearray()
    echoed = bytearray()

    async def serve() -> None:
        await start_tls(server, served, within=10)
        assert common_name(server) == "alice"
        while len(received) < len(body):
            received.extend(await server.receive_some(65536))
        await server.send_all(bytes(received))
        await server.aclose()

    async def talk() -> None:
        await client.send_all(body)
        while True:
            data = await client.receive_some(65536)
            if not data:
                break
            echoed.extend(data)
        await client.aclose()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            nursery.start_soon(talk)
    assert bytes(received) == body
    assert bytes(echoed) == body  # and then the end of the stream (close_notify)


async def test_a_peer_that_leaves_during_the_handshake_is_a_quiet_failure(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    served, _ = contexts
    server, plain = await _pair()
    await plain.aclose()
    with pytest.raises(TlsFailed) as failed:
        await start_tls(server, served, within=10)
    assert failed.value.closed
    await server.aclose()


async def test_plain_text_fails_the_handshake_with_a_reason(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
) -> None:
    served, _ = contexts
    server, plain = await _pair()
    await plain.send_all(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(TlsFailed, match="TLS handshake failed") as failed:
        await start_tls(server, served, within=10)
    assert not failed.value.closed
    await server.aclose()
    await plain.aclose()


async def test_a_silent_client_costs_at_most_the_deadline(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
    autojump_clock: trio.testing.MockClock,
) -> None:
    served, _ = contexts
    server, plain = await _pair()
    with pytest.raises(TlsFailed, match=r"no TLS handshake within 5 s"):
        await start_tls(server, served, within=5)
    await server.aclose()
    await plain.aclose()
