"""Network addresses as text: ``HOST[:PORT]``, an IPv6 address in brackets.

One rule serves every place an address is written: the daemon's listening
addresses, aliases and routes, the hosts of ``DIRECT=`` format names, and the
SDK's ``connect()``. An IPv6 address with a port is written ``[fd55::2]:1801``
(a link-local one with its scope inside the brackets, ``[fe80::1%eth0]:1801``).
Text with more than one colon and no brackets is taken whole as an IPv6
address without a port, because ``fd55::2:2800`` is an address, not
``fd55::2`` and port 2800; when such text is not an IPv6 address
(``fd55::2:28001``), it is refused with a message that says how to write it.

Callers turn :class:`AddressError` into their own error type (the daemon's
``InvalidName``, the SDK's ``InvalidArgument``); its message is theirs to show.
"""

from __future__ import annotations

import ipaddress
from typing import Final

from .text_fields import quoted

__all__ = ["AddressError", "endpoint_text", "is_ipv6", "split_host_port"]

#: What an error about an IPv6 address and a port says to do.
_BRACKETS: Final = "write an IPv6 address with a port as [addr]:port"


class AddressError(ValueError):
    """An address is not written as ``HOST[:PORT]`` (the message says why)."""


def is_ipv6(host: str) -> bool:
    """Whether ``host`` is an IPv6 address (a link-local one may carry ``%scope``)."""
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True


def endpoint_text(host: str, port: int | None) -> str:
    """``host:port`` as it is written: ``[v6]:port`` for an IPv6 address (with a
    link-local one's ``%scope`` inside the brackets); the host alone without a port."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def split_host_port(
    host_port: str, text: str | None = None, *, port_zero: bool = False
) -> tuple[str, int | None]:
    """``HOST[:PORT]`` as the host as written and its port (None: none written);
    ``text`` is what error messages quote (default: ``host_port``).

    Args:
        port_zero: take port 0 too (a listening address: any free port).

    Raises:
        AddressError: a scheme (``tcp://``), an unterminated ``[``, brackets
            around something that is not an IPv6 address, something after
            ``]`` other than ``:PORT``, more than one colon in what is not an
            IPv6 address, or a port that is
            not 1-65535 (0-65535 with ``port_zero``).
    """
    text = host_port if text is None else text
    lowest = 0 if port_zero else 1
    scheme, found, _ = host_port.partition("://")
    if found:  # tcp://host:port, http://...: a URL, not an address
        msg = f"{quoted(text)}: write HOST:PORT without a scheme ({scheme}://)"
        raise AddressError(msg)
    if host_port.startswith("["):  # [::1]:1801
        end = host_port.find("]")
        if end < 0:
            msg = f"{quoted(text)}: unterminated [IPv6 address]; {_BRACKETS}"
            raise AddressError(msg)
        host, after = host_port[1:end], host_port[end + 1 :]
        if not is_ipv6(host):
            msg = f"{quoted(text)}: {quoted(host)} is not an IPv6 address (brackets hold one)"
            raise AddressError(msg)
        if not after:
            return host, None
        if not after.startswith(":"):
            msg = f"{quoted(text)}: unexpected {quoted(after)} after the address; {_BRACKETS}"
            raise AddressError(msg)
        return host, _parse_port(after[1:], text, lowest)
    colons = host_port.count(":")
    if colons == 1:
        host, _, port_text = host_port.partition(":")
        return host, _parse_port(port_text, text, lowest)
    if colons > 1 and not is_ipv6(host_port):
        shown = quoted(text) if text == host_port else f"{quoted(text)}: {quoted(host_port)}"
        msg = f"{shown} is not an IPv6 address; {_BRACKETS}{_bracketed(host_port)}"
        raise AddressError(msg)
    return host_port, None


def _bracketed(host_port: str) -> str:
    """`` ([addr]:port)`` when ``host_port`` is an IPv6 address, a colon and a
    port written without brackets, else nothing."""
    host, _, port_text = host_port.rpartition(":")
    if is_ipv6(host) and port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        return f" ([{host}]:{port_text})"
    return ""


def _parse_port(port_text: str, text: str, lowest: int) -> int:
    if not (port_text.isascii() and port_text.isdigit()) or not lowest <= int(port_text) < 65536:
        msg = f"{quoted(text)}: {quoted(port_text)} is not a TCP port"
        raise AddressError(msg)
    return int(port_text)
