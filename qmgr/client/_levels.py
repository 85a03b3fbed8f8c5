"""Acknowledgment and journal levels a sender asks for, and the classes of reports.

``send(..., acknowledge=Acknowledge.FULL_RECEIVE, admin_queue="acks",
journal=Journal.DEADLETTER)`` asks for an acknowledgment of every outcome in
``acks`` and, if the message dies, a copy in the sending queue manager's
dead-letter queue. The values are MSMQ's (mq.h), so a number works too.
"""

from __future__ import annotations

import enum

__all__ = ["Acknowledge", "Journal", "MessageClass"]


class Acknowledge(enum.IntFlag):
    """MQMSG_ACKNOWLEDGMENT_*: which outcomes are acknowledged to the admin queue."""

    NONE = 0x00
    #: ACK_REACH_QUEUE when the message reaches its destination queue.
    POS_ARRIVAL = 0x01
    #: ACK_RECEIVE when a receive takes it (and its transaction commits).
    POS_RECEIVE = 0x02
    #: A NACK when it cannot reach its queue (rejected, expired on the way).
    NEG_ARRIVAL = 0x04
    #: A NACK when it leaves its queue unread (expired, purged, queue deleted).
    NEG_RECEIVE = 0x08
    NACK_REACH_QUEUE = NEG_ARRIVAL
    FULL_REACH_QUEUE = POS_ARRIVAL | NEG_ARRIVAL
    NACK_RECEIVE = NEG_ARRIVAL | NEG_RECEIVE
    FULL_RECEIVE = POS_RECEIVE | NEG_ARRIVAL | NEG_RECEIVE


class Journal(enum.IntFlag):
    """MQMSG_JOURNAL levels: copies the sending queue manager keeps."""

    NONE = 0x00
    #: If the message dies (or, transactional, is not confirmed received in
    #: time): a copy in ``system$;deadxact`` / ``system$;deadletter`` whose
    #: class says why.
    DEADLETTER = 0x01
    #: Once it is delivered (transactional: once received): a copy in ``system$;journal``.
    JOURNAL = 0x02


class MessageClass(enum.IntEnum):
    """MQMSG_CLASS_*: what a message is (``Message.message_class``)."""

    NORMAL = 0x0000
    REPORT = 0x0001
    ACK_REACH_QUEUE = 0x0002
    ACK_RECEIVE = 0x4000
    NACK_BAD_DST_Q = 0x8000
    NACK_PURGED = 0x8001
    NACK_REACH_QUEUE_TIMEOUT = 0x8002
    NACK_Q_EXCEED_QUOTA = 0x8003
    NACK_ACCESS_DENIED = 0x8004
    NACK_HOP_COUNT_EXCEEDED = 0x8005
    NACK_BAD_SIGNATURE = 0x8006
    NACK_BAD_ENCRYPTION = 0x8007
    NACK_COULD_NOT_ENCRYPT = 0x8008
    NACK_NOT_TRANSACTIONAL_Q = 0x8009
    NACK_NOT_TRANSACTIONAL_MSG = 0x800A
    NACK_UNSUPPORTED_CRYPTO_PROVIDER = 0x800B
    NACK_SOURCE_COMPUTER_GUID_CHANGED = 0x800C
    NACK_MESSAGE_TOO_LARGE = 0x800D
    NACK_Q_DELETED = 0xC000
    NACK_Q_PURGED = 0xC001
    NACK_RECEIVE_TIMEOUT = 0xC002
    NACK_RECEIVE_TIMEOUT_AT_SENDER = 0xC003
    NACK_RECEIVE_REJECTED = 0xC004

    @property
    def is_acknowledgment(self) -> bool:
        """True for the class of an acknowledgment (positive or negative)."""
        return self in (MessageClass.ACK_REACH_QUEUE, MessageClass.ACK_RECEIVE) or bool(
            self & 0x8000
        )


def class_name(value: int) -> str:
    """``NACK_RECEIVE_TIMEOUT`` for 0xC002; the number in hex for a custom class."""
    try:
        return MessageClass(value).name
    except ValueError:
        return f"0x{value:04x}"
