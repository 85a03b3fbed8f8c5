"""The construct layouts of the frame bodies: the documented bytes of outgoing queues and
incoming sequences, and the optional values.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from construct import Flag, Float64l, Int64ul, Struct
from wire_samples import CONNECTED_INFO, INCOMING_INFO, OUTGOING_INFO

from wire import RemoteProtocolError
from wire import client as cf
from wire.client.layouts import optional_container, optional_value

from .client_samples import (
    SAMPLES,
    decode_all,
    fields_of,
    text,
)


def _optional_layout(zero: float) -> Any:
    value = Float64l if isinstance(zero, float) else Int64ul
    return Struct("present" / Flag, "value" / value)


def _outgoing_bytes(info: cf.OutgoingInfo) -> bytes:
    """An OutgoingInfo as the protocol lays it out, written out by hand."""

    def optional_time(value: float | None) -> bytes:
        return struct.pack("<?d", value is not None, 0.0 if value is None else value)

    return b"".join(
        (
            text(info.destination),
            text(info.next_hop),
            text(info.state),
            optional_time(info.next_attempt),
            struct.pack(
                "<QQIIQ",
                info.waiting,
                info.unacknowledged,
                info.sequence_timestamp,
                info.sequence_ordinal,
                info.next_number,
            ),
            optional_time(info.last_order_ack),
            text(info.last_error),
        )
    )


def test_outgoing_frames_have_the_documented_layout() -> None:
    control = cf.ControlOutgoing(action=2, destination="DIRECT=TCP:h\\q")
    assert cf.encode_frame(1, control)[cf.HEADER_SIZE :] == b"\x02" + text(control.destination)
    assert cf.encode_frame(1, cf.ListOutgoing())[cf.HEADER_SIZE :] == b""
    listed = cf.OutgoingList(outgoing=(OUTGOING_INFO,), purged=5)
    body = cf.encode_frame(1, listed)[cf.HEADER_SIZE :]
    assert body == struct.pack("<I", 1) + _outgoing_bytes(OUTGOING_INFO) + struct.pack("<Q", 5)
    incoming = b"".join(
        (
            INCOMING_INFO.source_qm.bytes,
            text("payments"),
            struct.pack("<IIQQd", 1_650_000_000, 4, 41, 2, 1_700_000_002.0),
        )
    )
    status = SAMPLES[cf.FrameKind.STATUS_INFO]
    outgoing = _outgoing_bytes(OUTGOING_INFO) + _outgoing_bytes(CONNECTED_INFO)
    assert cf.encode_frame(1, status)[cf.HEADER_SIZE :].endswith(
        struct.pack("<I", 2) + outgoing + struct.pack("<I", 1) + incoming
    )


def test_a_status_without_peering_has_empty_lists_at_the_end() -> None:
    old_style = cf.StatusInfo(
        **{**fields_of(SAMPLES[cf.FrameKind.STATUS_INFO]), "outgoing": (), "incoming": ()}
    )
    fields = fields_of(old_style)
    del fields["outgoing"], fields["incoming"]
    assert cf.StatusInfo(**fields) == old_style  # the new fields have defaults
    data = cf.encode_frame(4, old_style)
    assert data.endswith(bytes(8))  # two empty u32-counted lists
    assert decode_all(data) == [cf.Frame(request_id=4, value=old_style)]
    # The lists are part of the frame: a body without them is malformed.
    with pytest.raises(RemoteProtocolError):
        cf.decode_body(cf.FrameKind.STATUS_INFO, data[cf.HEADER_SIZE : -8])


@pytest.mark.parametrize(("value", "zero"), [(None, 0), (5, 0), (None, 0.0), (0.0, 0.0)])
def test_an_optional_value_is_a_flag_and_the_value(value: float | None, zero: float) -> None:
    container = optional_container(value, zero)
    assert container == {"present": value is not None, "value": zero if value is None else value}
    layout = _optional_layout(zero)
    parsed = layout.parse(layout.build(container))
    assert optional_value(parsed) == value
