"""Reading a certificate back (``qmgr.certs.inspection``): ``describe`` and ``validity``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qmgr.certs import (
    CaPaths,
    CertsError,
    IssuedPaths,
    describe,
    validity,
)

from .certs_kit import QM_ADDRESS, QM_HOST, load


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


# --------------------------------------------------------------------------
# Certificates qmgr.certs did not issue
# --------------------------------------------------------------------------

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def self_signed(
    path: Path,
    subject: x509.Name,
    *extensions: x509.ExtensionType,
    not_before: dt.datetime = NOW,
    not_after: dt.datetime = NOW + dt.timedelta(days=1),
) -> Path:
    """Write a self-signed certificate with ``extensions`` (none critical) to ``path``."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    cert = builder.sign(key, hashes.SHA256())
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def cn(name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


LEAF = x509.BasicConstraints(ca=False, path_length=None)


@pytest.mark.parametrize(
    ("extensions", "kind"),
    [
        ([x509.BasicConstraints(ca=True, path_length=None)], "ca"),
        ([LEAF, x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])], "client"),
        (
            [
                LEAF,
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]
                ),
            ],
            "qm",
        ),
        ([LEAF, x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])], "other"),
        ([LEAF, x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING])], "other"),
        (
            [
                LEAF,
                x509.ExtendedKeyUsage(
                    [
                        ExtendedKeyUsageOID.SERVER_AUTH,
                        ExtendedKeyUsageOID.CLIENT_AUTH,
                        ExtendedKeyUsageOID.CODE_SIGNING,
                    ]
                ),
            ],
            "other",
        ),
        ([LEAF], "other"),  # no extended key usages
        ([x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])], "other"),  # no constraints
        ([], "other"),
    ],
    ids=["ca", "client", "qm", "server-only", "code-signing", "qm-and-more", "no-eku",
         "no-constraints", "bare"],
)  # fmt: skip
def test_the_kind_comes_from_the_extensions(
    tmp_path: Path, extensions: list[x509.ExtensionType], kind: str
) -> None:
    assert describe(self_signed(tmp_path / "c.crt", cn("c"), *extensions)).kind == kind


def test_a_name_without_a_common_name_is_given_whole(tmp_path: Path) -> None:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example"),
            x509.NameAttribute(NameOID.COUNTRY_NAME, "FR"),
        ]
    )
    info = describe(self_signed(tmp_path / "c.crt", name))
    assert info.subject == info.issuer == "C=FR,O=Example"
    assert (info.dns_names, info.ip_addresses) == ((), ())


def test_of_several_certificates_in_a_file_the_first_is_read(tmp_path: Path) -> None:
    first = self_signed(tmp_path / "first.crt", cn("first"))
    second = self_signed(tmp_path / "second.crt", cn("second"))
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(first.read_bytes() + second.read_bytes())
    assert describe(bundle).subject == "first"


def test_validity_at_a_given_moment(tmp_path: Path) -> None:
    start, end = NOW, NOW + dt.timedelta(days=1)
    path = self_signed(tmp_path / "c.crt", cn("c"), not_before=start, not_after=end)
    tick = dt.timedelta(microseconds=1)
    assert validity(start, end, start - tick) == "not yet valid"
    assert validity(start, end, start) == "valid"
    assert validity(start, end, end) == "valid"
    assert validity(start, end, end + tick) == "expired"
    assert describe(path, now=start - tick).validity == "not yet valid"
    assert describe(path, now=end + dt.timedelta(seconds=1)).validity == "expired"
    assert describe(path).validity == "expired"  # by the current time, years later
