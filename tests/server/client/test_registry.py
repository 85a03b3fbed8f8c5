"""The request table: every request a server runs has exactly one handler and a declared
need, and a registry refuses a handler without one."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from qmgr.core.permissions import Right
from qmgr.protocol.client_connection import SERVED_REQUESTS
from qmgr.server.client.handlers import REQUESTS
from qmgr.server.client.needs import (
    ADMINISTRATORS,
    MOVE_RIGHTS,
    OPEN,
    PREPARER,
    SEND_RIGHTS,
    QueueRight,
)
from qmgr.server.client.registry import Registry
from qmgr.server.client.request_context import RequestContext
from wire import client as cf


def handler(ctx: RequestContext, request_id: int, request: Any) -> None:
    """A handler that does nothing."""


def test_every_request_a_server_runs_has_a_handler() -> None:
    assert set(REQUESTS) == set(SERVED_REQUESTS)
    assert cf.Hello not in REQUESTS
    assert cf.Authenticate not in REQUESTS


def test_the_needs_of_the_requests() -> None:
    """The authorization matrix of docs/security.md, as the table declares it."""
    queue_rights = {
        cf.Receive: QueueRight("queue", Right.RECEIVE, peek=Right.PEEK),
        cf.PeekRange: QueueRight("queue", Right.PEEK),
        cf.DeleteQueue: QueueRight("name", Right.DELETE),
        cf.PurgeQueue: QueueRight("name", Right.PURGE),
        cf.RemoveThrough: QueueRight("queue", Right.RECEIVE),
        cf.MeasureRange: QueueRight("queue", Right.PEEK),
        cf.SetQueueProperties: QueueRight("name", Right.SET_PROPERTIES),
        cf.GetPermissions: QueueRight("queue", Right.GET_PROPERTIES),
        cf.ChangePermissions: QueueRight("queue", Right.CHANGE_PERMISSIONS),
    }
    administrators = {cf.ControlOutgoing, cf.CreateList, cf.ChangeList, cf.DeleteList}
    expected = {
        request: queue_rights.get(
            request,
            ADMINISTRATORS
            if request in administrators
            else SEND_RIGHTS
            if request is cf.Send
            else MOVE_RIGHTS
            if request is cf.MoveMessages
            else PREPARER
            if request is cf.Resolve
            else OPEN,
        )
        for request in REQUESTS
    }
    assert REQUESTS.needs() == expected


def test_every_handler_is_a_plain_function_of_a_context() -> None:
    for request, entry in REQUESTS.items():
        assert inspect.isfunction(entry.handler), request
        assert list(inspect.signature(entry.handler).parameters) == [
            "ctx",
            "request_id",
            "request",
        ], request


@pytest.mark.parametrize("need", [None, "open", Right.SEND, object()])
def test_a_handler_without_a_need_is_refused(need: Any) -> None:
    registry = Registry()
    with pytest.raises(TypeError, match="declares no need"):
        registry.handles(cf.ListQueues, need=need)
    with pytest.raises(TypeError):
        registry.handles(cf.ListQueues)  # type: ignore[call-arg]
    assert cf.ListQueues not in registry


@pytest.mark.parametrize("request_class", [cf.Hello, cf.Authenticate, cf.Ok, int])
def test_only_requests_a_server_runs_may_be_registered(request_class: type[Any]) -> None:
    with pytest.raises(TypeError, match="is not a request a server runs"):
        Registry().handles(request_class, need=OPEN)


def test_a_request_has_one_handler() -> None:
    first, second = Registry(), Registry()
    first.handles(cf.ListQueues, need=OPEN)(handler)
    assert first[cf.ListQueues].handler is handler
    assert len(first) == 1
    with pytest.raises(ValueError, match="ListQueues already has a handler"):
        first.handles(cf.ListQueues, need=OPEN)
    second.handles(cf.ListQueues, need=ADMINISTRATORS)(handler)
    with pytest.raises(ValueError, match="ListQueues has two handlers"):
        Registry.merged(first, second)
