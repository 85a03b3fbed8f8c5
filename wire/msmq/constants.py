"""Constants, flag masks and enumerations of the MSMQ session packets.

Every value here comes from [MS-MQMQ] (the data structures) or [MS-MQQB] (the
binary protocol); each class names its section. Bit numbering follows the spec
diagrams: bit 0 is the least significant bit of the little-endian integer, so
BaseHeader flag bytes ``0B 00`` mean PR=3 and IN=1.

Flag fields that carry both presence bits and free bits are split by the
codec: the presence bits (which headers follow, how a queue name is encoded)
are *derived* from the values when building and are not stored in the value;
the ``*_CARRIED_MASK`` constants name the bits that a value does carry.
"""

from __future__ import annotations

import uuid
from enum import IntEnum, IntFlag
from typing import Final

#: BaseHeader.VersionNumber, the only version there is ([MS-MQMQ] §2.2.19.1).
VERSION: Final = 0x10
#: BaseHeader.Signature as it appears on the wire (0x524F494C little-endian).
SIGNATURE: Final = b"LIOR"
#: The largest BaseHeader.PacketSize a peer may declare ([MS-MQMQ] §2.2.19.1, [MS-MQQB] §1.6).
MAX_PACKET_SIZE: Final = 0x00400000
#: Size of the BaseHeader that starts every session packet.
BASE_HEADER_SIZE: Final = 16
#: TimeToReachQueue / TimeToBeReceived meaning "never expires".
INFINITE: Final = 0xFFFFFFFF
#: The NULL GUID: QueueManagerAddress of a message sent to a direct format name.
NULL_GUID: Final = uuid.UUID(int=0)

#: PacketSize of an EstablishConnection packet ([MS-MQQB] §2.2.3): 16 + 4 + 552.
ESTABLISH_CONNECTION_SIZE: Final = 572
#: PacketSize of a ConnectionParameters packet ([MS-MQQB] §2.2.2): 16 + 4 + 12.
CONNECTION_PARAMETERS_SIZE: Final = 32
#: PacketSize of a stand-alone SessionAck packet ([MS-MQQB] §2.2.6): 16 + 4 + 16.
SESSION_ACK_SIZE: Final = 36
#: Size of a SessionHeader ([MS-MQMQ] §2.2.20.4).
SESSION_HEADER_SIZE: Final = 16
#: Size of the EstablishConnectionHeader padding ([MS-MQQB] §2.2.3.1).
ESTABLISH_CONNECTION_PADDING_SIZE: Final = 512
#: The padding an acceptor MUST send in its EstablishConnection response; the default here.
ESTABLISH_CONNECTION_PADDING: Final = b"\x5a" * ESTABLISH_CONNECTION_PADDING_SIZE
#: The smallest UserMessage: BaseHeader, fixed UserHeader, fixed MessagePropertiesHeader.
MIN_USER_MESSAGE_SIZE: Final = 16 + 48 + 56

#: The private queue number of ``order_queue$`` ([MS-MQQB] §2.2.4).
ORDER_QUEUE_NUMBER: Final = 0x00000004
#: The direct name suffix of ``order_queue$`` (after ``TCP:<ip>``), compared case-insensitively.
ORDER_QUEUE_SUFFIX: Final = "\\PRIVATE$\\order_queue$"
#: Label of OrderAck and FinalAck packets ([MS-MQQB] §2.2.4, §2.2.5).
ORDER_ACK_LABEL: Final = "QM Ordering Ack"
#: MessageSize of OrderAck and FinalAck packets ([MS-MQQB] §2.2.4.1, §2.2.5.1).
ORDER_ACK_BODY_SIZE: Final = 0x24

#: Longest Label in WCHARs, including the terminating NUL ([MS-MQMQ] §2.2.19.3).
MAX_LABEL_LENGTH: Final = 0xFA

#: SoapHeader section identifiers ([MS-MQMQ] §2.2.20.7).
SOAP_HEADER_SECTION_ID: Final = 0x0320
SOAP_BODY_SECTION_ID: Final = 0x0384

#: Ping.Signature ([MS-MQQB] §2.2.7), bytes ``48 55``.
PING_SIGNATURE: Final = 0x5548
#: Size of a Ping packet ([MS-MQQB] §2.2.7).
PING_SIZE: Final = 24

#: Reserved byte of EstablishConnectionHeader.OperatingSystem ([MS-MQQB] §2.2.3.1).
OPERATING_SYSTEM_RESERVED: Final = 0x10


class BaseFlags(IntFlag):
    """BaseHeader.Flags bits ([MS-MQMQ] §2.2.19.1).

    PR (bits 0-2) is the priority and is carried as ``BaseHeader.priority``.
    IN, SH and DH are presence bits derived from the packet type and the
    headers present. TR and the reserved bits are carried in ``BaseHeader.flags``.
    """

    #: IN: an internal packet (EstablishConnection, ConnectionParameters, SessionAck).
    INTERNAL = 0x0008
    #: SH: a SessionHeader is present.
    SESSION = 0x0010
    #: DH: a DebugHeader is present (user packets only).
    DEBUG = 0x0020
    #: TR: message tracing requested.
    TRACE = 0x0100


#: PR field of BaseHeader.Flags.
BASE_PRIORITY_MASK: Final = 0x0007
#: BaseHeader.Flags bits derived from the packet rather than carried.
BASE_STRUCTURAL_MASK: Final = int(BaseFlags.INTERNAL | BaseFlags.SESSION | BaseFlags.DEBUG)
#: BaseHeader.Flags bits carried in ``BaseHeader.flags``: TR and every reserved bit.
BASE_CARRIED_MASK: Final = 0xFFFF & ~(BASE_PRIORITY_MASK | BASE_STRUCTURAL_MASK)


class UserFlags(IntFlag):
    """UserHeader.Flags single bits ([MS-MQMQ] §2.2.19.2).

    Multi-bit fields have masks below (RC, DM, DQ, AQ, RQ). SH, TH, MP, CQ, MQ
    and HH are presence bits derived from the headers present; DQ, AQ and RQ are
    derived from the queue values. JN, JP, AH and the reserved bits are carried
    in ``UserHeader.flags``.
    """

    #: X1: reserved.
    RESERVED_X1 = 0x00000080
    #: JN: negative source journaling (MQMSG_DEADLETTER).
    JOURNAL_NEGATIVE = 0x00000100
    #: JP: positive source journaling (MQMSG_JOURNAL).
    JOURNAL_POSITIVE = 0x00000200
    #: SH: a SecurityHeader is present.
    SECURITY = 0x00080000
    #: TH: a TransactionHeader is present; the message is transactional.
    TRANSACTION = 0x00100000
    #: MP: a MessagePropertiesHeader is present. MUST always be set.
    PROPERTIES = 0x00200000
    #: CQ: the ConnectorType GUID is present.
    CONNECTOR = 0x00400000
    #: MQ: a MultiQueueFormatHeader is present.
    MULTI_QUEUE = 0x00800000
    #: X2: reserved.
    RESERVED_X2 = 0x01000000
    #: AH: the message arrived over HTTP; never set when sending.
    HTTP = 0x02000000
    #: HH: a SoapHeader is present.
    SOAP = 0x10000000


#: RC: hop count (bits 0-4).
USER_HOP_COUNT_MASK: Final = 0x0000001F
#: The most routing hops a packet may make ([MS-MQQB] §3.1.5.8.5: 0x1D): a
#: queue manager does not pass on one that would make more.
MAX_HOPS: Final = 0x1D
#: DM: delivery mode (bits 5-6).
USER_DELIVERY_SHIFT: Final = 5
USER_DELIVERY_MASK: Final = 0x00000060
#: DQ: destination queue format (bits 10-12).
USER_DQ_SHIFT: Final = 10
#: AQ: admin queue format (bits 13-15).
USER_AQ_SHIFT: Final = 13
#: RQ: response queue format (bits 16-18).
USER_RQ_SHIFT: Final = 16
USER_QUEUE_TYPE_MASK: Final = 0x7
#: UserHeader.Flags bits derived from the headers and queue values present.
USER_STRUCTURAL_MASK: Final = int(
    0x1C00
    | 0xE000
    | 0x70000
    | UserFlags.SECURITY
    | UserFlags.TRANSACTION
    | UserFlags.PROPERTIES
    | UserFlags.CONNECTOR
    | UserFlags.MULTI_QUEUE
    | UserFlags.SOAP
)
#: UserHeader.Flags bits carried in ``UserHeader.flags``: JN, JP, AH and the reserved bits.
USER_CARRIED_MASK: Final = 0xFFFFFFFF & ~(
    USER_STRUCTURAL_MASK | USER_HOP_COUNT_MASK | USER_DELIVERY_MASK
)


class DeliveryMode(IntEnum):
    """UserHeader.Flags.DM ([MS-MQMQ] §2.2.19.2). Transactional messages are recoverable."""

    #: Express: not recovered after a restart.
    EXPRESS = 0
    #: Recoverable (including transactional): persisted before it is acknowledged.
    RECOVERABLE = 1


class QueueFormatType(IntEnum):
    """The 3-bit DQ / AQ / RQ codes of UserHeader.Flags ([MS-MQMQ] §2.2.19.2).

    Each position allows a subset: DQ {0, 3, 5, 7}; AQ {0, 2, 3, 5, 6, 7}; RQ all.
    Any other code MUST close the session.
    """

    #: No queue; no field follows.
    NONE = 0
    #: RQ only: the response queue is the admin queue; no field follows.
    SAME_AS_ADMIN = 1
    #: PrivateQueueFormatNameId (u32) of a private queue on the source host.
    PRIVATE_ON_SOURCE = 2
    #: PrivateQueueFormatNameId (u32) of a private queue on the destination host.
    PRIVATE_ON_DESTINATION = 3
    #: RQ only: PrivateQueueFormatNameId (u32) on the admin queue's host.
    PRIVATE_ON_ADMIN_HOST = 4
    #: PublicQueueFormatName (GUID).
    PUBLIC = 5
    #: PrivateQueueFormatName (QM GUID + u32) on some other host.
    PRIVATE = 6
    #: DirectQueueFormatName (u16 byte count + UTF-16LE name, padded to 4).
    DIRECT = 7


#: Codes allowed in UserHeader.Flags.DQ.
DESTINATION_QUEUE_TYPES: Final = frozenset({0, 3, 5, 7})
#: Codes allowed in UserHeader.Flags.AQ.
ADMIN_QUEUE_TYPES: Final = frozenset({0, 2, 3, 5, 6, 7})
#: Codes allowed in UserHeader.Flags.RQ.
RESPONSE_QUEUE_TYPES: Final = frozenset(range(8))


class TransactionFlags(IntFlag):
    """TransactionHeader.Flags bits ([MS-MQMQ] §2.2.20.5).

    CG is a presence bit derived from ``connector_qm``; ID (bits 4-23) is carried
    as ``transaction_id``; FA, FM, LM and the unused bits 24-31 are carried in
    ``TransactionHeader.flags``.
    """

    #: CG: the ConnectorQMGuid field is present.
    CONNECTOR = 0x00000001
    #: FA: a FinalAck is required.
    FINAL_ACK = 0x00000002
    #: FM: first message of its transaction.
    FIRST = 0x00000004
    #: LM: last message of its transaction.
    LAST = 0x00000008


TRANSACTION_ID_SHIFT: Final = 4
#: ID: 20-bit per-sender transaction correlator.
TRANSACTION_ID_MASK: Final = 0x00FFFFF0
#: TransactionHeader.Flags bits carried in ``TransactionHeader.flags``.
TRANSACTION_CARRIED_MASK: Final = 0xFFFFFFFF & ~(
    int(TransactionFlags.CONNECTOR) | TRANSACTION_ID_MASK
)


class SecurityFlags(IntFlag):
    """SecurityHeader.Flags bits ([MS-MQMQ] §2.2.20.6). Carried whole; no bit is derived.

    ST (bits 0-3) is the sender id type (0 none, 1 SID, 2 QM GUID), AS (bits
    8-11) the authentication signature type. Windows sends the user SID even
    with AI clear ([MS-MQQB] §4.1.7), so AI does not decide what is parsed: the
    five sizes do.
    """

    #: AU: authenticated; MUST be 0.
    AUTHENTICATED = 0x0010
    #: EB: the body is encrypted.
    ENCRYPTED_BODY = 0x0020
    #: DE: the default cryptographic provider is used.
    DEFAULT_PROVIDER = 0x0040
    #: AI: SecurityData is present.
    DATA_PRESENT = 0x0080


SECURITY_SENDER_ID_TYPE_MASK: Final = 0x000F
SECURITY_SIGNATURE_TYPE_MASK: Final = 0x0F00


class AckFlags(IntFlag):
    """MessagePropertiesHeader.Flags: administration acknowledgements ([MS-MQMQ] §2.2.19.3).

    The same bits as MQMSG_ACKNOWLEDGMENT_*. Bits 4-7 are unused and carried.
    """

    #: PA: positive acknowledgement on arrival.
    POSITIVE_ARRIVAL = 0x01
    #: PR: positive acknowledgement on receive.
    POSITIVE_RECEIVE = 0x02
    #: NA: negative acknowledgement if not delivered.
    NEGATIVE_ARRIVAL = 0x04
    #: NR: negative acknowledgement if not received.
    NEGATIVE_RECEIVE = 0x08


class MessageClass(IntEnum):
    """MessagePropertiesHeader.MessageClass ([MS-MQMQ] §2.2.18.1.6; mq.h; [MC-MQAC] §2.2.2.9).

    In mq.h's layout bit 15 means NACK, bit 14 receive-time, bit 13 HTTP and
    the low 9 bits are the code. Applications may use custom values within the
    mask 0xE1FF, so the field is carried as a plain ``int``.
    """

    NORMAL = 0x0000
    REPORT = 0x0001
    ACK_REACH_QUEUE = 0x0002
    #: Internal transactional order acknowledgement ([MS-MQQB] §2.2.4).
    ORDER_ACK = 0x00FF
    #: Retrieved by a receiver; also the positive FinalAck ([MS-MQQB] §2.2.5).
    ACK_RECEIVE = 0x4000
    NACK_BAD_DST_Q = 0x8000
    #: [MS-MQMQ] calls it NACK_DELETED.
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


class VarType(IntEnum):
    """Common MessagePropertiesHeader.BodyType values (PROPVARIANT types, [MS-MQMQ] §2.2.12)."""

    EMPTY = 0x0000
    BSTR = 0x0008
    UI1_VECTOR = 0x1011


class PrivacyLevel(IntEnum):
    """MessagePropertiesHeader.PrivacyLevel ([MS-MQMQ] §2.2.19.3)."""

    NONE = 0
    BASE = 1
    ENHANCED = 3
    AES = 5


class HashAlgorithm(IntEnum):
    """MessagePropertiesHeader.HashAlgorithm ([MS-MQMQ] §2.2.19.3)."""

    MD2 = 0x8001
    MD4 = 0x8002
    MD5 = 0x8003
    SHA1 = 0x8004
    SHA256 = 0x800C
    SHA512 = 0x800E


class EncryptionAlgorithm(IntEnum):
    """MessagePropertiesHeader.EncryptionAlgorithm ([MS-MQMQ] §2.2.19.3)."""

    RC2 = 0x6602
    RC4 = 0x6801
    AES_128 = 0x660E
    AES_192 = 0x660F
    AES_256 = 0x6610


class DebugQueueType(IntEnum):
    """DebugHeader.Flags.QT (bits 0-1, [MS-MQMQ] §2.2.20.8); 2 and 3 are undefined."""

    NONE = 0
    PUBLIC = 1


DEBUG_QUEUE_TYPE_MASK: Final = 0x0003


class PacketType(IntEnum):
    """InternalHeader.Flags.PT (bits 0-3, [MS-MQQB] §2.2.1). Any other value closes the session."""

    SESSION_ACK = 0x1
    ESTABLISH_CONNECTION = 0x2
    CONNECTION_PARAMETERS = 0x3


class InternalFlags(IntFlag):
    """InternalHeader.Flags bits other than PT ([MS-MQQB] §2.2.1); all carried."""

    #: CS: the connection is refused. Only on EstablishConnection and ConnectionParameters.
    CONNECTION_REFUSED = 0x0010


INTERNAL_PACKET_TYPE_MASK: Final = 0x000F


class OperatingSystemFlags(IntFlag):
    """EstablishConnectionHeader.OperatingSystem bits ([MS-MQQB] §2.2.3.1).

    The low byte (RE) is reserved and MUST be 0x10 (:data:`OPERATING_SYSTEM_RESERVED`).
    """

    #: SE: no ping was sent before the session (echoed by the acceptor).
    NO_PING = 0x0100
    #: OS: the initiator runs a server-class operating system.
    SERVER = 0x0200
    #: QS: the transport supports guaranteed quality of service.
    QOS = 0x0400


class PingFlags(IntFlag):
    """Ping.Flags bits ([MS-MQQB] §2.2.7); the other 14 bits are garbage and carried."""

    #: RC: the initiator is not a server-class OS; echoed in the response.
    CLIENT = 0x0001
    #: RF: the acceptor would refuse a session now (responses only).
    REFUSE = 0x0002


class MqfHeaderId(IntEnum):
    """MQFAddressHeader.HeaderID / MQFSignatureHeader.ID ([MS-MQMQ] §2.2.20.2, §2.2.20.3)."""

    DESTINATION = 0x0064
    ADMIN = 0x00C8
    RESPONSE = 0x012C
    SIGNATURE = 0x015E


class MqfFormatType(IntEnum):
    """MQFFormatNameElement.FormatType ([MS-MQMQ] §2.2.18.1.4)."""

    PUBLIC = 0x0001
    PRIVATE = 0x0002
    DIRECT = 0x0003
    DISTRIBUTION_LIST = 0x0006
