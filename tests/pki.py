"""A throw-away deployment CA for tests of TLS and permissions: certificates for
queue managers and clients (and ones ``qmgr certs issue`` would not make:
expired, not yet valid, other extended key usages), ``qmgr serve`` arguments,
and a daemon that skips the start-up check of its own certificate."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TypedDict, Unpack

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from helpers import DaemonProcess

from qmgr.certs import init_ca, issue

HOSTS = ("127.0.0.1", "localhost")
DAY: Final = dt.timedelta(days=1)
QM_USAGES: Final = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
CLIENT_USAGES: Final = (ExtendedKeyUsageOID.CLIENT_AUTH,)
SERVER_USAGES: Final = (ExtendedKeyUsageOID.SERVER_AUTH,)


class Pki:
    """A deployment CA in ``directory`` and the certificates issued from it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca = init_ca(directory).cert

    def qm(self, name: str) -> tuple[Path, Path]:
        issued = issue(self.directory, name, kind="qm", hosts=HOSTS)
        return issued.cert, issued.key

    def client(self, name: str) -> tuple[Path, Path]:
        """The client certificate of ``name`` (issued the first time it is asked for)."""
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        if cert.exists():
            return cert, key
        issued = issue(self.directory, name, kind="client")
        return issued.cert, issued.key

    def expired_qm(self, name: str) -> tuple[Path, Path]:
        """A queue manager certificate that expired yesterday."""
        now = dt.datetime.now(dt.UTC)
        return self.leaf(name, not_before=now - DAY * 30, not_after=now - DAY)

    def leaf(self, name: str, **options: Unpack[SignOptions]) -> tuple[Path, Path]:
        """A certificate ``qmgr certs issue`` would not make: see :func:`sign`."""
        return sign(self.directory, name, **options)

    def serve_args(self, name: str, *more: str, cert: tuple[Path, Path] | None = None) -> list[str]:
        """``qmgr serve`` arguments for TLS with the certificate of queue manager ``name``."""
        cert_path, key_path = cert if cert is not None else self.qm(name)
        return [
            "--set",
            f"tls.certificate={cert_path}",
            "--set",
            f"tls.key={key_path}",
            "--set",
            f"tls.ca={self.ca}",
            *more,
        ]


class SignOptions(TypedDict, total=False):
    """What :func:`sign` makes other than ``qmgr certs issue`` would."""

    usages: Sequence[x509.ObjectIdentifier] | None
    not_before: dt.datetime | None
    not_after: dt.datetime | None
    common_name: str | None


def sign(
    directory: Path,
    name: str,
    *,
    usages: Sequence[x509.ObjectIdentifier] | None = QM_USAGES,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
    common_name: str | None = None,
) -> tuple[Path, Path]:
    """A certificate for ``name`` (for 127.0.0.1 and localhost) signed by the CA in
    ``directory``, written as ``<name>.crt`` and ``<name>.key`` there.

    ``usages`` are its extended key usages (None: no such extension); it is
    valid from ``not_before`` (default: a day ago) to ``not_after`` (default:
    in 30 days); its common name is ``common_name`` (default: ``name``).
    """
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, common_name or name)])
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - DAY if not_before is None else not_before)
        .not_valid_after(now + DAY * 30 if not_after is None else not_after)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    )
    builder = (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _uncheck() -> None:
    """Turn off the start-up check of the daemon's own certificate (in its process)."""
    import qmgr.server.tls as tls

    assert callable(tls._check_certificate)
    tls._check_certificate = lambda config, path: None


#: ``qmgr`` with the start-up check of its own certificate turned off (launched by exec).
_UNCHECKED: Final = (
    f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    "import pki\npki._uncheck()\nfrom qmgr.cli import main\nmain()\n"
)


class UncheckedDaemon(DaemonProcess):
    """A queue manager that serves with whatever certificate it is given: one whose
    certificate expired while it ran, or a modified one that presents a client's
    certificate. The other ends' checks are what is tested against it."""

    prepare = staticmethod(_uncheck)

    def command(self) -> list[str]:
        python, _m, _qmgr, *args = super().command()
        return [python, "-c", _UNCHECKED, *args]
