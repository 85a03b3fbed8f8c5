"""Every frame value has one kind, and the tables that say so cover every kind."""

from __future__ import annotations

from wire import client as cf
from wire.client.fast_codec import FAST_DECODE, FAST_ENCODE
from wire.client.frames import CLASS_OF, KIND_OF

from . import client_strategies as cs
from .client_samples import (
    SAMPLES,
)


def test_samples_and_strategies_cover_every_frame_kind() -> None:
    assert set(SAMPLES) == set(cf.FrameKind)
    assert set(cs.FRAMES_BY_KIND) == set(cf.FrameKind)
    assert all(type(value) is CLASS_OF[kind] for kind, value in SAMPLES.items())
    # Every hand-written path is compared with its layout below.
    assert set(FAST_DECODE) == set(cs.FAST_KINDS)
    assert set(FAST_ENCODE) == {CLASS_OF[kind] for kind in cs.FAST_KINDS}


def test_kinds_and_classes_map_both_ways_and_requests_are_below_0x80() -> None:
    assert {kind: cls for cls, kind in KIND_OF.items()} == CLASS_OF
    for kind, value in SAMPLES.items():
        assert KIND_OF[type(value)] is kind
        assert cf.is_request(value) == (kind < 0x80)
