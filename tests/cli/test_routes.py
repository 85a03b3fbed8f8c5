"""``qmgr route``, against a scripted daemon: the routing, and where a destination goes."""

from __future__ import annotations

import json

from fake_daemon import FakeDaemon
from wire_samples import ORDERS

from wire import client as cf

from .kit import ok, run


def test_route_without_a_destination_shows_the_routing(fake_daemon: FakeDaemon) -> None:
    text = ok(run(fake_daemon, "route")).stdout
    assert "router             yes" in text
    assert "aliases            gw.example.net:11801" in text
    line = next(line for line in text.splitlines() if "10.0.0.0/24" in line)
    assert "10.0.0.9:1801, 10.0.0.10:1801" in line
    assert [r for r in fake_daemon.requests if isinstance(r, cf.GetRouting)] == [cf.GetRouting()]


def test_route_of_a_destination_says_which_hop_and_why(fake_daemon: FakeDaemon) -> None:
    text = ok(run(fake_daemon, "route", ORDERS)).stdout
    lines = text.splitlines()
    assert lines[0] == "destination  10.0.0.5:1801"
    assert lines[1] == 'route        routes."10.0.0.0/24"'
    first = next(line for line in lines if "10.0.0.9:1801" in line)
    for cell in ("waiting", "yes", "connection refused", "2023-11-14T22:13:20"):
        assert cell in first
    second = next(line for line in lines if "10.0.0.10:1801" in line)
    assert "unused" in second
    assert "yes" not in second


def test_route_without_an_entry_and_to_itself(fake_daemon: FakeDaemon) -> None:
    text = ok(run(fake_daemon, "route", "billing.example")).stdout
    assert "no [routes] entry: straight to the destination" in text
    text = ok(run(fake_daemon, "route", "127.0.0.1")).stdout
    assert "127.0.0.1:1801 is this queue manager" in text


def test_route_json(fake_daemon: FakeDaemon) -> None:
    found = json.loads(ok(run(fake_daemon, "route", ORDERS, "--json")).stdout)
    assert found["router"] is True
    assert found["routes"] == [{"key": "10.0.0.0/24", "hops": ["10.0.0.9:1801", "10.0.0.10:1801"]}]
    assert found["destination"] == {
        "destination": "10.0.0.5:1801",
        "local": False,
        "entry": "10.0.0.0/24",
        "hops": [
            {
                "hop": "10.0.0.9:1801",
                "state": "waiting",
                "in_use": True,
                "down_since": "2023-11-14T22:13:20.000000+00:00",
                "last_error": "connection refused",
            },
            {
                "hop": "10.0.0.10:1801",
                "state": "unused",
                "in_use": False,
                "down_since": None,
                "last_error": "",
            },
        ],
    }
    assert "destination" not in json.loads(ok(run(fake_daemon, "route", "--json")).stdout)
