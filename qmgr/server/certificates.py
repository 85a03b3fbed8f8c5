"""What the queue manager checks in certificates: its own at start-up, and a peer's usages.

``qmgr.server.tls`` builds the contexts and runs the handshakes with the
standard library's ``ssl``; the checks ``ssl`` does not make read the
certificates with ``cryptography``, here, so that a queue manager without
TLS never imports it (about 8 MB of resident memory).

* :func:`check_own`: this queue manager's certificate must be valid now and
  carry the extended key usages of the ports that use it (see
  ``qmgr.server.tls`` for the rule).
* :func:`queue_manager_refusal`: a peer's certificate must be a queue
  manager's (serverAuth and clientAuth).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from qmgr.certs.authority import EXTENDED_KEY_USAGES
from qmgr.certs.inspection import validity
from qmgr.config import Config

__all__ = ["check_own", "own_certificate", "queue_manager_refusal"]

#: The extended key usages of a queue manager's certificate, required on the peer port.
_QUEUE_MANAGER: Final = EXTENDED_KEY_USAGES["qm"]
#: Those of a client's certificate, which serves no port.
_CLIENT: Final = EXTENDED_KEY_USAGES["client"]
#: OpenSSL's short names of the usages (``extendedKeyUsage = serverAuth, clientAuth``).
_USAGE_NAMES: Final = {
    ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
    ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth",
    ExtendedKeyUsageOID.CODE_SIGNING: "codeSigning",
    ExtendedKeyUsageOID.EMAIL_PROTECTION: "emailProtection",
    ExtendedKeyUsageOID.TIME_STAMPING: "timeStamping",
    ExtendedKeyUsageOID.OCSP_SIGNING: "OCSPSigning",
    ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE: "anyExtendedKeyUsage",
}
_ISSUE_HINT: Final = "`qmgr certs issue NAME --host ...`"


def own_certificate(path: Path) -> tuple[bytes, str | None]:
    """This queue manager's certificate as DER, and its common name (None: none).

    Raises:
        ValueError: it cannot be read.
    """
    certificate = _read_certificate(path)
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    name = str(names[0].value) if names else None
    return certificate.public_bytes(serialization.Encoding.DER), name


def check_own(config: Config, path: Path) -> None:
    """Refuse this queue manager's certificate if it cannot be used now on its ports.

    Raises:
        ValueError: it cannot be read, has expired or is not yet valid, or
            lacks a usage its ports need (the message names the file).
    """
    certificate = _read_certificate(path)
    not_before, not_after = certificate.not_valid_before_utc, certificate.not_valid_after_utc
    state = validity(not_before, not_after, dt.datetime.now(dt.UTC))
    if state == "expired":
        msg = (
            f"tls.certificate {path} expired on {_minute(not_after)}: "
            "renew it with `qmgr certs issue NAME --host ... --force`"
        )
        raise ValueError(msg)
    if state == "not yet valid":
        msg = (
            f"tls.certificate {path} is not valid before {_minute(not_before)} "
            "(is this host's clock right?)"
        )
        raise ValueError(msg)
    refusal = _usage_refusal(config, _extended_key_usages(certificate))
    if refusal is not None:
        msg = f"tls.certificate {path} {refusal}"
        raise ValueError(msg)


def _usage_refusal(config: Config, usages: frozenset[x509.ObjectIdentifier] | None) -> str | None:
    """Why a certificate with ``usages`` cannot serve the ports ``config`` has TLS on."""
    described = f"extended key usage {_usage_text(usages)}"
    if usages == _CLIENT:
        return (
            f"is a client certificate ({described}): the queue manager needs one "
            f"issued with {_ISSUE_HINT}"
        )
    serves = config.tls_clients or (config.tls_http and config.http_listen is not None)
    if serves and usages is not None and ExtendedKeyUsageOID.SERVER_AUTH not in usages:
        port = "client port" if config.tls_clients else "HTTP listener"
        return (
            f"cannot serve the {port} ({described}): it needs serverAuth; "
            f"issue one with {_ISSUE_HINT}"
        )
    if config.tls_peers and not _is_queue_managers(usages):
        return (
            f"cannot be used between queue managers ({described}): tls.peers needs "
            f"serverAuth and clientAuth; issue one with {_ISSUE_HINT}, or set tls.peers = false"
        )
    return None


def _read_certificate(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except OSError as exc:
        msg = f"cannot load tls.certificate {path}: {exc.strerror or exc}"
        raise ValueError(msg) from exc
    except ValueError:
        msg = f"cannot load tls.certificate {path}: not a PEM certificate"
        raise ValueError(msg) from None


def _extended_key_usages(certificate: x509.Certificate) -> frozenset[x509.ObjectIdentifier] | None:
    """The extended key usages of ``certificate`` (None: it has no such extension)."""
    try:
        extension = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    except x509.ExtensionNotFound:
        return None
    return frozenset(extension.value)


def _is_queue_managers(usages: frozenset[x509.ObjectIdentifier] | None) -> bool:
    return usages is not None and usages >= _QUEUE_MANAGER


def _usage_text(usages: frozenset[x509.ObjectIdentifier] | None) -> str:
    """``clientAuth only``, ``clientAuth, serverAuth``, or that there is none."""
    if usages is None:
        return "missing (no extendedKeyUsage extension)"
    names = sorted(_USAGE_NAMES.get(usage, usage.dotted_string) for usage in usages)
    if len(names) == 1:
        return f"{names[0]} only"
    return ", ".join(names) if names else "empty"


def _minute(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def queue_manager_refusal(der: bytes | None, identity: str) -> str | None:
    """Why a peer (``identity``) whose certificate is ``der`` is not a queue manager
    (None: it is one)."""
    usages = None if der is None else _extended_key_usages(x509.load_der_x509_certificate(der))
    if _is_queue_managers(usages):
        return None
    return (
        f"the peer's certificate (CN {identity}) is not a queue manager's: its extended "
        f"key usage is {_usage_text(usages)}; issue queue manager certificates with "
        f"{_ISSUE_HINT} (serverAuth and clientAuth)"
    )
