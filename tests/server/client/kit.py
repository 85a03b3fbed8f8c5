"""Daemon parts in-process, and a raw frame client over memory streams.

:func:`open_services` builds what a session needs (a real store in a
temporary directory, the core, a committer with its writer on the event
loop, queue signals, budgets) and runs the committer. :func:`open_session`
connects a :class:`ClientSession` to a :class:`FrameClient` through
``trio.testing.memory_stream_pair``: no sockets, and with
``MockClock(autojump_threshold=0)`` no real time passes while a test waits
for a timeout. The fixtures over them (``services``, ``conn``) are in
``conftest``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio
import trio.testing
from server.committer_kit import running_committer

from qmgr.core.budget import MemoryBudget
from qmgr.core.engine import Limits, QueueManagerCore
from qmgr.core.tokens import TokenBook, hash_token
from qmgr.server.client.authorization import Authorization
from qmgr.server.client.services import ConnectionLimits, Services
from qmgr.server.client.session import ClientSession
from qmgr.server.signals import QueueSignals, Wakeup
from storage import Store
from wire import MessageProperties
from wire import client as cf

_conn_ids = itertools.count(1)


@asynccontextmanager
async def open_services(
    path: Path,
    *,
    limits: ConnectionLimits | None = None,
    core_limits: Limits | None = None,
    frame_budget: int = 64 << 20,
    reply_budget: int = 256 << 20,
    thread: bool = False,
) -> AsyncIterator[Services]:
    """Services over a fresh store, with the committer running."""
    store = Store(path, initial_map_size=1 << 22, durable=False)
    core = QueueManagerCore(store, limits=core_limits)
    store.commit(core.queues.system_queue_units(time.time()), now=time.time())
    reservation = core.ordinal_reservation()
    assert reservation is not None
    core.ordinals_reserved(reservation, store.commit([reservation], now=time.time())[0])
    try:
        async with running_committer(store, thread=thread) as committer:
            yield Services(
                core=core,
                committer=committer,
                signals=QueueSignals(),
                frames=MemoryBudget(frame_budget, what="frames being received"),
                replies=MemoryBudget(reply_budget, what="large replies being written"),
                limits=limits or ConnectionLimits(),
                qm_name="test",
                qm_guid=store.qm_guid,
                server_version="test",
                status=lambda: _unused("status"),
                queue_infos=lambda: (),
                maintenance=Wakeup(),
            )
    finally:
        store.close()


def _unused(what: str) -> Any:
    msg = f"{what} is not part of these tests"
    raise AssertionError(msg)


class FrameClient:
    """The client end of a session: encodes requests, decodes replies."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        # As the SDK reads: whole lists of up to MAX_LIST_FRAME_BODY.
        self.decoder = cf.ClientFrameDecoder(max_list_body=cf.MAX_LIST_FRAME_BODY)
        self._ids = itertools.count(1)

    async def send(self, *values: cf.ClientRequest) -> list[int]:
        """Write requests in one write; returns their request ids."""
        ids = [next(self._ids) for _ in values]
        data = b"".join(cf.encode_frame(i, v) for i, v in zip(ids, values, strict=True))
        await self.stream.send_all(data)
        return ids

    async def send_raw(self, data: bytes) -> None:
        """Write bytes as they are."""
        await self.stream.send_all(data)

    async def reply(self) -> cf.Frame | None:
        """The next frame from the daemon, or None once it closed the stream."""
        while True:
            frame = self.decoder.next_frame()
            if frame is not None:
                return frame
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.decoder.receive_data(data)

    async def error(self) -> cf.ErrorReply:
        """The next frame, which must be an error reply."""
        frame = await self.reply()
        assert frame is not None, "the daemon closed the connection"
        assert isinstance(frame.value, cf.ErrorReply), frame
        return frame.value

    async def hello(self, max_version: int = cf.PROTOCOL_VERSION) -> cf.HelloOk:
        """Say Hello, speaking versions 2 to ``max_version``; the HelloOk."""
        await self.send(cf.Hello(client_name="test", min_version=2, max_version=max_version))
        frame = await self.reply()
        assert frame is not None
        assert isinstance(frame.value, cf.HelloOk), frame
        assert frame.value.version == max_version
        return frame.value

    async def call(self, value: cf.ClientRequest) -> cf.FrameValue:
        """One request, and the reply with its id (other replies are skipped)."""
        [request_id] = await self.send(value)
        while True:
            frame = await self.reply()
            assert frame is not None, "the daemon closed the connection"
            if frame.request_id == request_id:
                return frame.value


@dataclass
class Connection:
    """A session, its client, and the services it uses."""

    session: ClientSession
    client: FrameClient
    services: Services


@asynccontextmanager
async def open_session(
    services: Services,
    *,
    greet: bool = True,
    principal: str | None = None,
    on_authenticated: Callable[[], None] | None = None,
    lockstep: bool = False,
) -> AsyncIterator[Connection]:
    """A session served in the background, with its client (greeted unless told not
    to); ``lockstep``: the daemon's writes wait for the client to read them, as over
    a socket whose buffers are full (else they are buffered without bound)."""
    pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
    client_end, server_end = pair()
    session = ClientSession(
        services,
        server_end,
        conn_id=next(_conn_ids),
        peer="memory",
        principal=principal,
        on_authenticated=on_authenticated,
    )
    client = FrameClient(client_end)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run)
        if greet:
            await client.hello()
        yield Connection(session, client, services)
        await client_end.aclose()


@asynccontextmanager
async def open_connection(
    path: Path, *, greet: bool = True, frame_budget: int = 64 << 20, **changes: Any
) -> AsyncIterator[Connection]:
    """A session on services of their own in ``path``, whose connection limits
    have ``changes`` (``idle_timeout=60``, ...)."""
    async with (
        open_services(path, limits=limits(**changes), frame_budget=frame_budget) as services,
        open_session(services, greet=greet) as connection,
    ):
        yield connection


async def make_queue(client: FrameClient, name: str, **options: Any) -> None:
    """Create a queue, which must succeed."""
    reply = await client.call(cf.CreateQueue(name=name, **options))
    assert isinstance(reply, cf.Ok), reply


async def permissions(client: FrameClient, queue: str) -> list[tuple[str, int]]:
    """The queue's list of permissions as GetPermissions answers it: (entry, rights)."""
    acl = await client.call(cf.GetPermissions(queue=queue))
    assert isinstance(acl, cf.Permissions), acl
    return [(entry.name, entry.rights) for entry in acl.entries]


def enable_permissions(
    services: Services, *, enabled: bool = True, default_acl: dict[str, list[str]] | None = None
) -> Authorization:
    """Give ``services`` queue permissions: ``root`` administers, ``carol`` is in
    ``group:ops``, and a new queue's list is ``default_acl`` (empty) plus its creator."""
    authorization = Authorization(
        services.core,
        enabled=enabled,
        admins=frozenset({"root"}),
        groups={"ops": frozenset({"carol"})},
        default_acl=default_acl or {},
        tokens=TokenBook({"alice": hash_token("alice-token")}),
    )
    services.authorization = authorization
    return authorization


def error(value: cf.FrameValue | None, code: cf.ErrorCode) -> cf.ErrorReply:
    """``value``, which must be an error reply with ``code``."""
    assert isinstance(value, cf.ErrorReply), value
    assert value.code == code, value
    return value


def message(destination: str, body: bytes = b"", **fields: Any) -> MessageProperties:
    """A message to send."""
    return MessageProperties(destination=destination, body=body, **fields)


def limits(**changes: Any) -> ConnectionLimits:
    """Connection limits with some changed."""
    return replace(ConnectionLimits(), **changes)
