"""Queue access rights: their bits and their words."""

from __future__ import annotations

import pytest

from wire.rights import Right, parse_rights, rights_names


def test_receiving_includes_peeking_and_full_is_every_bit() -> None:
    assert Right.RECEIVE & Right.PEEK == Right.PEEK
    assert int(Right.FULL) == 0xFF
    assert parse_rights(["Receive", " send ", "set_properties"]) == (
        Right.RECEIVE | Right.SEND | Right.SET_PROPERTIES
    )
    assert parse_rights([]) == Right.NONE


def test_names_in_the_order_shown() -> None:
    assert rights_names(Right.FULL) == ["full"]
    assert rights_names(Right.RECEIVE | Right.SEND) == ["send", "receive"]
    assert rights_names(Right.PEEK) == ["peek"]
    assert rights_names(Right.NONE) == []
    for rights in (Right.SEND | Right.PURGE, Right.RECEIVE | Right.CHANGE_PERMISSIONS):
        assert parse_rights(rights_names(rights)) == rights


def test_an_unknown_word_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown right 'write'; rights are send, receive"):
        parse_rights(["write"])
