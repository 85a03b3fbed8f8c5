"""TraceMessage over a session: a clear error for what is not a message id, a scan in
steps that finds the message and its acknowledgments, and what a principal may see."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from kit import Connection, error, make_queue, open_session

import storage
from qmgr.core.outcomes import correlation_of
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.handlers import trace
from qmgr.server.client.services import Services
from wire import MessageProperties
from wire import client as cf


async def test_a_bad_message_id_is_an_invalid_argument(
    conn: Connection, autojump_clock: trio.testing.MockClock
) -> None:
    refused = await conn.client.call(cf.TraceMessage(message_id="not an id"))
    assert "is not a message id" in error(refused, cf.ErrorCode.INVALID_ARGUMENT).message


async def test_the_scan_goes_in_steps_and_finds_the_message_and_its_acknowledgments(
    conn: Connection,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    core = services.core
    store = core.store
    units = [core.queues.create(name, wall=1.0) for name in ("q", "acks")]
    for outcome in store.commit(units, now=1.0):
        core.queues.created(outcome)
    guid = store.qm_guid
    messages = [
        MessageProperties(body=b"%d" % i, source_qm=guid, ordinal=i, sent_time=1.0)
        for i in range(1, 120)
    ]
    target = messages[77]
    ack = MessageProperties(
        correlation_id=correlation_of(target), message_class=0x4000, source_qm=guid, ordinal=500
    )
    q, acks = core.queue("q").queue_id, core.queue("acks").queue_id
    ops: list[storage.Operation] = [
        storage.AppendMessage(q, m.raw, 3, m.body_size) for m in messages
    ]
    ops.append(storage.AppendMessage(acks, ack.raw, 3, 0))
    store.commit([storage.Unit(tuple(ops))], now=1.0)
    monkeypatch.setattr(trace, "SCAN_VISITS", 7)
    report = await conn.client.call(cf.TraceMessage(message_id=target.message_id))
    assert isinstance(report, cf.TraceReport)
    kinds = sorted((f.kind, f.place, f.message_class) for f in report.findings)
    assert kinds == [("acknowledgment", "acks", 0x4000), ("queue", "q", 0)]


async def test_a_trace_shows_a_principal_only_the_queues_it_may_peek(
    services: Services, authorization: Authorization, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_session(services, principal="root") as root:
        for name in ("open", "closed"):
            await make_queue(root.client, name)
        grant = cf.ChangePermissions(queue="open", entry="bob", grant=0x02)  # peek
        assert isinstance(await root.client.call(grant), cf.Permissions)
        sent = await root.client.call(
            cf.Send(message=MessageProperties(destination="open,closed", body=b"x"))
        )
        assert isinstance(sent, cf.Sent)
        everything = await root.client.call(cf.TraceMessage(message_id=sent.message_id))
        assert isinstance(everything, cf.TraceReport)
        assert sorted(f.place for f in everything.findings) == ["closed", "open"]
    async with open_session(services, principal="bob") as bob:
        seen = await bob.client.call(cf.TraceMessage(message_id=sent.message_id))
        assert isinstance(seen, cf.TraceReport)
        assert [f.place for f in seen.findings] == ["open"]
