"""The host's interface addresses (``qmgr.host_addresses``), read from the kernel's tables."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from qmgr import host_addresses
from qmgr.config import load_config, local_identity

FIB_TRIE = """\
Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
     +-- 10.248.9.0/24 2 0 2
        |-- 10.248.9.0
           /24 link UNICAST
        |-- 10.248.9.1
           /32 host LOCAL
        |-- 10.248.9.255
           /32 link BROADCAST
Local:
  +-- 0.0.0.0/0 3 0 5
           |-- 10.248.9.1
              /32 host LOCAL
"""

IF_INET6 = """\
fe8000000000000000fc00fffe000001 04 40 20 80     eth0
00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0
"""


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fib_trie, if_inet6 = tmp_path / "fib_trie", tmp_path / "if_inet6"
    fib_trie.write_text(FIB_TRIE)
    if_inet6.write_text(IF_INET6)
    monkeypatch.setattr(host_addresses, "_FIB_TRIE", fib_trie)
    monkeypatch.setattr(host_addresses, "_IF_INET6", if_inet6)


@pytest.mark.usefixtures("tables")
def test_the_local_host_routes_and_the_ipv6_addresses_are_read() -> None:
    # Not the network, its broadcast address or 127.0.0.0/8 as a route: the hosts only.
    assert host_addresses.interface_addresses(ipv6=False) == {"127.0.0.1", "10.248.9.1"}
    assert host_addresses.interface_addresses(ipv4=False) == {
        "fe80::fc:ff:fe00:1",
        "::1",
        "fd00::2",
    }


def test_unreadable_tables_give_no_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_addresses, "_FIB_TRIE", tmp_path / "missing")
    (tmp_path / "if_inet6").write_text("garbage\nzz 01\n")
    monkeypatch.setattr(host_addresses, "_IF_INET6", tmp_path / "if_inet6")
    assert host_addresses.interface_addresses() == frozenset()


def test_this_hosts_own_tables_give_its_loopback_address() -> None:
    # The kernel of the machine running the tests: 127.0.0.1 is always a local route.
    assert "127.0.0.1" in host_addresses.interface_addresses()


@pytest.mark.usefixtures("tables")
@pytest.mark.parametrize(
    ("listen", "ipv4", "ipv6"),
    [("0.0.0.0:1801", True, False), ("[::]:1801", True, True), ("127.0.0.1:1801", False, False)],
)
def test_a_queue_manager_listening_everywhere_takes_its_interface_addresses_as_its_own(
    tmp_path: Path, listen: str, ipv4: bool, ipv6: bool
) -> None:
    config = load_config(listen=listen, data_dir=str(tmp_path))
    identity = local_identity(config)
    assert identity.is_local("10.248.9.1", None) is ipv4
    assert identity.is_local("10.248.9.1", 1801) is ipv4
    assert identity.is_local("10.248.9.1", 1802) is False  # another port: another QM
    assert identity.is_local("FD00:0::2", None) is ipv6
    assert identity.is_local("10.248.9.2", None) is False
    assert socket.gethostname().lower() in identity.host_names
