"""``qmgr tx list|commit|abort``, against a scripted daemon.

The commands run in-process with click's runner and talk to
:class:`fake_daemon.FakeDaemon` over a real socket, through the real SDK.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fake_daemon import FakeDaemon

from qmgr.cli.transactions import age
from wire import client as cf

from .kit import ok, run


@pytest.fixture
def in_doubt(fake_daemon: FakeDaemon) -> FakeDaemon:
    """Two prepared transactions (3m12s and 2h05m old) and one kept outcome."""
    now = time.time()
    script = fake_daemon.two_phase
    script.prepared["spark:q:7:0:a1"] = (now - 192.4, 3, 2, 1536)
    script.prepared["batch:1"] = (now - 7500.0, 0, 1, 0)
    script.outcomes["spark:q:6:0:b2"] = (True, 1_700_000_000.0)
    return fake_daemon


def _row(table: str, xid: str) -> list[str]:
    line = next(line for line in table.splitlines() if xid in line)
    return [cell.strip() for cell in line.split("│")]


def test_list_shows_the_transactions_in_doubt(in_doubt: FakeDaemon) -> None:
    table = ok(run(in_doubt, "tx", "list")).stdout
    for heading in ("xid", "state", "age", "sends", "receives", "bytes"):
        assert heading in table
    assert _row(table, "spark:q:7:0:a1") == [
        "spark:q:7:0:a1",
        "prepared",
        "3m12s",
        "3",
        "2",
        "1.5 KiB",
    ]
    assert _row(table, "batch:1")[1:3] == ["prepared", "2h05m"]
    assert "spark:q:6:0:b2" not in table  # resolved: only with --all
    assert in_doubt.requests_of(cf.ListTransactions) == [cf.ListTransactions()]


def test_list_shows_an_xid_as_it_is_not_as_markup(fake_daemon: FakeDaemon) -> None:
    """Any client chooses xids: one that looks like console markup must neither
    break the operator's listing nor lose characters in it."""
    script = fake_daemon.two_phase
    for xid in ("job[/x]1", "job[bold]2", "[red]3"):
        script.prepared[xid] = (time.time() - 5.0, 1, 0, 1)
    table = ok(run(fake_daemon, "tx", "list")).stdout
    for xid in ("job[/x]1", "job[bold]2", "[red]3"):
        assert _row(table, xid)[:2] == [xid, "prepared"]


def test_list_tells_look_alike_xids_apart(fake_daemon: FakeDaemon) -> None:
    """Any client chooses xids: white space around one, or a character that does
    not print, must not make it pass for another principal's in the listing."""
    script = fake_daemon.two_phase
    for xid in ("job-1", "job-1 ", "job-1\u200b"):
        script.prepared[xid] = (time.time() - 5.0, 1, 0, 1)
    table = ok(run(fake_daemon, "tx", "list")).stdout
    shown = sorted(line.split("│")[0].strip() for line in table.splitlines() if "job-1" in line)
    assert shown == ["'job-1 '", "'job-1\\u200b'", "job-1"]


def test_list_all_and_prefix(in_doubt: FakeDaemon) -> None:
    table = ok(run(in_doubt, "tx", "list", "--all", "--prefix", "spark:")).stdout
    assert _row(table, "spark:q:6:0:b2")[1:2] == ["committed"]
    assert _row(table, "spark:q:7:0:a1")[1:2] == ["prepared"]
    assert "batch:1" not in table
    assert in_doubt.requests_of(cf.ListTransactions) == [
        cf.ListTransactions(prefix="spark:", resolved=True)
    ]


def test_list_json(in_doubt: FakeDaemon) -> None:
    listed: list[dict[str, Any]] = json.loads(
        ok(run(in_doubt, "tx", "list", "--all", "--json")).stdout
    )
    assert [t["xid"] for t in listed] == ["batch:1", "spark:q:7:0:a1", "spark:q:6:0:b2"]
    spark = listed[1]
    assert 190 < spark.pop("age_seconds") < 300
    assert spark.pop("since").endswith("+00:00")
    assert spark == {
        "xid": "spark:q:7:0:a1",
        "state": "prepared",
        "sends": 3,
        "receives": 2,
        "bytes": 1536,
    }
    assert listed[2]["state"] == "committed"
    assert listed[2]["since"] == "2023-11-14T22:13:20.000000+00:00"


def test_list_when_nothing_is_in_doubt(fake_daemon: FakeDaemon) -> None:
    assert ok(run(fake_daemon, "tx", "list")).stdout.strip() == "no transactions in doubt"
    assert ok(run(fake_daemon, "tx", "list", "--all")).stdout.strip() == "no transactions"
    assert json.loads(ok(run(fake_daemon, "tx", "list", "--json")).stdout) == []


def test_commit_and_abort_say_what_happened(in_doubt: FakeDaemon) -> None:
    xid = "spark:q:7:0:a1"
    assert ok(run(in_doubt, "tx", "commit", xid)).stdout.strip() == f"committed {xid!r}"
    again = ok(run(in_doubt, "tx", "commit", xid)).stdout.strip()
    assert again == f"{xid!r} was already committed"
    assert ok(run(in_doubt, "tx", "abort", "batch:1")).stdout.strip() == "aborted 'batch:1'"
    again = ok(run(in_doubt, "tx", "abort", "batch:1")).stdout.strip()
    assert again == "'batch:1' was already aborted"
    assert in_doubt.requests_of(cf.Resolve) == [
        cf.Resolve(commit=True, xids=(xid,)),
        cf.Resolve(commit=True, xids=(xid,)),
        cf.Resolve(commit=False, xids=("batch:1",)),
        cf.Resolve(commit=False, xids=("batch:1",)),
    ]


def test_errors_are_reported(in_doubt: FakeDaemon) -> None:
    committed = run(in_doubt, "tx", "abort", "spark:q:6:0:b2")
    assert committed.exit_code == 1
    assert committed.stderr.strip() == "error: transaction 'spark:q:6:0:b2' was committed"
    assert committed.stdout == ""
    ok(run(in_doubt, "tx", "abort", "batch:1"))
    aborted = run(in_doubt, "tx", "commit", "batch:1")
    assert aborted.exit_code == 1
    assert aborted.stderr.strip() == "error: transaction 'batch:1' was aborted"
    unknown = run(in_doubt, "tx", "commit", "nope")
    assert unknown.exit_code == 1
    assert unknown.stderr.splitlines() == [
        "error: transaction 'nope' is not prepared",
        "hint: `qmgr tx list --all` shows the prepared transactions and the outcomes kept",
    ]


@pytest.mark.parametrize(
    ("xid", "said"),
    [("a\tb", "control character U+0009"), ("", "1 to 200 bytes of UTF-8, not 0")],
)
@pytest.mark.parametrize("command", ["commit", "abort"])
def test_text_that_cannot_name_a_transaction_is_a_usage_error(
    command: str, xid: str, said: str
) -> None:
    # Refused before connecting: with no daemon to reach, the usage error is all.
    invalid = run(None, "tx", command, xid)
    assert invalid.exit_code == 2
    assert "Invalid value for 'XID'" in invalid.stderr
    assert said in invalid.stderr


def test_an_older_daemon_is_reported() -> None:
    daemon = FakeDaemon(version=2)
    try:
        for args in (("list",), ("commit", "x"), ("abort", "x")):
            result = run(daemon, "tx", *args)
            assert result.exit_code == 1, args
            assert result.stderr.startswith("error: "), args
            assert "speaks version 2" in result.stderr, args
        assert not daemon.requests
    finally:
        daemon.close()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (59.9, "59s"),
        (60.0, "1m00s"),
        (192.4, "3m12s"),
        (3599.0, "59m59s"),
        (3600.0, "1h00m"),
        (7500.0, "2h05m"),
        (86_399.0, "23h59m"),
        (86_400.0, "1d00h"),
        (3 * 86_400.0 + 4 * 3600 + 5, "3d04h"),
    ],
)
def test_age(seconds: float, text: str) -> None:
    assert age(seconds) == text


def test_help_lists_the_tx_commands() -> None:
    text = ok(run(None, "tx", "--help")).stdout
    for command in ("list", "commit", "abort"):
        assert command in text
    assert "tx" in ok(run(None, "--help")).stdout
