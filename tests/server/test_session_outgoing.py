"""A client session's outgoing-queue requests, with a fake ``PeeringControl`` in the services.

The session, core, committer and store are real (``kit``); only the
delivery between queue managers is replaced, by :class:`FakePeering`, which
records what it was asked and answers as scripted.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from pathlib import Path

import pytest
import structlog
import trio
import trio.testing
from kit import open_services, open_session

from qmgr.client import _common as client_common
from qmgr.core.errors import InvalidName, QueueNotFound
from qmgr.server.services import OutgoingAction, PeeringControl
from wire import client as cf

ORDERS = "DIRECT=TCP:10.0.0.5:1901\\private$\\orders"
INFO = cf.OutgoingInfo(
    destination=ORDERS,
    next_hop="10.0.0.5:1901",
    state="connected",
    next_attempt=None,
    waiting=4,
    unacknowledged=2,
    sequence_timestamp=1_700_000_000,
    sequence_ordinal=1,
    next_number=7,
    last_order_ack=1_700_000_010.5,
    last_error="",
)
OTHER = dataclasses.replace(INFO, destination="DIRECT=TCP:10.0.0.6\\private$\\x", state="idle")


class FakePeering:
    """Answers as scripted and records every ``control`` call."""

    def __init__(self) -> None:
        self.calls: list[tuple[OutgoingAction, str]] = []
        self.infos = (INFO, OTHER)

    def outgoing_infos(self) -> tuple[cf.OutgoingInfo, ...]:
        return self.infos

    def incoming_infos(self) -> tuple[cf.IncomingInfo, ...]:
        return ()

    def next_hops(self) -> dict[int, str]:
        return {}

    async def control(
        self, action: OutgoingAction, destination: str
    ) -> tuple[cf.OutgoingInfo, int]:
        self.calls.append((action, destination))
        await trio.lowlevel.checkpoint()  # the real one writes to the store
        if destination == "missing":
            msg = f"there is no outgoing queue for {destination!r}"
            raise QueueNotFound(msg)
        if destination == "local":
            msg = f"{destination!r} is not a queue on another queue manager"
            raise InvalidName(msg)
        if action is OutgoingAction.PURGE:
            return dataclasses.replace(INFO, waiting=0), INFO.waiting
        state = "paused" if action is OutgoingAction.PAUSE else "connecting"
        return dataclasses.replace(INFO, state=state), 0


def test_the_fake_has_the_methods_of_peering_control() -> None:
    names = [
        n
        for n in vars(PeeringControl)
        if not n.startswith("_") and callable(getattr(PeeringControl, n))
    ]
    assert sorted(names) == ["control", "incoming_infos", "next_hops", "outgoing_infos"]
    for name in names:
        expected = inspect.signature(getattr(PeeringControl, name))
        assert inspect.signature(getattr(FakePeering, name)) == expected, name
        assert inspect.iscoroutinefunction(getattr(FakePeering, name)) == (
            inspect.iscoroutinefunction(getattr(PeeringControl, name))
        ), name


def test_the_sdk_sends_the_servers_action_numbers() -> None:
    assert client_common.OUTGOING_PAUSE == OutgoingAction.PAUSE
    assert client_common.OUTGOING_RESUME == OutgoingAction.RESUME
    assert client_common.OUTGOING_PURGE == OutgoingAction.PURGE


async def test_list_outgoing_answers_every_queue(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    peering = FakePeering()
    async with open_services(tmp_path / "s") as services:
        services.peering = peering
        async with open_session(services) as a:
            assert await a.client.call(cf.ListOutgoing()) == cf.OutgoingList(outgoing=(INFO, OTHER))
            peering.infos = ()
            assert await a.client.call(cf.ListOutgoing()) == cf.OutgoingList(outgoing=())
    assert peering.calls == []


async def test_control_outgoing_pauses_resumes_and_purges(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    peering = FakePeering()
    async with open_services(tmp_path / "s") as services:
        services.peering = peering
        with structlog.testing.capture_logs() as logs:
            async with open_session(services) as a:
                paused = await a.client.call(cf.ControlOutgoing(action=1, destination=ORDERS))
                resumed = await a.client.call(cf.ControlOutgoing(action=2, destination=ORDERS))
                purged = await a.client.call(cf.ControlOutgoing(action=3, destination=ORDERS))
    assert paused == cf.OutgoingList(outgoing=(dataclasses.replace(INFO, state="paused"),))
    assert resumed == cf.OutgoingList(outgoing=(dataclasses.replace(INFO, state="connecting"),))
    assert purged == cf.OutgoingList(outgoing=(dataclasses.replace(INFO, waiting=0),), purged=4)
    assert peering.calls == [
        (OutgoingAction.PAUSE, ORDERS),
        (OutgoingAction.RESUME, ORDERS),
        (OutgoingAction.PURGE, ORDERS),
    ]
    assert all(type(action) is OutgoingAction for action, _ in peering.calls)
    events = [
        (entry["event"], entry["destination"], entry["messages"])
        for entry in logs
        if entry["event"].startswith("outgoing_")
    ]
    assert events == [
        ("outgoing_paused", ORDERS, 0),
        ("outgoing_resumed", ORDERS, 0),
        ("outgoing_purged", ORDERS, 4),
    ]


@pytest.mark.parametrize("action", [0, 4, 255])
async def test_an_unknown_action_is_an_invalid_argument(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, action: int
) -> None:
    peering = FakePeering()
    async with open_services(tmp_path / "s") as services:
        services.peering = peering
        async with open_session(services) as a:
            reply = await a.client.call(cf.ControlOutgoing(action=action, destination=ORDERS))
            assert isinstance(reply, cf.ErrorReply)
            assert reply.code == cf.ErrorCode.INVALID_ARGUMENT
            assert f"not {action}" in reply.message
            assert "1 (pause), 2 (resume), 3 (purge)" in reply.message
            # The connection goes on.
            assert isinstance(await a.client.call(cf.ListOutgoing()), cf.OutgoingList)
    assert peering.calls == []


@pytest.mark.parametrize(
    ("destination", "code"),
    [("missing", cf.ErrorCode.QUEUE_NOT_FOUND), ("local", cf.ErrorCode.INVALID_NAME)],
)
async def test_peering_errors_reach_the_client(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, destination: str, code: cf.ErrorCode
) -> None:
    async with open_services(tmp_path / "s") as services:
        services.peering = FakePeering()
        async with open_session(services) as a:
            reply = await a.client.call(cf.ControlOutgoing(action=1, destination=destination))
            assert isinstance(reply, cf.ErrorReply)
            assert reply.code == code
            assert repr(destination) in reply.message
            assert isinstance(await a.client.call(cf.ListOutgoing()), cf.OutgoingList)


async def test_without_peering_the_requests_say_it_is_not_running(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services:
        assert services.peering is None
        async with open_session(services) as a:
            for request in (
                cf.ListOutgoing(),
                cf.ControlOutgoing(action=1, destination=ORDERS),
                cf.ControlOutgoing(action=3, destination=ORDERS),
            ):
                reply = await a.client.call(request)
                assert isinstance(reply, cf.ErrorReply), request
                assert reply.code == cf.ErrorCode.NOT_SUPPORTED
                assert "not running" in reply.message
            # Still served: the status does not depend on peering.
            services.status = lambda: cf.StatusInfo(
                qm_name="test",
                qm_guid=uuid.UUID(int=1),
                server_version="test",
                started_at=0.0,
                connections=1,
                open_transactions=0,
                commits=0,
                aborts=0,
                batches=0,
                uncommitted_bytes=0,
                erasing=0,
                queues=(),
            )
            status = await a.client.call(cf.GetStatus())
            assert isinstance(status, cf.StatusInfo)
            assert (status.outgoing, status.incoming) == ((), ())
