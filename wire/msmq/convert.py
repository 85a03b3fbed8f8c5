"""Converting between qmgr's stored message and the MSMQ UserMessage packet.

Theory of operation
-------------------
qmgr keeps a message as :class:`~wire.MessageProperties` (encoded, one
definition of its fields); queue managers exchange it as a
:class:`~wire.UserMessage`. :func:`message_to_packet` and
:func:`packet_to_message` map one onto the other field by field, losslessly
wherever both sides can carry a value:

==========================  ==============================================
MessageProperties           UserMessage
==========================  ==============================================
source_qm, ordinal          UserHeader.source_qm, UserHeader.message_id
sent_time (float seconds)   UserHeader.sent_time (u32 seconds, truncated)
time_to_be_received         UserHeader.time_to_be_received
time_to_reach_queue         BaseHeader.time_to_reach_queue
priority                    BaseHeader.priority (0 when transactional)
delivery                    UserHeader.delivery (1 when transactional)
journal bit 1 / bit 2       UserHeader.flags JN (MQMSG_DEADLETTER) / JP (MQMSG_JOURNAL)
acknowledge                 MessagePropertiesHeader.flags bits 0-3 (AckFlags)
message_class               MessagePropertiesHeader.message_class
correlation_id              MessagePropertiesHeader.correlation_id
app_specific                MessagePropertiesHeader.application_tag
label                       MessagePropertiesHeader.label ("" <-> no Label field)
extension, body             MessagePropertiesHeader.extension, .body
transactional               TransactionHeader present
destination, admin_queue,   the ``destination``/``admin``/``response`` queues:
response_queue              addresses going out, text coming in (the caller
                            resolves names both ways; see :func:`queue_text`)
==========================  ==============================================

The losses, all deliberate:

* ``sent_time`` is truncated to whole seconds (the wire has no fraction), and
  must lie in 0 .. 2**32 - 1 to be sent.
* A transactional message goes out with priority 0 and recoverable delivery
  ([MS-MQMQ] §2.2.19.1, §2.2.19.2), whatever the stored value; coming in, a
  transactional packet's priority is ignored (as the spec tells a receiver to)
  and its delivery is taken as recoverable. Messages stamped by the queue
  manager (:meth:`MessageProperties.stamp`) already hold these values.
* An empty label is sent as no Label field (LabelLength 0), the form of a
  message without a label; a received empty Label (a lone NUL) and a missing
  one both become ``""``.
* The correlation id is 20 bytes on the wire whether set or not: coming in, it
  counts as present iff it is not all zeros, so a message whose correlation id
  is 20 zero bytes comes back without one.
* Coming in, bits 4-7 of MessagePropertiesHeader.flags (unused), the
  UserHeader.flags bits other than JN and JP, the hop count, the destination
  QM, the BodyType (always VT_VECTOR|VT_UI1 going out), the security,
  privacy and algorithm fields, the TransactionHeader's contents and the
  optional Debug, Soap and MultiQueueFormat headers are not kept: a
  :class:`MessageProperties` has no place for them. A queue manager that must
  forward a packet unchanged stores the packet, not the message.

Errors: going out, a field the packet cannot carry raises
:class:`~wire.LocalProtocolError` naming the ``MessageProperties`` field;
coming in, a value from the peer that a message cannot hold raises
:class:`~wire.RemoteProtocolError` naming the packet field, and nothing else.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final, NoReturn

from ..message_layout import CLASS_OFFSET, NO_CORRELATION
from ..message_properties import MessageProperties
from ..protocol_errors import LocalProtocolError, RemoteProtocolError
from .constants import (
    MAX_LABEL_LENGTH,
    NULL_GUID,
    QueueFormatType,
    UserFlags,
    VarType,
)
from .headers import TransactionHeader
from .packets import UserMessage
from .queues import (
    DirectQueue,
    PrivateQueue,
    PrivateQueueId,
    PublicQueue,
    QueueAddress,
    ResponseQueue,
    SameAsAdminQueue,
)
from .trusted import new

__all__ = [
    "direct_queue",
    "message_class_patch",
    "message_to_packet",
    "packet_to_message",
    "queue_text",
    "received_message",
    "scrubbed",
    "with_message_class",
]

#: Longest label on the wire, in UTF-16 units without the NUL.
_MAX_LABEL_UNITS: Final = MAX_LABEL_LENGTH - 1
_MAX_PRIORITY: Final = 7
#: MQMSG_ACKNOWLEDGMENT_* bits, the same as AckFlags.
_ACK_BITS: Final = 0x0F
#: MQMSG_DEADLETTER and MQMSG_JOURNAL, the journal levels the UserHeader carries.
_JOURNAL_DEADLETTER: Final = 0x01
_JOURNAL_JOURNAL: Final = 0x02
_JN: Final = int(UserFlags.JOURNAL_NEGATIVE)
_JP: Final = int(UserFlags.JOURNAL_POSITIVE)
_BODY_TYPE: Final = int(VarType.UI1_VECTOR)
_SENT_TIME_LIMIT: Final = float(1 << 32)
_DIRECT_PREFIX: Final = "DIRECT="
_DIRECT_TCP: Final = "DIRECT=TCP:"
_DIRECT_OS: Final = "DIRECT=OS:"

_U16: Final = struct.Struct("<H")

#: The packet field each MessageProperties field comes from, for errors coming in.
_WIRE_FIELDS: Final = {
    "source_qm": "UserHeader.source_qm",
    "ordinal": "UserHeader.message_id",
    "app_specific": "MessagePropertiesHeader.application_tag",
    "priority": "BaseHeader.priority",
    "delivery": "UserHeader.delivery",
    "acknowledge": "MessagePropertiesHeader.flags",
    "journal": "UserHeader.flags",
    "message_class": "MessagePropertiesHeader.message_class",
    "time_to_reach_queue": "BaseHeader.time_to_reach_queue",
    "time_to_be_received": "UserHeader.time_to_be_received",
    "sent_time": "UserHeader.sent_time",
    "correlation_id": "MessagePropertiesHeader.correlation_id",
    "label": "MessagePropertiesHeader.label",
    "admin_queue": "UserHeader.admin",
    "response_queue": "UserHeader.response",
    "destination": "UserHeader.destination",
    "extension": "MessagePropertiesHeader.extension",
    "body": "MessagePropertiesHeader.body",
}


def _local(field: str, message: str) -> NoReturn:
    raise LocalProtocolError(message, field=f"MessageProperties.{field}")


def _remote(field: str, message: str) -> NoReturn:
    raise RemoteProtocolError(message, field=field)


# --- MessageProperties -> UserMessage ---------------------------------------------------------


def message_to_packet(
    message: MessageProperties,
    *,
    destination: QueueAddress,
    admin: QueueAddress | None = None,
    response: ResponseQueue | None = None,
    transaction: TransactionHeader | None = None,
    hop_count: int = 0,
    destination_qm: uuid.UUID = NULL_GUID,
) -> UserMessage:
    """The UserMessage that carries ``message`` to ``destination``.

    Args:
        message: the message as stored.
        destination: the DestinationQueue, as the receiving queue manager names it.
        admin: the AdminQueue, where acknowledgements go (the caller turns
            ``message.admin_queue`` into an address the receiver can use).
        response: the ResponseQueue, likewise from ``message.response_queue``.
        transaction: the TransactionHeader; required iff ``message.transactional``.
        hop_count: UserHeader RC, the hops so far (0 from the source).
        destination_qm: UserHeader QueueManagerAddress: the NULL GUID for a direct
            name, else the destination queue manager's GUID.

    The packet is not built here: :func:`wire.build_packet` checks the queue
    addresses, ``hop_count`` and the transaction header.

    Raises:
        LocalProtocolError: a field of ``message`` the packet cannot carry
            (priority over 7, delivery over 1, journal or acknowledge bits the
            wire has no room for, a sent time outside 0 .. 2**32 - 1, a label
            over 249 UTF-16 units or holding NUL), or ``transaction`` given for
            a message that is not transactional, or missing for one that is.
    """
    transactional = message.transactional
    if transactional != (transaction is not None):
        if transactional:
            _local("transactional", "a transactional message needs a TransactionHeader")
        _local(
            "transactional", "a message not sent in a transaction cannot carry a TransactionHeader"
        )
    priority = message.priority
    if priority > _MAX_PRIORITY:
        _local("priority", f"{priority} is over the wire's 0..7")
    delivery = message.delivery
    if delivery > 1:
        _local("delivery", f"{delivery} is neither 0 (express) nor 1 (recoverable)")
    if transactional:
        priority = 0
        delivery = 1
    journal = message.journal
    if journal & ~(_JOURNAL_DEADLETTER | _JOURNAL_JOURNAL):
        _local("journal", f"{journal} is not a combination of MQMSG_DEADLETTER and MQMSG_JOURNAL")
    acknowledge = message.acknowledge
    if acknowledge & ~_ACK_BITS:
        _local("acknowledge", f"{acknowledge:#x} has bits beyond MQMSG_ACKNOWLEDGMENT_* (0x0f)")
    sent_time = message.sent_time
    if not 0.0 <= sent_time < _SENT_TIME_LIMIT:  # also refuses NaN
        _local("sent_time", f"{sent_time!r} is outside the wire's 0 .. 2**32 - 1 seconds")
    user_flags = 0
    if journal & _JOURNAL_DEADLETTER:
        user_flags = _JN
    if journal & _JOURNAL_JOURNAL:
        user_flags |= _JP
    # The trusted constructors skip the frozen dataclasses' __init__ (about 0.15 µs
    # a field; see wire.msmq.trusted), halving message_to_packet. They take every
    # field; build_packet checks the values, as it does for any.
    return new.UserMessage(
        base=new.BaseHeader(
            priority=priority,
            flags=0,
            reserved=0,
            time_to_reach_queue=message.time_to_reach_queue,
        ),
        user=new.UserHeader(
            source_qm=message.source_qm,
            destination_qm=destination_qm,
            time_to_be_received=message.time_to_be_received,
            sent_time=int(sent_time),
            message_id=message.ordinal,
            hop_count=hop_count,
            delivery=delivery,
            flags=user_flags,
            destination=destination,
            admin=admin,
            response=response,
            connector_type=None,
        ),
        transaction=transaction,
        security=None,
        properties=new.MessagePropertiesHeader(
            flags=acknowledge,
            message_class=message.message_class,
            correlation_id=message.correlation_id or NO_CORRELATION,
            body_type=_BODY_TYPE,
            application_tag=message.app_specific,
            allocation_body_size=None,
            privacy_level=0,
            hash_algorithm=0,
            encryption_algorithm=0,
            label=_wire_label(message.label),
            extension=message.extension,
            body=message.body,
            padding=b"",
        ),
        debug=None,
        soap=None,
        multi_queue=None,
        trailer=b"",
        session=None,
    )


def _wire_label(label: str) -> str | None:
    """The Label to send: None (no Label field) for ``""``; checked to fit."""
    if not label:
        return None
    if len(label) > _MAX_LABEL_UNITS // 2 and (units := _units(label)) > _MAX_LABEL_UNITS:
        _local("label", f"{units} UTF-16 units; the wire carries at most {_MAX_LABEL_UNITS}")
    if "\x00" in label:
        _local("label", "a label sent on the wire cannot contain NUL")
    return label


def _units(text: str) -> int:
    """Length of ``text`` in UTF-16 units (lone surrogates count one, as on the wire)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


# --- UserMessage -> MessageProperties ---------------------------------------------------------


def packet_to_message(
    packet: UserMessage, *, destination: str, admin_queue: str = "", response_queue: str = ""
) -> MessageProperties:
    """The message that ``packet`` carries, as qmgr stores it.

    Args:
        packet: a received UserMessage.
        destination: the format name the message was addressed to, as qmgr
            writes it (for example ``"DIRECT=" + name`` of its DestinationQueue).
        admin_queue: the AdminQueue's format name, or ``""`` for none.
        response_queue: the ResponseQueue's format name, or ``""``. When it is
            ``""`` and the packet says the response queue is the admin queue
            (:data:`~wire.SAME_AS_ADMIN`), ``admin_queue`` is used.

    Raises:
        RemoteProtocolError: a value the message cannot hold, naming the packet
            field: a delivery mode other than 0 or 1, a priority over 7 in a
            message that is not transactional, a label that is not text
            (a lone surrogate), holds NUL or is over 249 UTF-16 units, or a
            value out of its field's range or of the wrong type. Nothing else
            is raised, whatever the packet holds.
    """
    try:
        return _packet_to_message(packet, destination, admin_queue, response_queue)
    except RemoteProtocolError:
        raise
    except LocalProtocolError as exc:
        field = _wire_field(exc.field, packet, destination, admin_queue, response_queue)
        raise RemoteProtocolError(exc.message, field=field) from exc
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        # Only a UserMessage made by hand rather than by parse_packet gets here.
        msg = f"not a message: {type(exc).__name__}: {exc}"
        raise RemoteProtocolError(msg, field="UserMessage") from exc


def received_message(packet: UserMessage) -> MessageProperties:
    """The message ``packet`` carries as a receiving queue manager keeps it:
    :func:`packet_to_message` with its queues named as text (:func:`queue_text`).

    Raises:
        RemoteProtocolError: as :func:`packet_to_message`.
    """
    user = packet.user
    return packet_to_message(
        packet,
        destination=queue_text(user.destination),
        admin_queue=queue_text(user.admin, source_qm=user.source_qm),
        response_queue=queue_text(user.response, source_qm=user.source_qm),
    )


def scrubbed(text: str) -> str:
    """``text`` as qmgr keeps it: a Windows string is any run of 16-bit units
    ([MS-MQMQ] §2.2.19.3: a label is ``0*249(%x0001-FFFF)``), and an unpaired
    surrogate, which no UTF-8 store holds, becomes U+FFFD. A message whose
    label or queue name holds one is taken (its queue name then names no
    queue here), not refused with the whole session."""
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _packet_to_message(
    packet: UserMessage, destination: str, admin_queue: str, response_queue: str
) -> MessageProperties:
    user = packet.user
    properties = packet.properties
    transactional = packet.transaction is not None
    delivery = user.delivery
    if delivery not in (0, 1):
        _remote("UserHeader.delivery", f"DM={delivery!r} is neither express nor recoverable")
    if transactional:
        priority = 0
        delivery = 1
    else:
        priority = packet.base.priority
        if not 0 <= priority <= _MAX_PRIORITY:
            _remote("BaseHeader.priority", f"{priority!r} is outside 0..7")
    flags = user.flags
    journal = 0
    if flags & _JN:
        journal = _JOURNAL_DEADLETTER
    if flags & _JP:
        journal |= _JOURNAL_JOURNAL
    label = properties.label
    if label:
        # A character is one or two units, so only a long label can be too long.
        if len(label) > _MAX_LABEL_UNITS // 2 and _units(label) > _MAX_LABEL_UNITS:
            _remote("MessagePropertiesHeader.label", f"over {_MAX_LABEL_UNITS} UTF-16 units")
        if "\x00" in label:
            _remote("MessagePropertiesHeader.label", "NUL inside the label")
        label = scrubbed(label)
    else:
        label = ""
    correlation_id = properties.correlation_id
    if correlation_id == NO_CORRELATION:
        correlation_id = b""
    if not response_queue and isinstance(user.response, SameAsAdminQueue):
        response_queue = admin_queue
    destination, admin_queue, response_queue = (
        scrubbed(destination),
        scrubbed(admin_queue),
        scrubbed(response_queue),
    )
    return MessageProperties(
        body=properties.body,
        label=label,
        destination=destination,
        correlation_id=correlation_id,
        app_specific=properties.application_tag,
        priority=priority,
        delivery=delivery,
        acknowledge=properties.flags & _ACK_BITS,
        journal=journal,
        admin_queue=admin_queue,
        response_queue=response_queue,
        time_to_reach_queue=packet.base.time_to_reach_queue,
        time_to_be_received=user.time_to_be_received,
        message_class=properties.message_class,
        sent_time=float(user.sent_time),
        source_qm=user.source_qm,
        ordinal=user.message_id,
        transactional=transactional,
        extension=properties.extension,
    )


def _wire_field(
    field: str | None, packet: UserMessage, destination: str, admin_queue: str, response_queue: str
) -> str:
    """The packet field behind a MessageProperties encoding error (error path only)."""
    name = (field or "").removeprefix("MessageProperties.").removesuffix(" (length)")
    if name in _WIRE_FIELDS:
        return _WIRE_FIELDS[name]
    source_qm: object = packet.user.source_qm  # typed UUID, but a hand-made value may lie
    if not isinstance(source_qm, uuid.UUID):
        return "UserHeader.source_qm"
    # A string that is not text: find which.
    texts = (
        ("MessagePropertiesHeader.label", packet.properties.label or ""),
        ("UserHeader.destination", destination),
        ("UserHeader.admin", admin_queue),
        ("UserHeader.response", response_queue),
    )
    for wire_field, text in texts:
        try:
            text.encode("utf-8")
        except (UnicodeError, AttributeError):
            return wire_field
    return "UserMessage"


# --- queue names --------------------------------------------------------------------------------


def queue_text(
    queue: QueueAddress | ResponseQueue | None,
    *,
    source_qm: uuid.UUID | None = None,
    destination_qm: uuid.UUID | None = None,
) -> str:
    """The format name of a queue address as qmgr users write it, or ``""``.

    * :class:`DirectQueue`: ``DIRECT=`` + its name (``DIRECT=TCP:10.0.0.5\\private$\\q``).
    * :class:`PublicQueue`: ``PUBLIC=<queue guid>``.
    * :class:`PrivateQueue`: ``PRIVATE=<qm guid>\\<number, 8 hex digits>``, as MSMQ
      writes it (``PRIVATE=6f9619ff-8b86-d011-b42d-00c04fc964ff\\00000004``).
    * :class:`PrivateQueueId`: a queue number on some host, written like a
      PrivateQueue when that host's GUID is known: ``source_qm`` for one on the
      source (AQ/RQ=2), a ``destination_qm`` other than the NULL GUID for one on
      the destination (DQ/AQ/RQ=3). Otherwise, and always for one on the admin
      queue's host (RQ=4), it cannot be named: ``""``.
    * :data:`~wire.SAME_AS_ADMIN`: ``""``; the admin queue's text is the answer,
      which :func:`packet_to_message` uses when given ``""``.
    * None: ``""``.
    """
    if isinstance(queue, DirectQueue):
        return _DIRECT_PREFIX + scrubbed(queue.name)
    if isinstance(queue, PrivateQueue):
        return f"PRIVATE={queue.qm}\\{queue.number:08x}"
    if isinstance(queue, PublicQueue):
        return f"PUBLIC={queue.queue_id}"
    if isinstance(queue, PrivateQueueId):
        host: uuid.UUID | None = None
        if queue.host == QueueFormatType.PRIVATE_ON_SOURCE:
            host = source_qm
        elif queue.host == QueueFormatType.PRIVATE_ON_DESTINATION and destination_qm != NULL_GUID:
            host = destination_qm
        if host is not None:
            return f"PRIVATE={host}\\{queue.number:08x}"
    return ""


def direct_queue(text: str) -> DirectQueue | None:
    """The wire address of a ``DIRECT=TCP:`` or ``DIRECT=OS:`` format name, or None.

    The prefix is matched in any case and dropped; the rest is kept as
    written: ``direct_queue("direct=tcp:10.0.0.5\\private$\\q")`` is
    ``DirectQueue(name="tcp:10.0.0.5\\private$\\q")``. Text holding NUL, or with
    nothing after ``TCP:`` or ``OS:``, is None (no wire name can carry it).
    """
    head = text[: len(_DIRECT_TCP)].upper()
    tcp = head == _DIRECT_TCP and len(text) > len(_DIRECT_TCP)
    os_name = head.startswith(_DIRECT_OS) and len(text) > len(_DIRECT_OS)
    if not (tcp or os_name):
        return None
    if "\x00" in text:
        return None
    return DirectQueue(name=text[len(_DIRECT_PREFIX) :])


# --- message class ------------------------------------------------------------------------------


def message_class_patch(message_class: int) -> tuple[int, bytes]:
    """Where the class lies in an encoded message, and the bytes of ``message_class``
    there: ``(offset, bytes)``, the splice :func:`with_message_class` makes, for a
    layer that rewrites a stored message without decoding it (a dead letter moved
    back to its queue, with its class normal again).

    Raises:
        LocalProtocolError: ``message_class`` is not in 0..0xFFFF.
    """
    if not isinstance(message_class, int) or not 0 <= message_class <= 0xFFFF:
        _local("message_class", f"must be an integer in 0..0xffff, got {message_class!r:.40}")
    return CLASS_OFFSET, _U16.pack(message_class)


def with_message_class(message: MessageProperties, message_class: int) -> MessageProperties:
    """A copy of ``message`` with only its class changed (a NACK class on rejection).

    Splices the two class bytes into the encoded message and decodes the
    result: several times faster than ``message.replace(message_class=...)``,
    which re-encodes every field.

    Raises:
        LocalProtocolError: ``message_class`` is not in 0..0xFFFF.
    """
    offset, value = message_class_patch(message_class)
    raw = message.view
    return MessageProperties.from_bytes(b"".join((raw[:offset], value, raw[offset + len(value) :])))
