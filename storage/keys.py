"""Key codecs of the store's databases.

Theory of operation
-------------------
All integers in keys are big-endian and fixed width, so LMDB's byte order is
the numeric order we need: a cursor range scan over one queue's prefix returns
its messages in delivery order.

The databases of the environment (the named ones, and the main one, which
holds the messages):

====================  ==========================================  ==========================
database              key                                         value
====================  ==========================================  ==========================
``meta``              UTF-8 text: ``schema_version``              u32 big-endian
                      ``qm_guid``                                 16 bytes (UUID, big-endian)
                      ``next_queue_id``                           u32 big-endian
                      ``ordinal_limit``                           u64 big-endian
                      ``sequence_stamp``                          u32 big-endian
                      ``history_counter``                         u64 big-endian
                      ``setting:<k>``                             UTF-8 text
``queues``            canonical queue name, UTF-8                 queue record
``queue_ids``         queue_id u32 (4 B)                          canonical queue name, UTF-8
``doomed``            queue_id u32 (4 B)                          queue record of a deleted
                                                                  queue whose messages remain
                                                                  to be erased
``messages``          0x00 + queue_id u32 + lookup_id u64 (13 B)  message record
(the main DB)         0x00 + queue_id u32 + 0xFF x 8 (13 B)       the queue's counters
``by_priority``       queue_id u32 + (7 - priority) u8 +          empty
                      lookup_id u64 (13 B)
``outgoing``          queue_id u32 (4 B) of an OUTGOING queue     outgoing state record
``incoming``          source QM GUID (16 B) + sequence timestamp  incoming state record
                      u32 + queue key UTF-8 (16 B + queue key
                      before schema 7)
``history``           source QM GUID (16 B) + message ordinal     insertion counter u64
                      u32 + destination tag u32 (24 B; 20 B
                      without the tag, before schema 5)
``prepared``          xid UTF-8 + 0x00 + index u32 (index 0)      prepared header record
                      xid UTF-8 + 0x00 + index u32 (1..n)         one prepared send each
``outcomes``          xid UTF-8                                   outcome record
``outcome_times``     resolved_at u64 milliseconds + xid UTF-8    empty
``expiry``            deadline u64 milliseconds + queue_id u32 +  empty
                      lookup_id u64 (20 B)
``confirmations``     message ordinal u32 + copy index u8 (5 B)   copy awaiting confirmation
``awaited_confirmations`` destination (an OUTGOING queue's name,   its copies in
                      UTF-8)                                      ``confirmations``, u64
``final_acks``        source QM GUID (16 B) + message ordinal u32  FinalAck to send
                      + stream timestamp u32 (24 B; 20 B before
                      this release) (+ the sender's GUID, 40 B:
                      one kept to pass on)
``lists``             distribution list name, UTF-8 (lower-case)   distribution list record
``message_counters``  queue_id u32 + lookup_id u64 (12 B)         a message's abort and move
                                                                  counters (``ops.poison``)
``retry_due``         due u64 milliseconds + queue_id u32 +       empty
                      lookup_id u64 (20 B)
``relayed``           queue_id u32 of an OUTGOING queue + relay   empty
                      id (33 B) + lookup_id u64 (45 B)
``retired_sequences`` a removed OUTGOING queue's name, UTF-8       its sequence timestamp and
                                                                  ordinal (``ops.retired``)
====================  ==========================================  ==========================

The main database. Messages live in LMDB's main (unnamed) database rather
than in a named one: LMDB keeps each named database's root in the main
database, so a commit that changes a named database also rewrites a page
of the main one; keeping messages there saves that page on every commit.
The named databases' own entries in the main database are their names
(ASCII letters), and every message key starts with a zero byte, so the two
never interleave.

A queue's counters (next lookup id, depth, bytes, purge mark) change with
every message appended or removed, so they live in ``messages`` under the
key just past the queue's last possible lookup id: next to its newest
messages, usually on the same page. A commit that appends to one queue then
changes one database, not three. Lookup id 0xFFFFFFFFFFFFFFFF is never
assigned; :func:`message_range` stops before it.

``ordinal_limit`` is the store's half of message identity: the layer above
hands out message-id ordinals below it and raises it (in the same batch as
the messages, or before) whenever it needs more, so after a crash it starts
again from the limit and never reuses an ordinal.

``by_priority`` holds one entry per message of a *non-transactional* queue
only; a scan of one queue's prefix visits the highest priority first and,
within a priority, the lowest lookup id first. Transactional queues are FIFO
by lookup id and have no entries there.

``sequence_stamp`` is the last sequence timestamp given to an outgoing queue
(each new one takes ``max(int(now), last + 1)``, so no two outgoing queues
ever share one); ``history_counter`` is the last insertion counter given to
a ``history`` entry, so the history reads back in insertion order.

``incoming`` keys the receiver's state of one exactly-once stream: the
sending queue manager's GUID, the stream's sequence timestamp (the high 32
bits of its TxSequenceID: one per outgoing queue of a sender of ours), then
the destination queue key as the sender wrote it (it need not name a queue
here). ``history`` keys the ids of
non-transactional messages received lately, to drop resent duplicates.

``relayed`` indexes the outgoing entries appended with a *relay id* (the
layer above's 33 bytes naming a message it relays: ``AppendOutgoing.relay``)
by queue, relay id and lookup id: one key per entry, written with the entry
and deleted with it, however it goes (forgotten, purged and erased, its
queue deleted), so the copies of a message still held are found with one
seek (``ops.peering.read_relayed``) and the index never outgrows the
entries it indexes.

``prepared`` holds each prepared transaction under its transaction id
(*xid*, 1..200 bytes of UTF-8 without a zero byte): the zero byte after the
xid sorts before every byte another xid could continue with, so one
transaction's records are contiguous, its header (index 0) first, and the
headers come in xid order. ``outcome_times`` orders the kept outcomes by
when they were resolved, so the oldest are pruned first without a scan.

LMDB refuses keys longer than 511 bytes; queue names, setting keys and
incoming stream keys are checked against :data:`MAX_KEY_SIZE` before they
are written.
"""

from __future__ import annotations

import math
import struct
from typing import Final

from .errors import InvalidRecord

__all__ = [
    "DB_AWAITED",
    "DB_BY_PRIORITY",
    "DB_CONFIRMATIONS",
    "DB_DOOMED",
    "DB_EXPIRY",
    "DB_FINAL_ACKS",
    "DB_HISTORY",
    "DB_INCOMING",
    "DB_LISTS",
    "DB_MESSAGES",
    "DB_MESSAGE_COUNTERS",
    "DB_META",
    "DB_OUTCOMES",
    "DB_OUTCOME_TIMES",
    "DB_OUTGOING",
    "DB_PREPARED",
    "DB_PREPARED_COPIES",
    "DB_QUEUES",
    "DB_QUEUE_IDS",
    "DB_RELAYED",
    "DB_RETIRED",
    "DB_RETRY_DUE",
    "EXPIRY_KEY_SIZE",
    "HISTORY_KEY_SIZE",
    "INCOMING_PREFIX_SIZE",
    "MAX_KEY_SIZE",
    "MAX_LOOKUP_ID",
    "MAX_QUEUE_ID",
    "MAX_U32",
    "MAX_U64",
    "MAX_XID_SIZE",
    "META_HISTORY_COUNTER",
    "META_NEXT_QUEUE_ID",
    "META_ORDINAL_LIMIT",
    "META_QM_GUID",
    "META_RECLAIM",
    "META_SCHEMA_VERSION",
    "META_SEQUENCE_STAMP",
    "QM_GUID_SIZE",
    "RELAY_ID_SIZE",
    "SETTING_KEY_PREFIX",
    "counters_key",
    "decode_expiry_key",
    "expiry_key",
    "history_key",
    "incoming_key",
    "lookup_id_of",
    "message_key",
    "message_range",
    "outcome_time_key",
    "prepared_key",
    "priority_band_key",
    "priority_key",
    "priority_range",
    "queue_id_key",
    "relayed_key",
    "setting_key",
    "split_incoming_key",
    "split_message_key",
    "split_outcome_time_key",
    "split_prepared_key",
    "split_priority_key",
    "u32",
    "u64",
    "unpack_u32",
    "unpack_u64",
    "xid_key",
]

#: Names of the LMDB named databases.
DB_META: Final = b"meta"
DB_QUEUES: Final = b"queues"
DB_QUEUE_IDS: Final = b"queue_ids"
#: Messages live in LMDB's main (unnamed) database.
DB_MESSAGES: Final = None
DB_BY_PRIORITY: Final = b"by_priority"
DB_DOOMED: Final = b"doomed"
DB_OUTGOING: Final = b"outgoing"
DB_INCOMING: Final = b"incoming"
DB_HISTORY: Final = b"history"
DB_PREPARED: Final = b"prepared"
DB_OUTCOMES: Final = b"outcomes"
DB_OUTCOME_TIMES: Final = b"outcome_times"
DB_EXPIRY: Final = b"expiry"
DB_CONFIRMATIONS: Final = b"confirmations"
#: How many ``confirmations`` copies each destination has (``ops.confirmations``).
DB_AWAITED: Final = b"awaited_confirmations"
DB_FINAL_ACKS: Final = b"final_acks"
DB_LISTS: Final = b"lists"
#: Poison handling's databases (see ``ops.poison``).
DB_MESSAGE_COUNTERS: Final = b"message_counters"
DB_RETRY_DUE: Final = b"retry_due"
#: The index of relayed outgoing entries (see ``ops.peering``).
DB_RELAYED: Final = b"relayed"
#: The sequences of removed outgoing queues, for the next queue of each name (``ops.retired``).
DB_RETIRED: Final = b"retired_sequences"
#: The copies prepared transactions' commits add to ``confirmations`` (``ops.prepared``);
#: added without a schema change: a release without it never opens it.
DB_PREPARED_COPIES: Final = b"prepared_copies"

#: Keys of the ``meta`` database.
META_SCHEMA_VERSION: Final = b"schema_version"
META_QM_GUID: Final = b"qm_guid"
META_NEXT_QUEUE_ID: Final = b"next_queue_id"
META_ORDINAL_LIMIT: Final = b"ordinal_limit"
META_SEQUENCE_STAMP: Final = b"sequence_stamp"
META_HISTORY_COUNTER: Final = b"history_counter"
#: Rewritten (empty) to move LMDB's transaction id on when space must be reclaimed.
META_RECLAIM: Final = b"reclaim"
SETTING_KEY_PREFIX: Final = b"setting:"

#: LMDB's compiled-in key size limit.
MAX_KEY_SIZE: Final = 511
#: The largest u32 and u64: the widths of the store's ids, counters and times.
MAX_U32: Final = 0xFFFFFFFF
MAX_U64: Final = 0xFFFFFFFFFFFFFFFF
MAX_QUEUE_ID: Final = MAX_U32
MAX_LOOKUP_ID: Final = MAX_U64
#: A queue manager's GUID, in ``incoming`` and ``history`` keys.
QM_GUID_SIZE: Final = 16
#: A ``history`` key: source GUID + message ordinal u32.
HISTORY_KEY_SIZE: Final = QM_GUID_SIZE + 4
#: An ``incoming`` key before its queue key: source GUID + sequence timestamp u32.
INCOMING_PREFIX_SIZE: Final = QM_GUID_SIZE + 4
#: A relay id: what names a relayed message to the layer above (opaque here).
RELAY_ID_SIZE: Final = 33
#: The longest transaction id, in UTF-8 bytes.
MAX_XID_SIZE: Final = 200

_U32 = struct.Struct(">I")
# A zero byte, the queue id, the lookup id: see "the main database" above.
_MESSAGE_KEY = struct.Struct(">xIQ")
_PRIORITY_KEY = struct.Struct(">IBQ")
_U64 = struct.Struct(">Q")
# A key just past every key of queue MAX_QUEUE_ID (longer than any real key).
_PAST_LAST_QUEUE: Final = b"\xff" * 16


_EXPIRY_KEY = struct.Struct(">QIQ")
_MAX_DEADLINE: Final = MAX_U64 / 1000 - 1
#: Bytes of an ``expiry`` key.
EXPIRY_KEY_SIZE: Final = _EXPIRY_KEY.size  # 20


def expiry_key(deadline: float, queue_id: int, lookup_id: int) -> bytes:
    """The ``expiry`` key of a message with a deadline (unix seconds, rounded up to
    the millisecond so that a message is never due before its deadline)."""
    if not deadline < _MAX_DEADLINE:  # infinite or NaN: past every real deadline
        return _EXPIRY_KEY.pack(MAX_U64, queue_id, lookup_id)
    # round() first: a deadline decoded from a key encodes to that key again.
    return _EXPIRY_KEY.pack(max(0, math.ceil(round(deadline * 1000, 3))), queue_id, lookup_id)


def decode_expiry_key(key: bytes) -> tuple[float, int, int]:
    """``(deadline, queue_id, lookup_id)`` of an ``expiry`` key (deadline in unix seconds)."""
    millis, queue_id, lookup_id = _EXPIRY_KEY.unpack(key)
    return millis / 1000, queue_id, lookup_id


def relayed_key(queue_id: int, relay_id: bytes, lookup_id: int = 0) -> bytes:
    """The ``relayed`` key of an outgoing entry (with ``lookup_id`` 0: where the
    keys of ``relay_id`` in that queue begin).

    Raises:
        InvalidRecord: ``relay_id`` is not :data:`RELAY_ID_SIZE` bytes long.
    """
    if len(relay_id) != RELAY_ID_SIZE:
        msg = f"a relay id is {RELAY_ID_SIZE} bytes, not {len(relay_id)}"
        raise InvalidRecord(msg)
    return b"".join((_U32.pack(queue_id), relay_id, _U64.pack(lookup_id)))


def u32(value: int) -> bytes:
    """Encode a u32 (the ``queue_ids`` key, the meta counters)."""
    return _U32.pack(value)


def u64(value: int) -> bytes:
    """Encode a u64 (the ordinal limit)."""
    return _U64.pack(value)


def unpack_u64(data: bytes) -> int:
    """Decode an 8-byte big-endian value.

    Raises:
        struct.error: if ``data`` is not exactly 8 bytes long.
    """
    value: int = _U64.unpack(data)[0]
    return value


def unpack_u32(data: bytes) -> int:
    """Decode a 4-byte big-endian value.

    Raises:
        struct.error: if ``data`` is not exactly 4 bytes long.
    """
    value: int = _U32.unpack(data)[0]
    return value


def queue_id_key(queue_id: int) -> bytes:
    """Key of ``queue_ids``: the queue id as a u32."""
    return _U32.pack(queue_id)


def message_key(queue_id: int, lookup_id: int) -> bytes:
    """Key of a message: 0x00 + queue id u32 + lookup id u64 (13 bytes)."""
    return _MESSAGE_KEY.pack(queue_id, lookup_id)


def lookup_id_of(message_key: bytes) -> int:
    """The lookup id in a 13-byte message key."""
    lookup_id: int = _U64.unpack_from(message_key, 5)[0]
    return lookup_id


def split_message_key(key: bytes) -> tuple[int, int]:
    """Split a 13-byte message key into ``(queue_id, lookup_id)``."""
    queue_id, lookup_id = _MESSAGE_KEY.unpack(key)
    return queue_id, lookup_id


def _queue_end(queue_id: int) -> bytes:
    # Every key of a queue starts with its u32 id, so the next id's 4 bytes are
    # greater than all of them and not greater than any key of the next queue.
    return _U32.pack(queue_id + 1) if queue_id < MAX_QUEUE_ID else _PAST_LAST_QUEUE


def message_range(queue_id: int) -> tuple[bytes, bytes]:
    """``[start, end)`` of one queue's message keys in ``messages`` (its counters excluded)."""
    return _MESSAGE_KEY.pack(queue_id, 0), _MESSAGE_KEY.pack(queue_id, MAX_LOOKUP_ID)


def counters_key(queue_id: int) -> bytes:
    """Key of a queue's counters in ``messages``: just past its messages."""
    return _MESSAGE_KEY.pack(queue_id, MAX_LOOKUP_ID)


def priority_key(queue_id: int, priority: int, lookup_id: int) -> bytes:
    """Key of ``by_priority``: priority 7 sorts first, then ascending lookup id."""
    return _PRIORITY_KEY.pack(queue_id, 7 - priority, lookup_id)


def priority_band_key(queue_id: int, band: int, lookup_id: int) -> bytes:
    """Key of ``by_priority`` by band (``band`` is ``7 - priority``, 0 sorts first)."""
    return _PRIORITY_KEY.pack(queue_id, band, lookup_id)


def split_priority_key(key: bytes) -> tuple[int, int, int]:
    """Split a 13-byte ``by_priority`` key into ``(queue_id, 7 - priority, lookup_id)``."""
    queue_id, band, lookup_id = _PRIORITY_KEY.unpack(key)
    return queue_id, band, lookup_id


def priority_range(queue_id: int) -> tuple[bytes, bytes]:
    """``[start, end)`` of one queue's keys in ``by_priority``."""
    return _PRIORITY_KEY.pack(queue_id, 0, 0), _queue_end(queue_id)


def setting_key(key: str) -> bytes:
    """Key of a setting in ``meta``.

    Raises:
        InvalidRecord: if the key is empty or its encoding exceeds LMDB's key size limit.
    """
    encoded = SETTING_KEY_PREFIX + key.encode("utf-8")
    if not key or len(encoded) > MAX_KEY_SIZE:
        room = MAX_KEY_SIZE - len(SETTING_KEY_PREFIX)
        msg = f"setting key must be 1..{room} bytes of UTF-8: {key!r}"
        raise InvalidRecord(msg)
    return encoded


def incoming_key(source_qm: bytes, sequence_timestamp: int, queue_key: str) -> bytes:
    """Key of ``incoming``: the source QM's 16-byte GUID, the stream's sequence
    timestamp u32 big-endian, then the queue key in UTF-8.

    Raises:
        InvalidRecord: the GUID is not 16 bytes, the timestamp is not a u32, or
            the key exceeds LMDB's key size limit.
    """
    if len(source_qm) != QM_GUID_SIZE:
        msg = f"source QM GUID must be {QM_GUID_SIZE} bytes, not {len(source_qm)}"
        raise InvalidRecord(msg)
    if not 0 <= sequence_timestamp <= MAX_U32:
        msg = f"sequence timestamp must be a u32, not {sequence_timestamp}"
        raise InvalidRecord(msg)
    encoded = b"".join((bytes(source_qm), _U32.pack(sequence_timestamp), queue_key.encode("utf-8")))
    if len(encoded) > MAX_KEY_SIZE:
        limit = MAX_KEY_SIZE - INCOMING_PREFIX_SIZE
        msg = f"incoming queue key must be at most {limit} bytes of UTF-8: {queue_key!r}"
        raise InvalidRecord(msg)
    return encoded


def split_incoming_key(key: bytes) -> tuple[bytes, int, str]:
    """Split an ``incoming`` key into ``(source_qm, sequence_timestamp, queue_key)``.

    Raises:
        ValueError: it is shorter than the GUID and the timestamp, or the
            queue key is not UTF-8 (``UnicodeDecodeError``).
    """
    if len(key) < INCOMING_PREFIX_SIZE:
        raise ValueError(len(key))
    stamp: int = _U32.unpack_from(key, QM_GUID_SIZE)[0]
    queue_key = bytes(key[INCOMING_PREFIX_SIZE:]).decode("utf-8")
    return bytes(key[:QM_GUID_SIZE]), stamp, queue_key


def history_key(key: bytes) -> bytes:
    """Check a ``history`` key: source GUID (16 bytes) + message ordinal u32 (20 bytes),
    optionally followed by a 4-byte tag of the destination queue (24 bytes).

    Raises:
        InvalidRecord: it is not 20 bytes long.
    """
    if len(key) not in (HISTORY_KEY_SIZE, HISTORY_KEY_SIZE + 4):
        msg = (
            f"message history key must be {HISTORY_KEY_SIZE} bytes, or "
            f"{HISTORY_KEY_SIZE + 4} with a destination tag, not {len(key)}"
        )
        raise InvalidRecord(msg)
    return bytes(key)


def xid_key(xid: str) -> bytes:
    """A transaction id as it is keyed: its UTF-8 bytes.

    Raises:
        InvalidRecord: it is empty, longer than :data:`MAX_XID_SIZE` bytes, has a
            zero byte, or is not valid Unicode text.
    """
    try:
        encoded = xid.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"transaction id is not valid Unicode text: {xid!r}"
        raise InvalidRecord(msg) from exc
    if not 0 < len(encoded) <= MAX_XID_SIZE or b"\x00" in encoded:
        msg = f"transaction id must be 1..{MAX_XID_SIZE} bytes of UTF-8 without NUL: {xid!r}"
        raise InvalidRecord(msg)
    return encoded


def prepared_key(xid: bytes, index: int) -> bytes:
    """Key of ``prepared``: the xid's bytes, a zero byte, the record's index u32
    (0 is the header, 1..n the sends)."""
    return b"".join((xid, b"\x00", _U32.pack(index)))


def split_prepared_key(key: bytes) -> tuple[bytes, int]:
    """Split a ``prepared`` key into ``(xid bytes, index)``.

    Raises:
        struct.error: it is too short to be one.
    """
    index: int = _U32.unpack_from(key, len(key) - 4)[0]
    return bytes(key[:-5]), index


def outcome_time_key(milliseconds: int, xid: bytes) -> bytes:
    """Key of ``outcome_times``: when the outcome was resolved (u64 ms), then the xid."""
    return _U64.pack(milliseconds) + xid


def split_outcome_time_key(key: bytes) -> tuple[int, bytes]:
    """Split an ``outcome_times`` key into ``(milliseconds, xid bytes)``.

    Raises:
        struct.error: it is too short to be one.
    """
    milliseconds: int = _U64.unpack_from(key)[0]
    return milliseconds, bytes(key[8:])
