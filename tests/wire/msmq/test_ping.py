"""The UDP ping: round trips and malformed datagrams."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire

from . import msmq_strategies as ms

EXAMPLES = settings(max_examples=200, deadline=None)


@EXAMPLES
@given(st.builds(wire.Ping, flags=ms.u16, cookie=ms.u32, qm=ms.guids))
def test_ping_round_trip(ping: wire.Ping) -> None:
    data = wire.build_ping(ping)
    assert len(data) == 24
    assert wire.parse_ping(data) == ping


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (bytes(23), "Ping"),
        (bytes(25), "Ping"),
        (bytes(2) + b"\x49\x55" + bytes(20), "Ping.Signature"),
    ],
)
def test_malformed_pings_name_the_field(data: bytes, field: str) -> None:
    with pytest.raises(wire.RemoteProtocolError) as info:
        wire.parse_ping(data)
    assert info.value.field == field


def test_a_ping_needs_a_guid() -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.build_ping(wire.Ping(cookie=1, qm="not a guid"))  # type: ignore[arg-type]
    assert info.value.field == "Ping.qm"
