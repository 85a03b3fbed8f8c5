"""Errors of the queue-manager core, each tied to a client-protocol error code.

The daemon turns any of these into an ``ErrorReply`` with the same code and
message; the SDK turns that back into the matching ``qmgr.client`` exception.
"""

from __future__ import annotations

from wire.client_frames import ErrorCode


class QueueManagerError(Exception):
    """A request could not be carried out; nothing it asked for was applied."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QueueNotFound(QueueManagerError):
    """No queue has that name."""

    code = ErrorCode.QUEUE_NOT_FOUND


class QueueExists(QueueManagerError):
    """A queue with that name already exists."""

    code = ErrorCode.QUEUE_EXISTS


class InvalidName(QueueManagerError):
    """A queue name or format name is not valid."""

    code = ErrorCode.INVALID_NAME


class MessageTooLarge(QueueManagerError):
    """The body is over the 4 MB limit."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class QuotaExceeded(QueueManagerError):
    """A queue's byte quota would be exceeded."""

    code = ErrorCode.QUOTA_EXCEEDED


class TransactionUsageError(QueueManagerError):
    """Transactional and non-transactional operations were mixed in a way MSMQ forbids."""

    code = ErrorCode.TRANSACTION_USAGE


class TransactionNotFound(QueueManagerError):
    """The transaction id is unknown or the transaction has already ended."""

    code = ErrorCode.TRANSACTION_NOT_FOUND


class TransactionAborted(QueueManagerError):
    """The transaction was aborted; none of its operations took effect."""

    code = ErrorCode.TRANSACTION_ABORTED


class TransactionTooLarge(QueueManagerError):
    """The transaction holds more operations or bytes than the daemon allows."""

    code = ErrorCode.TRANSACTION_TOO_LARGE


class StoreFull(QueueManagerError):
    """The disk or the configured store size is full."""

    code = ErrorCode.STORE_FULL


class AccessDenied(QueueManagerError):
    """The operation is not allowed on this queue."""

    code = ErrorCode.ACCESS_DENIED


class InvalidArgument(QueueManagerError):
    """A property value is out of range."""

    code = ErrorCode.INVALID_ARGUMENT


class NotSupported(QueueManagerError):
    """The request is valid but this queue manager cannot carry it out."""

    code = ErrorCode.NOT_SUPPORTED


class ShuttingDown(QueueManagerError):
    """The daemon is stopping."""

    code = ErrorCode.SHUTTING_DOWN


class InternalError(QueueManagerError):
    """An unexpected failure; nothing was applied."""

    code = ErrorCode.INTERNAL
