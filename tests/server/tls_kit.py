"""Settings and checks the tests of the TLS adapter and of the certificate checks share."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from qmgr.certs import issue
from qmgr.config import load_config
from qmgr.server.tls import load_contexts

#: An extended key usage no port takes.
SIGNING = ExtendedKeyUsageOID.CODE_SIGNING


def tls_settings(pki: Path, name: str, *more: str) -> list[str]:
    """Settings for TLS with a queue manager certificate for ``name`` issued now."""
    issued = issue(pki, name, kind="qm", hosts=("127.0.0.1",), force=True)
    return cert_settings(pki, (issued.cert, issued.key), *more)


def cert_settings(pki: Path, cert: tuple[Path, Path], *more: str) -> list[str]:
    """Settings for TLS with the certificate and key ``cert``."""
    return [f"tls.certificate={cert[0]}", f"tls.key={cert[1]}", f"tls.ca={pki / 'ca.crt'}", *more]


def refused(pki: Path, cert: tuple[Path, Path], *more: str, match: str) -> None:
    """The configuration with ``cert`` (and ``more`` settings) fails to load: ``match``."""
    with pytest.raises(ValueError, match=match):
        load_contexts(load_config(settings=cert_settings(pki, cert, *more)))
