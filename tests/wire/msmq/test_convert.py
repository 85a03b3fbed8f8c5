"""MessageProperties <-> UserMessage: the mapping, its round trips and its errors."""

from __future__ import annotations

import dataclasses
import math
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wire_strategies import blob, properties, u16, u32

import wire

from . import msmq_strategies as ms
from .msmq_samples import FIRST_OF_TRANSACTION, MESSAGE_SOURCE, ORDERS

QM = uuid.UUID("11111111-2222-3333-4444-555555555555")
ADMIN = wire.DirectQueue(name="TCP:10.0.0.9\\private$\\acks")
ADMIN_TEXT = "DIRECT=TCP:10.0.0.9\\private$\\acks"
ORDERS_TEXT = "DIRECT=" + ORDERS.name

# Labels the wire carries: no NUL, no lone surrogate, at most 249 UTF-16 units.
wire_labels = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=60
) | st.sampled_from(["a" * 249, "\U0001f600" * 124 + "a", "é" * 249])
correlation_ids = st.just(b"") | st.binary(min_size=20, max_size=20).filter(any)

#: Keyword arguments of MessageProperties that a UserMessage can carry (queues aside).
wire_fields: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {
        "body": blob,
        "label": wire_labels,
        "correlation_id": correlation_ids,
        "app_specific": u32,
        "priority": st.integers(0, 7),
        "delivery": st.integers(0, 1),
        "acknowledge": st.integers(0, 15),
        "journal": st.integers(0, 3),
        "time_to_reach_queue": u32,
        "time_to_be_received": u32,
        "message_class": u16 | st.sampled_from(wire.MessageClass),
        "sent_time": st.floats(0, 2**32, exclude_max=True) | u32.map(float),
        "source_qm": st.none() | ms.guids,
        "ordinal": u32,
        "transactional": st.booleans(),
        "extension": st.binary(max_size=30),
    }
)


def message(**changes: Any) -> wire.MessageProperties:
    """A recoverable message to ORDERS with a label, a body and ``changes``."""
    fields: dict[str, Any] = {
        "body": bytes(range(256)),
        "label": "order 123456",
        "destination": ORDERS_TEXT,
        "source_qm": MESSAGE_SOURCE,
        "ordinal": 123_456,
        "sent_time": 1_700_000_000.0,
    }
    fields.update(changes)
    return wire.MessageProperties(**fields)


def transactional(**changes: Any) -> wire.MessageProperties:
    return message(transactional=True, priority=0, **changes)


def send(m: wire.MessageProperties, **kwargs: Any) -> wire.UserMessage:
    """``m`` converted, built and parsed: the packet a peer receives."""
    if m.transactional:
        kwargs.setdefault("transaction", FIRST_OF_TRANSACTION)
    packet = wire.parse_packet(
        wire.build_packet(wire.message_to_packet(m, destination=ORDERS, **kwargs))
    )
    assert isinstance(packet, wire.UserMessage)
    return packet


def receive(packet: wire.UserMessage, **kwargs: Any) -> wire.MessageProperties:
    kwargs.setdefault("destination", ORDERS_TEXT)
    return wire.packet_to_message(packet, **kwargs)


def what_arrives(m: wire.MessageProperties) -> wire.MessageProperties:
    """``m`` as it comes back: whole seconds, and a transactional one at PR 0, recoverable."""
    expected = m.replace(sent_time=float(int(m.sent_time)))
    if m.transactional:
        expected = expected.replace(priority=0, delivery=1)
    return expected


# --- round trips ------------------------------------------------------------------------------


@st.composite
def addressed_messages(draw: st.DrawFn) -> tuple[wire.MessageProperties, dict[str, Any]]:
    """A message and the message_to_packet arguments that send it (queues, transaction, hops)."""
    fields = draw(wire_fields)
    source_qm = fields["source_qm"] or wire.NULL_GUID
    destination_qm = draw(ms.guids)
    destination = draw(
        st.one_of(
            ms.private_ids(wire.QueueFormatType.PRIVATE_ON_DESTINATION),
            ms.public_queues,
            ms.direct_queues(),
        )
    )
    admin = draw(ms.admins)
    response = draw(ms.responses)
    known = {"source_qm": source_qm, "destination_qm": destination_qm}
    admin_text = wire.queue_text(admin, **known)
    response_text = wire.queue_text(response, **known)
    if response is wire.SAME_AS_ADMIN:
        response_text = admin_text
    m = wire.MessageProperties(
        **fields,
        destination=wire.queue_text(destination, **known),
        admin_queue=admin_text,
        response_queue=response_text,
    )
    kwargs = {
        "destination": destination,
        "admin": admin,
        "response": response,
        "transaction": draw(ms.transaction_headers) if m.transactional else None,
        "hop_count": draw(st.integers(0, 31)),
        "destination_qm": destination_qm,
    }
    return m, kwargs


@given(addressed_messages())
def test_round_trip_through_the_wire(case: tuple[wire.MessageProperties, dict[str, Any]]) -> None:
    m, kwargs = case
    data = wire.build_packet(wire.message_to_packet(m, **kwargs))
    packet = wire.parse_packet(data)
    assert isinstance(packet, wire.UserMessage)
    known = {"source_qm": packet.user.source_qm, "destination_qm": packet.user.destination_qm}
    back = wire.packet_to_message(
        packet,
        destination=wire.queue_text(packet.user.destination, **known),
        admin_queue=wire.queue_text(packet.user.admin, **known),
        response_queue=wire.queue_text(packet.user.response, **known),
    )
    assert back == what_arrives(m)
    assert back.sent_time == math.floor(m.sent_time)
    # What the message does not hold, the packet got from the arguments.
    assert packet.transaction == kwargs["transaction"]
    assert packet.user.hop_count == kwargs["hop_count"]
    assert packet.user.destination_qm == kwargs["destination_qm"]
    assert packet.properties.body_type == wire.VarType.UI1_VECTOR
    assert packet.properties.label == (m.label or None)
    assert packet.is_recoverable == bool(m.transactional or m.delivery)


@given(wire_fields, st.sampled_from([None, ADMIN]))
def test_round_trip_express_recoverable_and_transactional(
    fields: dict[str, Any], admin: wire.DirectQueue | None
) -> None:
    m = wire.MessageProperties(
        **fields, destination=ORDERS_TEXT, admin_queue=wire.queue_text(admin)
    )
    back = receive(send(m, admin=admin), admin_queue=wire.queue_text(admin))
    assert back == what_arrives(m)


def test_sample_transactional_message_maps_field_by_field() -> None:
    m = transactional(
        admin_queue=ADMIN_TEXT,
        acknowledge=wire.AckFlags.POSITIVE_ARRIVAL | wire.AckFlags.NEGATIVE_ARRIVAL,
        journal=3,
        app_specific=0xDEADBEEF,
        correlation_id=b"c" * 20,
        time_to_reach_queue=345_600,
        time_to_be_received=600,
        extension=b"ext",
        sent_time=1_700_000_000.75,
    )
    packet = wire.message_to_packet(
        m, destination=ORDERS, admin=ADMIN, transaction=FIRST_OF_TRANSACTION, hop_count=2
    )
    assert packet.base == wire.BaseHeader(priority=0, time_to_reach_queue=345_600)
    assert packet.user == wire.UserHeader(
        source_qm=MESSAGE_SOURCE,
        time_to_be_received=600,
        sent_time=1_700_000_000,
        message_id=123_456,
        hop_count=2,
        delivery=wire.DeliveryMode.RECOVERABLE,
        flags=wire.UserFlags.JOURNAL_NEGATIVE | wire.UserFlags.JOURNAL_POSITIVE,
        destination=ORDERS,
        admin=ADMIN,
    )
    assert packet.transaction == FIRST_OF_TRANSACTION
    assert packet.properties == wire.MessagePropertiesHeader(
        flags=0x05,
        correlation_id=b"c" * 20,
        body_type=wire.VarType.UI1_VECTOR,
        application_tag=0xDEADBEEF,
        label="order 123456",
        extension=b"ext",
        body=bytes(range(256)),
    )
    data = wire.build_packet(packet)
    assert wire.parse_packet(data) == packet
    back = receive(wire.parse_packet(data), admin_queue=ADMIN_TEXT)  # type: ignore[arg-type]
    assert back == m.replace(sent_time=1_700_000_000.0)


@pytest.mark.parametrize(("journal", "flags"), [(0, 0), (1, 0x100), (2, 0x200), (3, 0x300)])
def test_journal_levels_are_jn_and_jp(journal: int, flags: int) -> None:
    packet = send(message(journal=journal))
    assert packet.user.flags == flags
    assert receive(packet).journal == journal


def test_transactional_message_goes_out_at_priority_0_recoverable() -> None:
    # Not stamped: the stored priority and delivery are not what MSMQ requires.
    m = message(transactional=True, priority=6, delivery=0)
    packet = send(m)
    assert packet.base.priority == 0
    assert packet.user.delivery == wire.DeliveryMode.RECOVERABLE
    assert receive(packet) == m.replace(priority=0, delivery=1)


@pytest.mark.parametrize("priority", range(8))
@pytest.mark.parametrize("delivery", [0, 1])
def test_express_and_recoverable_keep_priority_and_delivery(priority: int, delivery: int) -> None:
    packet = send(message(priority=priority, delivery=delivery))
    assert (packet.base.priority, packet.user.delivery) == (priority, delivery)
    back = receive(packet)
    assert (back.priority, back.delivery, back.transactional) == (priority, delivery, False)


def test_infinite_times_stay_infinite() -> None:
    packet = send(message())
    assert packet.base.time_to_reach_queue == wire.INFINITE
    assert packet.user.time_to_be_received == wire.INFINITE
    back = receive(packet)
    assert back.time_to_reach_queue == back.time_to_be_received == 0xFFFFFFFF


def test_correlation_id_is_present_iff_not_all_zeros() -> None:
    assert send(message()).properties.correlation_id == bytes(20)
    assert receive(send(message())).correlation_id == b""
    assert receive(send(message(correlation_id=b"\x01" + bytes(19)))).correlation_id == (
        b"\x01" + bytes(19)
    )
    # The one loss: a correlation id of 20 zero bytes comes back absent.
    assert receive(send(message(correlation_id=bytes(20)))).correlation_id == b""


def test_empty_body_and_source_qm_none() -> None:
    m = message(body=b"", source_qm=None)
    packet = send(m)
    assert packet.user.source_qm == wire.NULL_GUID
    assert packet.properties.body == b""
    assert receive(packet) == m


# --- labels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label",
    ["a" * 249, "é" * 249, "\U0001f600" * 124 + "a", "\U0001f600", "QM Ordering Ack", " "],
)
def test_labels_that_fit(label: str) -> None:
    packet = send(message(label=label))
    assert packet.properties.label == label
    assert receive(packet).label == label


def test_empty_label_is_no_label_field() -> None:
    packet = send(message(label=""))
    assert packet.properties.label is None
    assert receive(packet).label == ""
    # A peer's lone-NUL label is an empty label too.
    lone_nul = dataclasses.replace(
        packet, properties=dataclasses.replace(packet.properties, label="")
    )
    received = wire.parse_packet(wire.build_packet(lone_nul))
    assert isinstance(received, wire.UserMessage)
    assert received.properties.label == ""
    assert receive(received).label == ""


@pytest.mark.parametrize("label", ["a" * 250, "é" * 250, "\U0001f600" * 125, "a\x00b"])
def test_labels_the_wire_cannot_carry(label: str) -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.message_to_packet(message(label=label), destination=ORDERS)
    assert info.value.field == "MessageProperties.label"


# --- errors going out -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"priority": 8}, "priority"),
        ({"priority": 255}, "priority"),
        ({"delivery": 2}, "delivery"),
        ({"journal": 4}, "journal"),
        ({"acknowledge": 0x10}, "acknowledge"),
        ({"sent_time": -0.5}, "sent_time"),
        ({"sent_time": float(2**32)}, "sent_time"),
        ({"sent_time": math.nan}, "sent_time"),
        ({"sent_time": math.inf}, "sent_time"),
    ],
)
def test_fields_the_wire_cannot_carry(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.message_to_packet(message(**changes), destination=ORDERS)
    assert info.value.field == f"MessageProperties.{field}"


def test_transaction_header_iff_transactional() -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.message_to_packet(transactional(), destination=ORDERS)
    assert info.value.field == "MessageProperties.transactional"
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.message_to_packet(message(), destination=ORDERS, transaction=FIRST_OF_TRANSACTION)
    assert info.value.field == "MessageProperties.transactional"


def test_addressing_errors_are_left_to_build_packet() -> None:
    packet = wire.message_to_packet(message(), destination=ORDERS, hop_count=32)
    with pytest.raises(wire.LocalProtocolError, match="hop_count"):
        wire.build_packet(packet)


# --- errors coming in -------------------------------------------------------------------------


def _with(packet: wire.UserMessage, part: str, **changes: Any) -> wire.UserMessage:
    """``packet`` with fields of one of its headers changed (as a hand-made value)."""
    changed = dataclasses.replace(getattr(packet, part), **changes)
    return dataclasses.replace(packet, **{part: changed})


@pytest.mark.parametrize("delivery", [2, 3])
@pytest.mark.parametrize("tx", [False, True])
def test_peer_delivery_mode_out_of_range(delivery: int, tx: bool) -> None:
    m = transactional() if tx else message()
    raw = wire.message_to_packet(
        m, destination=ORDERS, transaction=FIRST_OF_TRANSACTION if tx else None
    )
    packet = wire.parse_packet(wire.build_packet(_with(raw, "user", delivery=delivery)))
    assert isinstance(packet, wire.UserMessage)
    with pytest.raises(wire.RemoteProtocolError) as info:
        receive(packet)
    assert info.value.field == "UserHeader.delivery"


def test_peer_priority_over_7() -> None:
    packet = _with(send(message()), "base", priority=8)
    with pytest.raises(wire.RemoteProtocolError) as info:
        receive(packet)
    assert info.value.field == "BaseHeader.priority"


def test_peer_transactional_priority_is_ignored_and_delivery_recoverable() -> None:
    packet = _with(send(transactional()), "base", priority=5)
    packet = _with(packet, "user", delivery=0)
    packet = wire.parse_packet(wire.build_packet(packet))  # type: ignore[assignment]
    assert (packet.base.priority, packet.user.delivery) == (5, 0)
    back = receive(packet)
    assert (back.priority, back.delivery, back.transactional) == (0, 1, True)


def test_peer_unused_ack_bits_and_user_flags_are_dropped() -> None:
    packet = _with(send(message(acknowledge=0x0A)), "properties", flags=0xFA)
    packet = _with(packet, "user", flags=wire.UserFlags.HTTP | wire.UserFlags.JOURNAL_POSITIVE)
    back = receive(packet)
    assert (back.acknowledge, back.journal) == (0x0A, 2)


def test_peer_label_with_a_lone_surrogate() -> None:
    """[MS-MQMQ] §2.2.19.3: a label is any run of 16-bit units. One that is not
    Unicode text is kept with U+FFFD for the unpaired surrogate, so that one such
    message cannot close the session and hold back every message behind it."""
    packet = _with(send(message()), "properties", label="ab\ud800c")
    packet = wire.parse_packet(wire.build_packet(packet))  # type: ignore[assignment]
    assert packet.properties.label == "ab\ud800c"
    assert receive(packet).label == "ab\ufffdc"


@pytest.mark.parametrize(
    ("part", "changes", "field"),
    [
        ("properties", {"label": "a" * 250}, "MessagePropertiesHeader.label"),
        ("properties", {"label": "\U0001f600" * 125}, "MessagePropertiesHeader.label"),
        ("properties", {"label": "a\x00b"}, "MessagePropertiesHeader.label"),
        ("properties", {"correlation_id": b"short"}, "MessagePropertiesHeader.correlation_id"),
        ("properties", {"message_class": 0x10000}, "MessagePropertiesHeader.message_class"),
        ("properties", {"application_tag": -1}, "MessagePropertiesHeader.application_tag"),
        ("base", {"time_to_reach_queue": 2**32}, "BaseHeader.time_to_reach_queue"),
        ("user", {"time_to_be_received": 2**32}, "UserHeader.time_to_be_received"),
        ("user", {"message_id": -1}, "UserHeader.message_id"),
        ("user", {"source_qm": "not a guid"}, "UserHeader.source_qm"),
        ("user", {"sent_time": "noon"}, "UserMessage"),
        ("base", {"priority": None}, "UserMessage"),
    ],
)
def test_hand_made_packets_raise_only_remote_errors(
    part: str, changes: dict[str, Any], field: str
) -> None:
    packet = _with(send(message()), part, **changes)
    with pytest.raises(wire.RemoteProtocolError) as info:
        receive(packet)
    assert info.value.field == field


@pytest.mark.parametrize("argument", ["destination", "admin_queue", "response_queue"])
def test_queue_text_that_is_not_text_is_kept_with_a_replacement(argument: str) -> None:
    # A direct name decodes with surrogatepass, so "DIRECT=" + name may hold one;
    # with U+FFFD it names no queue (a refusal at arrival), the session goes on.
    received = receive(send(message()), **{argument: "DIRECT=OS:h\\q\udc80"})
    assert getattr(received, argument) == "DIRECT=OS:h\\q\ufffd"


@given(ms.user_messages())
def test_any_parsed_user_message_converts_or_raises_remote(packet: wire.UserMessage) -> None:
    error: wire.RemoteProtocolError | None = None
    try:
        m = receive(packet, admin_queue="a", response_queue="r")
    except wire.RemoteProtocolError as exc:
        error = exc
    if error is not None:
        assert error.field
        return
    assert m.transactional == (packet.transaction is not None)
    assert m.body == packet.properties.body


# --- addresses ---------------------------------------------------------------------------------


def test_response_same_as_admin_takes_the_admin_queue_text() -> None:
    packet = send(message(admin_queue=ADMIN_TEXT), admin=ADMIN, response=wire.SAME_AS_ADMIN)
    assert packet.user.response is wire.SAME_AS_ADMIN
    assert wire.queue_text(packet.user.response) == ""
    back = receive(packet, admin_queue=ADMIN_TEXT)
    assert back.response_queue == ADMIN_TEXT
    assert receive(packet, admin_queue=ADMIN_TEXT, response_queue="x").response_queue == "x"


def test_queue_text() -> None:
    qm = uuid.UUID("6f9619ff-8b86-d011-b42d-00c04fc964ff")
    assert wire.queue_text(None) == ""
    assert wire.queue_text(ORDERS) == ORDERS_TEXT
    assert wire.queue_text(wire.PublicQueue(queue_id=qm)) == f"PUBLIC={qm}"
    assert wire.queue_text(wire.PrivateQueue(qm=qm, number=0x4A)) == f"PRIVATE={qm}\\0000004a"
    assert wire.queue_text(wire.SAME_AS_ADMIN) == ""
    on_source = wire.PrivateQueueId(number=7, host=wire.QueueFormatType.PRIVATE_ON_SOURCE)
    on_admin = wire.PrivateQueueId(number=7, host=wire.QueueFormatType.PRIVATE_ON_ADMIN_HOST)
    # A queue number alone cannot be named; with its host's GUID it can.
    assert wire.queue_text(wire.ORDER_QUEUE) == ""
    assert wire.queue_text(wire.ORDER_QUEUE, destination_qm=wire.NULL_GUID) == ""
    assert wire.queue_text(wire.ORDER_QUEUE, destination_qm=qm) == f"PRIVATE={qm}\\00000004"
    assert wire.queue_text(wire.ORDER_QUEUE, source_qm=qm) == ""
    assert wire.queue_text(on_source, source_qm=qm) == f"PRIVATE={qm}\\00000007"
    assert wire.queue_text(on_source, destination_qm=qm) == ""
    assert wire.queue_text(on_admin, source_qm=qm, destination_qm=qm) == ""


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("DIRECT=TCP:10.0.0.5\\private$\\orders", "TCP:10.0.0.5\\private$\\orders"),
        ("direct=tcp:10.0.0.5\\private$\\orders", "tcp:10.0.0.5\\private$\\orders"),
        ("Direct=Tcp:[::1]:1902\\PRIVATE$\\q", "Tcp:[::1]:1902\\PRIVATE$\\q"),
        ("DIRECT=OS:host\\private$\\q", "OS:host\\private$\\q"),
        ("DIRECT=TCP:", None),
        ("DIRECT=TCP:1.2.3.4\\q\x00", None),
        ("TCP:10.0.0.5\\private$\\orders", None),
        ("private$\\orders", None),
        ("PUBLIC=6f9619ff-8b86-d011-b42d-00c04fc964ff", None),
        ("", None),
    ],
)
def test_direct_queue(text: str, name: str | None) -> None:
    expected = None if name is None else wire.DirectQueue(name=name)
    assert wire.direct_queue(text) == expected
    if expected is not None:
        assert wire.queue_text(expected) == "DIRECT=" + text[len("DIRECT=") :]


# --- with_message_class -----------------------------------------------------------------------


@given(properties, u16 | st.sampled_from(wire.MessageClass))
def test_with_message_class_changes_only_the_class(
    m: wire.MessageProperties, message_class: int
) -> None:
    changed = wire.with_message_class(m, message_class)
    assert changed.message_class == message_class
    assert changed == m.replace(message_class=message_class)
    for name in ("body", "label", "destination", "admin_queue", "response_queue", "extension"):
        assert getattr(changed, name) == getattr(m, name)
    assert (changed.message_id, changed.sent_time, changed.transactional) == (
        m.message_id,
        m.sent_time,
        m.transactional,
    )
    # Also on a message that is a view of a received frame.
    viewed = wire.MessageProperties.from_bytes(memoryview(m.raw))
    assert wire.with_message_class(viewed, message_class) == changed


@pytest.mark.parametrize("message_class", [-1, 0x10000, 1.5, None])
def test_with_message_class_out_of_range(message_class: Any) -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.with_message_class(message(), message_class)
    assert info.value.field == "MessageProperties.message_class"
    with pytest.raises(wire.LocalProtocolError):
        wire.message_class_patch(message_class)


@given(properties, u16)
def test_the_class_patch_written_over_a_message_is_with_message_class(
    m: wire.MessageProperties, message_class: int
) -> None:
    offset, value = wire.message_class_patch(message_class)
    raw = m.raw
    patched = raw[:offset] + value + raw[offset + len(value) :]
    assert len(patched) == len(raw)
    assert wire.MessageProperties.from_bytes(patched) == wire.with_message_class(m, message_class)


def test_with_message_class_on_a_received_message() -> None:
    back = receive(send(transactional()))
    nack = wire.with_message_class(back, wire.MessageClass.NACK_NOT_TRANSACTIONAL_Q)
    assert nack.message_class == 0x8009
    assert nack.replace(message_class=0) == back
