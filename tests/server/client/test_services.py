"""What a session needs from the daemon: the connection limits' defaults, the wake-up of
the background work, and the outgoing-queue actions the SDK sends."""

from __future__ import annotations

import trio
import trio.testing

from qmgr.client import _common as client_common
from qmgr.server.client.services import ConnectionLimits, OutgoingAction, Services


def test_the_connection_limits_default_to_the_documented_values() -> None:
    limits = ConnectionLimits()
    assert (limits.hello_timeout, limits.frame_timeout, limits.idle_timeout) == (10, 30, 600)
    assert (limits.max_transactions, limits.max_waiting_receives) == (256, 1024)
    assert limits.max_peek_range == 10_000


async def test_waking_the_background_work_is_not_lost(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    services.wake_maintenance()  # while nobody waits
    with trio.fail_after(1):
        await services.maintenance.wait()
    with trio.move_on_after(1) as idle:
        await services.maintenance.wait()
    assert idle.cancelled_caught


def test_the_sdk_sends_the_servers_action_numbers() -> None:
    assert client_common.OUTGOING_PAUSE == OutgoingAction.PAUSE
    assert client_common.OUTGOING_RESUME == OutgoingAction.RESUME
    assert client_common.OUTGOING_PURGE == OutgoingAction.PURGE
