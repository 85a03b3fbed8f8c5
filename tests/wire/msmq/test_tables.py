"""What the parser and the builder share: the flag bits, and the bounded memos."""

from __future__ import annotations

import wire
from wire.msmq import tables


def test_the_flag_bits_are_the_spec_bits_as_plain_ints() -> None:
    assert (tables.BASE_IN, tables.BASE_SH, tables.BASE_DH) == (0x08, 0x10, 0x20)
    assert tables.USER_MP == wire.UserFlags.PROPERTIES
    assert type(tables.USER_MP) is int
    assert [attribute for _id, _name, attribute in tables.MQF_LISTS] == [
        "destination",
        "admin",
        "response",
    ]


def test_a_memo_is_emptied_when_full() -> None:
    memo: dict[int, int] = {}
    for key in range(tables.MEMO_LIMIT):
        assert tables.remember(memo, key, key * 2) == key * 2
    assert len(memo) == tables.MEMO_LIMIT
    tables.remember(memo, -1, 0)
    assert memo == {-1: 0}
