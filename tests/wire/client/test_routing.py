"""The frames of routing: their documented bytes, and the version they need."""

from __future__ import annotations

import dataclasses
import struct

from wire import client as cf

from .client_samples import SAMPLES, assert_refused, body_of, both_decode, text


def _count(n: int) -> bytes:
    return struct.pack("<I", n)


def test_routing_needs_its_version() -> None:
    assert cf.GetRouting in cf.ROUTING_REQUESTS
    assert cf.ROUTING_VERSION == 7
    assert cf.ROUTING_VERSION <= cf.PROTOCOL_VERSION


def test_get_routing_is_one_string_empty_for_no_destination() -> None:
    assert body_of(cf.GetRouting()) == text("")
    asked = cf.GetRouting(destination="DIRECT=TCP:10.2.0.7\\private$\\orders")
    assert body_of(asked) == text(asked.destination)
    assert both_decode(cf.FrameKind.GET_ROUTING, body_of(asked)) == asked


def test_routing_info_is_the_documented_layout() -> None:
    info = SAMPLES[cf.FrameKind.ROUTING_INFO]
    assert isinstance(info, cf.RoutingInfo)
    assert body_of(info) == (
        b"\x01"
        + struct.pack("<d", 30.0)
        + _count(2)
        + text("203.0.113.5:11801")
        + text("qm1.example.net")
        + _count(1)
        + text("*")
        + _count(2)
        + text("gate1:1801")
        + text("direct")
        + text("10.2.0.7:1801")
        + b"\x00"
        + text("*")
        + _count(2)
        + text("gate1:1801")
        + text("waiting")
        + b"\x00"
        + struct.pack("<d", 1.5e9)
        + text("x")
        + text("10.2.0.7:1801")
        + text("connected")
        + b"\x01"
        + struct.pack("<d", 0.0)
        + text("")
    )
    assert both_decode(cf.FrameKind.ROUTING_INFO, body_of(info)) == info


def test_a_routing_info_cut_short_or_overlong_is_refused() -> None:
    sample = SAMPLES[cf.FrameKind.ROUTING_INFO]
    assert isinstance(sample, cf.RoutingInfo)
    empty = dataclasses.replace(sample, aliases=(), routes=(), destination="", entry="", hops=())
    body = body_of(empty)
    assert both_decode(cf.FrameKind.ROUTING_INFO, body) == empty
    assert_refused(cf.FrameKind.ROUTING_INFO, body[:-1])
    assert_refused(cf.FrameKind.ROUTING_INFO, body + b"\x00")
    # A count that promises more hops than the body holds.
    assert_refused(cf.FrameKind.ROUTING_INFO, body[:-4] + _count(1))
