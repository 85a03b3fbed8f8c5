"""The public surface of the storage package: exactly the names it exports."""

from __future__ import annotations

import types

import storage

#: Every name the package exports, by concern (adding or removing one changes its API).
PUBLIC_NAMES = {
    # errors (storage.errors)
    *["StoreError", "StoreFull", "MapFull", "StoreCorrupt", "SchemaMismatch", "StoreClosed"],
    *["StoreLocked"],
    *["QueueExists", "QueueMissing", "QuotaExceeded", "MessageMissing", "InvalidOperation"],
    *["InvalidRecord", "ListExists", "ListMissing", "ConfirmationMissing", "IncomingStreamMoved"],
    *["XidInUse", "XidResolved", "XidUnknown"],
    # records (storage.records, storage.peering_state, storage.reservations)
    *["MESSAGE_HEADER_SIZE", "TIMED_MESSAGE_VERSION", "QueueKind", "QueueRecord", "PoisonSettings"],
    *["decode_queue", "encode_queue", "encode_message_record", "message_arrived_time"],
    *["message_deadline", "message_header", "message_note", "message_payload"],
    *["OutgoingState", "PreparedInfo"],
    # operations, units and results (storage.units)
    *["Operation", "Unit", "UnitOutcome", "Attempt", "Together", "OPERATION_ERRORS", "SKIPPED"],
    *["Result", "Done", "Failed", "Fallback", "Skipped"],
    # the store and its plans (storage.store, storage.plan, storage.context, storage.catalog)
    *["Store", "Plan", "PlanContext", "SCHEMA_VERSION", "Usage"],
    # queues, messages and meta values (storage.ops.queues, .messages, .meta)
    *["CreateQueue", "DeleteQueue", "PurgeQueue", "EraseStep", "QueueCreated", "QueueDeleted"],
    *["QueuePurged", "Erased", "AppendMessage", "RemoveMessage", "Appended", "Removed"],
    *["SetQuota", "QuotaSet"],
    *["RemoveEmptyOutgoing"],
    *["CountedAppend", "HandedMessage", "Handed", "Taker"],
    *["ReserveOrdinals", "ReturnOrdinals", "SetSetting", "ClearSetting", "ReclaimSpace"],
    # peering (storage.ops.peering)
    *["AppendOutgoing", "ForgetOutgoing", "SetOutgoingPaused", "RecordIncoming", "RELAY_ID_SIZE"],
    *["RememberMessageIds", "Forgotten", "IncomingState"],
    # a store restored from a backup (storage.ops.restore)
    *["RenewAfterRestore", "Renewed", "ORDINAL_JUMP", "LOOKUP_JUMP", "LOOKUP_SKIPPED", "RENEWED"],
    # subqueues and poison handling (storage.ops.subqueues, storage.ops.poison)
    *["POISON_SUFFIX", "RETRY_SUFFIX", "SUBQUEUE_SUFFIXES", "CreateSubqueues", "DeleteSubqueues"],
    *["NO_COUNTERS", "MessageCounters", "MoveMessage", "MoveReason", "Moved", "RecordAbort"],
    *["AbortCounted", "SetPoisonSettings", "PoisonSet", "DropRetryEntry", "moved_record"],
    *["SubqueuesCreated", "SubqueuesDeleted"],
    # prepared transactions and outcomes (storage.ops.prepared, storage.ops.outcomes)
    *["PrepareTransaction", "ResolvePrepared", "RecordOutcome", "PruneOutcomes", "Prepared"],
    *["Resolved", "Resolution", "Pruned", "OutcomeInfo"],
    # confirmations, expiry, lists (storage.ops.confirmations, .expiry, .lists)
    *["CONFIRMATION_QUEUE_ID", "MAX_CONFIRMATION_COPIES", "AddConfirmation", "Confirmation"],
    *["ForgetFinalAcks", "MarkDelivered", "PendingFinalAck", "RecordFinalAck", "final_ack_sender"],
    *["SettleConfirmation", "confirmation_of_lookup", "DueMessage", "ForgetExpiry"],
    *["CreateList", "DeleteList", "DistributionList", "SetListTargets"],
}


def test_package_exports_exactly_the_public_names() -> None:
    # Its modules (``storage.store``, ``storage.ops``, ...) are attributes, not names it exports.
    exported = {
        name
        for name, value in vars(storage).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } - {"annotations"}
    assert exported == PUBLIC_NAMES
