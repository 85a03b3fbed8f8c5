"""What :mod:`qmgr.certs` accepts as names: of the CA, of a certificate, of hosts.

A certificate's name is its subject Common Name and also the base name of
its files, so it must be safe as a file name. Hosts become Subject
Alternative Names: IP addresses as such, everything else as DNS names.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from cryptography import x509

from qmgr.certs.errors import CertsError

__all__ = ["RESERVED_NAME", "check_ca_name", "check_leaf_name", "host_names"]

RESERVED_NAME = "ca"  # ca.key and ca.crt are the CA's own files
_MAX_COMMON_NAME = 64  # ub-common-name, RFC 5280
_MAX_DNS_NAME = 253
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def check_ca_name(name: str) -> None:
    """Accept a CA name: a Common Name of 1 to 64 printable characters.

    Raises:
        CertsError: saying what is wrong with it.
    """
    _check_common_name(name, "CA name")


def check_leaf_name(name: str) -> None:
    """Accept the name of a certificate: a Common Name that is also a safe file name.

    Letters, digits, ``.``, ``-`` and ``_``, not starting with ``.`` or
    ``-``, at most 64 characters, and not ``ca``.

    Raises:
        CertsError: saying what is wrong with it.
    """
    _check_common_name(name, "name")
    if not _SAFE_NAME.fullmatch(name):
        msg = (
            f"the name {name!r} is not usable as a file name: use letters, digits, '.', '-' "
            "and '_', not starting with '.' or '-'"
        )
        raise CertsError(msg)
    if name == RESERVED_NAME:
        msg = "the name 'ca' is the CA's own (ca.key, ca.crt); choose another"
        raise CertsError(msg)


def host_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """The Subject Alternative Names for ``hosts``, in order, without repeats.

    An entry that parses as an IPv4 or IPv6 address is an IP address; any
    other must be a DNS name (ASCII labels; internationalised names in their
    ``xn--`` form), which is lower-cased.

    Raises:
        CertsError: an entry is neither.
    """
    names: list[x509.GeneralName] = []
    for host in hosts:
        name: x509.GeneralName
        try:
            name = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            name = x509.DNSName(_dns_name(host))
        if name not in names:
            names.append(name)
    return names


def _check_common_name(name: str, what: str) -> None:
    if not name.strip():
        msg = f"the {what} is empty"
        raise CertsError(msg)
    if len(name) > _MAX_COMMON_NAME:
        msg = f"the {what} {name!r} is longer than {_MAX_COMMON_NAME} characters"
        raise CertsError(msg)
    if not name.isprintable():
        msg = f"the {what} {name!r} holds control characters"
        raise CertsError(msg)


def _dns_name(host: str) -> str:
    name = host.lower().removesuffix(".")
    labels = name.split(".")
    if len(name) > _MAX_DNS_NAME or not all(_DNS_LABEL.fullmatch(label) for label in labels):
        msg = (
            f"the host {host!r} is neither an IP address nor a DNS name "
            "(letters, digits and '-' in dot-separated labels; internationalised names "
            "in their xn-- form)"
        )
        raise CertsError(msg)
    return name
