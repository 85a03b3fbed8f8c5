"""Distribution lists: ``create_list()``, ``add_to_list()``, ...

A list is a named set of destinations kept by the queue manager; send to it
with ``qm.send("DL=name", ...)`` (alone or in a multiple-element name): one
copy per target, in the sender's transaction. These requests need the
protocol's ``OUTCOMES_VERSION``: against an older daemon they raise
:class:`NotSupported` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wire import client as cf

from .._protocol import ClientProtocol, Flow, W
from .._replies import expect, ok_value

__all__ = [
    "DistributionList",
    "add_to_list",
    "create_list",
    "delete_list",
    "get_list",
    "lists",
    "remove_from_list",
]


@dataclass(frozen=True, slots=True)
class DistributionList:
    """A distribution list: its name and its targets (format names), in order."""

    name: str
    targets: tuple[str, ...]


def _ask(proto: ClientProtocol[W], what: str, request: cf.ClientRequest) -> Flow[W, cf.ServerReply]:
    proto.require(cf.OUTCOMES_VERSION, what)
    return (yield proto.call(request))


def _lists(reply: cf.ServerReply) -> list[DistributionList]:
    return [DistributionList(i.name, i.targets) for i in expect(reply, cf.ListInfoList).lists]


def create_list(proto: ClientProtocol[W], name: str, targets: Iterable[str] = ()) -> Flow[W, None]:
    """``create_list()``."""
    yield from _ask(proto, "create_list()", cf.CreateList(name=name, targets=tuple(targets)))


def add_to_list(proto: ClientProtocol[W], name: str, *targets: str) -> Flow[W, int]:
    """``add_to_list()``: how many targets the list has now."""
    request = cf.ChangeList(name=name, add=targets)
    return ok_value((yield from _ask(proto, "add_to_list()", request)))


def remove_from_list(proto: ClientProtocol[W], name: str, *targets: str) -> Flow[W, int]:
    """``remove_from_list()``: how many targets the list has now."""
    request = cf.ChangeList(name=name, remove=targets)
    return ok_value((yield from _ask(proto, "remove_from_list()", request)))


def delete_list(proto: ClientProtocol[W], name: str) -> Flow[W, None]:
    """``delete_list()``."""
    yield from _ask(proto, "delete_list()", cf.DeleteList(name=name))


def lists(proto: ClientProtocol[W]) -> Flow[W, list[DistributionList]]:
    """``lists()``: every list, by name."""
    return _lists((yield from _ask(proto, "lists()", cf.GetLists())))


def get_list(proto: ClientProtocol[W], name: str) -> Flow[W, DistributionList]:
    """``get_list()``."""
    [found] = _lists((yield from _ask(proto, "get_list()", cf.GetLists(name=name))))
    return found
