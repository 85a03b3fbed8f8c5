"""The [MS-MQQB] §4.1 example frames for the protocol tests, and what the spec's
rules fix in the packets around them.

The frames are the files of ``tests/wire/msmq/vectors/`` (unchanged; their
README lists the spec's errors). Here they are read as bytes, the two queue
managers of the example are named, and the errors that stand in the way of a
replay are corrected, each in one place and said why:

* 4.1.4 carries two GUIDs that appear nowhere else in the example; the
  response an acceptor must send echoes the request's ClientGuid and names
  the acceptor (:func:`corrected_establish_response`);
* 4.1.7 is cut short after 1650 of its 2224 bytes; the rest is more of the
  same UTF-16 "a" body and two padding bytes (:func:`completed_user_message`).

Bytes a sender chooses freely (the BaseHeader's Reserved byte, padding the
spec calls uninitialised) are compared with :func:`fixed_bytes`, which blanks
them.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import wire

VECTORS = Path(__file__).resolve().parents[1] / "wire" / "msmq" / "vectors"


def frame(name: str) -> bytes:
    """The bytes of ``vectors/<name>.hex``."""
    return bytes.fromhex((VECTORS / f"{name}.hex").read_text())


EC_REQUEST = frame("4.1.3-establish-connection-request")
EC_RESPONSE = frame("4.1.4-establish-connection-response")
CP_REQUEST = frame("4.1.5-connection-parameters-request")
CP_RESPONSE = frame("4.1.6-connection-parameters-response")
USER_MESSAGE_TRUNCATED = frame("4.1.7-user-message-truncated")
SESSION_ACK = frame("4.1.8-session-ack")
PING_REQUEST = frame("4.1.1-ping-request")
PING_RESPONSE = frame("4.1.2-ping-response")

#: The client (initiator) queue manager: the request's ClientGuid, read as
#: [MS-DTYP] writes a GUID (``bytes_le``).
CLIENT_QM = uuid.UUID(bytes_le=EC_REQUEST[20:36])
#: The server (acceptor) queue manager: the request's ServerGuid.
SERVER_QM = uuid.UUID(bytes_le=EC_REQUEST[36:52])
#: The request's TimeStamp (ms since the client's boot), as a ``now`` in seconds.
CLIENT_NOW = int.from_bytes(EC_REQUEST[52:56], "little") / 1000
#: The timeouts the client announces in 4.1.5, in seconds.
RECOVERABLE_ACK_TIMEOUT = int.from_bytes(CP_REQUEST[20:24], "little") / 1000
ACK_TIMEOUT = int.from_bytes(CP_REQUEST[24:28], "little") / 1000


def completed_user_message() -> bytes:
    """4.1.7 with the 572 body bytes its dump leaves out and its 2 padding bytes."""
    return USER_MESSAGE_TRUNCATED + b"a\x00" * 286 + b"\x00\x00"


def corrected_establish_response() -> bytes:
    """4.1.4 with the GUIDs the rules require: the request's ClientGuid echoed and the
    acceptor's own GUID (the example's server) as ServerGuid."""
    return EC_RESPONSE[:20] + CLIENT_QM.bytes_le + SERVER_QM.bytes_le + EC_RESPONSE[52:]


def fixed_bytes(data: bytes) -> bytes:
    """A packet's bytes without the BaseHeader's Reserved byte, which is garbage on the
    wire (0xC0, 0x5A and 0xCD in the example)."""
    return data[:1] + b"\x00" + data[2:]


def decode_one(data: bytes) -> wire.Packet:
    """The one packet ``data`` holds, through a ``wire.FrameDecoder`` fed byte by byte
    (as a socket may deliver it)."""
    decoder = wire.FrameDecoder()
    packets: list[wire.Packet] = []
    for index in range(len(data)):
        decoder.receive_data(data[index : index + 1])
        packet = decoder.next_packet()
        if packet is not None:
            packets.append(packet)
    assert len(packets) == 1
    assert decoder.buffered == 0
    return packets[0]
