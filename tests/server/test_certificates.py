"""The start-up check of this queue manager's certificate (``qmgr.server.certificates``):
valid now, and the extended key usages its ports need; and the check of a peer's
certificate on the peer port. The rules are checked as the daemon meets them, when
the TLS contexts are loaded from the configuration."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from pki import CLIENT_USAGES, DAY, SERVER_USAGES, sign
from tls_kit import SIGNING, cert_settings, refused

from qmgr.config import load_config
from qmgr.server.certificates import own_certificate, queue_manager_refusal
from qmgr.server.tls import TlsContexts, load_contexts


def test_the_certificate_must_be_valid_now(pki: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    expired, _ = old = sign(pki, "old", not_before=now - DAY * 30, not_after=now - DAY)
    refused(
        pki,
        old,
        match=rf"^tls\.certificate {re.escape(str(expired))} expired on "
        rf"{now - DAY:%Y-%m-%d %H:%M} UTC: renew it with "
        r"`qmgr certs issue NAME --host \.\.\. --force`$",
    )
    starts = now + DAY
    future, _ = early = sign(pki, "early", not_before=starts, not_after=now + DAY * 30)
    refused(
        pki,
        early,
        match=rf"^tls\.certificate {re.escape(str(future))} is not valid before "
        rf"{starts:%Y-%m-%d %H:%M} UTC",
    )
    # Either port, whichever is on.
    for port in ("tls.clients=false", "tls.peers=false"):
        refused(pki, old, port, match="expired on")


def test_a_client_certificate_cannot_serve_either_port(pki: Path) -> None:
    alice = sign(pki, "alice", usages=CLIENT_USAGES)
    for port in ((), ("tls.clients=false",), ("tls.peers=false",)):
        refused(
            pki,
            alice,
            *port,
            match=r"alice\.crt is a client certificate \(extended key usage clientAuth only\): "
            r"the queue manager needs one issued with `qmgr certs issue NAME --host \.\.\.`",
        )


@pytest.mark.parametrize(
    ("usages", "described"),
    [
        (SERVER_USAGES, "serverAuth only"),
        (None, "missing (no extendedKeyUsage extension)"),
        ((ExtendedKeyUsageOID.SERVER_AUTH, SIGNING), "codeSigning, serverAuth"),
    ],
    ids=["server-only", "no-extension", "server-and-code-signing"],
)
def test_the_peer_port_needs_a_queue_managers_certificate(
    pki: Path, usages: tuple[x509.ObjectIdentifier, ...] | None, described: str
) -> None:
    server = sign(pki, "server", usages=usages)
    refused(
        pki,
        server,
        match=rf"server\.crt cannot be used between queue managers \(extended key usage "
        rf"{re.escape(described)}\): tls\.peers needs serverAuth and clientAuth; issue one with "
        r"`qmgr certs issue NAME --host \.\.\.`, or set tls\.peers = false$",
    )
    # The client port alone takes it: serverAuth, or no extended key usage at all.
    contexts = load_contexts(load_config(settings=cert_settings(pki, server, "tls.peers=false")))
    assert contexts.clients is not None
    assert contexts.peer_server is None


def test_the_client_port_needs_server_auth(pki: Path) -> None:
    signer = sign(pki, "signer", usages=(SIGNING,))
    refused(
        pki,
        signer,
        "tls.peers=false",
        match=r"signer\.crt cannot serve the client port \(extended key usage codeSigning only\): "
        r"it needs serverAuth",
    )
    # A queue manager's certificate serves both ports; a port without TLS is not checked.
    good = sign(pki, "qm-a")
    contexts = load_contexts(load_config(settings=cert_settings(pki, good)))
    assert None not in (contexts.clients, contexts.peer_server, contexts.peer_client)
    neither = cert_settings(pki, signer, "tls.peers=false", "tls.clients=false", "tls.http=false")
    assert load_contexts(load_config(settings=neither)) == TlsContexts(None, None, None)
    # The HTTP listener is served with the certificate too (HTTPS), unless it is off.
    refused(
        pki,
        signer,
        "tls.peers=false",
        "tls.clients=false",
        match=r"signer\.crt cannot serve the HTTP listener \(extended key usage codeSigning only\)",
    )
    off = cert_settings(pki, signer, "tls.peers=false", "tls.clients=false", 'http.listen=""')
    assert load_contexts(load_config(settings=off)) == TlsContexts(None, None, None)


def test_an_unreadable_certificate_is_named(pki: Path, tmp_path: Path) -> None:
    missing = (tmp_path / "missing.crt", pki / "ca.key")
    refused(pki, missing, match=r"cannot load tls\.certificate .*missing\.crt: No such")
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate\n")
    refused(pki, (garbage, pki / "ca.key"), match=r"garbage\.crt: not a PEM certificate")


def _der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(
        serialization.Encoding.DER
    )


def test_own_certificate_is_its_der_and_common_name(pki: Path) -> None:
    cert, _ = sign(pki, "qm-a", common_name="qm-a.example")
    der, name = own_certificate(cert)
    assert der == _der(cert)
    assert name == "qm-a.example"
    with pytest.raises(ValueError, match=r"cannot load tls\.certificate .*nothing\.crt"):
        own_certificate(pki / "nothing.crt")


def test_a_peer_is_a_queue_manager_only_with_both_usages(pki: Path) -> None:
    queue_manager, _ = sign(pki, "qm-b")
    assert queue_manager_refusal(_der(queue_manager), "qm-b") is None
    client, _ = sign(pki, "alice", usages=CLIENT_USAGES)
    assert queue_manager_refusal(_der(client), "alice") == (
        "the peer's certificate (CN alice) is not a queue manager's: its extended key usage "
        "is clientAuth only; issue queue manager certificates with "
        "`qmgr certs issue NAME --host ...` (serverAuth and clientAuth)"
    )
    bare, _ = sign(pki, "bare", usages=None)
    refusal = queue_manager_refusal(_der(bare), "bare")
    assert refusal is not None
    assert "missing (no extendedKeyUsage extension)" in refusal
    # No certificate at all (a peer that sent none) is not a queue manager's either.
    refusal = queue_manager_refusal(None, "anonymous")
    assert refusal is not None
    assert "(CN anonymous)" in refusal
