"""The daemon's listening sockets: bound at start-up, listening once it serves.

``qmgr serve`` binds every listener (the Unix-domain socket, the peer port,
the ping port when ``peers.ping`` is on, the HTTP listener, the client port)
before it opens the store, so that a port in use stops it before anything is
written to the data directory, and makes them listen only once the store is
open and the daemon's parts run: a client that finds a port answering finds
it served.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path
from typing import Final

import trio

from qmgr.config import Address
from qmgr.tcp import tune_tcp

__all__ = [
    "TCP_BACKLOG",
    "ConfigurationError",
    "StartupError",
    "StoreUnusable",
    "bind_tcp",
    "bind_udp",
    "bind_unix_socket",
    "listen_on",
    "remove_socket",
    "tune_tcp",
]

#: Pending connections of the Unix-domain socket.
_BACKLOG: Final = 128


class StartupError(Exception):
    """The daemon cannot start (store unusable, port taken, ...)."""

    #: The exit status ``qmgr serve`` ends with.
    status = 1


class StoreUnusable(StartupError):
    """The store cannot be used by this release whatever is retried: another
    schema, or damaged. A service manager should not restart the daemon
    (``RestartPreventExitStatus=`` in ``config/qmgr.service``)."""

    status = 3


class ConfigurationError(StartupError):
    """The configuration cannot be served: a setting, a certificate or a tokens
    file (the message names the key and the file)."""

    status = 2


#: The backlog of the TCP listeners (the kernel caps it at net.core.somaxconn).
TCP_BACKLOG: Final = 0xFFFF


async def bind_tcp(
    address: Address, what: str, bound: list[trio.socket.SocketType]
) -> list[trio.socket.SocketType]:
    """Bind a TCP socket for each address ``address`` resolves to (both families
    for a wildcard), without listening yet; each is added to ``bound``.

    Raises:
        StartupError: a port is in use, or the address cannot be bound.
    """
    return await _bind(address, what, bound, socket.SOCK_STREAM)


async def bind_udp(
    address: Address, what: str, bound: list[trio.socket.SocketType]
) -> list[trio.socket.SocketType]:
    """Bind a UDP socket for each address ``address`` resolves to, as
    :func:`bind_tcp` binds TCP ones.

    Raises:
        StartupError: a port is in use, or the address cannot be bound.
    """
    return await _bind(address, what, bound, socket.SOCK_DGRAM)


async def _bind(
    address: Address, what: str, bound: list[trio.socket.SocketType], kind: socket.SocketKind
) -> list[trio.socket.SocketType]:
    host = address.host or None
    try:
        infos = await trio.socket.getaddrinfo(
            host, address.port, type=kind, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        msg = f"cannot listen for {what} on {address}: {exc.strerror or exc}"
        raise StartupError(msg) from exc
    sockets = []
    for family, kind, proto, _, sockaddr in infos:
        sock = trio.socket.socket(family, kind, proto)
        bound.append(sock)
        try:
            if kind == socket.SOCK_STREAM:  # UDP would share the port with another process
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # ``[::]`` alone takes IPv4 too (its peers arrive as ::ffff:a.b.c.d),
                # as on any Linux service; every other IPv6 socket is IPv6 only, so
                # that the IPv4 socket of a wildcard bound beside it does not clash.
                dual = address.host.strip("[]") == "::"
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual else 1)
            await sock.bind(sockaddr)
        except OSError as exc:
            reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            msg = f"cannot listen for {what} on {address}: {reason}"
            raise StartupError(msg) from exc
        sockets.append(sock)
    if not sockets:
        msg = f"cannot listen for {what} on {address}: it resolves to no address"
        raise StartupError(msg)
    return sockets


async def bind_unix_socket(path: Path) -> trio.socket.SocketType:
    """Bind a socket to ``path`` (mode 0666), replacing a stale socket file; it
    listens once :func:`listen_on` is called.

    Raises:
        OSError: the path is taken (by a live daemon, or by something that is
            not a socket), or cannot be bound.
    """
    _clear_stale(path)  # at start-up, before anything is served: a blocking call is fine
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(str(path))
        os.chmod(path, 0o666)
    except BaseException:
        sock.close()
        raise
    return sock


def listen_on(sock: trio.socket.SocketType, backlog: int = _BACKLOG) -> trio.SocketListener:
    """Start listening on a bound socket (Unix-domain or TCP)."""
    sock.listen(backlog)
    return trio.SocketListener(sock)


def _clear_stale(path: Path) -> None:
    """Remove a socket file nothing answers on; make the directory if needed.

    Raises:
        FileExistsError: something answers there, or it is not a socket.
    """
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            msg = f"{path} exists and is not a socket"
            raise FileExistsError(msg)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nothing answers: a stale file
        else:
            msg = f"another process listens on {path}"
            raise FileExistsError(msg)
        finally:
            probe.close()
    path.parent.mkdir(parents=True, exist_ok=True)


def remove_socket(path: Path) -> None:
    """Remove the socket file (at shutdown); nothing if it is gone."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
