"""The core's errors (``qmgr.core.errors``): the store's errors become the core's in one place."""

from __future__ import annotations

import pytest

import storage
from qmgr.core import errors


@pytest.mark.parametrize(
    ("store_error", "core_error"),
    [
        (storage.QuotaExceeded("q", 10, 12), errors.QuotaExceeded),
        (storage.QueueMissing("q"), errors.QueueNotFound),
        (storage.MessageMissing(3, 4), errors.MessageNotFound),
        (storage.StoreFull("no room"), errors.StoreFull),
        (storage.QueueExists("q"), errors.QueueExists),
        (storage.ListExists("l"), errors.QueueExists),
        (storage.ListMissing("l"), errors.QueueNotFound),
        (storage.InvalidRecord("bad"), errors.InvalidArgument),
        (storage.InvalidOperation("bad"), errors.InvalidArgument),
        (storage.StoreCorrupt("broken"), errors.InternalError),
    ],
)
def test_each_store_error_has_its_kind(
    store_error: storage.StoreError, core_error: type[errors.QueueManagerError]
) -> None:
    translated = errors.from_store_error(store_error, context="transaction 4 was aborted: ")
    assert type(translated) is core_error
    assert translated.message.startswith("transaction 4 was aborted: ")
    assert str(translated) == translated.message


def test_a_core_error_passes_through_unchanged() -> None:
    original = errors.AccessDenied("no")
    assert errors.from_store_error(original, context="ignored: ") is original


def test_anything_else_is_an_internal_error() -> None:
    translated = errors.from_store_error(RuntimeError("disk on fire"))
    assert isinstance(translated, errors.InternalError)
    assert "disk on fire" in translated.message


def test_a_missing_queue_is_named_but_never_by_its_store_number() -> None:
    by_name = errors.from_store_error(storage.QueueMissing("orders"), context="tx 4: ")
    assert by_name.message == "tx 4: the queue no longer exists (queue 'orders' does not exist)"
    by_number = errors.from_store_error(storage.QueueMissing(31), context="tx 4: ")
    assert by_number.message == "tx 4: a queue it uses was deleted"
