"""The LMDB store of qmgr.

Layering rule: this package is synchronous. It imports nothing from ``qmgr``
or ``trio``, never awaits and never sleeps; every LMDB error leaves it as a
typed :class:`StoreError`. One :class:`Store` owns one LMDB environment, and
every write transaction begins and ends inside a single method call, so no
write transaction can span an ``await`` in the layers above.
"""

from __future__ import annotations

from ._errors import InvalidOperation as InvalidOperation
from ._errors import InvalidRecord as InvalidRecord
from ._errors import MessageMissing as MessageMissing
from ._errors import QueueExists as QueueExists
from ._errors import QueueMissing as QueueMissing
from ._errors import QuotaExceeded as QuotaExceeded
from ._errors import SchemaMismatch as SchemaMismatch
from ._errors import StoreClosed as StoreClosed
from ._errors import StoreCorrupt as StoreCorrupt
from ._errors import StoreError as StoreError
from ._errors import StoreFull as StoreFull
from ._errors import StoreLocked as StoreLocked
from ._records import MessageRecord as MessageRecord
from ._records import QueueKind as QueueKind
from ._records import QueueRecord as QueueRecord
from ._records import decode_message as decode_message
from ._records import decode_queue as decode_queue
from ._records import encode_message as encode_message
from ._records import encode_queue as encode_queue
from ._records import format_message_id as format_message_id
from ._store import SCHEMA_VERSION as SCHEMA_VERSION
from ._store import CommitOutcome as CommitOutcome
from ._store import CommittedSend as CommittedSend
from ._store import CommitUnit as CommitUnit
from ._store import NewMessage as NewMessage
from ._store import Removal as Removal
from ._store import Store as Store

__all__ = [
    "SCHEMA_VERSION",
    "CommitOutcome",
    "CommitUnit",
    "CommittedSend",
    "InvalidOperation",
    "InvalidRecord",
    "MessageMissing",
    "MessageRecord",
    "NewMessage",
    "QueueExists",
    "QueueKind",
    "QueueMissing",
    "QueueRecord",
    "QuotaExceeded",
    "Removal",
    "SchemaMismatch",
    "Store",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "decode_message",
    "decode_queue",
    "encode_message",
    "encode_queue",
    "format_message_id",
]
