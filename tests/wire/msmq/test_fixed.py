"""The fixed-size layouts compiled to ``struct`` formats: their sizes, formats, field
names, and the layouts that cannot be compiled."""

from __future__ import annotations

from typing import Any

import pytest
from construct import Bytes, CString, Int8ul, Int16ub, Struct

import wire
from wire.msmq import fixed

SIZES = {
    "BASE": 16,
    "INTERNAL": 4,
    "USER": 48,
    "TRANSACTION": 20,
    "SECURITY": 16,
    "PROPERTIES": 56,
    "SESSION": 16,
    "DEBUG": 4,
    "SOAP_SECTION": 8,
    "MQF_ADDRESS": 12,
    "MQF_SIGNATURE": 8,
    "ESTABLISH_CONNECTION": 552,
    "CONNECTION_PARAMETERS": 12,
    "ORDER_ACK_BODY": 36,
    "FINAL_ACK_BODY": 36,
    "PING": 24,
}


@pytest.mark.parametrize(("name", "size"), sorted(SIZES.items()))
def test_fixed_layouts_compile_to_their_spec_sizes(name: str, size: int) -> None:
    layout: fixed.FixedLayout = getattr(fixed, name)
    assert layout.size == layout.struct.size == size
    assert len(layout.fields) == len(layout.formats)


def test_compiled_formats() -> None:
    assert fixed.BASE.struct.format == "<BBH4sLL"
    assert fixed.TRANSACTION.fields == (
        "flags",
        "sequence_id.ordinal",
        "sequence_id.timestamp",
        "sequence_number",
        "previous_sequence_number",
    )


@pytest.mark.parametrize(
    "layout",
    [
        Struct("big" / Int16ub),
        Struct("text" / CString("utf8")),
        Struct("sized" / Bytes(lambda ctx: 4)),
        Struct(Int8ul),
    ],
)
def test_only_translatable_layouts_compile(layout: Any) -> None:
    with pytest.raises(TypeError):
        fixed.FixedLayout("bad", layout)


def test_pack_errors_name_the_field() -> None:
    with pytest.raises(wire.LocalProtocolError, match=r"BaseHeader: packet_size must be"):
        fixed.BASE.build(0x10, 0, 0, b"LIOR", -1, 0)
    with pytest.raises(wire.LocalProtocolError, match=r"signature must be 4 bytes"):
        fixed.BASE.build(0x10, 0, 0, "LIOR", 16, 0)
