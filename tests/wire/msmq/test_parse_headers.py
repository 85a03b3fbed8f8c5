"""The headers of a user message: specific malformations and the fields their errors name."""

from __future__ import annotations

import wire

from .msmq_samples import express_message as message
from .msmq_samples import patched, refused, u16, u32


def test_malformed_optional_headers() -> None:
    with_debug = wire.build_packet(message(debug=wire.DebugHeader()))
    at = len(with_debug) - 4
    error = refused(patched(with_debug, at, u16(2)))
    assert (error.field, "QT=2" in error.message) == ("DebugHeader.Flags", True)

    with_soap = wire.build_packet(message(soap=wire.SoapHeader(header="h", body="b")))
    at = len(with_soap) - 24
    assert with_soap[at : at + 2] == u16(0x0320)
    assert refused(patched(with_soap, at, u16(0x0321))).field == "SoapHeader.HeaderSectionID"
    assert refused(patched(with_soap, at + 4, u32(9))).field == "SoapHeader.HeaderDataLength"

    mqf = wire.MultiQueueFormatHeader()
    with_mqf = wire.build_packet(message(multi_queue=mqf))
    at = len(with_mqf) - (12 * 3 + 8)
    assert refused(patched(with_mqf, at, u32(11))).field == (
        "MultiQueueFormatHeader.Destination.HeaderSize"
    )
    assert refused(patched(with_mqf, at + 4, u16(0xC8))).field == (
        "MultiQueueFormatHeader.Destination.HeaderID"
    )
    assert refused(patched(with_mqf, len(with_mqf) - 8, u16(0x15F))).field == (
        "MultiQueueFormatHeader.Signature.ID"
    )
