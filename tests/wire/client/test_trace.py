"""The frames of tracing a message: their documented bytes, and the version they need."""

from __future__ import annotations

import struct

from wire import client as cf

from .client_samples import body_of, both_decode, text


def test_tracing_needs_the_outcomes_version() -> None:
    assert cf.TraceMessage in cf.OUTCOMES_REQUESTS
    assert cf.MAX_TRACE_FINDINGS == 1000


def test_bodies_are_the_documented_layouts() -> None:
    request = cf.TraceMessage(message_id="{6f9619ff-8b86-d011-b42d-00c04fc964ff}\\7")
    assert body_of(request) == text(request.message_id)
    assert both_decode(cf.FrameKind.TRACE_MESSAGE, body_of(request)) == request
    finding = cf.TraceFinding(
        kind="queue", place="q", time=1.5, message_class=0xC002, detail="d", next_hop=""
    )
    report = cf.TraceReport(qm_name="qm", findings=(finding,))
    assert body_of(report) == (
        text("qm")
        + struct.pack("<I", 1)
        + text("queue")
        + text("q")
        + struct.pack("<dH", 1.5, 0xC002)
        + text("d")
        + text("")
    )
    assert both_decode(cf.FrameKind.TRACE_REPORT, body_of(report)) == report
