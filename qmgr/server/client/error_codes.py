"""The one place where the core's errors become the client protocol's error codes.

(The protocol's own refusals, such as a malformed frame or a missed deadline,
are framed by ``qmgr.protocol.client_connection``; these are the errors of
the requests it lets through, and of a connection refused before it has a
session.)
"""

from __future__ import annotations

from typing import Final

from qmgr.core import errors
from wire import client as cf

ERROR_CODES: Final[dict[type[errors.QueueManagerError], cf.ErrorCode]] = {
    errors.QueueNotFound: cf.ErrorCode.QUEUE_NOT_FOUND,
    errors.QueueExists: cf.ErrorCode.QUEUE_EXISTS,
    errors.InvalidName: cf.ErrorCode.INVALID_NAME,
    errors.MessageTooLarge: cf.ErrorCode.MESSAGE_TOO_LARGE,
    errors.QuotaExceeded: cf.ErrorCode.QUOTA_EXCEEDED,
    errors.TransactionUsageError: cf.ErrorCode.TRANSACTION_USAGE,
    errors.TransactionNotFound: cf.ErrorCode.TRANSACTION_NOT_FOUND,
    errors.TransactionAborted: cf.ErrorCode.TRANSACTION_ABORTED,
    errors.TransactionCommitted: cf.ErrorCode.TRANSACTION_COMMITTED,
    errors.TransactionTooLarge: cf.ErrorCode.TRANSACTION_TOO_LARGE,
    errors.StoreFull: cf.ErrorCode.STORE_FULL,
    errors.AccessDenied: cf.ErrorCode.ACCESS_DENIED,
    errors.InvalidArgument: cf.ErrorCode.INVALID_ARGUMENT,
    errors.NotSupported: cf.ErrorCode.NOT_SUPPORTED,
    errors.LimitExceeded: cf.ErrorCode.LIMIT_EXCEEDED,
    errors.ShuttingDown: cf.ErrorCode.SHUTTING_DOWN,
    errors.InternalError: cf.ErrorCode.INTERNAL,
}


def error_code(error: errors.QueueManagerError) -> cf.ErrorCode:
    """The reply code of a core error (INTERNAL for a class the table does not know)."""
    for cls in type(error).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            return code
    return cf.ErrorCode.INTERNAL


def error_frame(request_id: int, error: errors.QueueManagerError) -> bytes:
    """A whole ErrorReply frame for ``error``."""
    return cf.encode_frame(request_id, cf.ErrorReply(code=error_code(error), message=error.message))
