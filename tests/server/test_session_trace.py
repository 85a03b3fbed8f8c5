"""TraceMessage in a client session over memory streams: refused to an older
protocol, a clear error for what is not a message id, and a scan in steps that
finds the message and its acknowledgments."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from kit import open_services, open_session

import storage
from qmgr.core.outcomes import correlation_of
from qmgr.server import trace_requests
from wire import MessageProperties
from wire import client as cf


async def test_a_protocol_3_connection_is_refused_trace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services, greet=False) as a:
        await a.client.send(cf.Hello(client_name="old", min_version=2, max_version=3))
        hello = await a.client.reply()
        assert hello is not None
        assert isinstance(hello.value, cf.HelloOk)
        assert hello.value.version == 3
        await a.client.send(cf.TraceMessage(message_id="{00000000-0000-0000-0000-000000000001}\\1"))
        frame = await a.client.reply()
        assert frame is not None
        assert isinstance(frame.value, cf.ErrorReply)
        assert "protocol version 4" in frame.value.message


async def test_a_bad_message_id_is_an_invalid_argument(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
        await a.client.send(cf.TraceMessage(message_id="not an id"))
        frame = await a.client.reply()
        assert frame is not None
        assert isinstance(frame.value, cf.ErrorReply)
        assert frame.value.code == cf.ErrorCode.INVALID_ARGUMENT
        assert "is not a message id" in frame.value.message


async def test_the_scan_goes_in_steps_and_finds_the_message_and_its_acknowledgments(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_services(tmp_path / "s") as services, open_session(services) as a:
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
        trace_requests.SCAN_VISITS = 7  # type: ignore[misc]
        try:
            await a.client.send(cf.TraceMessage(message_id=target.message_id))
            frame = await a.client.reply()
        finally:
            trace_requests.SCAN_VISITS = 20_000  # type: ignore[misc]
        assert frame is not None
        report = frame.value
        assert isinstance(report, cf.TraceReport)
        kinds = sorted((f.kind, f.place, f.message_class) for f in report.findings)
        assert kinds == [("acknowledgment", "acks", 0x4000), ("queue", "q", 0)]


async def test_a_trace_shows_a_principal_only_the_queues_it_may_peek(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    from qmgr.server.authorization import Authorization

    async with open_services(tmp_path / "s") as services:
        services.authorization = Authorization(
            services.core, enabled=True, admins=frozenset({"root"}), groups={}, default_acl={}
        )
        async with open_session(services, principal="root") as root:
            for name in ("open", "closed"):
                assert isinstance(await root.client.call(cf.CreateQueue(name=name)), cf.Ok)
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
