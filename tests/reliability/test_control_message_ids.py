"""The message ids of the OrderAcks and FinalAcks a queue manager sends are its own
message-id ordinals, which no restart gives twice ([MS-MQQB] §3.1.1.3): a Windows
peer drops a UserMessage packet whose id it has seen as a duplicate, and OrderAcks
and FinalAcks are UserMessage packets."""

from __future__ import annotations

import time
from collections.abc import Callable

from bad_peer_kit import RAW_QUEUE, RawPeer
from helpers import PEER_FAST, DaemonProcess

import wire
from qmgr.client import connect


def order_ack_id(daemon: DaemonProcess) -> int:
    """Send one transactional message from a new raw peer; the id of its OrderAck."""
    with RawPeer(daemon) as raw:
        raw.handshake()
        raw.send(raw.user_message(b"one"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            packet = raw.read_packet(timeout=max(0.1, deadline - time.monotonic()))
            assert packet is not None, "the daemon closed the session"
            if wire.classify_packet(packet) is wire.PacketKind.ORDER_ACK:
                assert isinstance(packet, wire.UserMessage)
                return wire.OrderAck.from_message(packet).message_id
    raise AssertionError("no OrderAck within 10 s")


def test_order_acks_never_repeat_a_message_id_across_restarts(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    qm = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with connect(qm.address) as client:
        client.create_queue(RAW_QUEUE, transactional=True)
        client.send(RAW_QUEUE, b"a user message", transactional=True)
        [sent] = client.peek_range(RAW_QUEUE)
    ids = [order_ack_id(qm)]
    qm.kill()  # a crash: nothing of the run's counters is written at its end
    qm.start()
    ids.append(order_ack_id(qm))
    qm.restart()
    ids.append(order_ack_id(qm))
    user_ordinal = int(sent.id.rpartition("\\")[2])
    assert len({*ids, user_ordinal}) == 4, (ids, user_ordinal)
