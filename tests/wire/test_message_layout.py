"""A message's bytes: the documented layout, its offsets, and the parts it is encoded as."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from wire_samples import GUID, PROPERTIES
from wire_strategies import message_fields

import wire
from wire import MessageProperties
from wire import client as cf


@settings(max_examples=200)
@given(fields=message_fields)
def test_message_bytes_are_the_documented_layout(fields: dict[str, Any]) -> None:
    """The construct reference layout, fed by hand, builds the same bytes."""
    correlation: bytes = fields["correlation_id"]
    source_qm = fields["source_qm"]
    texts = ("label", "admin_queue", "response_queue", "destination")
    # Every other field is laid out as it is.
    container = {
        name: value
        for name, value in fields.items()
        if name not in {"source_qm", "transactional", "correlation_id", *texts}
    }
    container |= {
        "source_qm": bytes(16) if source_qm is None else source_qm.bytes,
        "flags": (1 if fields["transactional"] else 0) | (2 if correlation else 0),
        "correlation": correlation or bytes(20),
        **{name: fields[name].encode() for name in texts},
    }
    raw = MessageProperties(**fields).raw
    assert raw == cf.MESSAGE_LAYOUT.build(container)
    parsed = cf.MESSAGE_LAYOUT.parse(raw)
    assert parsed.body == fields["body"]
    assert parsed.label == fields["label"].encode()


def test_message_fixed_part_offsets() -> None:
    raw = PROPERTIES.raw
    assert raw[0:16] == GUID.bytes
    assert struct.unpack_from("<II", raw, 16) == (42, 7)
    assert tuple(raw[24:30]) == (5, 0, 0x0E, 2, 0x03, 0)
    assert struct.unpack_from("<HIId", raw, 30) == (0, 60, 3600, 1_700_000_000.25)
    assert raw[48:68] == bytes(range(20))
    lengths = struct.unpack_from("<HHHHII", raw, 68)
    texts = (PROPERTIES.label, PROPERTIES.admin_queue, PROPERTIES.response_queue)
    assert lengths[:3] == tuple(len(t.encode()) for t in texts)
    assert lengths[3:] == (len(PROPERTIES.destination), 3, 100)
    assert len(raw) == 84 + sum(lengths)
    assert raw.endswith(b"ext" + b"x" * 100)


def test_a_message_id_reads_back_from_its_text() -> None:
    guid = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
    text = wire.format_message_id(guid, 4_294_967_295)
    assert wire.parse_message_id(text) == (guid, 4_294_967_295)
    assert wire.parse_message_id(f" {str(guid).upper()}\\7 ") == (guid, 7)  # no braces, spaces


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "{6f9619ff-8b86-d011-b42d-00c04fc964ff}",
        "{6f9619ff-8b86-d011-b42d-00c04fc964ff}\\4294967296",
        "{6f9619ff-8b86-d011-b42d-00c04fc964zz}\\1",
        "{6f9619ff-8b86-d011-b42d-00c04fc964ff}\\1x",
    ],
)
def test_anything_else_is_not_a_message_id(text: str) -> None:
    with pytest.raises(ValueError, match="not a message id"):
        wire.parse_message_id(text)
