"""The TLS context a client uses: its defaults and its refusals (no handshake here; the
TLS connections themselves are tested against a real daemon in
tests/integration/test_tls_between_processes.py)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from qmgr.certs import init_ca
from qmgr.client import tls_context


def test_the_defaults_check_the_queue_manager() -> None:
    context = tls_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    strict = tls_context(min_version="1.3", check_hostname=False)
    assert strict.minimum_version is ssl.TLSVersion.TLSv1_3
    assert not strict.check_hostname


def test_what_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=re.escape("min_version must be '1.2' or '1.3'")):
        tls_context(min_version="1.1")
    missing = tmp_path / "ca.pem"
    with pytest.raises(ValueError, match=re.escape(f"cannot load the CA bundle {missing}")):
        tls_context(missing)
    bogus = tmp_path / "client.pem"
    bogus.write_text("not a certificate")
    with pytest.raises(ValueError, match=re.escape(f"cannot load the client certificate {bogus}")):
        tls_context(certificate=bogus)


def test_a_certificate_without_its_key_says_so(tmp_path: Path) -> None:
    paths = init_ca(tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"{paths.cert}: it holds no private key")):
        tls_context(certificate=paths.cert)
    # A file that holds both is a client certificate with its key.
    both = tmp_path / "both.pem"
    both.write_bytes(paths.cert.read_bytes() + paths.key.read_bytes())
    tls_context(certificate=both)
    # With its key given, a certificate that does not match it is not this error.
    with pytest.raises(ValueError, match="cannot load the client certificate") as caught:
        tls_context(certificate=paths.cert, key=paths.cert)
    assert "private key" not in str(caught.value)
