"""Round trips of every packet type: parse(build(p)) == p and build(parse(x)) == x."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire

from . import msmq_strategies as ms

EXAMPLES = settings(max_examples=200, deadline=None)


def assert_round_trip(packet: wire.Packet) -> bytes:
    data = wire.build_packet(packet)
    parsed = wire.parse_packet(data)
    assert parsed == packet
    assert wire.build_packet(parsed) == data
    return data


@EXAMPLES
@given(ms.user_messages())
def test_user_message_round_trip(message: wire.UserMessage) -> None:
    data = assert_round_trip(message)
    size = int.from_bytes(data[8:12], "little")
    assert len(data) == size + (16 if message.session is not None else 0)


@EXAMPLES
@given(ms.transactional_messages())
def test_transactional_message_round_trip(message: wire.UserMessage) -> None:
    assert_round_trip(message)


@pytest.mark.parametrize(
    ("packets", "size"),
    [
        pytest.param(ms.establish_connections, 572, id="establish-connection"),
        pytest.param(ms.connection_parameters, 32, id="connection-parameters"),
        pytest.param(ms.session_acks, 36, id="session-ack"),
    ],
)
@EXAMPLES
@given(data=st.data())
def test_internal_packet_round_trip(
    packets: st.SearchStrategy[wire.Packet], size: int, data: st.DataObject
) -> None:
    assert len(assert_round_trip(data.draw(packets))) == size


@pytest.mark.parametrize(
    ("acks", "view", "kind"),
    [
        pytest.param(ms.order_acks, wire.OrderAck, wire.PacketKind.ORDER_ACK, id="order-ack"),
        pytest.param(ms.final_acks, wire.FinalAck, wire.PacketKind.FINAL_ACK, id="final-ack"),
    ],
)
@EXAMPLES
@given(data=st.data())
def test_ack_round_trip(
    acks: st.SearchStrategy[wire.OrderAck | wire.FinalAck],
    view: type[wire.OrderAck] | type[wire.FinalAck],
    kind: wire.PacketKind,
    data: st.DataObject,
) -> None:
    ack = data.draw(acks)
    packet = wire.build_packet(ack)
    assert packet == wire.build_packet(ack.to_message())
    message = wire.parse_packet(packet)
    assert isinstance(message, wire.UserMessage)
    assert wire.classify_packet(message) is kind
    assert view.from_message(message) == ack
    assert wire.build_packet(message) == packet
