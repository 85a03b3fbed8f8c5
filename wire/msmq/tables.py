"""Tables the MSMQ parser and builder share, so that both read the same definitions.

* The presence and structural flag bits as plain ints. The codec tests and sets
  them on every packet, and ``IntFlag`` arithmetic is both slow and would leak
  ``IntFlag`` values into the parsed integers.
* The three lists of a MultiQueueFormatHeader, in wire order.
* The UserHeader queue codes that hold a private queue number, and its host.
* The bound on the memos of decoded and encoded values, and how they are filled.
"""

from __future__ import annotations

from typing import Final, TypeVar

from .constants import (
    BaseFlags,
    InternalFlags,
    MqfHeaderId,
    QueueFormatType,
    TransactionFlags,
    UserFlags,
)

K = TypeVar("K")
V = TypeVar("V")

#: BaseHeader IN: an internal packet.
BASE_IN: Final = int(BaseFlags.INTERNAL)
#: BaseHeader SH: a SessionHeader is present.
BASE_SH: Final = int(BaseFlags.SESSION)
#: BaseHeader DH: a DebugHeader is present.
BASE_DH: Final = int(BaseFlags.DEBUG)
#: UserHeader MP: a MessagePropertiesHeader is present (always, on a valid message).
USER_MP: Final = int(UserFlags.PROPERTIES)
#: UserHeader CQ: the ConnectorType GUID is present.
USER_CQ: Final = int(UserFlags.CONNECTOR)
#: UserHeader TH: a TransactionHeader is present.
USER_TH: Final = int(UserFlags.TRANSACTION)
#: UserHeader SH: a SecurityHeader is present.
USER_SH: Final = int(UserFlags.SECURITY)
#: UserHeader HH: a SoapHeader is present.
USER_HH: Final = int(UserFlags.SOAP)
#: UserHeader MQ: a MultiQueueFormatHeader is present.
USER_MQ: Final = int(UserFlags.MULTI_QUEUE)
#: TransactionHeader CG: the ConnectorQMGuid is present.
TRANSACTION_CG: Final = int(TransactionFlags.CONNECTOR)
#: InternalHeader CS: the connection is refused.
INTERNAL_CS: Final = int(InternalFlags.CONNECTION_REFUSED)

#: The MQFAddressHeaders of a MultiQueueFormatHeader in wire order: HeaderID, the
#: name errors give the list, and the attribute of :class:`MultiQueueFormatHeader`.
MQF_LISTS: Final = (
    (MqfHeaderId.DESTINATION, "Destination", "destination"),
    (MqfHeaderId.ADMIN, "Administration", "admin"),
    (MqfHeaderId.RESPONSE, "Response", "response"),
)

#: The DQ / AQ / RQ codes of a PrivateQueueFormatNameId, with the host each one means.
PRIVATE_HOSTS: Final = {
    2: QueueFormatType.PRIVATE_ON_SOURCE,
    3: QueueFormatType.PRIVATE_ON_DESTINATION,
    4: QueueFormatType.PRIVATE_ON_ADMIN_HOST,
}

#: Entries a memo holds before it is emptied: a peer sending ever new names or
#: GUIDs costs at most a few megabytes.
MEMO_LIMIT: Final = 4096


def remember(memo: dict[K, V], key: K, value: V) -> V:
    """Store ``value`` under ``key`` in a memo, emptying the memo first when it is full."""
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo[key] = value
    return value
