"""Typed, immutable values of the MSMQ packet headers.

Each class is one header of [MS-MQMQ] §2.2.19-§2.2.20 or [MS-MQQB] §2.2. The
rules that hold for all of them:

* Sizes, counts and presence bits are not stored: they follow from the value
  (a Label's LabelLength, the SH bit from ``UserMessage.security``, the DQ code
  from the destination's type) and are computed when building.
* Everything else on the wire is carried, including reserved fields and bits
  the spec calls arbitrary, so that a parsed packet rebuilds byte for byte.
  ``flags`` attributes hold only the bits that are not derived; the
  ``*_CARRIED_MASK`` constants in :mod:`wire.msmq.constants` say which.
* ``padding`` attributes hold a header's padding bytes, concatenated in wire
  order, when any of them is non-zero; an empty value means zero-filled. Values
  built locally therefore compare equal to their parsed copies.
* Construction does not validate (the parser builds these on its hot path from
  checked bytes); :func:`wire.build_packet` validates and raises
  :class:`~wire.LocalProtocolError` naming the field that cannot be encoded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from .constants import (
    INFINITE,
    NULL_GUID,
)
from .mqf import decode_format_names, encode_format_names
from .queues import FormatNameElement, QueueAddress, ResponseQueue


@dataclass(frozen=True, slots=True, kw_only=True)
class TxSequenceId:
    """TxSequenceID ([MS-MQMQ] §2.2.18.1.2): identifies one transactional sequence.

    Compared as the 64-bit number ``(timestamp << 32) | ordinal``.
    """

    ordinal: int
    timestamp: int

    @property
    def value(self) -> int:
        """The sequence id as the unsigned 64-bit integer the spec compares."""
        return (self.timestamp << 32) | self.ordinal

    @classmethod
    def from_value(cls, value: int) -> TxSequenceId:
        """The sequence id whose 64-bit value is ``value``."""
        return cls(ordinal=value & 0xFFFFFFFF, timestamp=value >> 32)

    def __lt__(self, other: TxSequenceId) -> bool:
        return self.value < other.value

    def __le__(self, other: TxSequenceId) -> bool:
        return self.value <= other.value

    def __gt__(self, other: TxSequenceId) -> bool:
        return self.value > other.value

    def __ge__(self, other: TxSequenceId) -> bool:
        return self.value >= other.value


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseHeader:
    """BaseHeader ([MS-MQMQ] §2.2.19.1), minus what every packet derives.

    VersionNumber (0x10), Signature (``LIOR``) and PacketSize are written by the
    builder; IN, SH and DH come from the packet type and the headers present.

    Attributes:
        priority: PR, 0..7 (default 3). Transactional messages MUST use 0.
        flags: TR and the reserved bits of Flags (:data:`BASE_CARRIED_MASK`).
        reserved: the Reserved byte; arbitrary on the wire (Windows sends garbage).
        time_to_reach_queue: seconds, relative to ``UserHeader.sent_time`` on the
            session wire; :data:`INFINITE` for packets that are not user messages.
    """

    priority: int = 3
    flags: int = 0
    reserved: int = 0
    time_to_reach_queue: int = INFINITE


@dataclass(frozen=True, slots=True, kw_only=True)
class InternalHeader:
    """InternalHeader ([MS-MQQB] §2.2.1), minus PT, which the packet type decides.

    Attributes:
        flags: CS (:attr:`InternalFlags.CONNECTION_REFUSED`) and the reserved bits.
        reserved: the Reserved field (MUST be 0 when sent, ignored on receipt).
    """

    flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class UserHeader:
    """UserHeader ([MS-MQMQ] §2.2.19.2): source, destination and identity of a message.

    Attributes:
        source_qm: SourceQueueManager, the original sender's GUID.
        destination_qm: QueueManagerAddress; the NULL GUID for direct names.
        time_to_be_received: seconds; :data:`INFINITE` for never.
        sent_time: Unix seconds when the message was sent.
        message_id: the sender's message ordinal; the id is (source_qm, message_id).
        hop_count: RC, routing hops so far (0..0x1D by the spec, 5 bits on the wire).
        delivery: DM, :class:`DeliveryMode` (2 bits on the wire; 2 and 3 are undefined).
        flags: JN, JP, AH and the reserved bits of Flags (:data:`USER_CARRIED_MASK`).
        destination: DestinationQueue, or None (DQ=0).
        admin: AdminQueue, or None (AQ=0). Required by the spec when any
            acknowledgement flag is set; the wire layer does not enforce that.
        response: ResponseQueue, :data:`SAME_AS_ADMIN` (RQ=1), or None.
        connector_type: ConnectorType GUID (CQ), or None.
    """

    source_qm: uuid.UUID
    destination_qm: uuid.UUID = NULL_GUID
    time_to_be_received: int = INFINITE
    sent_time: int
    message_id: int
    hop_count: int = 0
    delivery: int = 0
    flags: int = 0
    destination: QueueAddress | None
    admin: QueueAddress | None = None
    response: ResponseQueue | None = None
    connector_type: uuid.UUID | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionHeader:
    """TransactionHeader ([MS-MQMQ] §2.2.20.5): the exactly-once in-order sequence fields.

    Attributes:
        flags: FA, FM, LM and the unused bits 24-31 (:data:`TRANSACTION_CARRIED_MASK`).
        transaction_id: ID, the sender's 20-bit transaction correlator.
        sequence_id: TxSequenceID of the sender's current sequence.
        sequence_number: TxSequenceNumber, 1 for the first message of a sequence.
        previous_sequence_number: PreviousTxSequenceNumber, 0 if none.
        connector_qm: ConnectorQMGuid (CG), or None.
    """

    flags: int = 0
    transaction_id: int = 0
    sequence_id: TxSequenceId
    sequence_number: int
    previous_sequence_number: int
    connector_qm: uuid.UUID | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityHeader:
    """SecurityHeader ([MS-MQMQ] §2.2.20.6): parsed and carried, never interpreted.

    The five sizes are the lengths of the five items; each item is padded to 4.

    Attributes:
        flags: Flags, whole (:class:`SecurityFlags`).
        sender_id: SecurityID (a SID, or a QM GUID).
        encryption_key: EncryptionKey.
        signature: Signature.
        sender_cert: SenderCert.
        provider_info: ProviderInfo.
        padding: the items' padding, concatenated; empty means zero-filled.
    """

    flags: int = 0
    sender_id: bytes = b""
    encryption_key: bytes = b""
    signature: bytes = b""
    sender_cert: bytes = b""
    provider_info: bytes = b""
    padding: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagePropertiesHeader:
    """MessagePropertiesHeader ([MS-MQMQ] §2.2.19.3): class, label and body of a message.

    Attributes:
        flags: the administration acknowledgement bits (:class:`AckFlags`) and bits 4-7.
        message_class: MessageClass (:class:`MessageClass`, or a custom value).
        correlation_id: CorrelationID, 20 opaque bytes.
        body_type: BodyType, a VARTYPE (:class:`VarType`).
        application_tag: ApplicationTag.
        allocation_body_size: AllocationBodySize, or None when it equals the body
            size (the usual case; it is larger only for encrypted bodies).
        privacy_level: PrivacyLevel (:class:`PrivacyLevel`).
        hash_algorithm: HashAlgorithm (:class:`HashAlgorithm`).
        encryption_algorithm: EncryptionAlgorithm (:class:`EncryptionAlgorithm`).
        label: Label without its NUL, at most 249 UTF-16 units; None when
            LabelLength is 0 (no Label field), ``""`` for a lone NUL.
        extension: ExtensionData.
        body: MessageBody.
        padding: the padding that makes the header a multiple of 4; empty means zeros.
    """

    flags: int = 0
    message_class: int = 0
    correlation_id: bytes = bytes(20)
    body_type: int = 0
    application_tag: int = 0
    allocation_body_size: int | None = None
    privacy_level: int = 0
    hash_algorithm: int = 0
    encryption_algorithm: int = 0
    label: str | None = None
    extension: bytes = b""
    body: bytes = b""
    padding: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class DebugHeader:
    """DebugHeader ([MS-MQMQ] §2.2.20.8): where trace reports go.

    Attributes:
        flags: Flags without QT (QT is 1 when ``queue`` is set, else 0).
        reserved: Reserved.
        queue: QueueIdentifier, the public report queue's GUID, or None.
    """

    flags: int = 0
    reserved: int = 0
    queue: uuid.UUID | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SoapHeader:
    """SoapHeader ([MS-MQMQ] §2.2.20.7): two application strings.

    Attributes:
        header: the Header string without its NUL; None when HeaderDataLength is 0.
        body: the Body string without its NUL; None when BodyDataLength is 0.
        reserved: Reserved (after the 0x0320 section id).
        reserved1: Reserved1 (after the 0x0384 section id).
        padding: bytes that align the next header to 4; empty means zeros.
    """

    header: str | None = None
    body: str | None = None
    reserved: int = 0
    reserved1: int = 0
    padding: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class MqfAddressHeader:
    """MQFAddressHeader ([MS-MQMQ] §2.2.20.2): one list of a MultiQueueFormatHeader.

    The FormatNameList is carried opaque; :meth:`elements` decodes it and
    :meth:`from_elements` encodes one. HeaderID follows from the list's position.

    Attributes:
        element_count: ElementCount.
        format_names: FormatNameList, the encoded elements (HeaderSize - 12 bytes).
        reserved: Reserved.
        padding: bytes that align the next list to 4; empty means zeros.
    """

    element_count: int = 0
    format_names: bytes = b""
    reserved: int = 0
    padding: bytes = b""

    def elements(self) -> tuple[FormatNameElement, ...]:
        """Decode the format names.

        Raises:
            RemoteProtocolError: the list does not hold ``element_count`` valid elements.
        """
        return decode_format_names(self.format_names, self.element_count)

    @classmethod
    def from_elements(cls, elements: tuple[FormatNameElement, ...]) -> MqfAddressHeader:
        """The address header listing ``elements``.

        Raises:
            LocalProtocolError: an element cannot be encoded.
        """
        return cls(element_count=len(elements), format_names=encode_format_names(elements))


@dataclass(frozen=True, slots=True, kw_only=True)
class MqfSignatureHeader:
    """MQFSignatureHeader ([MS-MQMQ] §2.2.20.3): the signature of a multi-queue message.

    Attributes:
        signature: Signature bytes.
        reserved: Reserved.
        padding: bytes that align the next header to 4; empty means zeros.
    """

    signature: bytes = b""
    reserved: int = 0
    padding: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiQueueFormatHeader:
    """MultiQueueFormatHeader ([MS-MQMQ] §2.2.20.1): every destination of a multi-queue send."""

    destination: MqfAddressHeader = MqfAddressHeader()
    admin: MqfAddressHeader = MqfAddressHeader()
    response: MqfAddressHeader = MqfAddressHeader()
    signature: MqfSignatureHeader = MqfSignatureHeader()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionHeader:
    """SessionHeader ([MS-MQMQ] §2.2.20.4): a cumulative session acknowledgement.

    Attributes:
        ack_sequence_number: AckSequenceNumber, user packets received on the session.
        recoverable_ack_sequence_number: RecoverableMsgAckSeqNumber, the bitmap's base.
        recoverable_ack_flags: RecoverableMsgAckFlags; bit k acks base + k.
        user_message_sequence_number: UserMsgSequenceNumber, user packets sent.
        recoverable_message_sequence_number: RecoverableMsgSeqNumber, recoverable sent.
        window_size: WindowSize (default 64; 1 signals memory pressure).
        reserved: Reserved.
    """

    ack_sequence_number: int = 0
    recoverable_ack_sequence_number: int = 0
    recoverable_ack_flags: int = 0
    user_message_sequence_number: int = 0
    recoverable_message_sequence_number: int = 0
    window_size: int = 64
    reserved: int = 0
