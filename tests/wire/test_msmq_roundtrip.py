"""Round trips of every packet type: parse(build(p)) == p and build(parse(x)) == x."""

from __future__ import annotations

import msmq_strategies as ms
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire

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


@EXAMPLES
@given(st.builds(wire.Ping, flags=ms.u16, cookie=ms.u32, qm=ms.guids))
def test_ping_round_trip(ping: wire.Ping) -> None:
    data = wire.build_ping(ping)
    assert len(data) == 24
    assert wire.parse_ping(data) == ping


@EXAMPLES
@given(st.lists(ms.format_name_elements, max_size=6))
def test_format_name_list_round_trip(elements: list[wire.FormatNameElement]) -> None:
    header = wire.MqfAddressHeader.from_elements(tuple(elements))
    assert len(header.format_names) % 4 == 0
    assert header.elements() == tuple(elements)


def test_sequence_id_orders_by_timestamp_then_ordinal() -> None:
    low = wire.TxSequenceId(ordinal=0xFFFFFFFF, timestamp=1)
    high = wire.TxSequenceId(ordinal=0, timestamp=2)
    assert low < high
    assert high > low
    assert low <= low
    assert high >= low
    assert high.value == 2 << 32
    assert wire.TxSequenceId.from_value(low.value) == low


@pytest.mark.parametrize(
    ("packet", "expected"),
    [
        (wire.SessionAck(session=wire.SessionHeader()), wire.PacketKind.SESSION_ACK),
        (
            wire.ConnectionParameters(recoverable_ack_timeout=500, ack_timeout=20000),
            wire.PacketKind.CONNECTION_PARAMETERS,
        ),
        (
            wire.EstablishConnection(client_qm=wire.NULL_GUID, timestamp=0),
            wire.PacketKind.ESTABLISH_CONNECTION,
        ),
    ],
)
def test_classify_internal_packets(packet: wire.Packet, expected: wire.PacketKind) -> None:
    assert wire.classify_packet(packet) is expected
