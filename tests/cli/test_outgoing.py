"""``qmgr outgoing ...``, against a scripted daemon.

The commands run in-process with click's runner and talk to
:class:`fake_daemon.FakeDaemon` over a real socket, through the real SDK.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from fake_daemon import FakeDaemon
from wire_samples import BILLING, ORDERS

from qmgr.cli import common
from wire import client as cf

from .kit import ok, run


def controls(daemon: FakeDaemon) -> list[tuple[int, str]]:
    return [(c.action, c.destination) for c in daemon.requests_of(cf.ControlOutgoing)]


def test_list_json(fake_daemon: FakeDaemon) -> None:
    listed: list[dict[str, Any]] = json.loads(
        ok(run(fake_daemon, "outgoing", "list", "--json")).stdout
    )
    assert [q["destination"] for q in listed] == [ORDERS, BILLING]
    orders, billing = listed
    assert orders == {
        "destination": ORDERS,
        "next_hop": "10.0.0.9:1801",
        "state": "waiting",
        "next_attempt": "2023-11-14T22:15:00.000000+00:00",
        "waiting": 12,
        "unacknowledged": 3,
        "sequence": "1700000000:2",
        "sequence_timestamp": 1_700_000_000,
        "sequence_ordinal": 2,
        "next_number": 16,
        "last_order_ack": None,
        "last_error": "connection refused",
        "alternates": ["10.0.0.10:1801"],
    }
    assert billing["alternates"] == []
    assert billing["next_attempt"] is None
    assert billing["last_order_ack"] == "2023-11-14T22:14:10.500000+00:00"


def test_list_table(fake_daemon: FakeDaemon) -> None:
    table = ok(run(fake_daemon, "outgoing", "list")).stdout
    orders_line = next(line for line in table.splitlines() if ORDERS in line)
    assert "10.0.0.9:1801" in orders_line
    assert "waiting (next attempt 2023-11-14T22:15:00+00:00)" in orders_line
    assert "1700000000:2" in orders_line
    assert "never" in orders_line  # no OrderAck yet
    assert "connection refused" in orders_line  # a last error column, since there is one
    billing_line = next(line for line in table.splitlines() if BILLING in line)
    assert "connected" in billing_line
    assert "2023-11-14T22:14:10+00:00" in billing_line
    for heading in ("next hop", "state", "waiting", "unacked", "sequence", "last OrderAck"):
        assert heading in table


def test_ipv6_addresses_are_shown_as_they_are(fake_daemon: FakeDaemon) -> None:
    """``[v6]:port`` is text in the tables of ``outgoing list`` and ``status``, not markup."""
    peering = fake_daemon.peering
    destination = "DIRECT=TCP:[fd55::3]:28001\\private$\\orders"
    orders = peering.outgoing.pop(ORDERS)
    peering.outgoing[destination] = dataclasses.replace(
        orders, destination=destination, next_hop="[fd55::3]:28001", last_error="[refused]"
    )
    for command in (("outgoing", "list"), ("status",)):
        table = ok(run(fake_daemon, *command)).stdout
        line = next(line for line in table.splitlines() if "orders" in line)
        assert "DIRECT=TCP:[fd55::3]:28001\\private$\\orders" in line
        assert " [fd55::3]:28001 " in line, line
        assert "[refused]" in line


def test_list_without_queues_or_errors(fake_daemon: FakeDaemon) -> None:
    fake_daemon.peering.outgoing.pop(ORDERS)
    table = ok(run(fake_daemon, "outgoing", "list")).stdout
    assert BILLING in table
    assert "last error" not in table  # no queue has one
    fake_daemon.peering.outgoing.clear()
    assert ok(run(fake_daemon, "outgoing", "list")).stdout.strip() == "no outgoing queues"
    assert json.loads(ok(run(fake_daemon, "outgoing", "list", "--json")).stdout) == []


def test_pause_and_resume(fake_daemon: FakeDaemon) -> None:
    paused = ok(run(fake_daemon, "outgoing", "pause", ORDERS))
    assert paused.stdout.strip() == f"paused {ORDERS} (12 messages waiting)"
    resumed = ok(run(fake_daemon, "outgoing", "resume", ORDERS))
    assert resumed.stdout.strip() == f"resumed {ORDERS} (12 messages waiting, connecting)"
    assert controls(fake_daemon) == [(1, ORDERS), (2, ORDERS)]


def test_purge_with_yes(fake_daemon: FakeDaemon) -> None:
    purged = ok(run(fake_daemon, "outgoing", "purge", ORDERS, "--yes"))
    # The name as it is typed (backslashes not doubled), to copy into the next command.
    assert purged.stdout.strip() == f"purged 12 messages from the outgoing queue to '{ORDERS}'"
    assert "\\\\" not in purged.stdout
    assert controls(fake_daemon) == [(3, ORDERS)]


def test_purge_asks_first_on_a_terminal(
    fake_daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "interactive", lambda: True)
    refused = run(fake_daemon, "outgoing", "purge", ORDERS, input="n\n")
    assert refused.exit_code == 1
    assert "Delete every message waiting to go to" in refused.stderr
    assert "nothing done" in refused.stderr
    assert controls(fake_daemon) == []
    agreed = ok(run(fake_daemon, "outgoing", "purge", ORDERS, input="y\n"))
    assert "purged 12 messages" in agreed.stdout
    assert controls(fake_daemon) == [(3, ORDERS)]


def test_errors_are_reported(fake_daemon: FakeDaemon) -> None:
    for args in (("pause",), ("resume",), ("purge", "--yes")):
        unknown = run(fake_daemon, "outgoing", *args, "nowhere")
        assert unknown.exit_code == 1, args
        assert unknown.stderr.strip() == "error: there is no outgoing queue for 'nowhere'", args
    fake_daemon.peering.running = False
    for args in (("list",), ("list", "--json"), ("resume", ORDERS), ("purge", ORDERS, "--yes")):
        off = run(fake_daemon, "outgoing", *args)
        assert off.exit_code == 1, args
        assert off.stderr.strip() == "error: peering is not running", args
        assert off.stdout == ""


def test_help_lists_the_outgoing_commands() -> None:
    text = ok(run(None, "outgoing", "--help")).stdout
    for command in ("list", "pause", "resume", "purge"):
        assert command in text
    assert "DIRECT=TCP:10.0.0.5:1801\\private$\\orders" in text
