"""Reaching a next hop (``qmgr.server.peering.dial``): why a connection could not
be made, in the system's words."""

from __future__ import annotations

import socket

import pytest

from qmgr.server.peering.dial import CannotConnect, connect_reason, open_hop


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_port_nothing_listens_on_says_connection_refused() -> None:
    with pytest.raises(CannotConnect) as refused:
        await open_hop("127.0.0.1", _closed_port(), within=5)
    assert str(refused.value) == "connection refused"


async def test_a_host_name_no_resolver_takes_says_why() -> None:
    with pytest.raises(CannotConnect) as refused:
        await open_hop("a..b", 1801, within=5)
    assert str(refused.value)
    assert "all attempts" not in str(refused.value)


def test_each_address_tried_gives_its_reason_once() -> None:
    tried = [
        ConnectionRefusedError(111, "Connection refused"),
        OSError(113, "No route to host"),
        ConnectionRefusedError(111, "Connection refused"),
    ]
    error = OSError("all attempts to connect to h:1801 failed")
    error.__cause__ = ExceptionGroup("all attempts", tried)
    assert connect_reason(error) == "connection refused; no route to host"
    assert connect_reason(OSError("something else")) == "something else"
