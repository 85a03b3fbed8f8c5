"""Hypothesis strategies that generate valid MSMQ packet values.

"Valid" means buildable, and in the normal form the parser produces: padding
is empty or non-zero bytes of exactly the right length, an allocation size is
None or differs from the body size. So ``parse_packet(build_packet(p)) == p``
holds for everything generated here.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st
from wire_strategies import u8, u16, u32

import wire
from wire.msmq.constants import (
    BASE_CARRIED_MASK,
    TRANSACTION_CARRIED_MASK,
    USER_CARRIED_MASK,
)

from . import msmq_samples as samples

guids = st.one_of(
    st.just(wire.NULL_GUID),
    st.builds(lambda raw: uuid.UUID(bytes_le=raw), st.binary(min_size=16, max_size=16)),
)
# Strings a peer can send: no NUL, no lone surrogates (those do not survive str -> UTF-16 -> str).
wide_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=40,
)


def wide_length(text: str | None) -> int:
    """Bytes of ``text`` on the wire with its NUL, 0 for None."""
    return 0 if text is None else len(text.encode("utf-16-le", "surrogatepass")) + 2


def padding(size: int) -> st.SearchStrategy[bytes]:
    """Carried padding of ``size`` bytes: empty (zeros) or non-zero bytes."""
    if size == 0:
        return st.just(b"")
    return st.one_of(st.just(b""), st.binary(min_size=size, max_size=size).filter(lambda b: any(b)))


def masked(mask: int, width: int = 32) -> st.SearchStrategy[int]:
    """Integers holding only bits of ``mask`` (biased towards zero)."""
    return st.one_of(st.just(0), st.integers(0, (1 << width) - 1).map(lambda v: v & mask))


@st.composite
def direct_queues(draw: st.DrawFn) -> wire.DirectQueue:
    name = draw(
        st.one_of(
            wide_text,
            st.sampled_from(["OS:a04bm02\\q", "TCP:10.0.0.5\\PRIVATE$\\order_queue$"]),
        )
    )
    pad = -(2 + wide_length(name)) % 4
    return wire.DirectQueue(name=name, padding=draw(padding(pad)))


def private_ids(*hosts: wire.QueueFormatType) -> st.SearchStrategy[wire.PrivateQueueId]:
    return st.builds(wire.PrivateQueueId, number=u32, host=st.sampled_from(hosts))


public_queues = st.builds(wire.PublicQueue, queue_id=guids)
private_queues = st.builds(wire.PrivateQueue, qm=guids, number=u32)
QFT = wire.QueueFormatType
destinations = st.one_of(
    st.none(), private_ids(QFT.PRIVATE_ON_DESTINATION), public_queues, direct_queues()
)
admins = st.one_of(
    st.none(),
    private_ids(QFT.PRIVATE_ON_SOURCE, QFT.PRIVATE_ON_DESTINATION),
    public_queues,
    private_queues,
    direct_queues(),
)
responses = st.one_of(
    st.none(),
    st.just(wire.SAME_AS_ADMIN),
    private_ids(QFT.PRIVATE_ON_SOURCE, QFT.PRIVATE_ON_DESTINATION, QFT.PRIVATE_ON_ADMIN_HOST),
    public_queues,
    private_queues,
    direct_queues(),
)

base_headers = st.builds(
    wire.BaseHeader,
    priority=st.integers(0, 7),
    flags=masked(BASE_CARRIED_MASK, 16),
    reserved=u8,
    time_to_reach_queue=u32,
)
internal_headers = st.builds(wire.InternalHeader, flags=masked(0xFFF0, 16), reserved=u16)
sequence_ids = st.builds(wire.TxSequenceId, ordinal=u32, timestamp=u32)
# Where a message stands in its sequence: TransactionHeader, OrderAck and FinalAck fields.
sequence_fields = {
    "sequence_id": sequence_ids,
    "sequence_number": u32,
    "previous_sequence_number": u32,
}
session_headers = st.builds(
    wire.SessionHeader,
    ack_sequence_number=u16,
    recoverable_ack_sequence_number=u16,
    recoverable_ack_flags=u32,
    user_message_sequence_number=u16,
    recoverable_message_sequence_number=u16,
    window_size=u16,
    reserved=u16,
)

user_headers = st.builds(
    wire.UserHeader,
    source_qm=guids,
    destination_qm=guids,
    time_to_be_received=u32,
    sent_time=u32,
    message_id=u32,
    hop_count=st.integers(0, 31),
    delivery=st.integers(0, 3),
    flags=masked(USER_CARRIED_MASK),
    destination=destinations,
    admin=admins,
    response=responses,
    connector_type=st.none() | guids,
)

transaction_headers = st.builds(
    wire.TransactionHeader,
    flags=masked(TRANSACTION_CARRIED_MASK),
    transaction_id=st.integers(0, 0xFFFFF),
    **sequence_fields,
    connector_qm=st.none() | guids,
)

small_bytes = st.binary(max_size=24)


@st.composite
def security_headers(draw: st.DrawFn) -> wire.SecurityHeader:
    items = [draw(small_bytes) for _ in range(5)]
    pad = sum(-len(item) % 4 for item in items)
    return wire.SecurityHeader(
        flags=draw(u16),
        sender_id=items[0],
        encryption_key=items[1],
        signature=items[2],
        sender_cert=items[3],
        provider_info=items[4],
        padding=draw(padding(pad)),
    )


labels = st.one_of(st.none(), wide_text, st.just(wire.ORDER_ACK_LABEL))


@st.composite
def properties_headers(draw: st.DrawFn, body: st.SearchStrategy[bytes] | None = None) -> Any:
    label = draw(labels)
    extension = draw(small_bytes)
    payload = draw(body if body is not None else st.binary(max_size=300))
    allocation = draw(st.none() | u32.filter(lambda v: v != len(payload)))
    pad = -(wide_length(label) + len(extension) + len(payload)) % 4
    return wire.MessagePropertiesHeader(
        flags=draw(u8),
        message_class=draw(st.one_of(u16, st.sampled_from(wire.MessageClass))),
        correlation_id=draw(st.binary(min_size=20, max_size=20)),
        body_type=draw(u32),
        application_tag=draw(u32),
        allocation_body_size=allocation,
        privacy_level=draw(u32),
        hash_algorithm=draw(u32),
        encryption_algorithm=draw(u32),
        label=label,
        extension=extension,
        body=payload,
        padding=draw(padding(pad)),
    )


debug_headers = st.builds(
    wire.DebugHeader, flags=masked(0xFFFC, 16), reserved=u16, queue=st.none() | guids
)


@st.composite
def soap_headers(draw: st.DrawFn) -> wire.SoapHeader:
    header = draw(st.none() | wide_text)
    body = draw(st.none() | wide_text)
    pad = -(wide_length(header) + wide_length(body)) % 4
    return wire.SoapHeader(
        header=header,
        body=body,
        reserved=draw(u16),
        reserved1=draw(u16),
        padding=draw(padding(pad)),
    )


format_name_elements = st.one_of(
    public_queues,
    private_queues,
    st.builds(wire.DirectQueue, name=wide_text),
    st.builds(wire.DistributionList, list_id=guids),
)


@st.composite
def mqf_address_headers(draw: st.DrawFn) -> wire.MqfAddressHeader:
    if draw(st.booleans()):
        elements = tuple(draw(st.lists(format_name_elements, max_size=4)))
        header = wire.MqfAddressHeader.from_elements(elements)
        names, count = header.format_names, header.element_count
    else:  # carried opaque: any bytes and count survive a round trip
        names, count = draw(small_bytes), draw(u32)
    return wire.MqfAddressHeader(
        element_count=count,
        format_names=names,
        reserved=draw(u16),
        padding=draw(padding(-(12 + len(names)) % 4)),
    )


@st.composite
def multi_queue_headers(draw: st.DrawFn) -> wire.MultiQueueFormatHeader:
    signature = draw(small_bytes)
    return wire.MultiQueueFormatHeader(
        destination=draw(mqf_address_headers()),
        admin=draw(mqf_address_headers()),
        response=draw(mqf_address_headers()),
        signature=wire.MqfSignatureHeader(
            signature=signature,
            reserved=draw(u16),
            padding=draw(padding(-len(signature) % 4)),
        ),
    )


@st.composite
def user_messages(draw: st.DrawFn) -> wire.UserMessage:
    return wire.UserMessage(
        base=draw(base_headers),
        user=draw(user_headers),
        transaction=draw(st.none() | transaction_headers),
        security=draw(st.none() | security_headers()),
        properties=draw(properties_headers()),
        debug=draw(st.none() | debug_headers),
        soap=draw(st.none() | soap_headers()),
        multi_queue=draw(st.none() | multi_queue_headers()),
        trailer=draw(st.one_of(st.just(b""), small_bytes)),
        session=draw(st.none() | session_headers),
    )


def internal_packets(
    packet: type[Any],
    internal: st.SearchStrategy[wire.InternalHeader] = internal_headers,
    **fields: Any,
) -> st.SearchStrategy[Any]:
    """Internal packets of type ``packet``: any BaseHeader and InternalHeader, then ``fields``."""
    return st.builds(packet, base=base_headers, internal=internal, **fields)


establish_connections = internal_packets(
    wire.EstablishConnection,
    client_qm=guids,
    server_qm=guids,
    timestamp=u32,
    operating_system=u16,
    reserved=u16,
    padding=st.one_of(
        st.just(b"\x5a" * 512), st.binary(min_size=512, max_size=512), st.just(bytes(512))
    ),
)
connection_parameters = internal_packets(
    wire.ConnectionParameters,
    recoverable_ack_timeout=u32,
    ack_timeout=u32,
    reserved=u16,
    window_size=u16,
)
session_acks = internal_packets(
    wire.SessionAck,
    internal=st.builds(wire.InternalHeader, flags=masked(0xFFE0, 16), reserved=u16),  # no CS
    session=session_headers,
)

order_queues = st.one_of(
    st.just(wire.ORDER_QUEUE),
    st.builds(
        lambda ip: wire.DirectQueue(name=f"TCP:{ip}\\PRIVATE$\\order_queue$"),
        st.ip_addresses().map(str),
    ),
)
# The user message around an OrderAck's or a FinalAck's body.
ack_envelope_fields = {
    "source_qm": guids,
    "destination": order_queues,
    "destination_qm": guids,
    "message_id": u32,
    "sent_time": u32,
    "time_to_reach_queue": u32,
    "time_to_be_received": u32,
}
order_acks = st.builds(
    wire.OrderAck,
    **ack_envelope_fields,
    **sequence_fields,
    reserved=st.binary(min_size=20, max_size=20),
)
final_acks = st.builds(
    wire.FinalAck,
    **ack_envelope_fields,
    message_class=st.integers(0x4000, 0xFFFF),
    **sequence_fields,
    acked_source_qm=guids,
    acked_message_id=u32,
)

packets = st.one_of(user_messages(), establish_connections, connection_parameters, session_acks)


def transactional_messages() -> st.SearchStrategy[wire.UserMessage]:
    """The common case: a transactional message to a direct name, like the benchmark's."""
    return st.builds(
        samples.transactional_message,
        time_to_reach_queue=u32,
        source_qm=guids,
        sent_time=u32,
        message_id=u32,
        destination=direct_queues(),
        transaction=transaction_headers,
        properties=properties_headers(),
        session=st.none() | session_headers,
    )
