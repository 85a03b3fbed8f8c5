"""The header values: what they compute from their fields."""

from __future__ import annotations

from hypothesis import settings

import wire

EXAMPLES = settings(max_examples=200, deadline=None)


def test_sequence_id_orders_by_timestamp_then_ordinal() -> None:
    low = wire.TxSequenceId(ordinal=0xFFFFFFFF, timestamp=1)
    high = wire.TxSequenceId(ordinal=0, timestamp=2)
    assert low < high
    assert high > low
    assert low <= low
    assert high >= low
    assert high.value == 2 << 32
    assert wire.TxSequenceId.from_value(low.value) == low


def test_an_address_header_lists_its_elements() -> None:
    elements = (wire.DirectQueue(name="OS:host\\q"), wire.PublicQueue(queue_id=wire.NULL_GUID))
    header = wire.MqfAddressHeader.from_elements(elements)
    assert header.element_count == 2
    assert header.elements() == elements
    assert wire.MqfAddressHeader().elements() == ()
