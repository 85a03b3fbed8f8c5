"""The permission model (``qmgr.core.permissions``): rights and their words, lists,
principals and groups."""

from __future__ import annotations

import pytest

from qmgr.core.permissions import (
    EVERYONE,
    Acl,
    Principal,
    Right,
    acl_entry,
    decode_acl,
    encode_acl,
    parse_rights,
    rights_names,
    user_name_problem,
)


def test_rights_and_their_words() -> None:
    assert parse_rights(["send", "receive"]) == Right.SEND | Right.RECEIVE
    assert parse_rights(["Set_Properties"]) == Right.SET_PROPERTIES
    assert Right.RECEIVE & Right.PEEK == Right.PEEK  # receiving includes peeking
    assert rights_names(Right.RECEIVE) == ["receive"]
    assert rights_names(Right.PEEK | Right.SEND) == ["send", "peek"]
    assert rights_names(parse_rights(["full"])) == ["full"]
    assert rights_names(Right.NONE) == []
    with pytest.raises(ValueError, match="unknown right 'write'; rights are send, receive"):
        parse_rights(["write"])


def test_a_principal_holds_the_union_of_its_entries() -> None:
    acl = Acl(
        {
            EVERYONE: Right.SEND,
            "group:ops": Right.PURGE,
            "alice": Right.PEEK,
            "peer:*": Right.GET_PROPERTIES,
        }
    )
    alice = Principal("alice", frozenset({"group:ops"}))
    assert acl.rights_of(alice) == Right.SEND | Right.PURGE | Right.PEEK
    assert acl.allows(alice, Right.SEND | Right.PEEK)
    assert not acl.allows(alice, Right.RECEIVE)
    assert acl.rights_of(Principal("bob")) == Right.SEND
    assert acl.rights_of(Principal("peer:qm-b")) == Right.SEND | Right.GET_PROPERTIES


def test_granting_and_revoking() -> None:
    acl = Acl({}).granted("bob", Right.SEND).granted("bob", Right.RECEIVE)
    assert acl.entries == {"bob": Right.SEND | Right.RECEIVE}
    acl = acl.revoked("bob", Right.PEEK)
    assert acl.entries == {"bob": Right.SEND | Right(0x04)}  # receive without peek
    assert acl.revoked("bob", Right.FULL).entries == {}
    assert decode_acl(encode_acl(acl)) == acl


def test_stored_lists_that_are_not_lists_are_refused() -> None:
    for text in ("[]", "3", '"x"'):
        with pytest.raises(ValueError, match="not a JSON object"):
            decode_acl(text)
    assert decode_acl('{"bob": 4095}').entries == {"bob": Right.FULL}


def test_list_entries_are_spelled_as_they_are_matched() -> None:
    assert acl_entry(" Everyone ") == EVERYONE
    assert acl_entry("GROUP:Ops") == "group:Ops"  # the group's own name keeps its case
    assert acl_entry("Peer:*") == "peer:*"
    assert acl_entry("Alice") == "Alice"
    for bad in ("", " ", "group:", "PEER:", "a\tb", "x" * 257):
        with pytest.raises(ValueError, match=r"an entry is|names no"):
            acl_entry(bad)


@pytest.mark.parametrize(
    "name", ["everyone", "Everyone", "EVERYONE", "group:x", "GROUP:x", "Peer:x"]
)
def test_a_client_cannot_be_named_as_everyone_a_group_or_a_peer(name: str) -> None:
    assert user_name_problem(name) == f"'{name}' names a group, a peer or everyone, not a client"
    assert user_name_problem("everyone2") is None
