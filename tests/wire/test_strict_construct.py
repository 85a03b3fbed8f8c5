"""Strict parsing with compiled construct layouts: short reads and trailing bytes are
refused, and every failure is one of the wire errors."""

from __future__ import annotations

import construct as c
import pytest

from wire import LocalProtocolError, RemoteProtocolError
from wire.strict_construct import StrictBytesIO, build_with, parse_exactly

LAYOUT = c.Struct("count" / c.Int16ul, "name" / c.PascalString(c.Int8ul, "utf8")).compile()


def test_exactly_one_value() -> None:
    data = b"\x05\x00\x02ab"
    assert parse_exactly(LAYOUT, data, "L").name == "ab"
    assert build_with(LAYOUT, {"count": 5, "name": "ab"}, "L") == data


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x05\x00\x03ab", "StreamError"),
        (b"\x05\x00\x02abc", "1 unexpected trailing"),
        (b"\x05\x00\x02\xff\xfe", "UnicodeDecodeError"),
    ],
)
def test_malformed_bytes_are_remote_errors(data: bytes, reason: str) -> None:
    with pytest.raises(RemoteProtocolError, match=reason) as info:
        parse_exactly(LAYOUT, data, "L")
    assert info.value.field == "L"


def test_values_that_do_not_fit_are_local_errors() -> None:
    with pytest.raises(LocalProtocolError, match="cannot encode") as info:
        build_with(LAYOUT, {"count": 70_000, "name": "ab"}, "L")
    assert info.value.field == "L"


def test_sized_reads_never_come_back_short() -> None:
    stream = StrictBytesIO(b"abc")
    assert stream.read(2) == b"ab"
    with pytest.raises(c.StreamError):
        stream.read(2)
    assert stream.read() == b""
