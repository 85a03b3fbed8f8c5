"""Who is at the other end of a Unix-domain connection: the kernel says (SO_PEERCRED)."""

from __future__ import annotations

import grp
import os
import pwd
import socket

import pytest

from qmgr.server.client.unix_socket import LocalUser, local_user


def test_the_user_of_a_local_connection_is_its_process_owner() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        user = local_user(ours)
    assert (user.pid, user.uid) == (os.getpid(), os.getuid())
    assert user.name == pwd.getpwuid(os.getuid()).pw_name
    assert f"group:{grp.getgrgid(os.getgid()).gr_name}" in user.groups


def test_a_user_without_a_name_is_known_by_its_uid() -> None:
    unknown = 4_000_000_000
    with pytest.raises(KeyError):
        pwd.getpwuid(unknown)
    user = LocalUser(pid=1, uid=unknown, gid=unknown)
    assert user.name == f"uid:{unknown}"
    assert user.groups == frozenset()
