"""Queues: create, delete, purge, list; and the queue manager's status."""

from __future__ import annotations

import datetime as _dt

from wire import client as cf

from .._message import QueueInfo, Status
from .._protocol import ClientProtocol, Flow, W
from .._replies import ok_value, queue_list
from .._replies import status as status_of
from .poison import POISON_USE, seconds

__all__ = ["create_queue", "delete_queue", "list_queues", "purge_queue", "status"]


def create_queue(
    proto: ClientProtocol[W],
    name: str,
    transactional: bool,
    journal: bool,
    quota: int | None,
    retry: tuple[int | None, int | None, float | _dt.timedelta | None],
) -> Flow[W, None]:
    """``create_queue()``; ``retry``: its ``retry_count``, ``retry_cycles`` and ``retry_delay``.

    Raises:
        NotSupported: retry settings for a daemon older than ``POISON_VERSION``.
        InvalidArgument: ``retry_delay`` is not seconds.
    """
    retry_count, retry_cycles, retry_delay = retry
    delay = seconds(retry_delay)
    if (retry_count, retry_cycles, delay) != (None, None, None):
        proto.require(cf.POISON_VERSION, "create_queue(retry_...=)", POISON_USE)
    request = cf.CreateQueue(
        name=name,
        transactional=transactional,
        journal=journal,
        quota=quota,
        retry_count=retry_count,
        retry_cycles=retry_cycles,
        retry_delay=delay,
    )
    ok_value((yield proto.call(request)))


def delete_queue(proto: ClientProtocol[W], name: str) -> Flow[W, int]:
    """``delete_queue()``: how many messages went."""
    return ok_value((yield proto.call(cf.DeleteQueue(name=name))))


def purge_queue(proto: ClientProtocol[W], name: str) -> Flow[W, int]:
    """``purge_queue()``: how many messages went."""
    return ok_value((yield proto.call(cf.PurgeQueue(name=name))))


def list_queues(proto: ClientProtocol[W]) -> Flow[W, list[QueueInfo]]:
    """``list_queues()``."""
    return queue_list((yield proto.call(cf.ListQueues())))


def status(proto: ClientProtocol[W]) -> Flow[W, Status]:
    """``status()``."""
    return status_of((yield proto.call(cf.GetStatus())))
