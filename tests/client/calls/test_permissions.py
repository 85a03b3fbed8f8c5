"""Permission calls and authentication: rights as words, checked before anything is sent."""

from __future__ import annotations

import pytest
from client_kit import run_call

from qmgr.client import ConnectionLost, InvalidArgument, NotSupported
from qmgr.client.calls import permissions
from wire import client as cf

ACL = cf.Permissions(
    queue="q",
    entries=(
        cf.AclEntry(name="alice", rights=int(cf.Right.SEND | cf.Right.PEEK)),
        cf.AclEntry(name="everyone", rights=int(cf.Right.PEEK)),
    ),
)
WORDS = {"alice": ["send", "peek"], "everyone": ["peek"]}


def test_permissions_are_words() -> None:
    run = run_call(permissions.permissions, "q", answers=[ACL])
    assert (run.requests, run.result) == ([cf.GetPermissions(queue="q")], WORDS)
    with pytest.raises(ConnectionLost, match="not Permissions"):
        run_call(permissions.permissions, "q", answers=[cf.Ok()])


def test_grant_and_revoke() -> None:
    granted = run_call(permissions.grant, "q", "alice", "send", "peek", answers=[ACL])
    rights = int(cf.Right.SEND | cf.Right.PEEK)
    assert granted.requests == [cf.ChangePermissions(queue="q", entry="alice", grant=rights)]
    assert granted.result == WORDS
    some = run_call(permissions.revoke, "q", "bob", "send", answers=[ACL])
    assert some.requests == [
        cf.ChangePermissions(queue="q", entry="bob", revoke=int(cf.Right.SEND))
    ]
    every = run_call(permissions.revoke, "q", "bob", answers=[ACL])
    assert every.requests == [
        cf.ChangePermissions(queue="q", entry="bob", revoke=int(cf.Right.FULL))
    ]


def test_rights_are_checked_before_anything_is_sent() -> None:
    with pytest.raises(InvalidArgument, match=r"grant\(\) needs at least one right"):
        run_call(permissions.grant, "q", "alice")
    with pytest.raises(InvalidArgument):
        run_call(permissions.grant, "q", "alice", "fly")
    with pytest.raises(InvalidArgument):
        run_call(permissions.revoke, "q", "alice", "fly")


def test_authenticate() -> None:
    run = run_call(permissions.authenticate, "t0ken", answers=[cf.Ok()])
    assert (run.requests, run.result) == ([cf.Authenticate(token="t0ken")], None)


@pytest.mark.parametrize(
    ("call", "args"),
    [
        (permissions.permissions, ("q",)),
        (permissions.grant, ("q", "a", "send")),
        (permissions.revoke, ("q", "a")),
        (permissions.authenticate, ("t",)),
    ],
)
def test_an_older_daemon_is_told_apart(call: object, args: tuple[object, ...]) -> None:
    with pytest.raises(NotSupported, match="tokens and queue permissions needs"):
        run_call(call, *args, version=cf.SECURITY_VERSION - 1)  # type: ignore[arg-type]
