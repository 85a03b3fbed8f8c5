"""The format name lists of a MultiQueueFormatHeader: round trips and errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire

from . import msmq_strategies as ms

EXAMPLES = settings(max_examples=200, deadline=None)


@EXAMPLES
@given(st.lists(ms.format_name_elements, max_size=6))
def test_format_name_list_round_trip(elements: list[wire.FormatNameElement]) -> None:
    header = wire.MqfAddressHeader.from_elements(tuple(elements))
    assert len(header.format_names) % 4 == 0
    assert header.elements() == tuple(elements)


def test_format_name_list_errors_surface_when_decoded() -> None:
    bad = wire.MqfAddressHeader(element_count=1, format_names=b"\x09\x00\x00\x00")
    with pytest.raises(wire.RemoteProtocolError, match="unknown FormatType 0x0009"):
        bad.elements()
    with pytest.raises(wire.RemoteProtocolError, match="missing"):
        wire.MqfAddressHeader(element_count=2, format_names=b"").elements()
    with pytest.raises(wire.RemoteProtocolError, match="NUL-terminated"):
        wire.MqfAddressHeader(element_count=1, format_names=b"\x03\x00A\x00").elements()
