"""The MSMQ session packets of [MS-MQMQ]/[MS-MQQB], as pure formats (no I/O).

Queue managers exchange these packets on TCP port 1801 (and pings on UDP port
3527). This package holds them as typed immutable values and turns them into
bytes and back:

* values: :mod:`~wire.msmq.queues` (queue format names),
  :mod:`~wire.msmq.headers` (one class per header), :mod:`~wire.msmq.packets`
  (the four session packets), :mod:`~wire.msmq.acks` (OrderAck and FinalAck,
  and :func:`classify_packet`), :mod:`~wire.msmq.ping`;
* the codec: :mod:`~wire.msmq.parse` and :mod:`~wire.msmq.parse_headers`
  (:func:`parse_packet`), :mod:`~wire.msmq.build` (:func:`build_packet`), and
  the sans-IO stream decoder :mod:`~wire.msmq.decoder` (:class:`FrameDecoder`);
* the definitions they share: :mod:`~wire.msmq.constants` (sizes, flag masks,
  enumerations, with their spec sections), :mod:`~wire.msmq.layouts` (the
  construct layouts: the specification the codec follows),
  :mod:`~wire.msmq.fixed` (their fixed parts compiled to ``struct``),
  :mod:`~wire.msmq.tables`, :mod:`~wire.msmq.reading` (the parser's
  bounds-checked reads), :mod:`~wire.msmq.text` (UTF-16 strings),
  :mod:`~wire.msmq.mqf` (multi-queue format name lists) and
  :mod:`~wire.msmq.trusted` (fast constructors for checked values);
* :mod:`~wire.msmq.convert`: qmgr's stored message
  (:class:`~wire.MessageProperties`) to a UserMessage and back.

The names below are the public surface; ``wire`` re-exports every one of them.
Errors are those of :mod:`wire.protocol_errors`: malformed bytes raise
``RemoteProtocolError``, values that cannot be built ``LocalProtocolError``.
"""

from __future__ import annotations

from .acks import FinalAck as FinalAck
from .acks import OrderAck as OrderAck
from .acks import PacketKind as PacketKind
from .acks import classify_packet as classify_packet
from .build import build_packet as build_packet
from .constants import INFINITE as INFINITE
from .constants import MAX_HOPS as MAX_HOPS
from .constants import MAX_PACKET_SIZE as MAX_PACKET_SIZE
from .constants import NULL_GUID as NULL_GUID
from .constants import ORDER_ACK_LABEL as ORDER_ACK_LABEL
from .constants import AckFlags as AckFlags
from .constants import BaseFlags as BaseFlags
from .constants import DeliveryMode as DeliveryMode
from .constants import EncryptionAlgorithm as EncryptionAlgorithm
from .constants import HashAlgorithm as HashAlgorithm
from .constants import InternalFlags as InternalFlags
from .constants import MessageClass as MessageClass
from .constants import OperatingSystemFlags as OperatingSystemFlags
from .constants import PacketType as PacketType
from .constants import PingFlags as PingFlags
from .constants import PrivacyLevel as PrivacyLevel
from .constants import QueueFormatType as QueueFormatType
from .constants import SecurityFlags as SecurityFlags
from .constants import TransactionFlags as TransactionFlags
from .constants import UserFlags as UserFlags
from .constants import VarType as VarType
from .convert import direct_queue as direct_queue
from .convert import message_class_patch as message_class_patch
from .convert import message_to_packet as message_to_packet
from .convert import packet_to_message as packet_to_message
from .convert import queue_text as queue_text
from .convert import received_message as received_message
from .convert import scrubbed as scrubbed
from .convert import with_message_class as with_message_class
from .decoder import FrameDecoder as FrameDecoder
from .headers import BaseHeader as BaseHeader
from .headers import DebugHeader as DebugHeader
from .headers import InternalHeader as InternalHeader
from .headers import MessagePropertiesHeader as MessagePropertiesHeader
from .headers import MqfAddressHeader as MqfAddressHeader
from .headers import MqfSignatureHeader as MqfSignatureHeader
from .headers import MultiQueueFormatHeader as MultiQueueFormatHeader
from .headers import SecurityHeader as SecurityHeader
from .headers import SessionHeader as SessionHeader
from .headers import SoapHeader as SoapHeader
from .headers import TransactionHeader as TransactionHeader
from .headers import TxSequenceId as TxSequenceId
from .headers import UserHeader as UserHeader
from .packets import ConnectionParameters as ConnectionParameters
from .packets import EstablishConnection as EstablishConnection
from .packets import Packet as Packet
from .packets import SessionAck as SessionAck
from .packets import UserMessage as UserMessage
from .parse import parse_packet as parse_packet
from .ping import Ping as Ping
from .ping import build_ping as build_ping
from .ping import parse_ping as parse_ping
from .queues import ORDER_QUEUE as ORDER_QUEUE
from .queues import SAME_AS_ADMIN as SAME_AS_ADMIN
from .queues import DirectQueue as DirectQueue
from .queues import DistributionList as DistributionList
from .queues import FormatNameElement as FormatNameElement
from .queues import PrivateQueue as PrivateQueue
from .queues import PrivateQueueId as PrivateQueueId
from .queues import PublicQueue as PublicQueue
from .queues import QueueAddress as QueueAddress
from .queues import ResponseQueue as ResponseQueue
from .queues import SameAsAdminQueue as SameAsAdminQueue
from .queues import is_order_queue as is_order_queue

__all__ = [
    "INFINITE",
    "MAX_HOPS",
    "MAX_PACKET_SIZE",
    "NULL_GUID",
    "ORDER_ACK_LABEL",
    "ORDER_QUEUE",
    "SAME_AS_ADMIN",
    "AckFlags",
    "BaseFlags",
    "BaseHeader",
    "ConnectionParameters",
    "DebugHeader",
    "DeliveryMode",
    "DirectQueue",
    "DistributionList",
    "EncryptionAlgorithm",
    "EstablishConnection",
    "FinalAck",
    "FormatNameElement",
    "FrameDecoder",
    "HashAlgorithm",
    "InternalFlags",
    "InternalHeader",
    "MessageClass",
    "MessagePropertiesHeader",
    "MqfAddressHeader",
    "MqfSignatureHeader",
    "MultiQueueFormatHeader",
    "OperatingSystemFlags",
    "OrderAck",
    "Packet",
    "PacketKind",
    "PacketType",
    "Ping",
    "PingFlags",
    "PrivacyLevel",
    "PrivateQueue",
    "PrivateQueueId",
    "PublicQueue",
    "QueueAddress",
    "QueueFormatType",
    "ResponseQueue",
    "SameAsAdminQueue",
    "SecurityFlags",
    "SecurityHeader",
    "SessionAck",
    "SessionHeader",
    "SoapHeader",
    "TransactionFlags",
    "TransactionHeader",
    "TxSequenceId",
    "UserFlags",
    "UserHeader",
    "UserMessage",
    "VarType",
    "build_packet",
    "build_ping",
    "classify_packet",
    "direct_queue",
    "is_order_queue",
    "message_class_patch",
    "message_to_packet",
    "packet_to_message",
    "parse_packet",
    "parse_ping",
    "queue_text",
    "received_message",
    "scrubbed",
    "with_message_class",
]
