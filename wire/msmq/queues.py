"""Queue format names as they appear inside MSMQ packets.

The UserHeader names up to three queues (destination, admin, response); each
is encoded by a 3-bit code in UserHeader.Flags that picks one of the layouts
of [MS-MQMQ] §2.2.18.1.5 and §2.2.18.1.7. These values are those layouts; the
code is derived from the value when building (``PrivateQueueId.host`` keeps
the three codes that share the u32 layout apart).

A direct name is carried without its ``DIRECT=`` prefix, exactly as on the
wire, e.g. ``OS:a04bm02\\q`` or ``TCP:10.0.0.5\\PRIVATE$\\order_queue$``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .constants import ORDER_QUEUE_NUMBER, ORDER_QUEUE_SUFFIX, QueueFormatType


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateQueueId:
    """PrivateQueueFormatNameId ([MS-MQMQ] §2.2.18.1.5.1): a private queue number.

    Attributes:
        number: the private queue identifier on its host (``order_queue$`` is 4).
        host: which host the number refers to; one of
            :attr:`QueueFormatType.PRIVATE_ON_SOURCE` (AQ, RQ),
            :attr:`QueueFormatType.PRIVATE_ON_DESTINATION` (DQ, AQ, RQ) or
            :attr:`QueueFormatType.PRIVATE_ON_ADMIN_HOST` (RQ only).
    """

    number: int
    host: QueueFormatType = QueueFormatType.PRIVATE_ON_DESTINATION


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicQueue:
    """PublicQueueFormatName ([MS-MQMQ] §2.2.18.1.7.1): a queue known by its GUID."""

    queue_id: uuid.UUID


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateQueue:
    """PrivateQueueFormatName ([MS-MQMQ] §2.2.18.1.7.2): a private queue on a named host.

    Attributes:
        qm: the GUID of the queue manager that hosts the queue.
        number: the private queue identifier on that host.
    """

    qm: uuid.UUID
    number: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectQueue:
    """DirectQueueFormatName ([MS-MQMQ] §2.2.18.1.5.2): a queue by its direct name.

    Attributes:
        name: the name without ``DIRECT=``, e.g. ``TCP:10.0.0.5\\private$\\orders``.
            It may not contain NUL; the terminating NUL is added on the wire.
        padding: the bytes that pad the name to 4 relative to its header, as
            received when any of them is non-zero; empty means zero-filled.
            Inside a MultiQueueFormatHeader element list padding is not kept.
    """

    name: str
    padding: bytes = b""

    def is_order_queue(self) -> bool:
        """Whether this names a queue manager's ``order_queue$`` (case-insensitive)."""
        return self.name.casefold().endswith(_ORDER_QUEUE_SUFFIX_FOLDED)


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributionList:
    """MQFDistributionQueueFormatName ([MS-MQMQ] §2.2.18.1.4.2); only in multi-queue lists."""

    list_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class SameAsAdminQueue:
    """UserHeader.Flags.RQ = 1: the response queue is the admin queue; no field follows."""


#: ``order_queue$`` as private queue 4 on the destination, where OrderAcks and FinalAcks go.
ORDER_QUEUE = PrivateQueueId(number=ORDER_QUEUE_NUMBER)

#: The one :class:`SameAsAdminQueue` value.
SAME_AS_ADMIN = SameAsAdminQueue()

#: A queue named in the UserHeader.
QueueAddress = PrivateQueueId | PublicQueue | PrivateQueue | DirectQueue
#: A response queue: any queue address, or "the same as the admin queue".
ResponseQueue = QueueAddress | SameAsAdminQueue
#: An element of a MultiQueueFormatHeader list ([MS-MQMQ] §2.2.18.1.4).
FormatNameElement = PublicQueue | PrivateQueue | DirectQueue | DistributionList

_ORDER_QUEUE_SUFFIX_FOLDED = ORDER_QUEUE_SUFFIX.casefold()


def is_order_queue(queue: QueueAddress | None) -> bool:
    """Whether ``queue`` addresses the receiving queue manager's ``order_queue$``.

    Per [MS-MQQB] §2.2.4 that is either the private queue number 4 on the
    destination host (DQ=3), or a direct name ``TCP:<ip>\\PRIVATE$\\order_queue$``
    (DQ=7; ``SPX:`` for the legacy transport).
    """
    if isinstance(queue, PrivateQueueId):
        return (
            queue.number == ORDER_QUEUE_NUMBER
            and queue.host == QueueFormatType.PRIVATE_ON_DESTINATION
        )
    if isinstance(queue, DirectQueue):
        return queue.is_order_queue()
    return False
