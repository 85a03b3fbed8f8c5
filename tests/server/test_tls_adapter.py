"""The TLS adapter without sockets: contexts from the configuration, handshakes over
memory streams (deadlines with a mock clock), the start-up rule, and the registry of
peer identities over a real store."""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path

import pytest
import structlog
import trio
import trio.testing

import storage
from qmgr.certs import init_ca, issue
from qmgr.config import load_config
from qmgr.server.peer_identity import SETTING_PREFIX, PeerIdentities
from qmgr.server.tls import (
    TlsFailed,
    check_exposure,
    exposure,
    handshake,
    is_loopback,
    load_contexts,
    peer_handshake,
)

A = uuid.UUID("a0000000-0000-4000-8000-00000000000a")
B = uuid.UUID("b0000000-0000-4000-8000-00000000000b")


def tls_settings(pki: Path, name: str, *more: str) -> list[str]:
    issued = issue(pki, name, kind="qm", hosts=("127.0.0.1",), force=True)
    return [
        f"tls.certificate={issued.cert}",
        f"tls.key={issued.key}",
        f"tls.ca={pki / 'ca.crt'}",
        *more,
    ]


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    init_ca(tmp_path / "pki")
    return tmp_path / "pki"


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


# --------------------------------------------------------------------------- handshakes


async def test_mutual_tls_gives_each_side_the_others_identity(
    pki: Path, autojump_clock: trio.testing.MockClock
) -> None:
    a = load_contexts(load_config(settings=tls_settings(pki, "qm-a")))
    b = load_contexts(load_config(settings=tls_settings(pki, "qm-b")))
    assert a.peer_client is not None
    assert b.peer_server is not None
    left, right = trio.testing.memory_stream_pair()
    config = load_config()
    found: dict[str, str] = {}

    async def side(
        stream: trio.abc.Stream, context: ssl.SSLContext, server: bool, key: str
    ) -> None:
        _, identity = await peer_handshake(stream, context, server_side=server, config=config)
        found[key] = identity

    async with trio.open_nursery() as nursery:
        nursery.start_soon(side, left, a.peer_client, False, "a sees")
        nursery.start_soon(side, right, b.peer_server, True, "b sees")
    assert found == {"a sees": "qm-b", "b sees": "qm-a"}


async def test_a_silent_client_costs_at_most_the_deadline(
    pki: Path, autojump_clock: trio.testing.MockClock
) -> None:
    contexts = load_contexts(load_config(settings=tls_settings(pki, "qm-a")))
    assert contexts.clients is not None
    _client, server = trio.testing.memory_stream_pair()
    start = trio.current_time()
    with pytest.raises(TlsFailed, match="no TLS handshake within 10 s"):
        await handshake(server, contexts.clients, server_side=True, within=10.0)
    assert trio.current_time() - start == pytest.approx(10.0)


async def test_plain_text_on_a_tls_port_fails_the_handshake(
    pki: Path, autojump_clock: trio.testing.MockClock
) -> None:
    contexts = load_contexts(load_config(settings=tls_settings(pki, "qm-a")))
    assert contexts.clients is not None
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(b"QMGR" + bytes(200))
    await client.send_eof()
    with pytest.raises(TlsFailed, match="TLS handshake failed"):
        await handshake(server, contexts.clients, server_side=True, within=10.0)


# --------------------------------------------------------------------------- identities


class StoreCommitter:
    """Writes a unit at once (the committer's contract, without batching)."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store

    async def submit(self, unit: storage.Unit) -> storage.UnitOutcome:
        [outcome] = self.store.commit([unit], now=0.0)
        return outcome


async def test_an_identity_speaks_for_the_first_guid_it_announces(tmp_path: Path) -> None:
    store = storage.Store(tmp_path / "store")
    log = structlog.get_logger("test")
    identities = PeerIdentities(store, pinned={}, relays=frozenset(), log=log)
    async with trio.open_nursery() as nursery:
        identities.attach(nursery, StoreCommitter(store))  # type: ignore[arg-type]
        assert identities.opened("qm-a", A) is None
        assert identities.opened("qm-a", A) is None
        refusal = identities.opened("qm-a", B)
    assert refusal is not None
    assert "speaks for" in refusal
    assert str(A) in refusal
    # The registration holds across restarts.
    assert store.get_setting(SETTING_PREFIX + "qm-a") == str(A)
    again = PeerIdentities(store, pinned={}, relays=frozenset(), log=log)
    assert again.guid_of("qm-a") == A
    assert again.opened("qm-a", B) is not None
    store.close()


def test_pinned_identities_and_relays(tmp_path: Path) -> None:
    store = storage.Store(tmp_path / "store")
    identities = PeerIdentities(
        store, pinned={"qm-b": B}, relays=frozenset({"router"}), log=structlog.get_logger("test")
    )
    refusal = identities.opened("qm-b", A)
    assert refusal is not None
    assert "pinned" in refusal
    assert identities.opened("qm-b", B) is None
    assert store.get_setting(SETTING_PREFIX + "qm-b") is None  # pinned: nothing registered
    assert identities.may_carry("qm-b", B, B)
    assert not identities.may_carry("qm-b", B, A)
    assert identities.may_carry("router", A, B)
    assert identities.is_relay("router")
    store.close()
