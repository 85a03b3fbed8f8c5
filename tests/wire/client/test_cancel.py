"""The frame that cancels a waiting receive: its bytes, and the version it needs."""

from __future__ import annotations

import struct

from wire import client as cf

from .client_samples import assert_refused, body_of, both_decode


def test_cancelling_needs_its_version_and_is_never_answered() -> None:
    assert cf.CancelReceive in cf.CANCEL_REQUESTS
    assert cf.CANCEL_VERSION == 8
    assert cf.CANCEL_VERSION <= cf.PROTOCOL_VERSION
    assert cf.CancelReceive not in cf.ROUTING_REQUESTS


def test_the_body_is_the_request_id_it_names() -> None:
    for request_id in (0, 41, 2**32 - 1):
        cancel = cf.CancelReceive(request_id=request_id)
        assert body_of(cancel) == struct.pack("<I", request_id)
        assert both_decode(cf.FrameKind.CANCEL_RECEIVE, body_of(cancel)) == cancel


def test_a_body_of_another_length_is_refused() -> None:
    assert_refused(cf.FrameKind.CANCEL_RECEIVE, b"\x01\x02\x03")
    assert_refused(cf.FrameKind.CANCEL_RECEIVE, b"\x01\x02\x03\x04\x05")
