"""What makes a send acceptable: the message's properties and MSMQ's transaction rules.

Theory of operation
-------------------
A message arrives already encoded (``wire.MessageProperties``); these checks
read its fields without decoding it again. Structure was checked by the
decoder; here the *values* are judged, with a typed error naming the field
(priority above 7, a label over 250 characters, an acknowledgment level
without an admin queue, ...). Then MSMQ's rules decide whether the send is
transactional: inside a transaction every destination must be a
transactional queue; outside one, ``SendMode`` says whether the caller asks
for a single-message transaction, for none, or lets the queue decide.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

from storage import QueueRecord
from wire import (
    MAX_LABEL_CHARS,
    MAX_MESSAGE_BODY,
    MAX_PACKET_SIZE,
    MessageClass,
    MessageProperties,
    quoted,
)

from .errors import InvalidArgument, MessageTooLarge, TransactionUsageError
from .outgoing import RemoteDestination

__all__ = [
    "PACKET_HEADROOM",
    "SendMode",
    "check_message",
    "check_remote_message",
    "fitted_for_wire",
    "send_is_transactional",
]

#: Longest label an MSMQ packet carries, in UTF-16 code units (without its NUL).
_WIRE_LABEL_UNITS: Final = 249
#: What an MSMQ packet adds to a message's own bytes, at the most: its fixed
#: headers (under 1 KiB) and its queue names as UTF-16 (three names of at most
#: about 420 characters, and the label's 249 units), with room to spare.
PACKET_HEADROOM: Final = 8 * 1024

_ACKNOWLEDGMENT_BITS: Final = 0x0F
_JOURNAL_LEVELS: Final = 3


class SendMode(enum.IntEnum):
    """How a send outside an explicit transaction is carried out (MQ_*_TRANSACTION)."""

    AUTO = 0  #: single-message transaction for a transactional queue, none otherwise
    NONE = 1  #: explicitly non-transactional (an error on a transactional queue)
    SINGLE = 2  #: a single-message transaction (an error on a non-transactional queue)


def check_message(message: MessageProperties) -> None:
    """Judge the values a sender set.

    Raises:
        MessageTooLarge: the body is over 4 MB.
        InvalidArgument: a property is out of range (the message says which).
    """
    if message.body_size > MAX_MESSAGE_BODY:
        msg = f"message body is {message.body_size} bytes; the limit is {MAX_MESSAGE_BODY} (4 MB)"
        raise MessageTooLarge(msg)
    label = message.label
    if len(label) > MAX_LABEL_CHARS:
        msg = f"label is {len(label)} characters; the limit is {MAX_LABEL_CHARS}"
        raise InvalidArgument(msg)
    if message.priority > 7:
        msg = f"priority must be 0..7, not {message.priority}"
        raise InvalidArgument(msg)
    if message.delivery > 1:
        msg = f"delivery must be 0 (express) or 1 (recoverable), not {message.delivery}"
        raise InvalidArgument(msg)
    acknowledge = message.acknowledge
    if acknowledge > _ACKNOWLEDGMENT_BITS:
        msg = f"acknowledge must be MQMSG_ACKNOWLEDGMENT bits (0..15), not {acknowledge}"
        raise InvalidArgument(msg)
    if acknowledge and not message.admin_queue:
        msg = "an acknowledgment level needs an admin queue to send acknowledgments to"
        raise InvalidArgument(msg)
    if message.journal > _JOURNAL_LEVELS:
        msg = f"journal level must be 0..3, not {message.journal}"
        raise InvalidArgument(msg)


def check_remote_message(message: MessageProperties) -> None:
    """Judge what only a message for another queue manager must satisfy: it
    must fit in one MSMQ packet (at most ``wire.MAX_PACKET_SIZE`` bytes with
    its headers: its own bytes and :data:`PACKET_HEADROOM`), and so must its
    label (249 UTF-16 units, no NUL).

    Raises:
        MessageTooLarge: the packet could be too large.
        InvalidArgument: the label does not fit.
    """
    size = len(message)
    if size + PACKET_HEADROOM > MAX_PACKET_SIZE:
        msg = (
            f"message is {size} bytes with its properties; a message for another queue "
            f"manager travels in one packet of at most {MAX_PACKET_SIZE} bytes with its "
            f"headers, which leaves {MAX_PACKET_SIZE - PACKET_HEADROOM} for the message"
        )
        raise MessageTooLarge(msg)
    label = message.label
    if not label:
        return
    units = len(label.encode("utf-16-le")) // 2
    if units > _WIRE_LABEL_UNITS or "\x00" in label:
        msg = (
            f"label is {units} UTF-16 units long or holds NUL; a message for another "
            f"queue manager takes at most {_WIRE_LABEL_UNITS} units and no NUL"
        )
        raise InvalidArgument(msg)


def fitted_for_wire(message: MessageProperties) -> MessageProperties:
    """``message`` made to pass :func:`check_remote_message`, for what this queue
    manager writes on its own to another one (an acknowledgment: it copies the
    label, and a NACK the body, of a message that may only ever have been
    local): the label without NUL and cut to 249 UTF-16 units, and the body
    left out if the packet would be too large."""
    label = message.label.replace("\x00", "")
    encoded = label.encode("utf-16-le")
    if len(encoded) > 2 * _WIRE_LABEL_UNITS:
        # Cut on a unit boundary, and never between the halves of a surrogate pair.
        label = encoded[: 2 * _WIRE_LABEL_UNITS].decode("utf-16-le", errors="ignore")
    if label != message.label:
        message = message.replace(label=label)
    if len(message) + PACKET_HEADROOM > MAX_PACKET_SIZE:
        message = message.replace(body=b"")
    return message


def send_is_transactional(
    targets: Sequence[object], *, in_transaction: bool, mode: SendMode
) -> bool:
    """Whether a send to ``targets`` is a transactional one, by MSMQ's rules.

    A queue on another queue manager cannot be checked here: inside a
    transaction (or as a single-message transaction) its copy is
    transactional, otherwise it is not, and the destination judges it.

    Raises:
        TransactionUsageError: the queues and the transaction (or mode) do not go together.
    """
    queues = [target for target in targets if isinstance(target, QueueRecord)]
    if not queues:
        return in_transaction or mode is SendMode.SINGLE
    for queue in queues:
        if in_transaction and not queue.transactional:
            msg = (
                f"queue {quoted(queue.display_name)} is not transactional; "
                "send to it outside the transaction"
            )
            raise TransactionUsageError(msg)
        if not in_transaction and mode is SendMode.NONE and queue.transactional:
            msg = (
                f"queue {quoted(queue.display_name)} is transactional; "
                "send inside a transaction or as a single-message transaction"
            )
            raise TransactionUsageError(msg)
        if not in_transaction and mode is SendMode.SINGLE and not queue.transactional:
            msg = (
                f"queue {quoted(queue.display_name)} is not transactional; "
                "send without a transaction"
            )
            raise TransactionUsageError(msg)
    if in_transaction:
        return True
    kinds = {queue.transactional for queue in queues}
    if len(kinds) > 1:
        msg = (
            "a multiple-element send outside a transaction cannot mix "
            "transactional queues with others"
        )
        raise TransactionUsageError(msg)
    return kinds == {True}


def fan_out_is_transactional(
    targets: Sequence[object], *, in_transaction: bool, mode: SendMode
) -> bool:
    """Whether a send to several queues (a multiple-element name or a
    distribution list) is transactional: in a transaction or as a
    single-message transaction it is, without one it is not; left to choose
    (``AUTO``), it is when every local queue it reaches is transactional.
    Targets that do not suit it are refused one by one (:func:`refused_copy`),
    never the whole send (seed 000)."""
    if in_transaction or mode is SendMode.SINGLE:
        return True
    if mode is SendMode.NONE:
        return False
    local = [target for target in targets if isinstance(target, QueueRecord)]
    return bool(local) and all(queue.transactional for queue in local)


def refused_copy(target: object, *, transactional: bool) -> int | None:
    """The NACK class a local queue refuses a fanned-out copy with, or None:
    a transactional message to a non-transactional queue, the reverse, or a
    list's target that no longer exists."""
    if isinstance(target, QueueRecord):
        if transactional and not target.transactional:
            return MessageClass.NACK_NOT_TRANSACTIONAL_Q
        if not transactional and target.transactional:
            return MessageClass.NACK_NOT_TRANSACTIONAL_MSG
        return None
    if isinstance(target, RemoteDestination):
        return None
    return MessageClass.NACK_BAD_DST_Q
