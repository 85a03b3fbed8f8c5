"""Helpers of the tests of ``qmgr.certs`` (their fixtures are in ``conftest.py``)."""

from __future__ import annotations

import stat
from pathlib import Path

from cryptography import x509

QM_HOST = "qm1.example.com"
QM_ADDRESS = "10.0.0.5"


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
