"""The LMDB store of qmgr.

Layering rule: this package is synchronous. It imports nothing from ``qmgr``,
``wire`` or ``trio``, never awaits and never sleeps; every LMDB error leaves
it as a typed :class:`StoreError`. One :class:`Store` owns one LMDB
environment. Writes are typed operations in units (``AppendMessage``,
``RemoveMessage``, ``CreateQueue``, ``AppendOutgoing``,
``PrepareTransaction``, ``MoveMessage``, ...) that the store plans on its owner's
thread and applies in one write transaction per batch, which begins and ends
inside one call: no write transaction can span an ``await`` in the layers
above. A message is an opaque payload to the store.
"""

from __future__ import annotations

from ._catalog import SCHEMA_VERSION as SCHEMA_VERSION
from ._confirmations import CONFIRMATION_QUEUE_ID as CONFIRMATION_QUEUE_ID
from ._confirmations import MAX_CONFIRMATION_COPIES as MAX_CONFIRMATION_COPIES
from ._confirmations import AddConfirmation as AddConfirmation
from ._confirmations import Confirmation as Confirmation
from ._confirmations import ForgetFinalAcks as ForgetFinalAcks
from ._confirmations import MarkDelivered as MarkDelivered
from ._confirmations import PendingFinalAck as PendingFinalAck
from ._confirmations import RecordFinalAck as RecordFinalAck
from ._confirmations import SettleConfirmation as SettleConfirmation
from ._confirmations import confirmation_of_lookup as confirmation_of_lookup
from ._errors import ConfirmationMissing as ConfirmationMissing
from ._errors import InvalidOperation as InvalidOperation
from ._errors import InvalidRecord as InvalidRecord
from ._errors import ListExists as ListExists
from ._errors import ListMissing as ListMissing
from ._errors import MapFull as MapFull
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
from ._errors import XidInUse as XidInUse
from ._errors import XidResolved as XidResolved
from ._errors import XidUnknown as XidUnknown
from ._expiry import DueMessage as DueMessage
from ._expiry import ForgetExpiry as ForgetExpiry
from ._lists import CreateList as CreateList
from ._lists import DeleteList as DeleteList
from ._lists import DistributionList as DistributionList
from ._lists import SetListTargets as SetListTargets
from ._ops import OPERATION_ERRORS as OPERATION_ERRORS
from ._ops import SKIPPED as SKIPPED
from ._ops import Appended as Appended
from ._ops import AppendMessage as AppendMessage
from ._ops import Attempt as Attempt
from ._ops import CreateQueue as CreateQueue
from ._ops import DeleteQueue as DeleteQueue
from ._ops import Done as Done
from ._ops import Erased as Erased
from ._ops import EraseStep as EraseStep
from ._ops import Failed as Failed
from ._ops import Fallback as Fallback
from ._ops import Operation as Operation
from ._ops import PurgeQueue as PurgeQueue
from ._ops import QueueCreated as QueueCreated
from ._ops import QueueDeleted as QueueDeleted
from ._ops import QueuePurged as QueuePurged
from ._ops import ReclaimSpace as ReclaimSpace
from ._ops import Removed as Removed
from ._ops import RemoveMessage as RemoveMessage
from ._ops import ReserveOrdinals as ReserveOrdinals
from ._ops import Result as Result
from ._ops import SetSetting as SetSetting
from ._ops import Skipped as Skipped
from ._ops import Together as Together
from ._ops import Unit as Unit
from ._ops import UnitOutcome as UnitOutcome
from ._peering_ops import AppendOutgoing as AppendOutgoing
from ._peering_ops import ForgetOutgoing as ForgetOutgoing
from ._peering_ops import Forgotten as Forgotten
from ._peering_ops import RecordIncoming as RecordIncoming
from ._peering_ops import RememberMessageIds as RememberMessageIds
from ._peering_ops import SetOutgoingPaused as SetOutgoingPaused
from ._plan import Plan as Plan
from ._plan import PlanContext as PlanContext
from ._poison import NO_COUNTERS as NO_COUNTERS
from ._poison import POISON_SUFFIX as POISON_SUFFIX
from ._poison import RETRY_SUFFIX as RETRY_SUFFIX
from ._poison import SUBQUEUE_SUFFIXES as SUBQUEUE_SUFFIXES
from ._poison import MessageCounters as MessageCounters
from ._poison_ops import AbortCounted as AbortCounted
from ._poison_ops import CreateSubqueues as CreateSubqueues
from ._poison_ops import DeleteSubqueues as DeleteSubqueues
from ._poison_ops import DropRetryEntry as DropRetryEntry
from ._poison_ops import Moved as Moved
from ._poison_ops import MoveMessage as MoveMessage
from ._poison_ops import MoveReason as MoveReason
from ._poison_ops import PoisonSet as PoisonSet
from ._poison_ops import RecordAbort as RecordAbort
from ._poison_ops import SetPoisonSettings as SetPoisonSettings
from ._poison_ops import SubqueuesCreated as SubqueuesCreated
from ._poison_ops import SubqueuesDeleted as SubqueuesDeleted
from ._poison_ops import moved_record as moved_record
from ._prepared import OutcomeInfo as OutcomeInfo
from ._prepared import PreparedInfo as PreparedInfo
from ._prepared_ops import Prepared as Prepared
from ._prepared_ops import PrepareTransaction as PrepareTransaction
from ._prepared_ops import Pruned as Pruned
from ._prepared_ops import PruneOutcomes as PruneOutcomes
from ._prepared_ops import RecordOutcome as RecordOutcome
from ._prepared_ops import Resolution as Resolution
from ._prepared_ops import Resolved as Resolved
from ._prepared_ops import ResolvePrepared as ResolvePrepared
from ._records import MESSAGE_HEADER_SIZE as MESSAGE_HEADER_SIZE
from ._records import TIMED_MESSAGE_VERSION as TIMED_MESSAGE_VERSION
from ._records import IncomingState as IncomingState
from ._records import OutgoingState as OutgoingState
from ._records import PoisonSettings as PoisonSettings
from ._records import QueueKind as QueueKind
from ._records import QueueRecord as QueueRecord
from ._records import decode_queue as decode_queue
from ._records import encode_message_record as encode_message_record
from ._records import encode_queue as encode_queue
from ._records import message_arrived_time as message_arrived_time
from ._records import message_deadline as message_deadline
from ._records import message_header as message_header
from ._records import message_note as message_note
from ._records import message_payload as message_payload
from ._store import Store as Store
