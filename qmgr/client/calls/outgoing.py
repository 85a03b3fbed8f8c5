"""Outgoing queues: messages on their way to other queue managers.

``outgoing()`` lists them; ``pause_outgoing()``, ``resume_outgoing()`` and
``purge_outgoing()`` are one ``ControlOutgoing`` request each.
"""

from __future__ import annotations

from wire import client as cf

from .._common import OUTGOING_PAUSE, OUTGOING_PURGE, OUTGOING_RESUME
from .._message import OutgoingInfo
from .._protocol import ClientProtocol, Flow, W
from .._replies import outgoing_changed, outgoing_list

__all__ = ["outgoing", "pause_outgoing", "purge_outgoing", "resume_outgoing"]


def _control(
    proto: ClientProtocol[W], action: int, destination: str
) -> Flow[W, tuple[OutgoingInfo, int]]:
    request = cf.ControlOutgoing(action=action, destination=destination)
    return outgoing_changed((yield proto.call(request)))


def outgoing(proto: ClientProtocol[W]) -> Flow[W, list[OutgoingInfo]]:
    """``outgoing()``: every outgoing queue, by destination."""
    return outgoing_list((yield proto.call(cf.ListOutgoing())))


def pause_outgoing(proto: ClientProtocol[W], destination: str) -> Flow[W, OutgoingInfo]:
    """``pause_outgoing()``: the queue afterwards."""
    return (yield from _control(proto, OUTGOING_PAUSE, destination))[0]


def resume_outgoing(proto: ClientProtocol[W], destination: str) -> Flow[W, OutgoingInfo]:
    """``resume_outgoing()``: the queue afterwards."""
    return (yield from _control(proto, OUTGOING_RESUME, destination))[0]


def purge_outgoing(proto: ClientProtocol[W], destination: str) -> Flow[W, int]:
    """``purge_outgoing()``: how many messages were purged."""
    return (yield from _control(proto, OUTGOING_PURGE, destination))[1]
