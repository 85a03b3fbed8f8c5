"""Making the CA and issuing (``qmgr.certs.authority``): what it issues verifies in real
TLS handshakes, the contents of the certificates, and what ``init_ca`` and ``issue``
refuse.

The handshakes run in-process over memory BIOs, with ``VERIFY_X509_STRICT``
on both sides (Python 3.13's default), TLS 1.2 and TLS 1.3.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qmgr.certs import (
    CaNotFoundError,
    CaPaths,
    CertsError,
    ExistingFilesError,
    IssuedPaths,
    describe,
    init_ca,
    issue,
)

from .certs_kit import QM_ADDRESS, QM_HOST, load, mode

TLS_VERSIONS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


# --------------------------------------------------------------------------
# TLS handshakes
# --------------------------------------------------------------------------


def context(side: int, own: IssuedPaths, trusted: Path, version: ssl.TLSVersion) -> ssl.SSLContext:
    ctx = ssl.SSLContext(side)
    ctx.minimum_version = ctx.maximum_version = version
    ctx.load_cert_chain(own.cert, own.key)
    ctx.load_verify_locations(trusted)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    return ctx


def handshake(
    server: IssuedPaths,
    client: IssuedPaths,
    *,
    trusted: Path,
    hostname: str = QM_HOST,
    version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """A mutual TLS handshake in memory, both ends trusting the CA certificate ``trusted``.

    Returns the (server, client) ends; raises the SSLError of the end that refuses.
    """
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server_end = context(ssl.PROTOCOL_TLS_SERVER, server, trusted, version).wrap_bio(
        server_in, server_out, server_side=True
    )
    client_end = context(ssl.PROTOCOL_TLS_CLIENT, client, trusted, version).wrap_bio(
        client_in, client_out, server_hostname=hostname
    )
    done: list[ssl.SSLObject] = []
    for _ in range(10):
        for end in (client_end, server_end):
            if end not in done:
                try:
                    end.do_handshake()
                    done.append(end)
                except ssl.SSLWantReadError:
                    pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if len(done) == 2:
            return server_end, client_end
    raise AssertionError("the handshake did not finish")


def common_name(end: ssl.SSLObject) -> str:
    peer = end.getpeercert()
    assert peer is not None
    return dict(pair for rdn in peer["subject"] for pair in rdn)["commonName"]


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda version: version.name)
def test_client_certificate_against_queue_manager(
    ca: CaPaths, qm: IssuedPaths, alice: IssuedPaths, version: ssl.TLSVersion
) -> None:
    server, client = handshake(qm, alice, trusted=ca.cert, version=version)
    expected = "TLSv1.2" if version is ssl.TLSVersion.TLSv1_2 else "TLSv1.3"
    assert server.version() == client.version() == expected
    assert common_name(server) == "alice"
    assert common_name(client) == "qm1"


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda version: version.name)
def test_queue_managers_authenticate_each_other(
    ca: CaPaths, qm: IssuedPaths, version: ssl.TLSVersion
) -> None:
    qm2 = issue(ca.cert.parent, "qm2", hosts=["qm2.example.com"])
    server, client = handshake(qm, qm2, trusted=ca.cert, version=version)
    assert (common_name(server), common_name(client)) == ("qm2", "qm1")


def test_ip_address_names_the_queue_manager(
    ca: CaPaths, qm: IssuedPaths, alice: IssuedPaths
) -> None:
    _, client = handshake(qm, alice, trusted=ca.cert, hostname=QM_ADDRESS)
    assert common_name(client) == "qm1"


@pytest.mark.parametrize("version", TLS_VERSIONS, ids=lambda version: version.name)
def test_client_of_another_ca_is_refused(
    tmp_path: Path, ca: CaPaths, qm: IssuedPaths, version: ssl.TLSVersion
) -> None:
    other = init_ca(tmp_path / "other")
    mallory = issue(other.cert.parent, "mallory", kind="client")
    with pytest.raises(ssl.SSLError, match="certificate verify failed"):
        handshake(qm, mallory, trusted=ca.cert, version=version)


def test_queue_manager_of_another_ca_is_refused(
    tmp_path: Path, ca: CaPaths, alice: IssuedPaths
) -> None:
    other = init_ca(tmp_path / "other")
    impostor = issue(other.cert.parent, "qm1", hosts=[QM_HOST])
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        handshake(impostor, alice, trusted=ca.cert)


def test_host_not_in_the_certificate_is_refused(
    ca: CaPaths, qm: IssuedPaths, alice: IssuedPaths
) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(qm, alice, trusted=ca.cert, hostname="qm9.example.com")


def test_client_certificate_cannot_serve(ca: CaPaths, alice: IssuedPaths) -> None:
    bob = issue(ca.cert.parent, "bob", kind="client")
    with pytest.raises(ssl.SSLCertVerificationError, match="unsuitable certificate purpose"):
        handshake(bob, alice, trusted=ca.cert, hostname="bob")


# --------------------------------------------------------------------------
# Contents of the certificates
# --------------------------------------------------------------------------


def test_ca_certificate(ca: CaPaths) -> None:
    cert = load(ca.cert)
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "qmgr deployment CA"
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert (constraints.value.ca, constraints.value.path_length) == (True, 0)
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical
    assert (usage.value.key_cert_sign, usage.value.crl_sign, usage.value.digital_signature) == (
        True,
        True,
        False,
    )
    cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    cert.verify_directly_issued_by(cert)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime.days == 3650


def test_queue_manager_certificate(ca: CaPaths, qm: IssuedPaths) -> None:
    cert, ca_cert = load(qm.cert), load(ca.cert)
    cert.verify_directly_issued_by(ca_cert)
    assert cert.subject.rfc4514_string() == "CN=qm1"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [QM_HOST]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(QM_ADDRESS)]
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert not constraints.value.ca
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert usage.critical
    assert usage.value.digital_signature
    assert not usage.value.key_cert_sign
    assert not usage.value.key_agreement
    authority = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_key_id = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert authority.key_identifier == ca_key_id.digest
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 825
    # Valid a few minutes before now: a peer whose clock is behind accepts it.
    skew = dt.datetime.now(dt.UTC) - cert.not_valid_before_utc
    assert dt.timedelta(minutes=4) < skew < dt.timedelta(minutes=6)


def test_client_certificate(ca: CaPaths, alice: IssuedPaths) -> None:
    cert = load(alice.cert)
    cert.verify_directly_issued_by(load(ca.cert))
    assert cert.subject.rfc4514_string() == "CN=alice"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


# --------------------------------------------------------------------------
# Where they are written, and what is refused
# --------------------------------------------------------------------------


def test_out_dir_holds_a_copy_of_the_ca_certificate(tmp_path: Path, ca: CaPaths) -> None:
    out = tmp_path / "hosts" / "qm1"
    paths = issue(ca.cert.parent, "qm1", hosts=[QM_HOST], out_dir=out)
    assert sorted(os.listdir(out)) == ["ca.crt", "qm1.crt", "qm1.key"]
    assert paths.ca_cert.read_bytes() == ca.cert.read_bytes()
    assert mode(out) == 0o700
    assert mode(paths.key) == 0o600
    issue(ca.cert.parent, "alice", kind="client", out_dir=out)  # the same ca.crt is kept

    other = init_ca(tmp_path / "other")
    with pytest.raises(CertsError, match="another CA"):
        issue(other.cert.parent, "qm2", hosts=[QM_HOST], out_dir=out)
    assert not (out / "qm2.crt").exists()
    issue(other.cert.parent, "qm2", hosts=[QM_HOST], out_dir=out, force=True)
    assert (out / "ca.crt").read_bytes() == other.cert.read_bytes()


def test_existing_ca_is_kept_unless_forced(ca: CaPaths) -> None:
    key = ca.key.read_bytes()
    with pytest.raises(ExistingFilesError, match="exist already") as raised:
        init_ca(ca.cert.parent)
    assert raised.value.paths == (ca.key, ca.cert)
    assert ca.key.read_bytes() == key
    init_ca(ca.cert.parent, name="second", force=True)
    assert ca.key.read_bytes() != key
    assert describe(ca.cert).subject == "second"
    assert mode(ca.key) == 0o600


def test_existing_certificate_is_kept_unless_forced(ca: CaPaths, qm: IssuedPaths) -> None:
    cert = qm.cert.read_bytes()
    with pytest.raises(ExistingFilesError, match=r"qm1\.key and .*qm1\.crt exist already"):
        issue(ca.cert.parent, "qm1", hosts=["other.example.com"])
    assert qm.cert.read_bytes() == cert
    issue(ca.cert.parent, "qm1", hosts=["other.example.com"], force=True)
    assert describe(qm.cert).dns_names == ("other.example.com",)
    assert mode(qm.key) == 0o600


def test_no_ca(tmp_path: Path) -> None:
    with pytest.raises(CaNotFoundError, match="no CA in"):
        issue(tmp_path, "qm1", hosts=[QM_HOST])


def test_ca_key_of_another_ca_is_refused(tmp_path: Path, ca: CaPaths) -> None:
    other = init_ca(tmp_path / "other")
    ca.key.write_bytes(other.key.read_bytes())
    with pytest.raises(CertsError, match="is not the key of"):
        issue(ca.cert.parent, "qm1", hosts=[QM_HOST])


def test_certificate_may_not_outlive_its_ca(tmp_path: Path) -> None:
    short = init_ca(tmp_path / "short", days=30)
    with pytest.raises(CertsError, match="the CA expires on"):
        issue(short.cert.parent, "qm1", hosts=[QM_HOST])
    issue(short.cert.parent, "qm1", hosts=[QM_HOST], days=29)


def test_bad_days_and_ca_names(tmp_path: Path, ca: CaPaths) -> None:
    with pytest.raises(CertsError, match="at least 1 day"):
        issue(ca.cert.parent, "alice", kind="client", days=0)
    with pytest.raises(CertsError, match="would end after the year 9999: at most"):
        init_ca(tmp_path / "forever", days=3_000_000)
    with pytest.raises(CertsError, match="would end after the year 9999"):
        issue(ca.cert.parent, "alice", kind="client", days=3_000_000)
    assert not (tmp_path / "forever").exists()
    with pytest.raises(CertsError, match="CA name is empty"):
        init_ca(tmp_path / "nameless", name=" ")
    with pytest.raises(CertsError, match="unknown certificate kind"):
        issue(ca.cert.parent, "alice", kind="server")  # type: ignore[arg-type]
    assert not (tmp_path / "nameless").exists()
