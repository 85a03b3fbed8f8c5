"""Values that cannot be built, and the fields their errors name."""

from __future__ import annotations

from typing import Any

import pytest

import wire

from . import msmq_samples as samples
from .msmq_samples import QM
from .msmq_samples import express_message as message


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (message(base=wire.BaseHeader(priority=8)), "BaseHeader.priority"),
        (message(base=wire.BaseHeader(flags=wire.BaseFlags.SESSION)), "BaseHeader.flags"),
        (message(base=wire.BaseHeader(reserved=256)), "BaseHeader"),
        (message(user_flags=wire.UserFlags.TRANSACTION), "UserHeader.flags"),
        (message(user_hop_count=32), "UserHeader.hop_count"),
        (message(user_delivery=4), "UserHeader.delivery"),
        (message(user_sent_time=2**32), "UserHeader"),
        (message(user_source_qm="not a guid"), "UserHeader.source_qm"),
        (message(user_destination="q"), "UserHeader.destination"),
        (
            message(user_destination=wire.PrivateQueue(qm=QM, number=1)),
            "UserHeader.destination",
        ),
        (
            message(
                user_destination=wire.PrivateQueueId(
                    number=1, host=wire.QueueFormatType.PRIVATE_ON_SOURCE
                )
            ),
            "UserHeader.destination",
        ),
        (
            message(
                user_admin=wire.PrivateQueueId(
                    number=1, host=wire.QueueFormatType.PRIVATE_ON_ADMIN_HOST
                )
            ),
            "UserHeader.admin",
        ),
        (
            message(user_admin=wire.PrivateQueueId(number=1, host=wire.QueueFormatType.PUBLIC)),
            "UserHeader.admin",
        ),
        (
            message(user_destination=wire.DirectQueue(name="a\x00b")),
            "UserHeader.destination",
        ),
        (
            message(user_destination=wire.DirectQueue(name="ab", padding=b"\x01")),
            "UserHeader.destination.padding",
        ),
        (
            message(user_destination=wire.DirectQueue(name="x" * 40000)),
            "UserHeader.destination",
        ),
        (message(props_label="x" * 250), "MessagePropertiesHeader.label"),
        (message(props_label="a\x00"), "MessagePropertiesHeader.label"),
        (message(props_correlation_id=b"short"), "MessagePropertiesHeader.correlation_id"),
        (message(props_padding=b"\x01\x02\x03"), "MessagePropertiesHeader.padding"),
        (message(props_body="text"), "MessagePropertiesHeader.body"),
        (message(props_body=bytes(wire.MAX_PACKET_SIZE)), "UserMessage"),
        (
            message(
                transaction=wire.TransactionHeader(
                    transaction_id=0x100000,
                    sequence_id=wire.TxSequenceId(ordinal=1, timestamp=1),
                    sequence_number=1,
                    previous_sequence_number=0,
                )
            ),
            "TransactionHeader.transaction_id",
        ),
        (
            message(security=wire.SecurityHeader(sender_id=b"x", padding=b"\x01")),
            "SecurityHeader.padding",
        ),
        (message(debug=wire.DebugHeader(flags=1)), "DebugHeader.flags"),
        (message(soap=wire.SoapHeader(body="\x00")), "SoapHeader.body"),
        (
            wire.SessionAck(
                internal=wire.InternalHeader(flags=wire.InternalFlags.CONNECTION_REFUSED),
                session=wire.SessionHeader(),
            ),
            "InternalHeader.flags",
        ),
        (wire.SessionAck(session=wire.SessionHeader(window_size=-1)), "SessionHeader"),
        (
            wire.EstablishConnection(client_qm=QM, timestamp=0, padding=b"\x5a"),
            "EstablishConnection.padding",
        ),
        (
            samples.final_ack(message_class=wire.MessageClass.NACK_BAD_DST_Q - 0x4001),
            "FinalAck.message_class",
        ),
        (samples.order_ack(reserved=b""), "OrderAck.reserved"),
    ],
)
def test_unbuildable_values(value: Any, field: str) -> None:
    with pytest.raises(wire.LocalProtocolError) as info:
        wire.build_packet(value)
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_build_refuses_what_is_not_a_packet() -> None:
    with pytest.raises(wire.LocalProtocolError, match="not a packet value: str"):
        wire.build_packet("hello")  # type: ignore[arg-type]
