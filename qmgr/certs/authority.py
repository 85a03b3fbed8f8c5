"""The deployment CA: making it (:func:`init_ca`) and issuing certificates (:func:`issue`).

The CA may sign leaf certificates only (path length 0). A leaf's subject
Common Name is the name it is issued for; its extended key usages say what
it is for (:data:`EXTENDED_KEY_USAGES`). Validity starts five minutes in
the past, so that a host whose clock is a little behind accepts it at once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qmgr.certs.errors import CaNotFoundError, CertsError
from qmgr.certs.files import make_private_directory, read_file, refuse_existing, write_atomically
from qmgr.certs.names import check_ca_name, check_leaf_name, host_names

__all__ = [
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "EXTENDED_KEY_USAGES",
    "CaPaths",
    "IssuedPaths",
    "LeafKind",
    "init_ca",
    "issue",
]

CA_KEY_FILE = "ca.key"
CA_CERT_FILE = "ca.crt"

LeafKind = Literal["qm", "client"]
"""``"qm"``: a queue manager (TLS server, and client of its peers); ``"client"``: an SDK user."""

EXTENDED_KEY_USAGES: dict[LeafKind, frozenset[x509.ObjectIdentifier]] = {
    "qm": frozenset({ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}),
    "client": frozenset({ExtendedKeyUsageOID.CLIENT_AUTH}),
}

_CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class CaPaths:
    """The files of a CA: its private key and its (self-signed) certificate."""

    key: Path
    cert: Path


@dataclass(frozen=True)
class IssuedPaths:
    """The files of an issued certificate, and the CA certificate that verifies it."""

    key: Path
    cert: Path
    ca_cert: Path


def init_ca(
    directory: Path, *, name: str = "qmgr deployment CA", days: int = 3650, force: bool = False
) -> CaPaths:
    """Create a CA in ``directory`` (made with mode 0700 if missing): ``ca.key`` and ``ca.crt``.

    ``name`` is the CA certificate's Common Name; ``days`` its validity.

    Raises:
        ExistingFilesError: a CA is there already and ``force`` is false.
        CertsError: a bad ``name`` or ``days``, or the files cannot be written.
    """
    check_ca_name(name)
    _check_days(days)
    paths = CaPaths(directory / CA_KEY_FILE, directory / CA_CERT_FILE)
    refuse_existing([paths.key, paths.cert], force)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _common_name(name)
    key_id = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        _validity(days)
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(key_id, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(key_id), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    make_private_directory(directory)
    write_atomically(paths.key, _private_pem(key), private=True)
    write_atomically(paths.cert, cert.public_bytes(serialization.Encoding.PEM))
    return paths


def issue(
    directory: Path,
    name: str,
    *,
    kind: LeafKind = "qm",
    hosts: Sequence[str] = (),
    days: int = 825,
    out_dir: Path | None = None,
    force: bool = False,
) -> IssuedPaths:
    """Sign a certificate for ``name`` with the CA in ``directory``; write it into ``out_dir``.

    Writes ``<name>.key`` (mode 0600) and ``<name>.crt`` into ``out_dir``
    (default: ``directory``, made with mode 0700 if missing), and a copy of
    ``ca.crt`` when that is another directory, so that it holds everything
    one host needs. ``hosts`` (DNS names or IP addresses) become the Subject
    Alternative Names of a ``"qm"`` certificate, which needs at least one; a
    ``"client"`` certificate takes none.

    Raises:
        CaNotFoundError: ``directory`` holds no CA.
        ExistingFilesError: the files exist already and ``force`` is false.
        CertsError: a bad name, host or ``days``, a certificate that would
            outlive its CA, another CA's ``ca.crt`` in ``out_dir`` (replaced
            only with ``force``), or files that cannot be read or written.
    """
    check_leaf_name(name)
    _check_days(days)
    sans = _subject_alternative_names(kind, hosts)
    ca_key, ca_cert = _load_ca(directory)
    out = directory if out_dir is None else out_dir
    paths = IssuedPaths(out / f"{name}.key", out / f"{name}.crt", out / CA_CERT_FILE)
    refuse_existing([paths.key, paths.cert], force)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    ca_there = paths.ca_cert.exists()
    copy_ca = out_dir is not None and not (ca_there and read_file(paths.ca_cert) == ca_pem)
    if copy_ca and ca_there and not force:
        msg = f"{paths.ca_cert} is the certificate of another CA, not replaced"
        raise CertsError(msg)
    if dt.datetime.now(dt.UTC) + dt.timedelta(days=days) > ca_cert.not_valid_after_utc:
        msg = (
            f"the CA expires on {ca_cert.not_valid_after_utc:%Y-%m-%d}, before the {days} days "
            "asked for: ask for fewer days, or make a new CA"
        )
        raise CertsError(msg)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _validity(days)
        .subject_name(_common_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage(sorted(EXTENDED_KEY_USAGES[kind], key=_dotted)), False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    make_private_directory(out)
    write_atomically(paths.key, _private_pem(key), private=True)
    write_atomically(paths.cert, cert.public_bytes(serialization.Encoding.PEM))
    if copy_ca:
        write_atomically(paths.ca_cert, ca_pem)
    return paths


def _subject_alternative_names(kind: LeafKind, hosts: Sequence[str]) -> list[x509.GeneralName]:
    if kind not in EXTENDED_KEY_USAGES:
        msg = f"unknown certificate kind {kind!r}: 'qm' or 'client'"
        raise CertsError(msg)
    if kind == "client":
        if hosts:
            msg = "a client certificate names a principal, not hosts"
            raise CertsError(msg)
        return []
    if not hosts:
        msg = (
            "a queue manager certificate needs at least one host: "
            "the DNS names and IP addresses clients and peers connect to"
        )
        raise CertsError(msg)
    return host_names(hosts)


def _load_ca(directory: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key_path, cert_path = directory / CA_KEY_FILE, directory / CA_CERT_FILE
    if not key_path.exists() or not cert_path.exists():
        msg = f"no CA in {directory} ({CA_KEY_FILE} and {CA_CERT_FILE})"
        raise CaNotFoundError(msg)
    try:
        key = serialization.load_pem_private_key(read_file(key_path), password=None)
        cert = x509.load_pem_x509_certificate(read_file(cert_path))
    except (ValueError, TypeError) as exc:
        msg = f"the CA in {directory} is unreadable: {exc}"
        raise CertsError(msg) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        msg = f"{key_path}: not an EC private key"
        raise CertsError(msg)
    if key.public_key() != cert.public_key():
        msg = f"{key_path} is not the key of {cert_path}"
        raise CertsError(msg)
    return key, cert


def _check_days(days: int) -> None:
    if days < 1:
        msg = f"a certificate must be valid for at least 1 day, not {days}"
        raise CertsError(msg)
    # A certificate's dates end with the year 9999 (X.509's GeneralizedTime).
    last = dt.datetime(9999, 12, 31, tzinfo=dt.UTC) - dt.datetime.now(dt.UTC)
    if days > last.days:
        msg = f"{days} days would end after the year 9999: at most {last.days}"
        raise CertsError(msg)


def _common_name(name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def _dotted(oid: x509.ObjectIdentifier) -> str:
    return oid.dotted_string


def _validity(days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
    )


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
