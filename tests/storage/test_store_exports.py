"""The public surface of the storage package: its names and its error tree."""

from __future__ import annotations

import storage

PUBLIC_NAMES = {
    "SCHEMA_VERSION",
    "MESSAGE_HEADER_SIZE",
    "OPERATION_ERRORS",
    "SKIPPED",
    # errors
    "InvalidOperation",
    "InvalidRecord",
    "MapFull",
    "MessageMissing",
    "QueueExists",
    "QueueMissing",
    "QuotaExceeded",
    "SchemaMismatch",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "XidInUse",
    "XidResolved",
    "XidUnknown",
    # operations and units
    "AppendMessage",
    "Attempt",
    "CreateQueue",
    "DeleteQueue",
    "EraseStep",
    "Operation",
    "PurgeQueue",
    "ReclaimSpace",
    "RemoveMessage",
    "ReserveOrdinals",
    "SetSetting",
    "Unit",
    # peering operations
    "AppendOutgoing",
    "ForgetOutgoing",
    "ForgetExpiry",
    "ListExists",
    "ListMissing",
    "CreateList",
    "DeleteList",
    "DistributionList",
    "SetListTargets",
    "CONFIRMATION_QUEUE_ID",
    "MAX_CONFIRMATION_COPIES",
    "AddConfirmation",
    "Confirmation",
    "ForgetFinalAcks",
    "MarkDelivered",
    "PendingFinalAck",
    "RecordFinalAck",
    "SettleConfirmation",
    "confirmation_of_lookup",
    "ConfirmationMissing",
    "Together",
    "DueMessage",
    "RecordIncoming",
    "RememberMessageIds",
    "SetOutgoingPaused",
    # prepared transactions
    "PrepareTransaction",
    "PruneOutcomes",
    "RecordOutcome",
    "ResolvePrepared",
    "Resolution",
    # results
    "Appended",
    "Done",
    "Erased",
    "Failed",
    "Fallback",
    "Forgotten",
    "Prepared",
    "Pruned",
    "QueueCreated",
    "QueueDeleted",
    "QueuePurged",
    "Removed",
    "Resolved",
    "Result",
    "Skipped",
    "UnitOutcome",
    # the store and its plans
    "Plan",
    "PlanContext",
    "Store",
    # records
    "IncomingState",
    "OutcomeInfo",
    "PreparedInfo",
    "OutgoingState",
    "QueueKind",
    "QueueRecord",
    "decode_queue",
    "encode_message_record",
    "encode_queue",
    "message_arrived_time",
    "message_header",
    "message_payload",
    # poison handling and subqueues
    "NO_COUNTERS",
    "POISON_SUFFIX",
    "RETRY_SUFFIX",
    "SUBQUEUE_SUFFIXES",
    "AbortCounted",
    "CreateSubqueues",
    "DeleteSubqueues",
    "DropRetryEntry",
    "MessageCounters",
    "MoveMessage",
    "MoveReason",
    "Moved",
    "PoisonSet",
    "PoisonSettings",
    "RecordAbort",
    "SetPoisonSettings",
    "SubqueuesCreated",
    "SubqueuesDeleted",
    "moved_record",
    "message_deadline",
    "TIMED_MESSAGE_VERSION",
    "message_note",
}


def test_package_exports_exactly_the_public_names() -> None:
    exported = {name for name in vars(storage) if not name.startswith("_")} - {"annotations"}
    assert exported == PUBLIC_NAMES


def test_every_error_is_a_store_error() -> None:
    for name in (
        "StoreFull",
        "MapFull",
        "StoreCorrupt",
        "SchemaMismatch",
        "StoreClosed",
        "StoreLocked",
        "QueueExists",
        "QueueMissing",
        "QuotaExceeded",
        "MessageMissing",
        "InvalidOperation",
        "InvalidRecord",
        "XidInUse",
        "XidResolved",
        "XidUnknown",
    ):
        assert issubclass(getattr(storage, name), storage.StoreError), name
    assert issubclass(storage.InvalidRecord, ValueError)


def test_operation_errors_are_the_per_operation_failures() -> None:
    assert set(storage.OPERATION_ERRORS) == {
        storage.ConfirmationMissing,
        storage.ListExists,
        storage.ListMissing,
        storage.QueueMissing,
        storage.QueueExists,
        storage.QuotaExceeded,
        storage.MessageMissing,
        storage.InvalidRecord,
        storage.InvalidOperation,
        storage.XidInUse,
        storage.XidResolved,
        storage.XidUnknown,
    }
    # Batch-level errors are not among them: they fail a batch, not an operation.
    for batch_level in (storage.StoreFull, storage.StoreCorrupt, storage.StoreClosed):
        assert not issubclass(batch_level, storage.OPERATION_ERRORS)
