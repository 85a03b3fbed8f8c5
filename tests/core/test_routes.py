"""Routes: parsing, the most specific match, and which next hop a queue uses."""

from __future__ import annotations

import re

import pytest

from qmgr.core.routes import (
    HopState,
    RouteError,
    RouteKind,
    RouteTable,
    choose_hop,
    failover_deadline,
    parse_route,
    socket_address_text,
    split_host_port,
)

TABLE = RouteTable.parse(
    {
        "*": ["gate1", "gate2:1901"],
        "10.0.0.0/8": "core-router",
        "10.1.0.0/16": "direct",
        "10.1.2.3": "special",
        "10.1.2.3:1901": "other-port",
        "*.example.net": "dns-router",
        "*.b.example.net": ["b-gate1", "b-gate2"],
        "fd00::/8": "v6-router",
        "[fd00::7]:1801": "v6-one",
    }
)


@pytest.mark.parametrize(
    ("destination", "key", "hops"),
    [
        (("10.1.2.3", 1801), "10.1.2.3:1801", (("special", 1801),)),
        (("10.1.2.3", 1901), "10.1.2.3:1901", (("other-port", 1801),)),
        (("10.1.2.4", 1801), "10.1.0.0/16", (("10.1.2.4", 1801),)),
        (("10.9.0.1", 1801), "10.0.0.0/8", (("core-router", 1801),)),
        (("11.0.0.1", 1801), "*", (("gate1", 1801), ("gate2", 1901))),
        (("qm.b.example.net", 1801), "*.b.example.net", (("b-gate1", 1801), ("b-gate2", 1801))),
        (("QM.C.Example.NET", 1801), "*.example.net", (("dns-router", 1801),)),
        # A fully qualified name's final dot names the same host.
        (("qm.b.example.net.", 1801), "*.b.example.net", (("b-gate1", 1801), ("b-gate2", 1801))),
        # The suffix names hosts under it, not itself; and names are not resolved.
        (("example.net", 1801), "*", (("gate1", 1801), ("gate2", 1901))),
        (("fd00:0::7", 1801), "[fd00::7]:1801", (("v6-one", 1801),)),
        (("fd00::8", 1801), "fd00::/8", (("v6-router", 1801),)),
    ],
)
def test_the_most_specific_entry_wins(
    destination: tuple[str, int], key: str, hops: tuple[tuple[str, int], ...]
) -> None:
    route = TABLE.match(destination)
    assert route is not None
    assert route.key == key
    assert TABLE.hops(destination) == hops


def test_no_entry_means_straight_to_the_destination() -> None:
    table = RouteTable.parse({"10.0.0.0/8": "r"})
    assert table.match(("192.0.2.1", 1801)) is None
    assert table.hops(("192.0.2.1", 1801)) == (("192.0.2.1", 1801),)
    assert len(RouteTable()) == 0


def test_direct_in_a_list_is_the_destination_itself() -> None:
    route = parse_route("*", ["gate", "direct"])
    assert route.kind is RouteKind.DEFAULT
    assert route.resolve(("10.0.0.9", 1801)) == (("gate", 1801), ("10.0.0.9", 1801))
    assert route.hops_text() == ["gate:1801", "direct"]


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("10.0.0.0/40", "r", "is not a CIDR network"),
        ("*.", "r", "is not a DNS suffix"),
        ("*.a/b", "r", "is not a DNS suffix"),
        ("*a", "r", "'*' stands alone"),
        ("", "r", "expected HOST[:PORT]"),
        ("h:0", "r", "expected HOST[:PORT]"),
        ("h", [], "names no next hop"),
        ("h", "r:70000", "expected HOST[:PORT]"),
        ("h", ["r", "direct", "DIRECT"], "twice"),
    ],
)
def test_bad_entries_are_refused(key: str, value: str | list[str], reason: str) -> None:
    with pytest.raises(RouteError, match=re.escape(reason)):
        RouteTable.parse({key: value})


def test_split_host_port() -> None:
    assert split_host_port("Host.Example:1901") == ("host.example", 1901)
    assert split_host_port("[2001:db8::1]:7") == ("2001:db8::1", 7)
    assert split_host_port("2001:db8::1") == ("2001:db8::1", None)
    with pytest.raises(RouteError):
        split_host_port("[::1]x")


#: What a route or an alias written ``IPv6:PORT`` is refused with.
BRACKETS = "write an IPv6 address with a port as [addr]:port"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (
            "fd55::3/128",
            "fd55::2:28001",
            "routes.\"fd55::3/128\": expected HOST[:PORT]: 'fd55::2:28001' is not an IPv6 "
            f"address; {BRACKETS} ([fd55::2]:28001)",
        ),
        (
            "fd55::3:28001",
            "[fd55::1]:28001",
            "routes.\"fd55::3:28001\": expected HOST[:PORT]: 'fd55::3:28001' is not an IPv6 "
            f"address; {BRACKETS} ([fd55::3]:28001)",
        ),
        (
            "*",
            ["gate", "[fd55::1:28001"],
            f"routes.\"*\": expected HOST[:PORT]: '[fd55::1:28001': unterminated [IPv6 address]; "
            f"{BRACKETS}",
        ),
    ],
)
def test_an_ipv6_address_with_a_port_needs_brackets(
    key: str, value: str | list[str], reason: str
) -> None:
    with pytest.raises(RouteError) as excinfo:
        RouteTable.parse({key: value})
    assert str(excinfo.value) == reason


def test_a_bare_ipv6_address_is_that_address_on_the_peer_port() -> None:
    # fd55::2:2800 is an IPv6 address: without brackets there is no port in it.
    route = parse_route("fd55::3", ["fd55::2:2800", "[fd55::2]:2800"])
    assert route.key == "[fd55::3]:1801"
    assert route.hops_text() == ["[fd55::2:2800]:1801", "[fd55::2]:2800"]


@pytest.mark.parametrize(
    ("address", "text"),
    [
        (("10.0.0.1", 1801), "10.0.0.1:1801"),
        (("::1", 1802, 0, 0), "[::1]:1802"),
        (("fe80::1", 1801, 0, 3), "[fe80::1%3]:1801"),  # the scope id the host lacks
        (("fe80::1%eth0", 1801, 0, 3), "[fe80::1%eth0]:1801"),
        # An IPv4 peer of a dual-stack socket is written as the IPv4 address it is.
        (("::ffff:10.0.0.7", 43004, 0, 0), "10.0.0.7:43004"),
        ("/run/qmgr/qmgr.sock", "/run/qmgr/qmgr.sock"),
    ],
)
def test_a_socket_address_is_written_as_an_endpoint(
    address: tuple[object, ...] | str, text: str
) -> None:
    assert socket_address_text(address) == text


UP = HopState(up=True)
UNKNOWN = HopState()


def down(since: float) -> HopState:
    return HopState(down_since=since)


@pytest.mark.parametrize(
    ("current", "states", "now", "chosen"),
    [
        (0, [UNKNOWN, UNKNOWN], 100.0, 0),  # nothing known: the first
        (0, [down(95.0), UNKNOWN], 100.0, 0),  # down for less than the failover time
        (0, [down(90.0), UNKNOWN], 100.0, 1),  # down for the failover time: the next
        (1, [down(0.0), UP], 100.0, 1),  # the first still down: stay
        (1, [UP, UP], 100.0, 0),  # the first answers again: back
        (1, [UP, down(0.0)], 100.0, 0),
        (2, [down(0.0), UP, UP], 100.0, 1),  # the earliest that answers
        (1, [down(0.0), down(80.0), UNKNOWN], 100.0, 2),  # both down long: the third
        (2, [UNKNOWN, down(0.0), down(0.0)], 100.0, 0),  # past the last: the first again
        (1, [down(0.0), down(0.0)], 100.0, 1),  # every one down long: stay
        (0, [UP, down(0.0)], 100.0, 0),
    ],
)
def test_choose_hop(current: int, states: list[HopState], now: float, chosen: int) -> None:
    assert choose_hop(current, states, now, 10.0) == chosen


def test_failover_deadline() -> None:
    assert failover_deadline([UNKNOWN, UP], 10.0) is None
    assert failover_deadline([down(5.0), down(3.0)], 10.0) == 13.0
