"""The deployment CA (qmgr.certs): what it issues verifies in real TLS handshakes.

The handshakes run in-process over memory BIOs, with ``VERIFY_X509_STRICT``
on both sides (Python 3.13's default), TLS 1.2 and TLS 1.3.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import ipaddress
import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qmgr.certs import (
    CaNotFoundError,
    CaPaths,
    CertsError,
    ExistingFilesError,
    IssuedPaths,
    LeafKind,
    describe,
    init_ca,
    issue,
    validity,
)

QM_HOST = "qm1.example.com"
QM_ADDRESS = "10.0.0.5"
TLS_VERSIONS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


@pytest.fixture
def ca(tmp_path: Path) -> CaPaths:
    return init_ca(tmp_path / "ca")


@pytest.fixture
def qm(ca: CaPaths) -> IssuedPaths:
    return issue(ca.cert.parent, "qm1", hosts=[QM_HOST, QM_ADDRESS])


@pytest.fixture
def alice(ca: CaPaths) -> IssuedPaths:
    return issue(ca.cert.parent, "alice", kind="client")


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


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


def test_hosts_ipv6_and_repeats(ca: CaPaths) -> None:
    paths = issue(
        ca.cert.parent, "qm6", hosts=["::1", "LocalHost", "localhost.", "127.0.0.1", "::1"]
    )
    info = describe(paths.cert)
    assert info.dns_names == ("localhost",)
    assert info.ip_addresses == ("::1", "127.0.0.1")


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


def test_files_and_modes(tmp_path: Path, ca: CaPaths, qm: IssuedPaths) -> None:
    directory = tmp_path / "ca"
    assert mode(directory) == 0o700
    assert mode(ca.key) == mode(qm.key) == 0o600
    assert not mode(ca.cert) & (stat.S_IWGRP | stat.S_IWOTH)
    assert sorted(os.listdir(directory)) == ["ca.crt", "ca.key", "qm1.crt", "qm1.key"]
    assert qm.ca_cert == ca.cert
    assert qm.key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")


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


def test_a_failed_write_leaves_no_temporary_file(ca: CaPaths) -> None:
    (ca.cert.parent / "qm1.crt").mkdir()
    with pytest.raises(CertsError, match=r"cannot write .*qm1\.crt"):
        issue(ca.cert.parent, "qm1", hosts=[QM_HOST], force=True)
    assert sorted(os.listdir(ca.cert.parent)) == ["ca.crt", "ca.key", "qm1.crt", "qm1.key"]


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


# --------------------------------------------------------------------------
# Names and hosts
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("a/b", "file name"),
        ("..", "file name"),
        (".hidden", "file name"),
        ("-rf", "file name"),
        ("two words", "file name"),
        ("é", "file name"),
        ("tab\there", "control characters"),
        ("x" * 65, "longer than 64"),
        ("ca", "the CA's own"),
    ],
)
def test_bad_names_are_refused(ca: CaPaths, name: str, message: str) -> None:
    with pytest.raises(CertsError, match=message):
        issue(ca.cert.parent, name, kind="client")
    assert sorted(os.listdir(ca.cert.parent)) == ["ca.crt", "ca.key"]


def test_good_names(ca: CaPaths) -> None:
    for name in ("qm-1.site_a", "A", "x" * 64, "_svc"):
        issue(ca.cert.parent, name, kind="client")
        assert describe(ca.cert.parent / f"{name}.crt").subject == name


@pytest.mark.parametrize(
    ("kind", "hosts", "message"),
    [
        ("qm", [], "at least one host"),
        ("qm", ["bad host"], "neither an IP address nor a DNS name"),
        ("qm", ["-lead.example.com"], "neither"),
        ("qm", ["a..b"], "neither"),
        ("qm", ["münchen.example"], "xn--"),
        ("qm", ["x" * 64 + ".com"], "neither"),
        ("client", ["host.example.com"], "not hosts"),
    ],
)
def test_bad_hosts_are_refused(ca: CaPaths, kind: LeafKind, hosts: list[str], message: str) -> None:
    with pytest.raises(CertsError, match=message):
        issue(ca.cert.parent, "leaf", kind=kind, hosts=hosts)


def test_bad_days_and_ca_names(tmp_path: Path, ca: CaPaths) -> None:
    with pytest.raises(CertsError, match="at least 1 day"):
        issue(ca.cert.parent, "alice", kind="client", days=0)
    with pytest.raises(CertsError, match="CA name is empty"):
        init_ca(tmp_path / "nameless", name=" ")
    with pytest.raises(CertsError, match="unknown certificate kind"):
        issue(ca.cert.parent, "alice", kind="server")  # type: ignore[arg-type]
    assert not (tmp_path / "nameless").exists()


# --------------------------------------------------------------------------
# describe
# --------------------------------------------------------------------------


def test_describe(ca: CaPaths, qm: IssuedPaths, alice: IssuedPaths) -> None:
    info = describe(qm.cert)
    cert = load(qm.cert)
    der = cert.public_bytes(serialization.Encoding.DER)
    assert (info.subject, info.issuer, info.kind) == ("qm1", "qmgr deployment CA", "qm")
    assert (info.dns_names, info.ip_addresses) == ((QM_HOST,), (QM_ADDRESS,))
    assert info.sha256_fingerprint == ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
    assert (info.not_before, info.not_after) == (
        cert.not_valid_before_utc,
        cert.not_valid_after_utc,
    )
    assert info.serial == cert.serial_number
    assert info.validity == "valid"
    assert describe(alice.cert).kind == "client"
    assert describe(ca.cert).kind == "ca"
    assert describe(ca.cert).dns_names == ()


def test_describe_reads_der_and_refuses_what_is_no_certificate(
    tmp_path: Path, qm: IssuedPaths
) -> None:
    der_path = tmp_path / "qm1.der"
    der_path.write_bytes(load(qm.cert).public_bytes(serialization.Encoding.DER))
    assert describe(der_path) == dataclasses.replace(describe(qm.cert), path=der_path)
    with pytest.raises(CertsError, match="not a certificate"):
        describe(qm.key)
    with pytest.raises(CertsError, match="no such file"):
        describe(tmp_path / "missing.crt")


def test_describe_says_whether_it_is_valid_at_a_moment(qm: IssuedPaths) -> None:
    info = describe(qm.cert)
    second = dt.timedelta(seconds=1)
    at = {
        "before": info.not_before - second,
        "from": info.not_before,
        "until": info.not_after,
        "after": info.not_after + second,
        "years after": info.not_after + dt.timedelta(days=3650),
    }
    assert {when: describe(qm.cert, now=now).validity for when, now in at.items()} == {
        "before": "not yet valid",
        "from": "valid",
        "until": "valid",
        "after": "expired",
        "years after": "expired",
    }
    assert validity(info.not_before, info.not_after, info.not_after + second) == "expired"
    # Any time zone: the moments are compared, not the clock faces.
    tokyo = dt.timezone(dt.timedelta(hours=9))
    assert describe(qm.cert, now=(info.not_after + second).astimezone(tokyo)).validity == "expired"
