"""A client session's outgoing-queue requests, with a fake ``PeeringControl`` in the services.

The session, core, committer and store are real (``kit``); only the
delivery between queue managers is replaced, by :class:`FakePeering`, which
records what it was asked and answers as scripted, with the outgoing queues of the
sample values (``wire_samples``).
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import structlog
import trio
import trio.testing
from kit import Connection, error
from wire_samples import CONNECTED_INFO, ORDERS, OUTGOING_INFO, ROUTING_INFO, hop_info

from qmgr.core.errors import InvalidName, QueueNotFound
from qmgr.server.client.services import OutgoingAction, PeeringControl, Services
from wire import client as cf
from wire import quoted

ROUTING = dataclasses.replace(
    ROUTING_INFO, hops=(hop_info("10.0.0.9:1801", "connected", in_use=True),)
)


class FakePeering:
    """Answers as scripted and records every ``control`` call."""

    def __init__(self) -> None:
        self.calls: list[tuple[OutgoingAction, str]] = []
        self.infos = (OUTGOING_INFO, CONNECTED_INFO)

    def outgoing_infos(self) -> tuple[cf.OutgoingInfo, ...]:
        return self.infos

    def incoming_infos(self) -> tuple[cf.IncomingInfo, ...]:
        return ()

    def next_hops(self) -> dict[int, str]:
        return {}

    def routing(self, destination: str) -> cf.RoutingInfo:
        if destination == "not a destination":
            msg = f"{quoted(destination)}: not a format name or HOST[:PORT]"
            raise InvalidName(msg)
        return dataclasses.replace(ROUTING, destination=destination)

    async def control(
        self, action: OutgoingAction, destination: str
    ) -> tuple[cf.OutgoingInfo, int]:
        self.calls.append((action, destination))
        await trio.lowlevel.checkpoint()  # the real one writes to the store
        if destination == "missing":
            msg = f"there is no outgoing queue for {quoted(destination)}"
            raise QueueNotFound(msg)
        if destination == "local":
            msg = f"{quoted(destination)} is not a queue on another queue manager"
            raise InvalidName(msg)
        if action is OutgoingAction.PURGE:
            return dataclasses.replace(OUTGOING_INFO, waiting=0), OUTGOING_INFO.waiting
        state = "paused" if action is OutgoingAction.PAUSE else "connecting"
        return dataclasses.replace(OUTGOING_INFO, state=state), 0


@pytest.fixture
def peering(services: Services) -> FakePeering:
    fake = FakePeering()
    services.peering = fake
    return fake


def test_the_fake_has_the_methods_of_peering_control() -> None:
    names = [
        n
        for n in vars(PeeringControl)
        if not n.startswith("_") and callable(getattr(PeeringControl, n))
    ]
    assert sorted(names) == ["control", "incoming_infos", "next_hops", "outgoing_infos", "routing"]
    for name in names:
        expected = inspect.signature(getattr(PeeringControl, name))
        assert inspect.signature(getattr(FakePeering, name)) == expected, name
        assert inspect.iscoroutinefunction(getattr(FakePeering, name)) == (
            inspect.iscoroutinefunction(getattr(PeeringControl, name))
        ), name


async def test_list_outgoing_answers_every_queue(
    peering: FakePeering, conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    listed = cf.OutgoingList(outgoing=(OUTGOING_INFO, CONNECTED_INFO))
    assert await conn.client.call(cf.ListOutgoing()) == listed
    peering.infos = ()
    assert await conn.client.call(cf.ListOutgoing()) == cf.OutgoingList(outgoing=())
    assert peering.calls == []


async def test_control_outgoing_pauses_resumes_and_purges(
    peering: FakePeering, conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    with structlog.testing.capture_logs() as logs:
        paused = await conn.client.call(cf.ControlOutgoing(action=1, destination=ORDERS))
        resumed = await conn.client.call(cf.ControlOutgoing(action=2, destination=ORDERS))
        purged = await conn.client.call(cf.ControlOutgoing(action=3, destination=ORDERS))
    assert paused == cf.OutgoingList(outgoing=(dataclasses.replace(OUTGOING_INFO, state="paused"),))
    assert resumed == cf.OutgoingList(
        outgoing=(dataclasses.replace(OUTGOING_INFO, state="connecting"),)
    )
    assert purged == cf.OutgoingList(
        outgoing=(dataclasses.replace(OUTGOING_INFO, waiting=0),), purged=OUTGOING_INFO.waiting
    )
    assert peering.calls == [
        (OutgoingAction.PAUSE, ORDERS),
        (OutgoingAction.RESUME, ORDERS),
        (OutgoingAction.PURGE, ORDERS),
    ]
    assert all(type(action) is OutgoingAction for action, _ in peering.calls)
    events = [
        (entry["event"], entry["destination"], entry.get("messages"), entry.get("waiting"))
        for entry in logs
        if entry["event"].startswith("outgoing_")
    ]
    # A pause and a resume say what the queue holds; a purge, what it deleted.
    assert events == [
        ("outgoing_paused", ORDERS, None, OUTGOING_INFO.waiting),
        ("outgoing_resumed", ORDERS, None, OUTGOING_INFO.waiting),
        ("outgoing_purged", ORDERS, OUTGOING_INFO.waiting, None),
    ]
    assert [
        entry["unacknowledged"]
        for entry in logs
        if entry["event"] in ("outgoing_paused", "outgoing_resumed")
    ] == [OUTGOING_INFO.unacknowledged] * 2


async def test_get_routing_answers_what_peering_says(
    peering: FakePeering, conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    assert await conn.client.call(cf.GetRouting()) == ROUTING
    answer = await conn.client.call(cf.GetRouting(destination="10.0.0.5"))
    assert answer == dataclasses.replace(ROUTING, destination="10.0.0.5")
    reply = await conn.client.call(cf.GetRouting(destination="not a destination"))
    assert "not a format name" in error(reply, cf.ErrorCode.INVALID_NAME).message
    assert isinstance(await conn.client.call(cf.ListOutgoing()), cf.OutgoingList)


@pytest.mark.parametrize("action", [0, 4, 255])
async def test_an_unknown_action_is_an_invalid_argument(
    peering: FakePeering, conn: Connection, autojump_clock: trio.testing.MockClock, action: int
) -> None:
    reply = await conn.client.call(cf.ControlOutgoing(action=action, destination=ORDERS))
    refused = error(reply, cf.ErrorCode.INVALID_ARGUMENT)
    assert f"not {action}" in refused.message
    assert "1 (pause), 2 (resume), 3 (purge)" in refused.message
    # The connection goes on.
    assert isinstance(await conn.client.call(cf.ListOutgoing()), cf.OutgoingList)
    assert peering.calls == []


@pytest.mark.parametrize(
    ("destination", "code"),
    [("missing", cf.ErrorCode.QUEUE_NOT_FOUND), ("local", cf.ErrorCode.INVALID_NAME)],
)
async def test_peering_errors_reach_the_client(
    peering: FakePeering,
    conn: Connection,
    autojump_clock: trio.testing.MockClock,
    destination: str,
    code: cf.ErrorCode,
) -> None:
    reply = await conn.client.call(cf.ControlOutgoing(action=1, destination=destination))
    assert quoted(destination) in error(reply, code).message
    assert isinstance(await conn.client.call(cf.ListOutgoing()), cf.OutgoingList)


async def test_without_peering_the_requests_say_it_is_not_running(
    services: Services, conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    assert services.peering is None
    for request in (
        cf.ListOutgoing(),
        cf.GetRouting(),
        cf.ControlOutgoing(action=1, destination=ORDERS),
        cf.ControlOutgoing(action=3, destination=ORDERS),
    ):
        reply = await conn.client.call(request)
        assert "not running" in error(reply, cf.ErrorCode.NOT_SUPPORTED).message, request
