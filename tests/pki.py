"""A throw-away deployment CA for tests of TLS and permissions: certificates for
queue managers and clients (and an expired one), ``qmgr serve`` arguments, and
reading a daemon's JSON log."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from helpers import DaemonProcess

from qmgr.certs import init_ca, issue

HOSTS = ("127.0.0.1", "localhost")


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
        ca_key = serialization.load_pem_private_key((self.directory / "ca.key").read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        ca_cert = x509.load_pem_x509_certificate(self.ca.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=30))
            .not_valid_after(now - dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        cert_path = self.directory / f"{name}.crt"
        key_path = self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return cert_path, key_path

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


def log_events(daemon: DaemonProcess, event: str) -> list[dict[str, object]]:
    found = []
    for line in daemon.log().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == event:
            found.append(record)
    return found
