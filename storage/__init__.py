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

The package is a core and its operations grouped by concern (the map of
modules is in ``docs/storage.md``): ``environment``, ``errors``, ``keys``,
``records``, ``catalog`` (committed state in memory), ``overlay`` and
``context`` (a batch being planned), ``units`` (operations, units and
results), ``plan`` (planning, applying, installing), ``reads`` and ``store``
(the facade); ``reservations`` and ``peering_state`` are the parts of the
catalog and of the context that prepared transactions and peering keep;
``ops/<concern>.py`` holds each concern's operations with the records and
reads only it uses. Imports go one way: ``ops`` import the core, the core
never imports ``ops`` (only ``store`` does, to read), and nothing imports
its importer back, not even for typing. Import from ``storage``, not from
its modules: these names are the API.
"""

from __future__ import annotations

from .catalog import SCHEMA_VERSION as SCHEMA_VERSION
from .context import PlanContext as PlanContext
from .environment import Usage as Usage
from .errors import ConfirmationMissing as ConfirmationMissing
from .errors import IncomingStreamMoved as IncomingStreamMoved
from .errors import InvalidOperation as InvalidOperation
from .errors import InvalidRecord as InvalidRecord
from .errors import ListExists as ListExists
from .errors import ListMissing as ListMissing
from .errors import MapFull as MapFull
from .errors import MessageMissing as MessageMissing
from .errors import QueueExists as QueueExists
from .errors import QueueMissing as QueueMissing
from .errors import QuotaExceeded as QuotaExceeded
from .errors import SchemaMismatch as SchemaMismatch
from .errors import StoreClosed as StoreClosed
from .errors import StoreCorrupt as StoreCorrupt
from .errors import StoreError as StoreError
from .errors import StoreFull as StoreFull
from .errors import StoreLocked as StoreLocked
from .errors import XidInUse as XidInUse
from .errors import XidResolved as XidResolved
from .errors import XidUnknown as XidUnknown
from .keys import RELAY_ID_SIZE as RELAY_ID_SIZE
from .ops.confirmations import CONFIRMATION_QUEUE_ID as CONFIRMATION_QUEUE_ID
from .ops.confirmations import MAX_CONFIRMATION_COPIES as MAX_CONFIRMATION_COPIES
from .ops.confirmations import AddConfirmation as AddConfirmation
from .ops.confirmations import Confirmation as Confirmation
from .ops.confirmations import ForgetFinalAcks as ForgetFinalAcks
from .ops.confirmations import MarkDelivered as MarkDelivered
from .ops.confirmations import PendingFinalAck as PendingFinalAck
from .ops.confirmations import RecordFinalAck as RecordFinalAck
from .ops.confirmations import SettleConfirmation as SettleConfirmation
from .ops.confirmations import confirmation_of_lookup as confirmation_of_lookup
from .ops.confirmations import final_ack_sender as final_ack_sender
from .ops.expiry import DueMessage as DueMessage
from .ops.expiry import ForgetExpiry as ForgetExpiry
from .ops.lists import CreateList as CreateList
from .ops.lists import DeleteList as DeleteList
from .ops.lists import DistributionList as DistributionList
from .ops.lists import SetListTargets as SetListTargets
from .ops.messages import Appended as Appended
from .ops.messages import AppendMessage as AppendMessage
from .ops.messages import CountedAppend as CountedAppend
from .ops.messages import Handed as Handed
from .ops.messages import HandedMessage as HandedMessage
from .ops.messages import Removed as Removed
from .ops.messages import RemoveMessage as RemoveMessage
from .ops.messages import Taker as Taker
from .ops.meta import ClearSetting as ClearSetting
from .ops.meta import ReclaimSpace as ReclaimSpace
from .ops.meta import ReserveOrdinals as ReserveOrdinals
from .ops.meta import ReturnOrdinals as ReturnOrdinals
from .ops.meta import SetSetting as SetSetting
from .ops.outcomes import OutcomeInfo as OutcomeInfo
from .ops.outcomes import Pruned as Pruned
from .ops.outcomes import PruneOutcomes as PruneOutcomes
from .ops.peering import AppendOutgoing as AppendOutgoing
from .ops.peering import ForgetOutgoing as ForgetOutgoing
from .ops.peering import Forgotten as Forgotten
from .ops.peering import IncomingState as IncomingState
from .ops.peering import RecordIncoming as RecordIncoming
from .ops.peering import RememberMessageIds as RememberMessageIds
from .ops.peering import SetOutgoingPaused as SetOutgoingPaused
from .ops.poison import NO_COUNTERS as NO_COUNTERS
from .ops.poison import AbortCounted as AbortCounted
from .ops.poison import DropRetryEntry as DropRetryEntry
from .ops.poison import MessageCounters as MessageCounters
from .ops.poison import Moved as Moved
from .ops.poison import MoveMessage as MoveMessage
from .ops.poison import MoveReason as MoveReason
from .ops.poison import PoisonSet as PoisonSet
from .ops.poison import RecordAbort as RecordAbort
from .ops.poison import SetPoisonSettings as SetPoisonSettings
from .ops.poison import moved_record as moved_record
from .ops.prepared import Prepared as Prepared
from .ops.prepared import PrepareTransaction as PrepareTransaction
from .ops.prepared import RecordOutcome as RecordOutcome
from .ops.prepared import Resolution as Resolution
from .ops.prepared import Resolved as Resolved
from .ops.prepared import ResolvePrepared as ResolvePrepared
from .ops.queues import CreateQueue as CreateQueue
from .ops.queues import DeleteQueue as DeleteQueue
from .ops.queues import Erased as Erased
from .ops.queues import EraseStep as EraseStep
from .ops.queues import PurgeQueue as PurgeQueue
from .ops.queues import QueueCreated as QueueCreated
from .ops.queues import QueueDeleted as QueueDeleted
from .ops.queues import QueuePurged as QueuePurged
from .ops.queues import QuotaSet as QuotaSet
from .ops.queues import SetQuota as SetQuota
from .ops.restore import LOOKUP_JUMP as LOOKUP_JUMP
from .ops.restore import LOOKUP_SKIPPED as LOOKUP_SKIPPED
from .ops.restore import ORDINAL_JUMP as ORDINAL_JUMP
from .ops.restore import RENEWED as RENEWED
from .ops.restore import RenewAfterRestore as RenewAfterRestore
from .ops.restore import Renewed as Renewed
from .ops.retired import RemoveEmptyOutgoing as RemoveEmptyOutgoing
from .ops.subqueues import POISON_SUFFIX as POISON_SUFFIX
from .ops.subqueues import RETRY_SUFFIX as RETRY_SUFFIX
from .ops.subqueues import SUBQUEUE_SUFFIXES as SUBQUEUE_SUFFIXES
from .ops.subqueues import CreateSubqueues as CreateSubqueues
from .ops.subqueues import DeleteSubqueues as DeleteSubqueues
from .ops.subqueues import SubqueuesCreated as SubqueuesCreated
from .ops.subqueues import SubqueuesDeleted as SubqueuesDeleted
from .peering_state import OutgoingState as OutgoingState
from .plan import Plan as Plan
from .records import MESSAGE_HEADER_SIZE as MESSAGE_HEADER_SIZE
from .records import TIMED_MESSAGE_VERSION as TIMED_MESSAGE_VERSION
from .records import PoisonSettings as PoisonSettings
from .records import QueueKind as QueueKind
from .records import QueueRecord as QueueRecord
from .records import decode_queue as decode_queue
from .records import encode_message_record as encode_message_record
from .records import encode_queue as encode_queue
from .records import message_arrived_time as message_arrived_time
from .records import message_deadline as message_deadline
from .records import message_header as message_header
from .records import message_note as message_note
from .records import message_payload as message_payload
from .reservations import PreparedInfo as PreparedInfo
from .store import Store as Store
from .units import OPERATION_ERRORS as OPERATION_ERRORS
from .units import SKIPPED as SKIPPED
from .units import Attempt as Attempt
from .units import Done as Done
from .units import Failed as Failed
from .units import Fallback as Fallback
from .units import Operation as Operation
from .units import Result as Result
from .units import Skipped as Skipped
from .units import Together as Together
from .units import Unit as Unit
from .units import UnitOutcome as UnitOutcome
