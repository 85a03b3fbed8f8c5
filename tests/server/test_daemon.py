"""The daemon's composition (``qmgr.server.daemon``), in this process: the parts it
builds and how they are wired, start-up writes, serving real sockets until asked
to stop (in order, open transactions aborted), and what ``serve`` refuses before
it opens the store."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
from collections.abc import AsyncIterator
from pathlib import Path

import lmdb
import pytest
import structlog
import trio

from qmgr.client import ConnectionLost, QueueExists, ShuttingDown, open_client
from qmgr.config import Config, load_config
from qmgr.server import ConfigurationError, StartupError, http, serve
from qmgr.server.daemon import Daemon, Sockets
from qmgr.server.listeners import bind_tcp
from storage import QueueKind, Store
from storage.catalog import META_SCHEMA_VERSION, SCHEMA_VERSION
from storage.keys import DB_META, u32
from wire import client as cf


@pytest.fixture(autouse=True)
def no_gc_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon freezes what it made out of garbage collection; not in the tests' process."""
    monkeypatch.setattr(gc, "freeze", lambda: None)


#: The configuration's listeners: peers, clients, HTTP.
LISTENERS = ("listen", "client_listen", "http_listen")


def make_config(tmp_path: Path, *settings: str, **listeners: str) -> Config:
    """A configuration whose data is in ``tmp_path / "data"``, with ``settings``
    applied; each of :data:`LISTENERS` on a free port of 127.0.0.1 unless
    ``listeners`` gives its address."""
    addresses = dict.fromkeys(LISTENERS, "127.0.0.1:0") | listeners
    return load_config(settings=settings, data_dir=tmp_path / "data", **addresses)


@pytest.fixture
async def sockets(tmp_path: Path) -> AsyncIterator[Sockets]:
    config = make_config(tmp_path)
    bound: list[trio.socket.SocketType] = []
    peers = await bind_tcp(config.listen, "peers", bound)
    clients = await bind_tcp(config.client_listen, "clients", bound)
    yield Sockets(None, peers, clients)
    for sock in bound:
        sock.close()


def test_the_parts_are_wired_together(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(
        tmp_path,
        "auth.required=true",
        f'auth.tokens={{ "alice" = "sha256:{"0" * 64}" }}',
        "transactions.max_operations=7",
    )
    daemon = Daemon(config, store)
    authorization = daemon.services.authorization
    assert authorization is not None
    assert authorization.enabled
    assert daemon.peering.authorization is authorization
    assert daemon.services.peering is daemon.peering
    assert daemon.services.maintenance is daemon.maintenance.eraser._wakeup
    assert daemon.core.outcomes.refuses_acknowledgment == authorization.refuses_acknowledgment
    assert daemon.core.limits.max_transaction_operations == 7
    assert daemon.services.limits.hello_timeout == config.hello_timeout
    assert daemon.workers == (daemon.maintenance.run, daemon.poison.run, daemon.expirer.run)
    assert not daemon.stopping
    # The HTTP listener authorizes through the same place as client requests.
    assert daemon.http is not None
    assert daemon.http._tally is authorization.tally
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    service = trio.run(daemon.http._load)  # what its first connection loads
    assert frozen  # kept out of the garbage collections, as at start-up
    assert service.app.authorization is authorization  # type: ignore[attr-defined]
    assert daemon.connections() == {"client": 0, "peer": 0, "http": 0}
    assert Daemon(dataclasses.replace(make_config(tmp_path), http_listen=None), store).http is None


def test_a_missing_http_library_is_a_start_up_error(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "_LIBRARIES", ("hypercorn", "qmgr_no_such_library"))
    with pytest.raises(StartupError, match=r"cannot serve HTTP: .* qmgr_no_such_library"):
        Daemon(make_config(tmp_path), store)


async def test_the_http_listener_is_served_with_the_others(
    tmp_path: Path, store: Store, sockets: Sockets
) -> None:
    config = make_config(tmp_path)
    daemon = Daemon(config, store)
    daemon.start_up()
    bound: list[trio.socket.SocketType] = []
    assert config.http_listen is not None
    http = await bind_tcp(config.http_listen, "HTTP", bound)
    served = Sockets(sockets.local, sockets.peers, sockets.clients, http)
    run = functools.partial(daemon.run, served, install_signal_handlers=False)
    number = http[0].getsockname()[1]
    with structlog.testing.capture_logs() as logs, trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(run)
            async with open_client(f"{host}:{port}") as qm:
                await qm.create_queue("q")
                await qm.send("q", b"counted")
            async with await trio.open_tcp_stream("127.0.0.1", number) as stream:
                request = b"GET /metrics HTTP/1.1\r\nhost: qm\r\nconnection: close\r\n\r\n"
                await stream.send_all(request)
                text = b""
                while chunk := await stream.receive_some(65536):
                    text += chunk
            daemon.stop()
    for sock in bound:
        sock.close()
    assert b'qmgr_queue_messages_added_total{queue="q"} 1\n' in text
    [started] = [log for log in logs if log["event"] == "queue_manager_started"]
    assert started["http_listen"] == f"127.0.0.1:{number}"


def test_start_up_writes_the_system_queues_once(tmp_path: Path, store: Store) -> None:
    daemon = Daemon(make_config(tmp_path), store)
    with structlog.testing.capture_logs() as logs:
        daemon.start_up()
    created = [log["queue"] for log in logs if log["event"] == "system_queue_created"]
    assert created
    status = daemon.status()
    assert status.connections == 0
    assert {queue.name for queue in status.queues} >= set(created)
    assert all(queue.kind != int(QueueKind.OUTGOING) for queue in daemon.queue_infos())
    with structlog.testing.capture_logs() as logs:
        Daemon(make_config(tmp_path), store).start_up()
    assert [log for log in logs if log["event"] == "system_queue_created"] == []


async def test_it_serves_until_stopped_and_aborts_what_is_open(
    tmp_path: Path, store: Store, sockets: Sockets
) -> None:
    daemon = Daemon(make_config(tmp_path), store)
    daemon.start_up()
    run = functools.partial(daemon.run, sockets, install_signal_handlers=False)
    with structlog.testing.capture_logs() as logs, trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(run)
            async with open_client(f"{host}:{port}") as qm:
                await qm.create_queue("q", transactional=True)
                tx = await qm.begin()
                await tx.send("q", b"never committed")
                status = await qm.status()
                assert (status.connections, status.open_transactions) == (1, 1)
                daemon.stop()
                # The daemon ends the session: the next request is refused or finds
                # the connection closed.
                with pytest.raises((ShuttingDown, ConnectionLost)):
                    await qm.status()
    stopped = [log for log in logs if log["event"] == "queue_manager_stopped"]
    assert [log["open_transactions_aborted"] for log in stopped] == [1]
    assert daemon.stopping
    queue = store.get_queue("q")
    assert queue is not None
    assert queue.depth == 0


async def test_an_orderly_stop_gives_back_the_message_ids_it_reserved_and_never_used(
    tmp_path: Path, store: Store
) -> None:
    """Each start reserves a block of message-id ordinals; a stop that gave none
    back would use up the 32-bit ordinals a block per restart."""
    ordinals = []
    for _ in range(3):
        config = make_config(tmp_path)
        daemon = Daemon(config, store)
        daemon.start_up()
        bound: list[trio.socket.SocketType] = []
        sockets = Sockets(
            None,
            await bind_tcp(config.listen, "peers", bound),
            await bind_tcp(config.client_listen, "clients", bound),
        )
        run = functools.partial(daemon.run, sockets, install_signal_handlers=False)
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                host, port = await nursery.start(run)
                async with open_client(f"{host}:{port}") as qm:
                    with contextlib.suppress(QueueExists):
                        await qm.create_queue("q")
                    message_id = await qm.send("q", b"x")
                daemon.stop()
        for sock in bound:
            sock.close()
        ordinals.append(int(message_id.rpartition("\\")[2]))
        assert store.ordinal_limit == ordinals[-1] + 1  # the rest went back
    assert ordinals == [ordinals[0], ordinals[0] + 1, ordinals[0] + 2]


async def test_serve_keeps_what_was_committed_across_a_restart(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    for start in range(2):
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                host, port = await nursery.start(
                    functools.partial(serve, config, install_signal_handlers=False)
                )
                async with open_client(f"{host}:{port}") as qm:
                    if start == 0:
                        await qm.create_queue("q")
                        await qm.send("q", b"kept")
                    else:
                        message = await qm.receive("q")
                        assert message is not None
                        assert bytes(message.body) == b"kept"
                nursery.cancel_scope.cancel()


async def test_serve_refuses_an_exposed_listener_before_opening_the_store(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, listen="0.0.0.0:0")
    with pytest.raises(ConfigurationError) as raised:
        await serve(config, install_signal_handlers=False)
    assert raised.value.status == 2
    assert not (tmp_path / "data").exists()


async def test_serve_says_when_the_store_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("not a directory")
    with pytest.raises(StartupError, match="cannot open the store"):
        await serve(make_config(tmp_path), install_signal_handlers=False)


async def test_a_store_of_another_schema_ends_the_start_with_status_3(tmp_path: Path) -> None:
    # No restart can help: the service unit does not restart after status 3.
    Store(tmp_path / "data").close()
    with lmdb.open(str(tmp_path / "data"), max_dbs=16) as env:
        meta = env.open_db(DB_META)
        with env.begin(write=True) as txn:
            txn.put(META_SCHEMA_VERSION, u32(SCHEMA_VERSION + 1), db=meta)
    with pytest.raises(StartupError, match="cannot use the store") as raised:
        await serve(make_config(tmp_path), install_signal_handlers=False)
    assert raised.value.status == 3


async def test_a_listing_shows_each_change_and_forgets_deleted_queues(
    tmp_path: Path, store: Store, sockets: Sockets
) -> None:
    """The queue values a listing keeps between calls follow every change: a
    message in, a message held by a transaction, a queue deleted."""
    daemon = Daemon(make_config(tmp_path), store)
    daemon.start_up()
    run = functools.partial(daemon.run, sockets, install_signal_handlers=False)

    def listed(name: str) -> cf.QueueInfo | None:
        return next((q for q in daemon.queue_infos() if q.name == name), None)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(run)
            async with open_client(f"{host}:{port}") as qm:
                await qm.create_queue("kept", transactional=True)
                first = listed("kept")
                assert first is not None
                assert first.depth == 0
                assert listed("kept") is first  # unchanged: the same value
                async with qm.begin() as tx:
                    await tx.send("kept", b"one")
                after = listed("kept")
                assert after is not None
                assert after.depth == 1
                tx = await qm.begin()
                assert await tx.receive("kept") is not None
                held = listed("kept")
                assert held is not None
                assert held.locked == 1
                await tx.abort()
                await qm.delete_queue("kept")
                assert listed("kept") is None
                ids = {q.queue_id for q in store.queue_records()}
                assert set(daemon._queue_infos) <= ids
            daemon.stop()


async def test_the_start_up_log_writes_ipv6_listeners_in_brackets(
    tmp_path: Path, store: Store
) -> None:
    config = make_config(tmp_path, **dict.fromkeys(LISTENERS, "[::1]:0"))
    daemon = Daemon(config, store)
    daemon.start_up()
    bound: list[trio.socket.SocketType] = []
    assert config.http_listen is not None
    served = Sockets(
        None,
        await bind_tcp(config.listen, "peers", bound),
        await bind_tcp(config.client_listen, "clients", bound),
        await bind_tcp(config.http_listen, "HTTP", bound),
    )
    ports = [sockets[0].getsockname()[1] for sockets in (served.peers, served.clients, served.http)]
    run = functools.partial(daemon.run, served, install_signal_handlers=False)
    with structlog.testing.capture_logs() as logs, trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(run)
            daemon.stop()
    for sock in bound:
        sock.close()
    [started] = [log for log in logs if log["event"] == "queue_manager_started"]
    shown = [started[key] for key in ("peer_listen", "client_listen", "http_listen")]
    assert shown == [f"[::1]:{port}" for port in ports]
