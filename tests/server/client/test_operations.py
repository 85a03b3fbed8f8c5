"""Client requests run without a connection, as the HTTP API runs them: the
request's own handler, its reply decoded, its error as it is, its log the caller's."""

from __future__ import annotations

import pytest
import structlog
import trio
import trio.testing

from qmgr.core.errors import QueueNotFound, ShuttingDown
from qmgr.core.permissions import Principal
from qmgr.server.client.handlers import REQUESTS
from qmgr.server.client.needs import Need
from qmgr.server.client.operations import Operations
from qmgr.server.client.services import Services
from wire import client as cf

_LOG = structlog.get_logger("test").bind(via="http")


def test_the_need_is_the_one_the_request_table_declares() -> None:
    for request in (cf.CreateQueue, cf.PurgeQueue, cf.ListQueues, cf.PeekRange):
        assert Operations.need(request) == REQUESTS[request].need
    assert isinstance(Operations.need(cf.PurgeQueue), Need)
    with pytest.raises(KeyError):
        Operations.need(cf.Hello)


async def test_a_request_runs_its_handler_and_returns_the_decoded_reply(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    operations = Operations(services)
    alice = Principal("alice")
    created = await operations.run(
        cf.CreateQueue(name="orders", transactional=False), principal=alice, log=_LOG
    )
    assert isinstance(created, cf.Ok)
    assert services.core.store.get_queue("orders") is not None
    listed = await operations.run(cf.ListQueues(), principal=alice, log=_LOG)
    assert isinstance(listed, cf.QueueList)
    # A peek's reply is written as encoded bytes: it is read back as a value.
    peeked = await operations.run(
        cf.PeekRange(queue="orders", after=0, max_count=10), principal=alice, log=_LOG
    )
    assert peeked == cf.MessageList(messages=())


async def test_the_handlers_error_and_log_are_the_callers(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    operations = Operations(services)
    with pytest.raises(QueueNotFound):
        await operations.run(cf.PurgeQueue(name="missing"), principal=None, log=_LOG)
    await operations.run(cf.CreateQueue(name="orders"), principal=None, log=_LOG)
    with structlog.testing.capture_logs() as logs:
        await operations.run(cf.PurgeQueue(name="orders"), principal=None, log=_LOG)
    [purged] = [entry for entry in logs if entry["event"] == "queue_purged"]
    assert purged["via"] == "http"


async def test_nothing_runs_once_the_queue_manager_is_stopping(
    services: Services, autojump_clock: trio.testing.MockClock
) -> None:
    operations = Operations(services)
    services.stopping = True
    with pytest.raises(ShuttingDown, match="shutting down"):
        await operations.run(cf.CreateQueue(name="orders"), principal=None, log=_LOG)
    assert services.core.store.get_queue("orders") is None
