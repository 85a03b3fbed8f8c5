"""A Windows string is any run of 16-bit units ([MS-MQMQ] §2.2.19.3), so a peer may
send a label or a queue name with an unpaired surrogate. One such message must not
close the session: every message behind it would be held back for good (the peer
sends it again on every new session)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from bad_peer_kit import RAW_QUEUE, RawPeer, user_message
from helpers import PEER_FAST, DaemonProcess, log_events

import wire
from qmgr.client import MessageClass, connect


def with_label(data: bytes, label: str) -> bytes:
    packet = wire.parse_packet(data)
    assert isinstance(packet, wire.UserMessage)
    properties = dataclasses.replace(packet.properties, label=label)
    return wire.build_packet(dataclasses.replace(packet, properties=properties))


def test_a_label_or_queue_name_that_is_not_unicode_text_holds_back_nothing(
    daemon_factory: Callable[..., DaemonProcess],
) -> None:
    qm = daemon_factory(name="qm-b", extra_args=PEER_FAST)
    with connect(qm.address) as client:
        client.create_queue(RAW_QUEUE, transactional=True)
    with RawPeer(qm) as raw:
        raw.handshake()
        raw.send(with_label(raw.user_message(b"odd label", number=1), "ab\ud800"))
        # Another queue, another stream: its own numbers.
        raw.send(user_message(qm, "q\udc80", b"odd queue", source_qm=raw.qm, number=1))
        raw.send(raw.user_message(b"after", number=2))
        deadline = time.monotonic() + 15
        with connect(qm.address) as client:
            while time.monotonic() < deadline:
                kept = [(m.label, m.body) for m in client.peek_range(RAW_QUEUE)]
                refused = client.peek_range("system$;deadxact")
                if len(kept) == 2 and refused:
                    break
                time.sleep(0.05)
    assert kept == [("ab\ufffd", b"odd label"), ("raw", b"after")]
    [dead] = refused
    assert (dead.body, dead.message_class) == (b"odd queue", MessageClass.NACK_BAD_DST_Q)
    assert "q\ufffd" in dead.destination
    assert not log_events(qm, "peer_connection_crashed")
    assert not log_events(qm, "peer_protocol_error")
