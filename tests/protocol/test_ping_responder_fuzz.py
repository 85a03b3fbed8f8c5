"""``qmgr.protocol.ping.PingResponder`` on any datagram: never an exception.

Random datagrams and the [MS-MQQB] §4.1.1 request damaged at random: each gets
no answer or one 24-byte ping that echoes the request's cookie and RC bit,
names this queue manager and sets nothing but RC and RF; every datagram is
counted once as answered, dropped (past the rate) or malformed.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from qmgr.protocol.ping import PingResponder

from .spec_frames import PING_REQUEST, PING_RESPONSE

LOCAL = uuid.UUID("5e5e5e5e-0000-4000-8000-000000000001")
EXAMPLES = settings(max_examples=300, deadline=None)


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from([PING_REQUEST, PING_RESPONSE])))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["cut", "extend", "byte", "flags", "signature"]))
        if kind == "cut":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=8))
        elif kind == "flags" and len(data) >= 2:
            data[0:2] = draw(st.binary(min_size=2, max_size=2))
        elif kind == "signature" and len(data) >= 4:
            data[2:4] = draw(st.binary(min_size=2, max_size=2))
        elif data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


datagrams = st.one_of(st.binary(max_size=48), damaged())


@EXAMPLES
@given(st.lists(st.tuples(datagrams, st.booleans(), st.floats(0, 0.05)), max_size=20))
def test_any_datagram_gets_a_well_formed_answer_or_none(
    inputs: list[tuple[bytes, bool, float]],
) -> None:
    responder = PingResponder(LOCAL, rate=5)
    now = 0.0
    for datagram, refuse, step in inputs:
        now += step
        answer = responder.answer(datagram, refuse=refuse, now=now)
        if answer is None:
            continue
        request = wire.parse_ping(datagram)  # only a ping is answered
        ping = wire.parse_ping(answer)
        assert len(answer) == 24
        assert (ping.cookie, ping.qm) == (request.cookie, LOCAL)
        flags = wire.PingFlags
        assert ping.flags & flags.CLIENT == request.flags & flags.CLIENT
        assert bool(ping.flags & flags.REFUSE) is refuse
        assert ping.flags & ~(flags.CLIENT | flags.REFUSE) == 0
    assert responder.answered + responder.dropped + responder.malformed == len(inputs)
