"""Every ``QueueManager`` call that is one request (or a few), as a table both clients'
tests run against :class:`fake_daemon.FakeDaemon`: the arguments, the reply the fake
gives, the request the client must send and the result it must return. The blocking
and the trio client must agree on every row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from client_kit import status_info
from fake_daemon import FakeDaemon
from wire_samples import ORDERS, OUTGOING_INFO, QUEUE_INFO, QUEUED

from qmgr.client import (
    DistributionList,
    Message,
    MoveResult,
    OutgoingInfo,
    QueueInfo,
    RangeInfo,
    Resolution,
    Status,
    TraceReport,
    connect,
    open_client,
)
from wire import MessageProperties
from wire import client as cf


@dataclass(frozen=True)
class Case:
    """One call: ``method(*args, **kwargs)`` sends ``sent`` and returns ``result``.

    ``reply`` is canned for the request's type (None: the fake's own script answers).
    """

    method: str
    args: tuple[Any, ...]
    sent: cf.FrameValue
    result: Any
    reply: cf.ServerReply | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.method}-{type(self.sent).__name__}"

    def arrange(self, daemon: FakeDaemon) -> None:
        """Give ``daemon`` this case's reply."""
        if self.reply is not None:
            daemon.canned[type(self.sent)] = self.reply

    def check(self, daemon: FakeDaemon, result: Any) -> None:
        """The client sent this case's request and returned its result."""
        assert daemon.requests_of(type(self.sent))[-1] == self.sent
        assert result == self.result


#: What a block that commits a send and a receive, then one that aborts a send, sends.
TWO_BLOCKS = [cf.Begin, cf.Send, cf.Receive, cf.Commit, cf.Begin, cf.Send, cf.Abort]

#: An xid as the Spark connector makes them.
XID = "spark:q1:7:0:0123456789ab"


def new_frames(daemon: FakeDaemon) -> list[cf.FrameValue]:
    """The requests of the kinds that need protocol version 3."""
    return [r for r in daemon.requests if type(r) in cf.TWO_PHASE_REQUESTS]


def call_blocking(daemon: FakeDaemon, case: Case) -> None:
    """Make ``case``'s call with the blocking client, and check it."""
    case.arrange(daemon)
    with connect(daemon.address) as qm:
        result = getattr(qm, case.method)(*case.args, **case.kwargs)
    case.check(daemon, result)


async def call_trio(daemon: FakeDaemon, case: Case) -> None:
    """Make ``case``'s call with the trio client, and check it."""
    case.arrange(daemon)
    async with open_client(daemon.address) as qm:
        result = await getattr(qm, case.method)(*case.args, **case.kwargs)
    case.check(daemon, result)


MESSAGES = cf.MessageList(messages=tuple(dataclasses.replace(QUEUED, lookup_id=n) for n in (4, 5)))
LISTED = cf.ListInfoList(lists=(cf.ListInfo(name="all", targets=("a", "b")),))
ACL = cf.Permissions(queue="q", entries=(cf.AclEntry(name="bob", rights=int(cf.Right.PEEK)),))


def _outgoing(state: str) -> cf.OutgoingList:
    return cf.OutgoingList(outgoing=(dataclasses.replace(OUTGOING_INFO, state=state),))


#: The calls of the messaging core (``_blocking``, ``_trio``).
CORE = [
    Case(
        "create_queue",
        ("q", True),
        cf.CreateQueue(name="q", transactional=True, retry_count=3),
        None,
        reply=cf.Ok(),
        kwargs={"retry_count": 3},
    ),
    Case("delete_queue", ("q",), cf.DeleteQueue(name="q"), 4, reply=cf.Ok(value=4)),
    Case("purge_queue", ("q",), cf.PurgeQueue(name="q"), 2, reply=cf.Ok(value=2)),
    Case(
        "list_queues",
        (),
        cf.ListQueues(),
        [QueueInfo.from_wire(QUEUE_INFO)],
        reply=cf.QueueList(queues=(QUEUE_INFO,)),
    ),
    Case("status", (), cf.GetStatus(), Status.from_wire(status_info()), reply=status_info()),
    Case(
        "send",
        ("orders", "b\u00e9"),
        cf.Send(
            tx_id=0,
            mode=2,
            message=MessageProperties(destination="orders", body="b\u00e9".encode(), label="l"),
        ),
        "m",
        kwargs={"transactional": True, "label": "l"},
    ),
    Case(
        "receive",
        ("q", 1.5),
        cf.Receive(queue="q", timeout_ms=1500, lookup_id=7),
        Message.from_wire(QUEUED),
        reply=cf.MessageReply(message=QUEUED),
        kwargs={"lookup_id": 7},
    ),
    Case(
        "peek",
        ("q", None, 3),
        cf.Receive(queue="q", timeout_ms=0xFFFFFFFF, peek=True, lookup_id=3),
        None,
    ),
    Case(
        "peek_range",
        ("q", 3, 2),
        cf.PeekRange(queue="q", after=3, max_count=2),
        [Message.from_wire(m) for m in MESSAGES.messages],
        reply=MESSAGES,
    ),
    Case("remove_through", ("orders", 4), cf.RemoveThrough(queue="orders", lookup_id=4), 2),
    Case(
        "measure_range",
        ("orders", 4, 2),
        cf.MeasureRange(queue="orders", after=4, max_count=2),
        RangeInfo(queue_id=7, count=2, last=9),
    ),
]

#: The management calls (``_blocking_admin``, ``_trio_admin``).
ADMIN = [
    Case(
        "commit_prepared",
        ("a",),
        cf.Resolve(commit=True, xids=("a",)),
        Resolution.COMMITTED,
        reply=cf.Resolutions(outcomes=(1,)),
    ),
    Case(
        "abort_prepared",
        ("a",),
        cf.Resolve(commit=False, xids=("a",)),
        Resolution.ALREADY_ABORTED,
        reply=cf.Resolutions(outcomes=(4,)),
    ),
    Case(
        "commit_prepared_all",
        (["a", "b"],),
        cf.Resolve(commit=True, xids=("a", "b")),
        [Resolution.COMMITTED, Resolution.ALREADY_COMMITTED],
        reply=cf.Resolutions(outcomes=(1, 2)),
    ),
    Case(
        "abort_prepared_all",
        (("a",),),
        cf.Resolve(commit=False, xids=("a",)),
        [Resolution.ABORTED],
        reply=cf.Resolutions(outcomes=(3,)),
    ),
    Case(
        "transactions",
        ("sp",),
        cf.ListTransactions(prefix="sp", resolved=True, max_count=5),
        [],
        kwargs={"resolved": True, "limit": 5},
    ),
    Case(
        "set_queue_properties",
        ("q",),
        cf.SetQueueProperties(name="q", poison=cf.PoisonHandling.ON, retry_delay=5.0),
        None,
        reply=cf.Ok(),
        kwargs={"retry_delay": 5, "poison_handling": True},
    ),
    Case(
        "set_queue_properties",
        ("q",),
        cf.SetQueueProperties(name="q", quota=10 * 1024**2),
        None,
        reply=cf.Ok(),
        kwargs={"quota": 10 * 1024**2},
    ),
    Case(
        "set_queue_properties",
        ("q",),
        cf.SetQueueProperties(name="q", poison=cf.PoisonHandling.OFF, no_quota=True),
        None,
        reply=cf.Ok(),
        kwargs={"poison_handling": False, "no_quota": True},
    ),
    Case(
        "move",
        ("q;poison", "q"),
        cf.MoveMessages(source="q;poison", target="q", all=True),
        MoveResult(3, 9),
        reply=cf.Moved(count=3, lookup_id=9),
        kwargs={"all": True},
    ),
    Case(
        "create_list",
        ("all", ["a"]),
        cf.CreateList(name="all", targets=("a",)),
        None,
        reply=cf.Ok(),
    ),
    Case(
        "add_to_list",
        ("all", "b", "c"),
        cf.ChangeList(name="all", add=("b", "c")),
        3,
        reply=cf.Ok(value=3),
    ),
    Case(
        "remove_from_list",
        ("all", "b"),
        cf.ChangeList(name="all", remove=("b",)),
        2,
        reply=cf.Ok(value=2),
    ),
    Case("delete_list", ("all",), cf.DeleteList(name="all"), None, reply=cf.Ok()),
    Case("lists", (), cf.GetLists(), [DistributionList("all", ("a", "b"))], reply=LISTED),
    Case(
        "get_list",
        ("all",),
        cf.GetLists(name="all"),
        DistributionList("all", ("a", "b")),
        reply=LISTED,
    ),
    Case(
        "outgoing",
        (),
        cf.ListOutgoing(),
        [OutgoingInfo.from_wire(o) for o in _outgoing("idle").outgoing],
        reply=_outgoing("idle"),
    ),
    Case(
        "pause_outgoing",
        (ORDERS,),
        cf.ControlOutgoing(action=1, destination=ORDERS),
        OutgoingInfo.from_wire(_outgoing("paused").outgoing[0]),
        reply=_outgoing("paused"),
    ),
    Case(
        "resume_outgoing",
        (ORDERS,),
        cf.ControlOutgoing(action=2, destination=ORDERS),
        OutgoingInfo.from_wire(_outgoing("connecting").outgoing[0]),
        reply=_outgoing("connecting"),
    ),
    Case("purge_outgoing", (ORDERS,), cf.ControlOutgoing(action=3, destination=ORDERS), 12),
    Case("permissions", ("q",), cf.GetPermissions(queue="q"), {"bob": ["peek"]}, reply=ACL),
    Case(
        "grant",
        ("q", "bob", "peek"),
        cf.ChangePermissions(queue="q", entry="bob", grant=int(cf.Right.PEEK)),
        {"bob": ["peek"]},
        reply=ACL,
    ),
    Case(
        "revoke",
        ("q", "bob"),
        cf.ChangePermissions(queue="q", entry="bob", revoke=int(cf.Right.FULL)),
        {"bob": ["peek"]},
        reply=ACL,
    ),
    Case(
        "trace",
        ("{g}\\1",),
        cf.TraceMessage(message_id="{g}\\1"),
        TraceReport("qm", ()),
        reply=cf.TraceReport(qm_name="qm", findings=()),
    ),
]
