"""Wire formats of qmgr: pure data, no I/O.

Layering rule: this package imports nothing from ``qmgr`` or ``storage``, opens
no sockets, reads no clock and never sleeps. It holds construct layouts, typed
immutable values, ``parse_*``/``build_*`` functions and sans-IO frame decoders.
Two formats live here:

* the MSMQ session packets of [MS-MQMQ]/[MS-MQQB] that queue managers exchange
  on TCP port 1801 (``parse_packet``, ``build_packet``, ``FrameDecoder``);
* qmgr's own client protocol (``wire.client_frames``), spoken between the
  daemon and the SDK;
* :class:`MessageProperties`, the one definition of a message's fields and
  their bytes, which the client protocol carries and the store keeps.

Both share the error tree (``ProtocolError`` with ``RemoteProtocolError`` for
malformed input and ``LocalProtocolError`` for values that cannot be built)
and the receive buffer.
"""

from __future__ import annotations

from ._errors import LocalProtocolError as LocalProtocolError
from ._errors import ProtocolError as ProtocolError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._message import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from ._message import MAX_MESSAGE_BODY as MAX_MESSAGE_BODY
from ._message import MessageProperties as MessageProperties
from ._message import format_message_id as format_message_id

# --- MSMQ packets (begin) ---
from ._msmq_acks import FinalAck as FinalAck
from ._msmq_acks import OrderAck as OrderAck
from ._msmq_acks import PacketKind as PacketKind
from ._msmq_acks import classify_packet as classify_packet
from ._msmq_build import build_packet as build_packet
from ._msmq_constants import INFINITE as INFINITE
from ._msmq_constants import MAX_PACKET_SIZE as MAX_PACKET_SIZE
from ._msmq_constants import NULL_GUID as NULL_GUID
from ._msmq_constants import ORDER_ACK_LABEL as ORDER_ACK_LABEL
from ._msmq_constants import AckFlags as AckFlags
from ._msmq_constants import BaseFlags as BaseFlags
from ._msmq_constants import DeliveryMode as DeliveryMode
from ._msmq_constants import EncryptionAlgorithm as EncryptionAlgorithm
from ._msmq_constants import HashAlgorithm as HashAlgorithm
from ._msmq_constants import InternalFlags as InternalFlags
from ._msmq_constants import MessageClass as MessageClass
from ._msmq_constants import OperatingSystemFlags as OperatingSystemFlags
from ._msmq_constants import PacketType as PacketType
from ._msmq_constants import PingFlags as PingFlags
from ._msmq_constants import PrivacyLevel as PrivacyLevel
from ._msmq_constants import QueueFormatType as QueueFormatType
from ._msmq_constants import SecurityFlags as SecurityFlags
from ._msmq_constants import TransactionFlags as TransactionFlags
from ._msmq_constants import UserFlags as UserFlags
from ._msmq_constants import VarType as VarType
from ._msmq_convert import direct_queue as direct_queue
from ._msmq_convert import message_to_packet as message_to_packet
from ._msmq_convert import packet_to_message as packet_to_message
from ._msmq_convert import queue_text as queue_text
from ._msmq_convert import with_message_class as with_message_class
from ._msmq_decoder import FrameDecoder as FrameDecoder
from ._msmq_headers import BaseHeader as BaseHeader
from ._msmq_headers import DebugHeader as DebugHeader
from ._msmq_headers import InternalHeader as InternalHeader
from ._msmq_headers import MessagePropertiesHeader as MessagePropertiesHeader
from ._msmq_headers import MqfAddressHeader as MqfAddressHeader
from ._msmq_headers import MqfSignatureHeader as MqfSignatureHeader
from ._msmq_headers import MultiQueueFormatHeader as MultiQueueFormatHeader
from ._msmq_headers import SecurityHeader as SecurityHeader
from ._msmq_headers import SessionHeader as SessionHeader
from ._msmq_headers import SoapHeader as SoapHeader
from ._msmq_headers import TransactionHeader as TransactionHeader
from ._msmq_headers import TxSequenceId as TxSequenceId
from ._msmq_headers import UserHeader as UserHeader
from ._msmq_packets import ConnectionParameters as ConnectionParameters
from ._msmq_packets import EstablishConnection as EstablishConnection
from ._msmq_packets import Packet as Packet
from ._msmq_packets import SessionAck as SessionAck
from ._msmq_packets import UserMessage as UserMessage
from ._msmq_parse import parse_packet as parse_packet
from ._msmq_ping import Ping as Ping
from ._msmq_ping import build_ping as build_ping
from ._msmq_ping import parse_ping as parse_ping
from ._msmq_queues import ORDER_QUEUE as ORDER_QUEUE
from ._msmq_queues import SAME_AS_ADMIN as SAME_AS_ADMIN
from ._msmq_queues import DirectQueue as DirectQueue
from ._msmq_queues import DistributionList as DistributionList
from ._msmq_queues import FormatNameElement as FormatNameElement
from ._msmq_queues import PrivateQueue as PrivateQueue
from ._msmq_queues import PrivateQueueId as PrivateQueueId
from ._msmq_queues import PublicQueue as PublicQueue
from ._msmq_queues import QueueAddress as QueueAddress
from ._msmq_queues import ResponseQueue as ResponseQueue
from ._msmq_queues import SameAsAdminQueue as SameAsAdminQueue
from ._msmq_queues import is_order_queue as is_order_queue
# --- MSMQ packets (end) ---
