"""The trace call: its request, and the report it becomes."""

from __future__ import annotations

import datetime as dt

import pytest
from client_kit import run_call
from wire_samples import TRACE_FINDING

from qmgr.client import ConnectionLost, NotSupported, TraceFinding, TraceReport
from qmgr.client.calls import trace
from wire import client as cf


def test_a_report_names_its_findings() -> None:
    unknown = cf.TraceFinding(
        kind="queue", place="q", time=0.0, message_class=0x1234, detail="", next_hop=""
    )
    answer = cf.TraceReport(qm_name="qm", findings=(TRACE_FINDING, unknown))
    run = run_call(trace.trace, "{guid}\\1", answers=[answer])
    assert run.requests == [cf.TraceMessage(message_id="{guid}\\1")]
    assert run.result == TraceReport(
        qm_name="qm",
        findings=(
            TraceFinding(
                kind="queue",
                place="orders",
                time=dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC),
                message_class=0xC002,
                class_name="NACK_RECEIVE_TIMEOUT",
                detail="lookup id 3",
                next_hop="10.0.0.5:1801",
            ),
            TraceFinding("queue", "q", None, 0x1234, "0x1234", "", ""),
        ),
    )


def test_trace_refuses_another_reply_and_an_old_daemon() -> None:
    with pytest.raises(ConnectionLost, match="not TraceReport"):
        run_call(trace.trace, "m", answers=[cf.Ok()])
    with pytest.raises(NotSupported, match=r"trace\(\) needs"):
        run_call(trace.trace, "m", version=cf.OUTCOMES_VERSION - 1)
