"""The answer to an MSMQ ping (``qmgr.protocol.ping``): the spec's example
exchange field by field, the refusal bit, datagrams that are not pings, and the
bound on the rate of answers (an explicit clock)."""

from __future__ import annotations

import uuid
from pathlib import Path

import wire
from qmgr.protocol.ping import PingResponder

VECTORS = Path(__file__).resolve().parents[1] / "wire" / "msmq" / "vectors"
REQUEST = bytes.fromhex((VECTORS / "4.1.1-ping-request.hex").read_text())
RESPONSE = bytes.fromhex((VECTORS / "4.1.2-ping-response.hex").read_text())
#: The server queue manager of the spec's example (its ping response's QMGuid).
SERVER = wire.parse_ping(RESPONSE).qm


def test_the_spec_s_ping_is_answered_as_the_spec_s_server_answers_it() -> None:
    responder = PingResponder(SERVER)
    answer = responder.answer(REQUEST, refuse=False, now=0.0)
    assert answer is not None
    ours, theirs = wire.parse_ping(answer), wire.parse_ping(RESPONSE)
    # Fixed by the spec: size, signature, the cookie echoed, the QMGuid, RC echoed, RF.
    assert len(answer) == len(RESPONSE) == 24
    assert answer[2:] == RESPONSE[2:]
    assert ours.cookie == wire.parse_ping(REQUEST).cookie == theirs.cookie
    flags = wire.PingFlags.CLIENT | wire.PingFlags.REFUSE
    assert ours.flags & flags == theirs.flags & flags == wire.PingFlags.CLIENT
    # The other 14 bits are free (the example's are garbage): ours are 0.
    assert ours.flags & ~flags == 0
    assert responder.answered == 1


def test_a_peer_that_would_be_refused_is_told_so() -> None:
    responder = PingResponder(uuid.uuid4())
    answer = responder.answer(REQUEST, refuse=True, now=0.0)
    assert answer is not None
    assert wire.parse_ping(answer).flags & wire.PingFlags.REFUSE


def test_what_is_not_a_ping_gets_no_answer() -> None:
    responder = PingResponder(uuid.uuid4())
    wrong_signature = REQUEST[:2] + b"\x00\x00" + REQUEST[4:]
    for datagram in (b"", REQUEST[:23], REQUEST + b"\x00", wrong_signature, b"\xff" * 512):
        assert responder.answer(datagram, refuse=False, now=0.0) is None
    assert (responder.malformed, responder.answered) == (5, 0)


def test_one_source_cannot_use_up_the_others_answers() -> None:
    responder = PingResponder(uuid.uuid4(), rate=10, per_source=3)
    flood = [
        responder.answer(REQUEST, source="10.0.0.66", refuse=False, now=0.0) for _ in range(50)
    ]
    assert sum(a is not None for a in flood) == 3
    others = [
        responder.answer(REQUEST, source=f"10.0.0.{n}", refuse=False, now=0.0) for n in range(7)
    ]
    assert all(a is not None for a in others)  # the common bucket had 7 left
    assert responder.answer(REQUEST, source="10.0.0.99", refuse=False, now=0.0) is None
    assert responder.dropped == 48


def test_answers_are_bounded_in_rate() -> None:
    responder = PingResponder(uuid.uuid4(), rate=10, per_source=1000)
    answered = [responder.answer(REQUEST, refuse=False, now=0.0) for _ in range(15)]
    assert sum(a is not None for a in answered) == 10
    assert responder.dropped == 5
    # Half a second later, half the bucket is back.
    later = [responder.answer(REQUEST, refuse=False, now=0.5) for _ in range(10)]
    assert sum(a is not None for a in later) == 5
    # A quiet while fills it up to its size, never more.
    assert (
        sum(responder.answer(REQUEST, refuse=False, now=100.0) is not None for _ in range(20)) == 10
    )
