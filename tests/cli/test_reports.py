"""``send``'s report options (``qmgr/cli/reports.py``): what ``send()`` is asked for."""

from __future__ import annotations

import json
from typing import Any

import click
from click.testing import CliRunner, Result

from qmgr.cli.reports import report_options
from qmgr.client import Acknowledge, Journal


@click.command()
@report_options
def reporting(reports: dict[str, Any]) -> None:
    click.echo(json.dumps(reports))


def invoke(*args: str) -> Result:
    return CliRunner().invoke(reporting, args)


def reports(*args: str) -> dict[str, Any]:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    given: dict[str, Any] = json.loads(result.stdout)
    return given


def test_nothing_asked_is_nothing_passed() -> None:
    assert reports() == {}
    assert reports("--ack", "none", "--journal", "none") == {}


def test_acknowledgments_and_journal_levels_add_up() -> None:
    asked = reports(
        "--ack", "pos-arrival", "--ack", "neg-receive", "--admin-queue", "admin",
        "--journal", "deadletter", "--journal", "journal",
    )  # fmt: skip
    assert asked == {
        "acknowledge": Acknowledge.POS_ARRIVAL | Acknowledge.NEG_RECEIVE,
        "admin_queue": "admin",
        "journal": Journal.DEADLETTER | Journal.JOURNAL,
    }


def test_queues_and_times() -> None:
    asked = reports("--admin-queue", "a", "--response-queue", "r", "--ttrq", "0", "--ttbr", "2.5")
    assert asked == {
        "admin_queue": "a",
        "response_queue": "r",
        "time_to_reach_queue": 0.0,  # zero is a limit, not "no limit"
        "time_to_be_received": 2.5,
    }


def test_acknowledgments_need_an_admin_queue() -> None:
    result = invoke("--ack", "full-receive")
    assert result.exit_code == 2
    assert "--ack needs --admin-queue (where the acknowledgments go)" in result.stderr


def test_unknown_levels_and_negative_times_are_usage_errors() -> None:
    for args in (("--ack", "sometimes"), ("--journal", "always"), ("--ttbr", "-1")):
        result = invoke(*args)
        assert result.exit_code == 2, args
        assert "Invalid value" in result.stderr, args


def test_the_options_in_help() -> None:
    text = invoke("--help").stdout
    for option in ("--admin-queue", "--response-queue", "--ack", "--journal", "--ttrq", "--ttbr"):
        assert option in text
    assert "full-reach-queue" in text
