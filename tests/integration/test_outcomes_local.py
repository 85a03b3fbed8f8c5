"""Delivery outcomes on one real daemon: reports written by the background
work (erase steps after a purge, the expirer) wake the receives waiting for them."""

from __future__ import annotations

import time

from helpers import DaemonProcess

from qmgr.client import Acknowledge, Journal, MessageClass, connect


def test_a_purge_report_wakes_a_waiting_receive(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    acks = f"{queue_name}-acks"
    with connect(shared_daemon.address) as qm:
        qm.create_queue(queue_name, transactional=True)
        qm.create_queue(acks)
        message_id = qm.send(
            queue_name, b"x", acknowledge=Acknowledge.NEG_RECEIVE, admin_queue=acks
        )
        qm.purge_queue(queue_name)
        started = time.monotonic()
        nack = qm.receive(acks, timeout=20)
        assert nack is not None
        assert time.monotonic() - started < 10
        assert (nack.message_class, nack.acknowledged_id) == (
            MessageClass.NACK_Q_PURGED,
            message_id,
        )


def test_expiry_reports_wake_a_waiting_receive(
    shared_daemon: DaemonProcess, queue_name: str
) -> None:
    acks = f"{queue_name}-acks"
    with connect(shared_daemon.address) as qm:
        qm.create_queue(queue_name)
        qm.create_queue(acks)
        message_id = qm.send(
            queue_name,
            b"late",
            acknowledge=Acknowledge.NACK_RECEIVE,
            admin_queue=acks,
            journal=Journal.DEADLETTER,
            time_to_be_received=1,
        )
        nack = qm.receive(acks, timeout=20)
        assert nack is not None
        assert nack.message_class == MessageClass.NACK_RECEIVE_TIMEOUT
        # The shared daemon's dead-letter queue holds other tests' messages too.
        [dead] = [m for m in qm.peek_range("system$;deadletter") if m.id == message_id]
        assert (dead.body, dead.message_class) == (b"late", MessageClass.NACK_RECEIVE_TIMEOUT)
        assert qm.receive(queue_name, timeout=0) is None
