"""A queue's quota changed in place on a real daemon: a full queue raised takes
sends again at once, one lowered below what it holds refuses them until enough
is received, the change is logged, and a connection of an earlier protocol
version may not change it."""

from __future__ import annotations

import socket

import pytest
import trio
from helpers import DaemonProcess, log_events

from qmgr.client import NotSupported, QuotaExceeded, connect, open_client
from wire import client as cf


def quota_of(daemon: DaemonProcess, queue: str) -> int | None:
    with connect(daemon.address) as qm:
        [info] = [q for q in qm.list_queues() if q.name == queue]
        return info.quota


def test_a_full_queue_takes_sends_again_once_its_quota_is_raised(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    with connect(shared_daemon.address) as qm:
        qm.create_queue(queue_name, transactional=True, quota=10, retry_count=2)
        qm.send(queue_name, b"0123456789", transactional=True)
        with pytest.raises(QuotaExceeded):
            qm.send(queue_name, b"a", transactional=True)
        with qm.begin() as tx:  # a transaction that would pass it fails whole
            tx.send(queue_name, b"a")
            with pytest.raises(QuotaExceeded):
                tx.commit()
        qm.set_queue_properties(queue_name, quota=20)
        assert quota_of(shared_daemon, queue_name) == 20
        with qm.begin() as tx:
            tx.send(queue_name, b"abcdefghij")
            tx.commit()
        # Lowered below the 20 bytes it holds: nothing more, not even an empty body.
        qm.set_queue_properties(queue_name, quota=5)
        with pytest.raises(QuotaExceeded):
            qm.send(queue_name, b"", transactional=True)
        assert qm.receive(queue_name) is not None
        with pytest.raises(QuotaExceeded):
            qm.send(queue_name, b"", transactional=True)  # 10 bytes left: still over
        assert qm.receive(queue_name) is not None
        qm.send(queue_name, b"12345", transactional=True)
        # Removed, with a poison setting in the same request; the other settings stay.
        qm.set_queue_properties(queue_name, no_quota=True, retry_cycles=1)
        qm.send(queue_name, b"x" * 100_000, transactional=True)
        [info] = [q for q in qm.list_queues() if q.name == queue_name]
        assert (info.quota, info.retry_count, info.retry_cycles) == (None, 2, 1)
    changes = [
        (event["quota"], event["retry_count"])
        for event in log_events(shared_daemon, "queue_properties_set")
        if event["queue"] == queue_name.lower()
    ]
    assert changes == [(20, 2), (5, 2), (None, 2)]


def test_the_trio_client_changes_a_quota(shared_daemon: DaemonProcess, queue_name: str) -> None:
    async def main() -> None:
        async with open_client(shared_daemon.address) as qm:
            await qm.create_queue(queue_name, quota=1)
            await qm.send(queue_name, b"a")
            with pytest.raises(QuotaExceeded):
                await qm.send(queue_name, b"b")
            await qm.set_queue_properties(queue_name, quota=2)
            await qm.send(queue_name, b"b")

    trio.run(main)
    assert quota_of(shared_daemon, queue_name) == 2


def test_an_earlier_protocol_version_may_not_change_a_quota(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    with connect(shared_daemon.address) as qm:
        qm.create_queue(queue_name, quota=10)
    host, port = shared_daemon.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as old:
        hello = cf.Hello(client_name="old", min_version=2, max_version=cf.QUOTA_VERSION - 1)
        old.sendall(cf.encode_frame(1, hello))
        decoder = cf.ClientFrameDecoder()
        frames = read_frames(old, decoder)
        assert isinstance(frames[0].value, cf.HelloOk)
        assert frames[0].value.version == cf.QUOTA_VERSION - 1
        # Its poison settings still change; a quota closes the connection.
        old.sendall(cf.encode_frame(2, cf.SetQueueProperties(name=queue_name, retry_count=1)))
        [ok] = read_frames(old, decoder)
        assert isinstance(ok.value, cf.Ok)
        old.sendall(cf.encode_frame(3, cf.SetQueueProperties(name=queue_name, quota=99)))
        [refused] = read_frames(old, decoder)
        assert refused.request_id == 3
        assert refused.value == cf.ErrorReply(
            code=cf.ErrorCode.BAD_REQUEST,
            message="SetQueueProperties.quota needs protocol version 10; "
            "this connection agreed on 9",
        )
        assert old.recv(1) == b""  # closed
    assert quota_of(shared_daemon, queue_name) == 10


def test_an_sdk_that_agreed_on_an_earlier_version_says_not_supported(
    shared_daemon: DaemonProcess, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A daemon of the release before answers Hello with version 9: this one
    # does too when the client offers no more.
    hello = cf.Hello
    monkeypatch.setattr(
        cf, "Hello", lambda **fields: hello(**fields, max_version=cf.QUOTA_VERSION - 1)
    )
    with connect(shared_daemon.address) as qm:
        qm.create_queue(queue_name, quota=10)
        with pytest.raises(NotSupported, match="protocol version 10"):
            qm.set_queue_properties(queue_name, quota=20)
        qm.set_queue_properties(queue_name, retry_count=1)  # poison settings alone still go
    assert quota_of(shared_daemon, queue_name) == 10


def read_frames(sock: socket.socket, decoder: cf.ClientFrameDecoder) -> list[cf.Frame]:
    """The frames of the next read(s): at least one."""
    found: list[cf.Frame] = []
    while not found:
        data = sock.recv(65536)
        assert data, "the daemon closed the connection"
        decoder.receive_data(data)
        while (frame := decoder.next_frame()) is not None:
            found.append(frame)
    return found
