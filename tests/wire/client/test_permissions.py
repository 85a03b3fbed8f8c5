"""The frames of authentication and queue permissions: their documented bytes."""

from __future__ import annotations

import struct

from wire import client as cf

from .client_samples import body_of, both_decode, text


def test_the_security_requests_need_version_6() -> None:
    assert (
        frozenset({cf.Authenticate, cf.GetPermissions, cf.ChangePermissions})
        == cf.SECURITY_REQUESTS
    )
    assert cf.SECURITY_VERSION == 6


def test_a_token_is_not_shown() -> None:
    assert "s3cret" not in repr(cf.Authenticate(token="s3cret"))


def test_bodies_are_the_documented_layouts() -> None:
    change = cf.ChangePermissions(queue="q", entry="group:ops", grant=0x06, revoke=0x08)
    assert body_of(change) == text("q") + text("group:ops") + struct.pack("<HH", 0x06, 0x08)
    assert both_decode(cf.FrameKind.CHANGE_PERMISSIONS, body_of(change)) == change
    assert body_of(cf.Authenticate(token="t")) == text("t")
    assert body_of(cf.GetPermissions(queue="q")) == text("q")
    listed = cf.Permissions(queue="q", entries=(cf.AclEntry(name="alice", rights=0xFF),))
    assert body_of(listed) == (
        text("q") + struct.pack("<I", 1) + text("alice") + struct.pack("<H", 0xFF)
    )
    assert both_decode(cf.FrameKind.PERMISSIONS, body_of(listed)) == listed
