"""The TLS context of an SDK client: :func:`tls_context`.

A client connects over TLS when it is given an ``ssl.SSLContext``
(:func:`tls_context` makes the usual one: trust the deployment's CA, check
the queue manager's host name, and present a client certificate when one is
given, which is how the client authenticates). The TLS I/O is the clients'
own: ``_blocking_io.TlsConnection`` and ``_trio_io.tls_handshake``; both say
why a handshake failed in the words of :func:`tls_failure`.
"""

from __future__ import annotations

import ssl
from os import PathLike
from typing import Final

__all__ = ["tls_context", "tls_failure"]

_VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
#: How every PEM private key block ends its first line (``RSA``, ``EC``, ``ENCRYPTED``, ...).
_PRIVATE_KEY: Final = b"PRIVATE KEY-----"
#: Bytes of a certificate file looked through for a private key (PEM files are a few KiB).
_PEM_READ_LIMIT: Final = 1 << 20


def tls_context(
    ca: str | PathLike[str] | None = None,
    *,
    certificate: str | PathLike[str] | None = None,
    key: str | PathLike[str] | None = None,
    min_version: str = "1.2",
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """The TLS context of a client of a queue manager.

    Args:
        ca: the CA bundle (PEM) that signed the queue manager's certificate;
            None trusts the system's CAs.
        certificate: this client's certificate (PEM), to authenticate with;
            its common name is the principal the queue manager knows it as.
        key: the certificate's private key (PEM; default: in ``certificate``).
        min_version: the oldest TLS version accepted, ``"1.2"`` or ``"1.3"``.
        check_hostname: check that the queue manager's certificate names the
            host connected to (keep it on; off only for an address that the
            certificate does not list, on a network you trust).

    Raises:
        ValueError: ``min_version`` is neither; a file cannot be loaded (or, without
            ``key``, ``certificate`` holds no private key: the message says "holds no
            private key").
    """
    if min_version not in _VERSIONS:
        msg = f"min_version must be '1.2' or '1.3', not {min_version!r}"
        raise ValueError(msg)
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        msg = f"cannot load the CA bundle {ca}: {exc}"
        raise ValueError(msg) from exc
    context.minimum_version = _VERSIONS[min_version]
    context.options |= ssl.OP_NO_RENEGOTIATION
    context.check_hostname = check_hostname
    if certificate is not None:
        try:
            context.load_cert_chain(certificate, key)
        except (OSError, ssl.SSLError) as exc:
            if key is None and not _holds_private_key(certificate):
                msg = (
                    f"cannot load the client certificate {certificate}: it holds no private "
                    "key: give key, the file of its private key"
                )
            else:
                msg = f"cannot load the client certificate {certificate}: {exc}"
            raise ValueError(msg) from exc
    return context


def _holds_private_key(path: str | PathLike[str]) -> bool:
    """True unless the PEM file ``path`` can be read and has no private key in it."""
    try:
        with open(path, "rb") as pem:
            return _PRIVATE_KEY in pem.read(_PEM_READ_LIMIT)
    except OSError:
        return True  # the error of loading it says what is wrong


def tls_failure(error: BaseException | None, otherwise: str) -> str:
    """Why a TLS handshake with the queue manager failed, in words: its certificate
    is not trusted, the TLS layer's reason, or ``otherwise`` when ``error`` gives neither."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted ({error.verify_message})"
    if isinstance(error, ssl.SSLError) and error.reason:
        return f"TLS handshake failed: {error.reason}"
    return f"TLS handshake failed: {otherwise}"
