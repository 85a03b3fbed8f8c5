"""Addresses, timeouts, the client's name and protocol version checks."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio

from qmgr.client import InvalidArgument, NotSupported
from qmgr.client._common import (
    check_token,
    check_transport,
    connect_timeout,
    default_client_name,
    parse_address,
    require_version,
    timeout_ms,
    unix_path,
)
from wire import client as cf
from wire.addresses import endpoint_text


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:1802") == ("127.0.0.1", 1802)
    assert parse_address("qm.example") == ("qm.example", 1802)
    assert parse_address("[::1]:99") == ("::1", 99)
    assert parse_address("[::1]") == ("::1", 1802)
    assert parse_address(":5") == ("127.0.0.1", 5)
    for bad in ("h:0", "h:x", "h:70000", "[::1]x"):
        with pytest.raises(InvalidArgument):  # a ValueError too, as before
            parse_address(bad)
    assert issubclass(InvalidArgument, ValueError)


def test_an_ipv6_address_takes_a_port_only_in_brackets() -> None:
    assert parse_address("::1") == ("::1", 1802)
    assert parse_address("fd55::2:2800") == ("fd55::2:2800", 1802)  # an address, not a port
    assert parse_address("[fe80::1%eth0]:28002") == ("fe80::1%eth0", 28002)
    for bad in ("::1:28002", "[::1:28002", "[::1]28002"):
        with pytest.raises(
            InvalidArgument, match=re.escape("write an IPv6 address with a port as [addr]:port")
        ):
            parse_address(bad)
    with pytest.raises(InvalidArgument, match="is not an IPv6 address"):
        parse_address("[qm.example]:1802")


def test_endpoint_text() -> None:
    assert endpoint_text("127.0.0.1", 1802) == "127.0.0.1:1802"
    assert endpoint_text("::1", 1802) == "[::1]:1802"
    assert endpoint_text("fe80::1%eth0", 1802) == "[fe80::1%eth0]:1802"
    assert endpoint_text("qm.example", None) == "qm.example"


def test_unix_path() -> None:
    assert unix_path("unix:/run/qmgr/qmgr.sock") == "/run/qmgr/qmgr.sock"
    assert unix_path(" unix:relative.sock ") == "relative.sock"
    assert unix_path("127.0.0.1:1802") is None


def test_tls_on_the_unix_socket_is_refused_before_connecting(tmp_path: Path) -> None:
    import ssl

    from qmgr.client import connect, open_client

    context = ssl.create_default_context()
    # Nothing listens there: the refusal comes before any attempt to connect.
    address = f"unix:{tmp_path / 'qmgr.sock'}"
    with pytest.raises(InvalidArgument, match="Unix-domain socket, which does not use TLS"):
        connect(address, tls=context)

    async def open_it() -> None:
        async with open_client(address, tls=context):
            pass  # pragma: no cover - refused before it connects

    with pytest.raises(InvalidArgument, match="connect to it without tls="):
        trio.run(open_it)
    check_transport("127.0.0.1:1802", context)
    check_transport(address, None)


def test_timeout_ms() -> None:
    assert timeout_ms(None) == cf.INFINITE_TIMEOUT_MS
    assert timeout_ms(0) == 0
    assert timeout_ms(0.0001) == 1
    assert timeout_ms(2.5) == 2500
    assert timeout_ms(1e12) == cf.INFINITE_TIMEOUT_MS - 1
    for bad in (-1.0, float("nan"), "1", True):
        with pytest.raises(InvalidArgument):
            timeout_ms(bad)  # type: ignore[arg-type]


def test_connect_timeout() -> None:
    assert connect_timeout(None) is None
    assert connect_timeout(2) == 2.0
    assert connect_timeout(1e300) is None  # no bound, not an overflow
    for bad in (0, -1, float("nan"), "10", True):
        with pytest.raises(InvalidArgument, match="above 0"):
            connect_timeout(bad)  # type: ignore[arg-type]


def test_check_token() -> None:
    check_token(None)
    check_token("t" * 0xFFFF)
    with pytest.raises(InvalidArgument, match=r"^token is not valid Unicode text \(position 1: "):
        check_token("a\udcff")
    with pytest.raises(InvalidArgument, match=r"^token is too long to send \(65,536 characters\)"):
        check_token("t" * 0x10000)


def test_require_version() -> None:
    require_version(3, 3, "h:1", "x()")
    with pytest.raises(NotSupported) as caught:
        require_version(2, 3, "h:1", "x()", "ranges")
    assert caught.value.message == (
        "x() needs a queue manager that speaks protocol version 3; "
        "the one at h:1 speaks version 2: upgrade it to use ranges"
    )
    with pytest.raises(NotSupported, match=r"speaks version 2$"):
        require_version(2, 3, "h:1", "x()")


def test_default_client_name() -> None:
    assert default_client_name().endswith(f"[{os.getpid()}]")
