"""NUL-terminated UTF-16LE strings: what decodes, what encodes, and the errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire
from wire.msmq.text import decode_utf16z, encode_utf16z


@given(st.text(alphabet=st.characters(exclude_characters="\x00")))
def test_any_text_without_nul_round_trips(text: str) -> None:
    raw = encode_utf16z(text, "f")
    assert raw.endswith(b"\x00\x00")
    assert decode_utf16z(raw, "f") == text


def test_lone_surrogates_survive() -> None:
    raw = b"\x00\xd8\x00\x00"  # a lone high surrogate, then the NUL
    assert encode_utf16z(decode_utf16z(raw, "f"), "f") == raw


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"a\x00\x00", "odd length"),
        (b"a\x00", "not NUL-terminated"),
        (b"a\x00\x00\x00b\x00\x00\x00", "NUL inside"),
    ],
)
def test_malformed_strings(raw: bytes, reason: str) -> None:
    with pytest.raises(wire.RemoteProtocolError, match=reason) as info:
        decode_utf16z(raw, "Some.Field")
    assert info.value.field == "Some.Field"


@pytest.mark.parametrize(("value", "reason"), [("a\x00b", "NUL"), (b"bytes", "expected a str")])
def test_what_cannot_be_encoded(value: object, reason: str) -> None:
    with pytest.raises(wire.LocalProtocolError, match=reason) as info:
        encode_utf16z(value, "Some.Field")
    assert info.value.field == "Some.Field"
