"""The values a ``PeerSession`` takes and returns (``qmgr.protocol.session_values``): the
settings it refuses, and the actions as plain immutable values."""

from __future__ import annotations

import dataclasses
import math
import uuid
from typing import Any, cast

import pytest

from qmgr.protocol import Acked, Close, Opened, Send, SessionSettings
from qmgr.protocol.session_values import MAX_MILLISECONDS


@pytest.mark.parametrize(
    "changes",
    [
        {"window_size": 0},
        {"window_size": 65536},
        {"ack_timeout": 0.0},
        {"ack_timeout": 5_000_000.0},
        {"recoverable_ack_timeout": -1.0},
        {"init_timeout": 0.0},
        {"idle_timeout": -5.0},
    ],
)
def test_settings_are_validated(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(changes))):
        SessionSettings(**changes)  # type: ignore[arg-type]


def test_the_limits_themselves_are_accepted() -> None:
    SessionSettings()
    SessionSettings(window_size=1)
    SessionSettings(window_size=65535)
    SessionSettings(ack_timeout=MAX_MILLISECONDS / 1000)  # the largest u32 of milliseconds
    with pytest.raises(ValueError, match="ack_timeout must fit in a u32 of milliseconds"):
        SessionSettings(ack_timeout=(MAX_MILLISECONDS + 1) / 1000)
    SessionSettings(recoverable_ack_timeout=1e-9, init_timeout=1e-9, idle_timeout=1e-9)


@pytest.mark.parametrize(
    "name", ["ack_timeout", "recoverable_ack_timeout", "init_timeout", "idle_timeout"]
)
def test_a_timeout_that_is_not_a_number_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be positive, got nan"):
        SessionSettings(**cast(dict[str, Any], {name: math.nan}))


def test_settings_and_actions_are_immutable_values() -> None:
    settings = SessionSettings(window_size=8)
    assert settings == SessionSettings(window_size=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.window_size = 9  # type: ignore[misc]
    guid = uuid.UUID(int=1)
    assert Opened(remote_qm=guid, peer_window=4) == Opened(remote_qm=guid, peer_window=4)
    assert Acked(tags=(1, "a")) != Acked(tags=("a", 1))
    send, close = Send(data=b"x"), Close(reason="done")
    with pytest.raises(dataclasses.FrozenInstanceError):
        send.data = b"y"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        close.reason = "other"  # type: ignore[misc]
