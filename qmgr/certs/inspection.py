"""Reading a certificate back: :func:`describe`, for ``qmgr certs show``.

A certificate's validity is a state of the moment it is looked at
(:func:`validity`): ``"not yet valid"`` before its not-before time,
``"expired"`` after its not-after time, ``"valid"`` in between (both ends
included, as OpenSSL checks them). The queue manager's start-up check
(``qmgr.server.tls``) uses the same rule.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from qmgr.certs.authority import EXTENDED_KEY_USAGES
from qmgr.certs.errors import CertsError
from qmgr.certs.files import read_file

__all__ = ["CertInfo", "CertKind", "Validity", "describe", "validity"]

CertKind = Literal["ca", "qm", "client", "other"]

Validity = Literal["valid", "expired", "not yet valid"]
"""Whether a certificate may be used at a given moment (:func:`validity`)."""


@dataclass(frozen=True)
class CertInfo:
    """What :func:`describe` reads from a certificate.

    ``subject`` and ``issuer`` are Common Names (the whole RFC 4514 name when
    there is none); times are in UTC; the fingerprint is the SHA-256 of the
    DER encoding as colon-separated upper-case hex, as ``openssl x509
    -fingerprint -sha256`` prints it. ``validity`` is the state at the
    moment :func:`describe` was given (``now``).
    """

    path: Path
    subject: str
    issuer: str
    kind: CertKind
    serial: int
    not_before: dt.datetime
    not_after: dt.datetime
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    sha256_fingerprint: str
    validity: Validity


def validity(not_before: dt.datetime, not_after: dt.datetime, now: dt.datetime) -> Validity:
    """The state of a certificate valid from ``not_before`` to ``not_after`` at ``now``
    (aware datetimes)."""
    if now < not_before:
        return "not yet valid"
    if now > not_after:
        return "expired"
    return "valid"


def describe(path: Path, *, now: dt.datetime | None = None) -> CertInfo:
    """Read the certificate in ``path`` (PEM or DER): names, kind, validity, fingerprint.

    ``validity`` is computed at ``now`` (an aware datetime; default: the
    current time).

    The kind comes from the certificate's extensions: ``"ca"`` for a CA,
    ``"qm"`` for serverAuth with clientAuth, ``"client"`` for clientAuth
    alone, ``"other"`` for anything else. Of a PEM file with several
    certificates, the first is read.

    Raises:
        CertsError: the file cannot be read or holds no certificate.
    """
    data = read_file(path)
    try:
        if b"-----BEGIN" in data:
            cert = x509.load_pem_x509_certificate(data)
        else:
            cert = x509.load_der_x509_certificate(data)
    except ValueError:
        msg = f"{path}: not a certificate (PEM or DER)"
        raise CertsError(msg) from None
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns_names = tuple(sans.get_values_for_type(x509.DNSName))
        ip_addresses = tuple(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        dns_names, ip_addresses = (), ()
    return CertInfo(
        path=path,
        subject=_common_name(cert.subject),
        issuer=_common_name(cert.issuer),
        kind=_kind(cert),
        serial=cert.serial_number,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        sha256_fingerprint=cert.fingerprint(hashes.SHA256()).hex(":").upper(),
        validity=validity(
            cert.not_valid_before_utc,
            cert.not_valid_after_utc,
            dt.datetime.now(dt.UTC) if now is None else now,
        ),
    )


def _kind(cert: x509.Certificate) -> CertKind:
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return "ca"
        usages = frozenset(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return "other"
    if usages == EXTENDED_KEY_USAGES["qm"]:
        return "qm"
    if usages == EXTENDED_KEY_USAGES["client"]:
        return "client"
    return "other"


def _common_name(name: x509.Name) -> str:
    values = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else name.rfc4514_string()
