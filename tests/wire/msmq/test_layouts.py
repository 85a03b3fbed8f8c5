"""The construct layouts are the specification the codec follows.

Fixed layouts are compiled to ``struct`` formats for the codec; the full
layouts (variable parts included) are not used at run time, so these tests
check that construct, interpreting them, reads exactly what the codec writes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

import wire
from wire.msmq import layouts
from wire.msmq.constants import BASE_CARRIED_MASK, USER_CARRIED_MASK

from . import msmq_strategies as ms
from .msmq_samples import completed_user_message


def wide(text: str | None) -> bytes:
    return b"" if text is None else text.encode("utf-16-le", "surrogatepass") + b"\x00\x00"


def pad(padding: bytes, size: int) -> bytes:
    return padding or bytes(size)


def queue(value: object) -> object:
    if isinstance(value, wire.DirectQueue):
        name = wide(value.name)
        return {
            "count": len(name),
            "name": name,
            "padding": pad(value.padding, -(2 + len(name)) % 4),
        }
    if isinstance(value, wire.PrivateQueueId):
        return value.number
    if isinstance(value, wire.PublicQueue):
        return value.queue_id.bytes_le
    if isinstance(value, wire.PrivateQueue):
        return {"qm": value.qm.bytes_le, "number": value.number}
    return None


#: The SecurityHeader items in wire order ([MS-MQMQ] §2.2.20.6).
SECURITY_ITEMS = ("sender_id", "encryption_key", "signature", "sender_cert", "provider_info")


def expected_user_message(m: wire.UserMessage, size: int) -> dict[str, Any]:
    p = m.properties
    label = wide(p.label)
    t = m.transaction
    s = m.security
    items = [] if s is None else [getattr(s, name) for name in SECURITY_ITEMS]
    pads = [-len(item) % 4 for item in items]
    security_padding = pad(s.padding, sum(pads)) if s is not None else b""
    return {
        "base": {
            "version": 0x10,
            "reserved": m.base.reserved,
            "signature": b"LIOR",
            "packet_size": size,
            "time_to_reach_queue": m.base.time_to_reach_queue,
        },
        "user": {
            "source_qm": m.user.source_qm.bytes_le,
            "destination_qm": m.user.destination_qm.bytes_le,
            "time_to_be_received": m.user.time_to_be_received,
            "sent_time": m.user.sent_time,
            "message_id": m.user.message_id,
            "destination": queue(m.user.destination),
            "admin": queue(m.user.admin),
            "response": queue(m.user.response),
            "connector_type": m.user.connector_type and m.user.connector_type.bytes_le,
        },
        "transaction": t
        and {
            "sequence_id": {"ordinal": t.sequence_id.ordinal, "timestamp": t.sequence_id.timestamp},
            "sequence_number": t.sequence_number,
            "previous_sequence_number": t.previous_sequence_number,
            "connector_qm": t.connector_qm and t.connector_qm.bytes_le,
        },
        "security": s and {"flags": s.flags, **dict(zip(SECURITY_ITEMS, items, strict=True))},
        "security_padding": security_padding,
        "properties": {
            "flags": p.flags,
            "label_length": len(label) // 2,
            "message_class": p.message_class,
            "correlation_id": p.correlation_id,
            "body_type": p.body_type,
            "application_tag": p.application_tag,
            "message_size": len(p.body),
            "allocation_body_size": len(p.body)
            if p.allocation_body_size is None
            else p.allocation_body_size,
            "privacy_level": p.privacy_level,
            "hash_algorithm": p.hash_algorithm,
            "encryption_algorithm": p.encryption_algorithm,
            "extension_size": len(p.extension),
            "label": label,
            "extension": p.extension,
            "body": p.body,
            "padding": pad(p.padding, -(len(label) + len(p.extension) + len(p.body)) % 4),
        },
        "debug": m.debug
        and {"reserved": m.debug.reserved, "queue": m.debug.queue and m.debug.queue.bytes_le},
        "soap": m.soap
        and {
            "reserved": m.soap.reserved,
            "header": wide(m.soap.header),
            "reserved1": m.soap.reserved1,
            "body": wide(m.soap.body),
        },
        "multi_queue": m.multi_queue
        and {
            **{
                name: {
                    "header_size": 12 + len(getattr(m.multi_queue, name).format_names),
                    "element_count": getattr(m.multi_queue, name).element_count,
                    "format_names": getattr(m.multi_queue, name).format_names,
                }
                for name in ("destination", "admin", "response")
            },
            "signature": {"size": len(m.multi_queue.signature.signature)},
        },
        "trailer": m.trailer,
        "session": m.session
        and {
            "ack_sequence_number": m.session.ack_sequence_number,
            "window_size": m.session.window_size,
            "reserved": m.session.reserved,
        },
    }


def assert_matches(found: Any, expected: Any, path: str = "") -> None:
    if isinstance(expected, dict):
        assert found is not None, path
        for key, value in expected.items():
            assert_matches(found[key], value, f"{path}.{key}")
    else:
        assert found == expected, path


def check_user_message(message: wire.UserMessage) -> None:
    data = wire.build_packet(message)
    size = len(data) - (16 if message.session is not None else 0)
    parsed = layouts.USER_MESSAGE.parse(data)
    expected = expected_user_message(message, size)
    security_padding = expected.pop("security_padding")
    assert_matches(parsed, expected)
    if message.security is not None:
        s = parsed.security
        assert b"".join(s[f"{item}_padding"] for item in SECURITY_ITEMS) == security_padding
    flags = parsed.base.flags
    assert flags & 7 == message.base.priority
    assert flags & BASE_CARRIED_MASK == message.base.flags
    assert bool(flags & 0x20) == (message.debug is not None)
    assert bool(flags & 0x10) == (message.session is not None)
    user_flags = parsed.user.flags
    assert user_flags & USER_CARRIED_MASK == message.user.flags
    assert user_flags & 0x1F == message.user.hop_count
    assert (user_flags >> 5) & 3 == message.user.delivery


@settings(max_examples=100, deadline=None)
@given(ms.user_messages())
def test_the_user_message_layout_reads_what_the_codec_writes(message: wire.UserMessage) -> None:
    check_user_message(message)


def test_the_user_message_layout_reads_the_spec_example() -> None:
    message = wire.parse_packet(completed_user_message())
    assert isinstance(message, wire.UserMessage)
    check_user_message(message)


@settings(max_examples=100, deadline=None)
@given(ms.establish_connections | ms.connection_parameters | ms.session_acks)
def test_the_internal_layouts_read_what_the_codec_writes(packet: wire.Packet) -> None:
    data = wire.build_packet(packet)
    if isinstance(packet, wire.EstablishConnection):
        parsed = layouts.ESTABLISH_CONNECTION.parse(data)
        assert parsed.header.client_qm == packet.client_qm.bytes_le
        assert parsed.header.server_qm == packet.server_qm.bytes_le
        assert parsed.header.operating_system == packet.operating_system
        assert parsed.header.padding == packet.padding
        assert parsed.internal.flags == packet.internal.flags | 2
    elif isinstance(packet, wire.ConnectionParameters):
        parsed = layouts.CONNECTION_PARAMETERS.parse(data)
        assert parsed.header.ack_timeout == packet.ack_timeout
        assert parsed.header.window_size == packet.window_size
        assert parsed.internal.flags == packet.internal.flags | 3
    else:
        assert isinstance(packet, wire.SessionAck)
        parsed = layouts.SESSION_ACK.parse(data)
        assert parsed.session.recoverable_ack_flags == packet.session.recoverable_ack_flags
        assert parsed.internal.flags == packet.internal.flags | 1
    assert parsed.base.packet_size == len(data)
    assert parsed.base.reserved == packet.base.reserved
    assert parsed.internal.reserved == packet.internal.reserved
