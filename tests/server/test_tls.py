"""The TLS adapter (``qmgr.server.tls``) without sockets: contexts from the configuration,
handshakes over memory streams (deadlines with a mock clock; the peer port takes only
queue managers' certificates, on either side), and the start-up rule.

(The start-up check of the certificate, validity and extended key usages by port, is
tested in ``tests/server/test_certificates.py``; the registry of peer identities in
``tests/server/peering/test_identity.py``; TLS between real processes in
``tests/integration/test_tls_between_processes.py``.)"""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path

import pytest
import trio
import trio.testing
from cryptography import x509
from pki import CLIENT_USAGES, SERVER_USAGES, sign
from tls_kit import tls_settings

from qmgr.config import load_config
from qmgr.server.tls import (
    TlsFailed,
    check_exposure,
    exposure,
    handshake,
    is_loopback,
    key_file_warnings,
    load_contexts,
    peer_handshake,
)

A = uuid.UUID("a0000000-0000-4000-8000-00000000000a")
B = uuid.UUID("b0000000-0000-4000-8000-00000000000b")


# --------------------------------------------------------------------------- exposure


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("qm.example", False)],
)  # fmt: skip
def test_what_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_exposed_listeners_need_protection(pki: Path) -> None:
    assert exposure(load_config()) == []
    exposed = load_config(listen="0.0.0.0:1801", client_listen="10.0.0.5:1802")
    peer, client = exposure(exposed)
    assert "peer listener 0.0.0.0:1801" in peer
    assert "mutual TLS" in peer
    assert "client listener 10.0.0.5:1802" in client
    with pytest.raises(ValueError, match=r"server\.insecure"):
        check_exposure(exposed)
    allowed = load_config(listen="0.0.0.0:1801", settings=["server.insecure=true"])
    assert len(check_exposure(allowed)) == 1  # allowed, and reported
    secured = load_config(
        listen="0.0.0.0:1801",
        client_listen="0.0.0.0:1802",
        settings=tls_settings(pki, "qm-a", "auth.required=true"),
    )
    assert check_exposure(secured) == []
    # TLS without authentication protects the peer port, not the client port.
    half = load_config(client_listen="0.0.0.0:1802", settings=tls_settings(pki, "qm-a"))
    [problem] = exposure(half)
    assert "auth] required" in problem


def test_an_exposed_http_listener_needs_tls_and_authentication(pki: Path) -> None:
    [plain] = exposure(load_config(http_listen="0.0.0.0:1803"))
    assert "HTTP listener 0.0.0.0:1803" in plain
    assert "tls.http = true" in plain
    assert exposure(load_config(http_listen="127.0.0.1:1803")) == []
    assert exposure(load_config(http_listen="")) == []
    secured = tls_settings(pki, "qm-a", "auth.required=true")
    assert exposure(load_config(http_listen="0.0.0.0:1803", settings=secured)) == []
    # HTTPS without authentication, or authentication over plain HTTP: refused.
    half = tls_settings(pki, "qm-a")
    assert len(exposure(load_config(http_listen="0.0.0.0:1803", settings=half))) == 1
    plain_http = [*secured, "tls.http=false"]
    [problem] = exposure(load_config(http_listen="10.0.0.5:1803", settings=plain_http))
    assert "HTTP listener 10.0.0.5:1803" in problem
    with pytest.raises(ValueError, match=r"server\.insecure"):
        check_exposure(load_config(http_listen="0.0.0.0:1803"))
    allowed = load_config(http_listen="0.0.0.0:1803", settings=["server.insecure=true"])
    assert len(check_exposure(allowed)) == 1


def test_the_http_context_asks_for_a_client_certificate_and_speaks_http_1_1(pki: Path) -> None:
    contexts = load_contexts(load_config(settings=tls_settings(pki, "qm-a", "auth.required=true")))
    assert contexts.http is not None
    # A token is the other way in: the certificate is asked for, never required.
    assert contexts.http.verify_mode is ssl.CERT_OPTIONAL
    assert (
        load_contexts(load_config(settings=tls_settings(pki, "qm-a", "tls.http=false"))).http
        is None
    )
    assert (
        load_contexts(load_config(settings=tls_settings(pki, "qm-a", 'http.listen=""'))).http
        is None
    )
    assert load_contexts(load_config()).http is None


def test_contexts_follow_the_configuration(pki: Path) -> None:
    assert load_contexts(load_config()).clients is None
    contexts = load_contexts(load_config(settings=tls_settings(pki, "qm-a", "tls.peers=false")))
    assert contexts.clients is not None
    assert contexts.peer_server is None
    assert contexts.peer_client is None
    required = load_contexts(load_config(settings=tls_settings(pki, "qm-a", "auth.required=true")))
    assert required.clients is not None
    assert required.clients.verify_mode is ssl.CERT_REQUIRED
    assert contexts.clients.verify_mode is ssl.CERT_OPTIONAL
    assert required.peer_server is not None
    assert required.peer_server.verify_mode is ssl.CERT_REQUIRED
    assert required.peer_client is not None
    assert required.peer_client.minimum_version is ssl.TLSVersion.TLSv1_2


def test_unreadable_files_are_named(pki: Path, tmp_path: Path) -> None:
    settings = tls_settings(pki, "qm-a")
    settings[1] = f"tls.key={tmp_path / 'missing.key'}"
    with pytest.raises(ValueError, match=r"cannot load tls\.certificate .*missing\.key: No such"):
        load_contexts(load_config(settings=settings))
    settings = tls_settings(pki, "qm-a")
    settings[2] = f"tls.ca={pki / 'qm-a.key'}"
    with pytest.raises(ValueError, match=r"cannot load tls\.ca"):
        load_contexts(load_config(settings=settings))


def test_a_key_every_user_may_read_gets_a_warning(pki: Path) -> None:
    """A key shared with a group (Debian's ssl-cert) is a normal set-up; one
    every user may read lets any of them pose as this queue manager."""
    config = load_config(settings=tls_settings(pki, "qm-a"))
    assert config.tls_key is not None
    assert key_file_warnings(config) == []  # as issued: 0600
    config.tls_key.chmod(0o640)
    assert key_file_warnings(config) == []
    config.tls_key.chmod(0o644)
    (warning,) = key_file_warnings(config)
    assert f"tls.key {config.tls_key} can be read by every user (mode 0644)" in warning
    assert f"chmod 600 {config.tls_key}" in warning
    without_tls = load_config(
        settings=tls_settings(pki, "qm-b", "tls.clients=false", "tls.peers=false", "tls.http=false")
    )
    assert without_tls.tls_key is not None
    without_tls.tls_key.chmod(0o644)
    assert key_file_warnings(without_tls) == []  # the key is not used


# --------------------------------------------------------------------------- handshakes


def initiator(pki: Path, cert: tuple[Path, Path]) -> ssl.SSLContext:
    """A peer port's connecting side presenting ``cert``, as ``load_contexts`` makes it
    (which would refuse a certificate that is not a queue manager's)."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=pki / "ca.crt")
    context.check_hostname = False
    context.load_cert_chain(*cert)
    return context


def acceptor(pki: Path, cert: tuple[Path, Path]) -> ssl.SSLContext:
    """A peer port's accepting side presenting ``cert``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(*cert)
    return context


async def peer_handshakes(connects: ssl.SSLContext, accepts: ssl.SSLContext) -> dict[str, str]:
    """Both sides of a peer handshake over memory streams: what each side saw (the
    other's identity, or ``refused: <why>``)."""
    left, right = trio.testing.memory_stream_pair()
    config = load_config()
    found: dict[str, str] = {}

    async def side(stream: trio.abc.Stream, context: ssl.SSLContext, server: bool) -> None:
        key = "acceptor" if server else "initiator"
        try:
            _, found[key] = await peer_handshake(stream, context, server_side=server, config=config)
        except TlsFailed as exc:
            found[key] = f"refused: {exc}"
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(side, left, connects, False)
        nursery.start_soon(side, right, accepts, True)
    return found


async def test_mutual_tls_gives_each_side_the_others_identity(
    pki: Path, autojump_clock: trio.testing.MockClock
) -> None:
    a = load_contexts(load_config(settings=tls_settings(pki, "qm-a")))
    b = load_contexts(load_config(settings=tls_settings(pki, "qm-b")))
    assert a.peer_client is not None
    assert b.peer_server is not None
    found = await peer_handshakes(a.peer_client, b.peer_server)
    assert found == {"initiator": "qm-b", "acceptor": "qm-a"}


async def test_the_acceptor_refuses_a_client_certificate(
    pki: Path, autojump_clock: trio.testing.MockClock
) -> None:
    b = load_contexts(load_config(settings=tls_settings(pki, "qm-b")))
    assert b.peer_server is not None
    alice = initiator(pki, sign(pki, "alice", usages=CLIENT_USAGES))
    found = await peer_handshakes(alice, b.peer_server)
    assert found["acceptor"] == (
        "refused: the peer's certificate (CN alice) is not a queue manager's: its extended key "
        "usage is clientAuth only; issue queue manager certificates with `qmgr certs issue "
        "NAME --host ...` (serverAuth and clientAuth)"
    )


@pytest.mark.parametrize(
    ("usages", "described"),
    [(SERVER_USAGES, "serverAuth only"), (None, "missing (no extendedKeyUsage extension)")],
    ids=["server-only", "no-extension"],
)
async def test_the_initiator_refuses_what_is_not_a_queue_manager(
    pki: Path,
    autojump_clock: trio.testing.MockClock,
    usages: tuple[x509.ObjectIdentifier, ...] | None,
    described: str,
) -> None:
    a = load_contexts(load_config(settings=tls_settings(pki, "qm-a")))
    assert a.peer_client is not None
    web = acceptor(pki, sign(pki, "web", usages=usages))
    found = await peer_handshakes(a.peer_client, web)
    assert found["initiator"].startswith(
        f"refused: the peer's certificate (CN web) is not a queue manager's: its extended key "
        f"usage is {described}; "
    )


@pytest.fixture
def client_port(pki: Path) -> ssl.SSLContext:
    """The client port's context of a queue manager with TLS."""
    contexts = load_contexts(load_config(settings=tls_settings(pki, "qm-a")))
    assert contexts.clients is not None
    return contexts.clients


async def test_a_silent_client_costs_at_most_the_deadline(
    client_port: ssl.SSLContext, autojump_clock: trio.testing.MockClock
) -> None:
    _client, server = trio.testing.memory_stream_pair()
    start = trio.current_time()
    with pytest.raises(TlsFailed, match="no TLS handshake within 10 s"):
        await handshake(server, client_port, server_side=True, within=10.0)
    assert trio.current_time() - start == pytest.approx(10.0)


async def test_plain_text_on_a_tls_port_fails_the_handshake(
    client_port: ssl.SSLContext, autojump_clock: trio.testing.MockClock
) -> None:
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(b"QMGR" + bytes(200))
    await client.send_eof()
    with pytest.raises(TlsFailed, match="TLS handshake failed"):
        await handshake(server, client_port, server_side=True, within=10.0)
