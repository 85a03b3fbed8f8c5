"""``qmgr outgoing ...`` and the peering part of ``qmgr status``, against a scripted daemon.

The commands run in-process with click's runner and talk to
:class:`fake_daemon.FakeDaemon` over a real socket, through the real SDK.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fake_daemon import BILLING, ORDERS, SOURCE_QM, FakeDaemon

from qmgr import cli_common
from qmgr.cli import cli
from wire import client_frames as cf


def run(daemon: FakeDaemon, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--server", daemon.address, *args], input=input)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}\n{result.stderr}"
    return result


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
    }
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
    assert purged.stdout.strip() == f"purged 12 messages from the outgoing queue to {ORDERS!r}"
    assert controls(fake_daemon) == [(3, ORDERS)]


def test_purge_asks_first_on_a_terminal(
    fake_daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_common, "interactive", lambda: True)
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


def test_status_shows_outgoing_queues_and_incoming_sequences(fake_daemon: FakeDaemon) -> None:
    text = ok(run(fake_daemon, "status")).stdout
    assert "Outgoing queues" in text
    assert "Incoming sequences" in text
    outgoing_part = text[text.index("Outgoing queues") : text.index("Incoming sequences")]
    assert ORDERS in outgoing_part
    assert "waiting (next attempt 2023-11-14T22:15:00+00:00)" in outgoing_part
    incoming_part = text[text.index("Incoming sequences") :]
    line = next(line for line in incoming_part.splitlines() if str(SOURCE_QM) in line)
    cells = [cell.strip() for cell in line.split("│")]
    assert cells[:5] == [str(SOURCE_QM), "payments", "1650000000:4", "41", "2"]
    for heading in ("source QM", "last accepted", "rejects"):
        assert heading in incoming_part

    status = json.loads(ok(run(fake_daemon, "status", "--json")).stdout)
    assert [o["destination"] for o in status["outgoing"]] == [ORDERS, BILLING]
    assert status["outgoing"][0]["sequence"] == "1700000000:2"
    assert status["incoming"] == [
        {
            "source_qm": str(SOURCE_QM),
            "queue": "payments",
            "sequence": "1650000000:4",
            "sequence_timestamp": 1_650_000_000,
            "sequence_ordinal": 4,
            "last_number": 41,
            "reject_count": 2,
            "last_access": "2023-11-14T22:13:22.000000+00:00",
        }
    ]


def test_status_without_peering_has_no_tables_but_empty_json_lists(
    fake_daemon: FakeDaemon,
) -> None:
    fake_daemon.peering.running = False
    text = ok(run(fake_daemon, "status")).stdout
    assert "queue manager      fake" in text
    assert "Outgoing queues" not in text
    assert "Incoming sequences" not in text
    status = json.loads(ok(run(fake_daemon, "status", "--json")).stdout)
    assert (status["outgoing"], status["incoming"]) == ([], [])


def test_help_lists_the_outgoing_commands() -> None:
    text = ok(CliRunner().invoke(cli, ["outgoing", "--help"])).stdout
    for command in ("list", "pause", "resume", "purge"):
        assert command in text
    assert "DIRECT=TCP:10.0.0.5:1801\\private$\\orders" in text
