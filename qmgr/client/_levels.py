"""Acknowledgment and journal levels a sender asks for, and the classes of reports.

``send(..., acknowledge=Acknowledge.FULL_RECEIVE, admin_queue="acks",
journal=Journal.DEADLETTER)`` asks for an acknowledgment of every outcome in
``acks`` and, if the message dies, a copy in the sending queue manager's
dead-letter queue. The values are MSMQ's (mq.h), so a number works too.
"""

from __future__ import annotations

import enum

from wire import MessageClass

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


# MessageClass is the wire package's (MQMSG_CLASS_*), re-exported by the SDK.


def class_name(value: int) -> str:
    """``NACK_RECEIVE_TIMEOUT`` for 0xC002; the number in hex for a custom class."""
    try:
        return MessageClass(value).name
    except ValueError:
        return f"0x{value:04x}"
