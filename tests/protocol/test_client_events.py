"""The events a client connection reports (``qmgr.protocol.client_events``)."""

from __future__ import annotations

import typing

import pytest

from qmgr.protocol import client_events as ce
from wire import client as cf


@pytest.mark.parametrize(
    ("kind", "message", "reason"),
    [
        (ce.ViolationKind.MALFORMED, "truncated header", "malformed frame: truncated header"),
        (ce.ViolationKind.HELLO_FIRST, "send Hello first", "protocol violation"),
        (ce.ViolationKind.TOKEN_REFUSED, "token refused", "protocol violation"),
    ],
)
def test_a_violation_says_why_the_connection_closes(
    kind: ce.ViolationKind, message: str, reason: str
) -> None:
    # Only malformed bytes say what was wrong with them in the log's reason;
    # the client was told the rest in its error reply.
    assert ce.Violation(kind, 0, message).reason == reason


def test_every_event_class_is_an_event() -> None:
    classes = {
        value
        for name in ce.__all__
        if isinstance(value := getattr(ce, name), type) and value is not ce.ViolationKind
    }
    # ``Request`` is the wire's frame, and ``Authenticated`` is what
    # ``authenticate`` answers rather than an event of ``next_event``.
    assert set(typing.get_args(ce.Event)) == (classes - {ce.Authenticated}) | {cf.Frame}
    assert isinstance(ce.NEED_DATA, ce.NeedData)
    assert repr(ce.NEED_DATA) == "NEED_DATA"
    assert ce.Closed("closed by client") == ce.CLOSED
