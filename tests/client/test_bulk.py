"""send_bodies: the frames ``tx.send`` would pack, packed from one template."""

from __future__ import annotations

import pytest
from fake_daemon import FakeDaemon

from qmgr.client import MessageTooLarge, QueueNotFound, TransactionNotFound, connect
from qmgr.client._bulk import send_bodies
from wire import MessageProperties
from wire import client as cf


def test_each_body_is_the_send_tx_send_would_make(fake_daemon: FakeDaemon) -> None:
    bodies = [b"", b"one", bytearray(b"two"), b"x" * 20_000, b"last"]
    with connect(fake_daemon.address) as qm, qm.begin() as tx:
        assert send_bodies(tx, "orders", bodies) == len(bodies)
    sends = fake_daemon.requests_of(cf.Send)
    assert sends == [
        cf.Send(tx_id=tx.id, mode=0, message=MessageProperties(destination="orders", body=bytes(b)))
        for b in bodies
    ]
    assert len(fake_daemon.requests_of(cf.Commit)) == 1


def test_errors_are_those_of_send(fake_daemon: FakeDaemon) -> None:
    with connect(fake_daemon.address) as qm:
        tx = qm.begin()
        with pytest.raises(MessageTooLarge):
            send_bodies(tx, "orders", [b"ok", b"x" * (cf.MAX_MESSAGE_BODY + 1)])
        send_bodies(tx, "missing", [b"fails at the daemon"])
        with pytest.raises(QueueNotFound, match="aborted because a send in it failed"):
            tx.commit()
        with pytest.raises(TransactionNotFound, match="has already ended"):
            send_bodies(tx, "orders", [b"late"])
    assert [s.message.body for s in fake_daemon.requests_of(cf.Send)] == [
        b"ok",
        b"fails at the daemon",
    ]
