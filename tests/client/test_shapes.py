"""The JSON shapes of the SDK's values, shared by ``qmgr --json`` and the HTTP API."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json

from client_kit import status_info
from wire_samples import OUTGOING_INFO, PROPERTIES, QUEUE_INFO, QUEUED, ROUTING_INFO, hop_info

from qmgr.client import Message, OutgoingInfo, QueueInfo, Status
from qmgr.client.calls.routing import Routing
from qmgr.client.shapes import (
    PREVIEW_CHARS,
    alternates,
    iso,
    message_json,
    outgoing_json,
    queue_json,
    status_json,
)


def _message(body: bytes) -> Message:
    return Message.from_wire(dataclasses.replace(QUEUED, message=PROPERTIES.replace(body=body)))


def _routing(*hops: tuple[str, bool]) -> Routing:
    return Routing.from_wire(
        dataclasses.replace(
            ROUTING_INFO, hops=tuple(hop_info(hop, "connected", in_use=used) for hop, used in hops)
        )
    )


def test_times_keep_microseconds_and_the_zone() -> None:
    moment = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert iso(moment) == "2026-01-02T03:04:05.000000+00:00"


def test_a_text_body_is_shown_as_text_and_another_as_base64() -> None:
    shown = message_json(_message("h\u00e9llo".encode()))
    assert (shown["body"], shown["body_encoding"], shown["body_size"]) == ("h\u00e9llo", "utf-8", 6)
    assert "body_truncated" not in shown
    raw = message_json(_message(b"\xff\x00"))
    assert (raw["body"], raw["body_encoding"]) == (base64.b64encode(b"\xff\x00").decode(), "base64")
    json.dumps(shown)
    json.dumps(raw)


def test_a_bounded_body_is_cut_and_previewed_even_mid_character() -> None:
    body = "\u00e9t\u00e9".encode()  # 5 bytes; the cut at 4 splits the last character
    cut = message_json(_message(body), bounded=4)
    assert base64.b64decode(cut["body"]) == body[:4]
    assert cut["body_encoding"] == "base64"
    assert cut["body_truncated"] is True
    assert cut["body_size"] == 5
    assert cut["text_preview"] == "\u00e9t"
    whole = message_json(_message(body), bounded=100)
    assert whole["body_truncated"] is False
    assert whole["text_preview"] == "\u00e9t\u00e9"
    # A whole body that ends mid-character is not text at all.
    broken = message_json(_message(body[:4]), bounded=100)
    assert broken["body_truncated"] is False
    assert broken["text_preview"] is None
    assert message_json(_message(b"\xff" * 10), bounded=4)["text_preview"] is None
    long = message_json(_message(b"a" * (PREVIEW_CHARS + 10)), bounded=PREVIEW_CHARS + 10)
    assert long["text_preview"] == "a" * PREVIEW_CHARS


def test_a_queue_without_poison_handling_has_null_settings() -> None:
    shown = queue_json(QueueInfo.from_wire(QUEUE_INFO))
    assert shown["name"] == "orders"
    assert (shown["retry_count"], shown["retry_cycles"], shown["retry_delay"]) == (None,) * 3
    json.dumps(shown)


def test_alternates_are_the_hops_not_in_use_in_order() -> None:
    assert alternates(None) == []
    routing = _routing(("a:1801", False), ("b:1801", True), ("c:1801", False))
    assert alternates(routing) == ["a:1801", "c:1801"]
    outgoing = OutgoingInfo.from_wire(OUTGOING_INFO)
    assert "alternates" not in outgoing_json(outgoing, routing)
    assert outgoing_json(outgoing, routing, with_alternates=True)["alternates"] == [
        "a:1801",
        "c:1801",
    ]
    assert outgoing_json(outgoing, None, with_alternates=True)["alternates"] == []


def test_the_status_says_router_and_aliases_only_with_the_routing() -> None:
    status = Status.from_wire(status_info())
    plain = status_json(status)
    assert "router" not in plain
    assert "aliases" not in plain
    assert plain["queues"] == [queue_json(QueueInfo.from_wire(QUEUE_INFO))]
    routed = status_json(status, _routing())
    assert routed["router"] is True
    assert routed["aliases"] == ["gw.example.net:11801"]
    json.dumps(routed)
