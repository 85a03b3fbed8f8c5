"""``qmgr status``, against a scripted daemon: the queue manager, then its peering."""

from __future__ import annotations

import json

import pytest
from fake_daemon import FakeDaemon
from wire_samples import BILLING, ORDERS, QM_GUID, SOURCE_QM

from qmgr.cli import common

from .kit import ok, run


def test_status_shows_the_queue_manager(fake_daemon: FakeDaemon) -> None:
    lines = ok(run(fake_daemon, "status")).stdout.splitlines()
    assert lines[:3] == [
        "queue manager      fake",
        f"guid               {QM_GUID}",
        "version            0.test",
    ]
    assert lines[3].startswith("up                 ")
    assert "(since 2023-11-14T22:13:20.000000+00:00)" in lines[3]
    assert lines[4:10] == [
        "connections        2",
        "open transactions  1",
        "uncommitted        100 B in open transactions",
        "since start        10 commits, 3 aborts, 7 synced writes",
        "router             yes",
        "aliases            gw.example.net:11801",
    ]
    assert not any(line.startswith("erasing") for line in lines)


def test_status_json_has_every_field(fake_daemon: FakeDaemon) -> None:
    status = json.loads(ok(run(fake_daemon, "status", "--json")).stdout)
    assert status["uptime_seconds"] > 0
    del status["uptime_seconds"], status["outgoing"], status["incoming"]
    assert status == {
        "qm_name": "fake",
        "qm_guid": str(QM_GUID),
        "server_version": "0.test",
        "started_at": "2023-11-14T22:13:20.000000+00:00",
        "connections": 2,
        "open_transactions": 1,
        "uncommitted_bytes": 100,
        "commits": 10,
        "aborts": 3,
        "batches": 7,
        "erasing": 0,
        "queues": [],
        "router": True,
        "aliases": ["gw.example.net:11801"],
    }


def test_status_without_peering_leaves_routing_out(fake_daemon: FakeDaemon) -> None:
    fake_daemon.peering.running = False
    lines = ok(run(fake_daemon, "status")).stdout.splitlines()
    assert not any(line.startswith(("router", "aliases")) for line in lines)
    status = json.loads(ok(run(fake_daemon, "status", "--json")).stdout)
    assert "router" not in status


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


def test_status_lists_many_rows_as_plain_text(
    fake_daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past PLAIN_ROWS rows, rich's layout would take seconds (14 s for 20,000 queues).
    tables = ok(run(fake_daemon, "status")).stdout.split("Outgoing queues")[1]
    assert "━" in tables
    monkeypatch.setattr(common, "PLAIN_ROWS", 0)
    plain = ok(run(fake_daemon, "status")).stdout.split("Outgoing queues")[1]
    assert "━" not in plain
    assert "│" not in plain
    lines = plain.splitlines()
    assert lines[1].split()[:2] == ["destination", "next"]
    assert set(lines[2].replace(" ", "")) == {"-"}
    assert lines[3].startswith("DIRECT=TCP:10.0.0.5:1901\\private$\\orders ")
