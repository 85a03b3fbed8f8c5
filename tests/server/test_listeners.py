"""The daemon's listening sockets (``qmgr.server.listeners``), on loopback in this process:
bound without listening, listening once asked, the errors that stop start-up (a port in
use, an address that resolves to nothing, a socket path that is taken), a stale socket
file replaced, and the exit status of each error.

(The refusal of listeners other hosts can reach without TLS or authentication is
``qmgr.server.tls.check_exposure``, tested in ``tests/server/test_tls.py``; that ``serve``
refuses them before it opens the store, in ``tests/server/test_daemon.py``.)"""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from qmgr.config import Address
from qmgr.server import ConfigurationError, StartupError
from qmgr.server.listeners import (
    TCP_BACKLOG,
    bind_tcp,
    bind_unix_socket,
    listen_on,
    remove_socket,
)


@pytest.fixture
async def bound() -> AsyncIterator[list[trio.socket.SocketType]]:
    """The list ``bind_tcp`` adds its sockets to; closed after the test."""
    sockets: list[trio.socket.SocketType] = []
    yield sockets
    for sock in sockets:
        sock.close()


def refused_connection(family: int, address: str | tuple[Any, ...]) -> bool:
    """True if connecting to ``address`` is refused (nothing listens there)."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(address)
        except ConnectionRefusedError:
            return True
        return False


async def echo_once(listener: trio.SocketListener, client: trio.abc.Stream) -> bytes:
    """Send a line from ``client``; what the connection ``listener`` accepted received."""
    server = await listener.accept()
    async with server, client:
        await client.send_all(b"ping")
        return await server.receive_some(4)


async def listens_at(sock: trio.socket.SocketType, path: Path) -> bool:
    """True if ``sock``, made to listen, takes a client of the socket file ``path``."""
    listener = listen_on(sock)
    client = await trio.open_unix_socket(str(path))
    return await echo_once(listener, client) == b"ping"


# --------------------------------------------------------------------------- errors


def test_a_configuration_error_ends_with_another_status() -> None:
    assert StartupError("x").status == 1
    assert ConfigurationError("x").status == 2
    assert issubclass(ConfigurationError, StartupError)


# --------------------------------------------------------------------------- TCP


async def test_tcp_is_bound_and_listens_only_when_asked(
    bound: list[trio.socket.SocketType],
) -> None:
    [sock] = await bind_tcp(Address(host="127.0.0.1", port=0), "clients", bound)
    assert bound == [sock]
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
    address = sock.getsockname()
    assert address[0] == "127.0.0.1"
    assert address[1] != 0
    assert refused_connection(socket.AF_INET, address)
    listener = listen_on(sock, TCP_BACKLOG)
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    client = await trio.open_tcp_stream(*address)
    assert await echo_once(listener, client) == b"ping"


async def test_ipv6_sockets_take_only_ipv6(bound: list[trio.socket.SocketType]) -> None:
    [sock] = await bind_tcp(Address(host="::1", port=0), "peers", bound)
    assert sock.family == socket.AF_INET6
    # An IPv6 wildcard must not take the IPv4 port too: the wildcard binds both families.
    assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1


async def test_the_ipv6_wildcard_alone_takes_ipv4_too(
    bound: list[trio.socket.SocketType],
) -> None:
    """``--listen '[::]:PORT'`` is one dual-stack socket, as on any Linux service: a
    peer that reaches this host by IPv4 is taken (a name resolving to IPv4 works)."""
    [sock] = await bind_tcp(Address(host="::", port=0), "peers", bound)
    assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
    listener = listen_on(sock, TCP_BACKLOG)
    client = await trio.open_tcp_stream("127.0.0.1", sock.getsockname()[1])
    assert await echo_once(listener, client) == b"ping"


async def test_a_wildcard_binds_each_family(bound: list[trio.socket.SocketType]) -> None:
    sockets = await bind_tcp(Address(host="", port=0), "peers", bound)
    assert sockets == bound
    assert sorted(sock.getsockname()[0] for sock in sockets) == ["0.0.0.0", "::"]


async def test_a_port_in_use_is_named(bound: list[trio.socket.SocketType]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StartupError) as raised:
            await bind_tcp(Address(host="127.0.0.1", port=port), "clients", bound)
    assert str(raised.value) == (
        f"cannot listen for clients on 127.0.0.1:{port}: address already in use"
    )
    assert not isinstance(raised.value, ConfigurationError)
    assert isinstance(raised.value.__cause__, OSError)
    assert raised.value.__cause__.errno == errno.EADDRINUSE
    assert len(bound) == 1  # the socket that failed is the caller's to close


async def test_an_address_that_cannot_be_bound_says_why(
    bound: list[trio.socket.SocketType],
) -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this host.
    with pytest.raises(StartupError, match=r"^cannot listen for peers on 192\.0\.2\.1:0: \w"):
        await bind_tcp(Address(host="192.0.2.1", port=0), "peers", bound)


async def test_an_address_that_does_not_resolve_is_named(
    monkeypatch: pytest.MonkeyPatch, bound: list[trio.socket.SocketType]
) -> None:
    async def unknown(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(trio.socket, "getaddrinfo", unknown)
    with pytest.raises(
        StartupError, match=r"^cannot listen for peers on qm\.invalid:1801: Name or service"
    ):
        await bind_tcp(Address(host="qm.invalid", port=1801), "peers", bound)
    assert bound == []


async def test_an_address_that_resolves_to_nothing_is_named(
    monkeypatch: pytest.MonkeyPatch, bound: list[trio.socket.SocketType]
) -> None:
    async def nothing(*args: object, **kwargs: object) -> list[object]:
        return []

    monkeypatch.setattr(trio.socket, "getaddrinfo", nothing)
    with pytest.raises(StartupError, match=r"on qm\.example:1802: it resolves to no address$"):
        await bind_tcp(Address(host="qm.example", port=1802), "clients", bound)


# --------------------------------------------------------------------------- Unix-domain socket


async def test_the_unix_socket_is_made_with_its_directory_and_listens_when_asked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run" / "qm.sock"
    sock = await bind_unix_socket(path)
    with sock:
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o666
        assert refused_connection(socket.AF_UNIX, str(path))
        assert await listens_at(sock, path)


async def test_a_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "qm.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # a daemon that died without removing it
    assert refused_connection(socket.AF_UNIX, str(path))
    with await bind_unix_socket(path) as sock:  # binding over it would fail: EADDRINUSE
        assert await listens_at(sock, path)


async def test_a_socket_somebody_listens_on_is_not_taken(tmp_path: Path) -> None:
    path = tmp_path / "qm.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(path))
        live.listen()
        with pytest.raises(FileExistsError, match=f"another process listens on {path}$"):
            await bind_unix_socket(path)
        assert stat.S_ISSOCK(path.lstat().st_mode)


@pytest.mark.parametrize("what", ["file", "directory", "dangling link"])
async def test_a_path_that_is_not_a_socket_is_not_touched(tmp_path: Path, what: str) -> None:
    path = tmp_path / "qm.sock"
    if what == "file":
        path.write_bytes(b"data")
    elif what == "directory":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "nowhere")
    before = path.lstat()
    with pytest.raises(FileExistsError, match=f"{path} exists and is not a socket$"):
        await bind_unix_socket(path)
    assert path.lstat() == before


async def test_a_socket_that_cannot_be_bound_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "qm.sock"
    made: list[trio.socket.SocketType] = []
    real_socket = trio.socket.socket

    def recording(*args: int) -> trio.socket.SocketType:
        made.append(real_socket(*args))
        return made[-1]

    def refuse(*args: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(trio.socket, "socket", recording)
    monkeypatch.setattr(os, "chmod", refuse)
    with pytest.raises(PermissionError):
        await bind_unix_socket(path)
    [sock] = made
    assert sock.fileno() == -1  # closed


# --------------------------------------------------------------------------- remove_socket


def test_remove_socket_removes_only_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "qm.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
    remove_socket(path)
    assert not path.exists()
    remove_socket(path)  # gone already: nothing
    path.write_bytes(b"not a socket")
    remove_socket(path)
    assert path.read_bytes() == b"not a socket"
