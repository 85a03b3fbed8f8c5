"""A small deployment CA: the TLS certificates of queue managers and their clients.

qmgr speaks TLS on its client port and, with mutual TLS, on its peer port. A
deployment needs one certificate authority that every queue manager and
client trusts, and the certificates it signs:

* :func:`init_ca` makes the CA: ``ca.key`` (its private key, mode 0600) and
  ``ca.crt`` (the trust root every queue manager and client is given).
* :func:`issue` signs a leaf certificate, ``<name>.key`` and ``<name>.crt``,
  whose subject Common Name is ``name``, the identity the other end sees:

  - ``"qm"``, a queue manager: serverAuth and clientAuth, because the same
    certificate serves its ports and is presented when it connects to
    peers; its Subject Alternative Names are the DNS names and IP addresses
    clients and peers connect to (at least one is required).
  - ``"client"``, an SDK or CLI user: clientAuth only; its Common Name is the
    principal name, and it names no hosts.

* :func:`describe` reads a certificate back (``qmgr certs show``), with its
  validity at a given moment (:func:`validity`: valid, expired or not yet
  valid).

Keys are EC P-256, signatures ECDSA with SHA-256. Private keys are written as
unencrypted PKCS#8 PEM, protected only by their file mode (0600 from the
moment they are created). Every file is written atomically: a temporary file
in the same directory, fsync, rename.

Modules: ``authority`` (making the CA and issuing), ``inspection``
(:func:`describe`), ``names`` (what names and hosts are accepted), ``files``
(reading and atomic writing), ``errors``.
"""

from __future__ import annotations

from qmgr.certs.authority import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    CaPaths,
    IssuedPaths,
    LeafKind,
    init_ca,
    issue,
)
from qmgr.certs.errors import CaNotFoundError, CertsError, ExistingFilesError
from qmgr.certs.inspection import CertInfo, CertKind, Validity, describe, validity

__all__ = [
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "CaNotFoundError",
    "CaPaths",
    "CertInfo",
    "CertKind",
    "CertsError",
    "ExistingFilesError",
    "IssuedPaths",
    "LeafKind",
    "Validity",
    "describe",
    "init_ca",
    "issue",
    "validity",
]
