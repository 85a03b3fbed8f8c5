"""The IP addresses of this host's network interfaces, as the kernel lists them.

A queue manager that listens on every address (``0.0.0.0`` or ``::``) is
reached at each of them, and a format name that names one (with its port, or
none) is its own: a send to it is local, and a router delivers a message for
it here instead of relaying it to itself. The kernel's own tables say which
addresses the host has, in the network namespace the daemon runs in:

* IPv4: the local routes of ``/proc/net/fib_trie`` (an address followed by
  ``/32 host LOCAL``);
* IPv6: ``/proc/net/if_inet6`` (one address of 32 hex digits a line).

They are read when the daemon starts. An address added later (DHCP, a new
interface) is not known until the next start; ``server.aliases`` names it
meanwhile. Where the files cannot be read (not Linux), none is known.
"""

from __future__ import annotations

import contextlib
import ipaddress
from pathlib import Path
from typing import Final

__all__ = ["interface_addresses"]

_FIB_TRIE: Final = Path("/proc/net/fib_trie")
_IF_INET6: Final = Path("/proc/net/if_inet6")


def interface_addresses(*, ipv4: bool = True, ipv6: bool = True) -> frozenset[str]:
    """The host's IPv4 and IPv6 interface addresses now, in their standard
    spelling (loopback included); empty where the kernel's tables cannot be read."""
    found: set[str] = set()
    if ipv4:
        found |= _ipv4(_read(_FIB_TRIE))
    if ipv6:
        found |= _ipv6(_read(_IF_INET6))
    return frozenset(found)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""


def _ipv4(fib_trie: str) -> set[str]:
    """The addresses ``fib_trie`` marks as local host routes."""
    found: set[str] = set()
    last = ""
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith("|--"):
            last = text[3:].strip()
        elif text.startswith("/32 host LOCAL") and last:
            with contextlib.suppress(ValueError):
                found.add(str(ipaddress.IPv4Address(last)))
    return found


def _ipv6(if_inet6: str) -> set[str]:
    found: set[str] = set()
    for line in if_inet6.splitlines():
        fields = line.split()
        if not fields or len(fields[0]) != 32:
            continue
        with contextlib.suppress(ValueError):
            found.add(str(ipaddress.IPv6Address(int(fields[0], 16))))
    return found
