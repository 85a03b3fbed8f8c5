"""Error replies become typed SDK exceptions, one class per error code."""

from __future__ import annotations

import pytest

import qmgr.client as sdk
from qmgr.client import QueueError, error_from_reply
from wire import client as cf

#: What every error code of the protocol raises, spelled out.
EXPECTED_CLASS: dict[cf.ErrorCode, type[QueueError]] = {
    cf.ErrorCode.BAD_REQUEST: sdk.ProtocolViolation,
    cf.ErrorCode.UNSUPPORTED_VERSION: sdk.UnsupportedVersion,
    cf.ErrorCode.QUEUE_NOT_FOUND: sdk.QueueNotFound,
    cf.ErrorCode.QUEUE_EXISTS: sdk.QueueExists,
    cf.ErrorCode.INVALID_NAME: sdk.InvalidName,
    cf.ErrorCode.MESSAGE_TOO_LARGE: sdk.MessageTooLarge,
    cf.ErrorCode.QUOTA_EXCEEDED: sdk.QuotaExceeded,
    cf.ErrorCode.TRANSACTION_USAGE: sdk.TransactionUsageError,
    cf.ErrorCode.TRANSACTION_NOT_FOUND: sdk.TransactionNotFound,
    cf.ErrorCode.TRANSACTION_ABORTED: sdk.TransactionAborted,
    cf.ErrorCode.TRANSACTION_TOO_LARGE: sdk.TransactionTooLarge,
    cf.ErrorCode.STORE_FULL: sdk.StoreFull,
    cf.ErrorCode.ACCESS_DENIED: sdk.AccessDenied,
    cf.ErrorCode.INVALID_ARGUMENT: sdk.InvalidArgument,
    cf.ErrorCode.NOT_SUPPORTED: sdk.NotSupported,
    cf.ErrorCode.SHUTTING_DOWN: sdk.ShuttingDown,
    cf.ErrorCode.INTERNAL: sdk.InternalError,
    cf.ErrorCode.LIMIT_EXCEEDED: sdk.LimitExceeded,
    cf.ErrorCode.TRANSACTION_COMMITTED: sdk.TransactionCommitted,
}


def test_the_table_names_every_code_once() -> None:
    assert set(EXPECTED_CLASS) == set(cf.ErrorCode)
    assert len(set(EXPECTED_CLASS.values())) == len(EXPECTED_CLASS)


@pytest.mark.parametrize(
    ("code", "cls"), list(EXPECTED_CLASS.items()), ids=[code.name for code in EXPECTED_CLASS]
)
def test_every_error_code_raises_its_class(code: cf.ErrorCode, cls: type[QueueError]) -> None:
    error = error_from_reply(int(code), "what was wrong")
    assert type(error) is cls
    assert cls.code is code
    assert error.code is code
    assert error.message == str(error) == "what was wrong"
    assert cls.__name__ in sdk.__all__
    assert getattr(sdk, cls.__name__) is cls
    assert issubclass(cls, QueueError)


def test_limit_exceeded_is_its_own_error() -> None:
    error = error_from_reply(18, "too many connections")
    assert isinstance(error, sdk.LimitExceeded)
    assert not isinstance(error, sdk.InternalError | sdk.QuotaExceeded | sdk.StoreFull)
    assert error.code is cf.ErrorCode.LIMIT_EXCEEDED
    with pytest.raises(sdk.LimitExceeded, match="too many connections"):
        raise error


@pytest.mark.parametrize("code", [0, 20, 999, 0xFFFF])
def test_unknown_code_still_says_what_was_wrong(code: int) -> None:
    error = error_from_reply(code, "new in a later version")
    assert type(error) is QueueError
    assert error.code is None
    assert "new in a later version" in error.message
    assert str(code) in error.message


def test_connection_lost_is_client_side() -> None:
    assert sdk.ConnectionLost("x").code is None
    assert issubclass(sdk.ConnectionLost, QueueError)
    assert QueueError("x").code is None
