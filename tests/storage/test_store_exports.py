"""The public surface of the storage package."""

from __future__ import annotations

import storage


def test_public_names() -> None:
    assert sorted(storage.__all__) == [
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
        "SCHEMA_VERSION",
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
    for name in storage.__all__:
        assert getattr(storage, name) is not None


def test_error_tree() -> None:
    for name in (
        "StoreFull",
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
    ):
        assert issubclass(getattr(storage, name), storage.StoreError)
