"""The core frame values: their defaults, and the bytes of the first frames of a connection."""

from __future__ import annotations

import struct

from wire_samples import GUID

from wire import client as cf

from .client_samples import body_of, both_decode, text


def test_defaults() -> None:
    hello = cf.Hello()
    assert (hello.min_version, hello.max_version, hello.client_name) == (
        cf.MIN_PROTOCOL_VERSION,
        cf.PROTOCOL_VERSION,
        "",
    )
    assert cf.Begin().tx_id == 0  # the daemon chooses the id
    assert cf.Receive(queue="q").timeout_ms == 0
    assert cf.PeekRange(queue="q").max_count == 1000
    assert cf.Ok().value == 0
    assert cf.OutgoingList(outgoing=()).purged == 0


def test_hello_and_its_answer_are_the_documented_layouts() -> None:
    hello = cf.Hello(client_name="sdk")
    assert body_of(hello) == cf.HELLO_MAGIC + struct.pack("<HH", 2, 10) + text("sdk")
    ok = cf.HelloOk(version=6, server_version="1.0", qm_name="qm", qm_guid=GUID)
    assert body_of(ok) == (
        struct.pack("<H", 6)
        + text("1.0")
        + text("qm")
        + GUID.bytes
        + struct.pack("<I", cf.MAX_FRAME_BODY)
    )
    assert both_decode(cf.FrameKind.HELLO_OK, body_of(ok)) == ok
    error = cf.ErrorReply(code=cf.ErrorCode.QUEUE_NOT_FOUND, message="no")
    assert body_of(error) == struct.pack("<H", 3) + text("no")
