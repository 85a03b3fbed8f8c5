"""``qmgr trace`` (``qmgr/cli/trace.py``): which queue managers it asks, and what it prints.

The following from one queue manager to the next runs against scripted
reports; a message in a real queue manager is traced at the end. Traces
across real queue managers are in ``tests/integration/test_outcomes_between_qms.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import click
import pytest
from helpers import DaemonProcess

from qmgr.cli import trace as trace_module
from qmgr.client import ConnectionLost, TraceFinding, TraceReport

from .kit import ok, run, sent_id

WHEN = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
#: A message id the scripted queue managers are asked about.
MESSAGE_ID = "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2}\\1"


def finding(kind: str = "queue", place: str = "orders", next_hop: str = "") -> TraceFinding:
    return TraceFinding(
        kind=kind,
        place=place,
        time=WHEN,
        message_class=0,
        class_name="NORMAL",
        detail="waiting",
        next_hop=next_hop,
    )


def test_via_maps_peer_addresses_to_client_addresses() -> None:
    assert trace_module._via((" HOST:1801 = host:2802 ", "10.0.0.5:1801=10.0.0.5:1802")) == {
        "host:1801": "host:2802",
        "10.0.0.5:1801": "10.0.0.5:1802",
    }
    for bad in ("nothing", "=x", "x="):
        with pytest.raises(click.UsageError, match="expected PEER=CLIENT"):
            trace_module._via((bad,))


@pytest.mark.parametrize(
    ("peer", "client"),
    [("10.0.0.5:1801", "10.0.0.5:1802"), ("qm.example:9000", "qm.example:9001"), ("host", "")],
)
def test_the_default_client_port_is_the_one_after_the_peer_port(peer: str, client: str) -> None:
    assert trace_module._default_client(peer) == client


def test_next_asks_each_queue_manager_once() -> None:
    report = TraceReport(
        qm_name="a",
        findings=(
            finding(next_hop="B:1801"),
            finding(next_hop="b:1801"),
            finding(next_hop=""),
            finding(next_hop="c:1801"),
            finding(next_hop="seen:1801"),
        ),
    )
    seen = {"seen:1802"}
    assert trace_module._next(report, {"c:1801": "c-client:7"}, seen) == ["b:1802", "c-client:7"]
    assert seen == {"seen:1802", "b:1802", "c-client:7"}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> dict[str, TraceReport | None]:
    """Reports by client address (None: not reachable), for the commands to find."""
    reports: dict[str, TraceReport | None] = {}

    class Scripted:
        def __init__(self, address: str) -> None:
            self.address = address

        def __enter__(self) -> Scripted:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def trace(self, message_id: str) -> TraceReport:
            report = reports[self.address]
            assert report is not None
            return report

    @contextlib.contextmanager
    def client(ctx: click.Context) -> Iterator[Scripted]:
        yield Scripted(trace_module.server_of(ctx))

    def connect_to(ctx: click.Context, address: str, *, client_name: str) -> Scripted:
        assert client_name == "qmgr-trace"
        if reports.get(address) is None:
            raise ConnectionLost(f"cannot connect to {address}")
        return Scripted(address)

    monkeypatch.setattr(trace_module, "client", client)
    monkeypatch.setattr(trace_module, "connect_to", connect_to)
    return reports


def trace(*args: str) -> Any:
    return run(None, "--server", "a:1802", "trace", MESSAGE_ID, *args)


def test_trace_follows_the_message(scripted: dict[str, TraceReport | None]) -> None:
    scripted["a:1802"] = TraceReport("qm-a", (finding("outgoing", "remote", "b:1801"),))
    scripted["b:1802"] = TraceReport("qm-b", (finding("relaying", "x", "c:1801"),))
    scripted["c:1802"] = None
    visits = json.loads(ok(trace("--json")).stdout)
    assert [v["address"] for v in visits] == ["a:1802", "b:1802", "c:1802"]
    assert [v.get("qm") for v in visits] == ["qm-a", "qm-b", None]
    assert visits[2]["error"] == "cannot connect to c:1802"
    assert visits[0]["findings"] == [
        {
            "kind": "outgoing",
            "place": "remote",
            "time": "2024-01-02T03:04:05.000000+00:00",
            "message_class": 0,
            "class_name": "NORMAL",
            "detail": "waiting",
            "next_hop": "b:1801",
        }
    ]
    text = ok(trace("--via", "c:1801=c:1802")).stdout
    assert "qm-a (a:1802)" in text
    assert "qm-b (b:1802)" in text
    assert "c:1802: not reachable (cannot connect to c:1802)" in text
    assert "2024-01-02 03:04:05" in text
    only = json.loads(ok(trace("--json", "--no-follow")).stdout)
    assert [v["address"] for v in only] == ["a:1802"]


def test_the_table_shows_every_text_as_it_is(scripted: dict[str, TraceReport | None]) -> None:
    """An IPv6 next hop, a place or a kind in brackets is text, not console markup."""
    scripted["a:1802"] = TraceReport(
        "qm-a",
        (
            finding("relaying", "DIRECT=TCP:[fd55::3]:28001\\private$\\q"),
            finding("outgoing", "far", "[fd55::4]:28001"),
            finding("[bold]kind[/bold]", "[red]orders[/red]"),
        ),
    )
    text = ok(trace("--no-follow")).stdout
    assert "[fd55::3]:28001\\private$" in text
    assert "[fd55::4]:28001" in text
    assert "[bold]kind[/bold]" in text
    assert "[red]orders[/red]" in text


def test_trace_stops_after_eight_queue_managers(scripted: dict[str, TraceReport | None]) -> None:
    for n in range(12):
        scripted[f"h{n}:1802"] = TraceReport(f"qm{n}", (finding(next_hop=f"h{n + 1}:1801"),))
    result = ok(run(None, "--server", "h0:1802", "trace", MESSAGE_ID, "--json"))
    assert len(json.loads(result.stdout)) == trace_module.MAX_VISITS


def test_a_message_nobody_knows_is_an_error(scripted: dict[str, TraceReport | None]) -> None:
    scripted["a:1802"] = TraceReport("qm-a", ())
    result = trace()
    assert result.exit_code == 1
    assert result.stdout == "qm-a (a:1802): nothing about this message\n"
    error, hint = result.stderr.splitlines()
    assert error == f"error: no queue manager visited knows message {MESSAGE_ID}"
    assert hint.startswith("hint: a message received without a journal leaves no record")
    # The same answer in JSON, and the same exit status.
    as_json = trace("--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout) == [{"address": "a:1802", "qm": "qm-a", "findings": []}]
    assert as_json.stderr == result.stderr


def test_a_message_in_a_queue(shared_daemon: DaemonProcess, queue_name: str) -> None:
    ok(run(shared_daemon, "queue", "create", queue_name))
    message_id = sent_id(shared_daemon, queue_name, "x")
    [visit] = json.loads(ok(run(shared_daemon, "trace", message_id, "--json")).stdout)
    assert visit["address"] == shared_daemon.address
    [found] = visit["findings"]
    assert (found["kind"], found["place"], found["next_hop"]) == ("queue", queue_name, None)
    table = ok(run(shared_daemon, "trace", message_id)).stdout
    assert f"({shared_daemon.address})" in table
    assert queue_name in table


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2}",
        "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2}\\4294967296",
        "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1cz}\\1",
        "{6f1c2a3b-0d4e-4f5a-8b6c-7d8e9fa0b1c2}\\1 and more",
        "------------------------------------\\1",
    ],
    ids=["garbage", "no ordinal", "ordinal too large", "not hex", "trailing text", "no GUID"],
)
def test_a_malformed_message_id_is_a_usage_error(
    scripted: dict[str, TraceReport | None], text: str
) -> None:
    """Refused before any queue manager is asked (none is scripted), with exit
    status 2 as every usage error, and named as it was typed (one backslash)."""
    result = run(None, "--server", "a:1802", "trace", "--", text)
    assert result.exit_code == 2, result.output
    assert (
        f"Error: Invalid value for 'MESSAGE-ID': '{text}' is not a message id "
        "({source QM GUID}\\ordinal)"
    ) in result.stderr


@pytest.mark.parametrize(
    "text",
    [
        MESSAGE_ID,
        "6F1C2A3B-0D4E-4F5A-8B6C-7D8E9FA0B1C2\\4294967295",
        f" {MESSAGE_ID} ",
    ],
    ids=["as send() writes it", "no braces, upper case", "spaces around"],
)
def test_a_message_id_is_taken_as_the_queue_manager_takes_it(
    scripted: dict[str, TraceReport | None], text: str
) -> None:
    scripted["a:1802"] = TraceReport("qm-a", (finding(),))
    ok(run(None, "--server", "a:1802", "trace", text, "--no-follow"))
