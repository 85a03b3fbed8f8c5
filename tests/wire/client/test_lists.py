"""The frames of distribution lists: their documented bytes, and the version they need."""

from __future__ import annotations

import struct

import pytest

from wire import client as cf
from wire.client.frames import KIND_OF

from .client_samples import body_of, both_decode, text


def test_the_list_requests_need_the_outcomes_version() -> None:
    lists = {cf.CreateList, cf.ChangeList, cf.DeleteList, cf.GetLists}
    assert lists <= cf.OUTCOMES_REQUESTS
    assert cf.OUTCOMES_VERSION == 4


@pytest.mark.parametrize(
    ("value", "body"),
    [
        pytest.param(
            cf.CreateList(name="dl", targets=("a", "b")),
            text("dl") + struct.pack("<I", 2) + text("a") + text("b"),
            id="create",
        ),
        pytest.param(
            cf.ChangeList(name="dl", add=("x",)),
            text("dl") + struct.pack("<I", 1) + text("x") + struct.pack("<I", 0),
            id="change",
        ),
        pytest.param(cf.DeleteList(name="dl"), text("dl"), id="delete"),
        pytest.param(cf.GetLists(), text(""), id="get-every-list"),
        pytest.param(
            cf.ListInfoList(lists=(cf.ListInfo(name="dl", targets=("a",)),)),
            struct.pack("<I", 1) + text("dl") + struct.pack("<I", 1) + text("a"),
            id="list-info",
        ),
    ],
)
def test_bodies_are_the_documented_layouts(value: cf.FrameValue, body: bytes) -> None:
    assert body_of(value) == body
    assert both_decode(KIND_OF[type(value)], body) == value
