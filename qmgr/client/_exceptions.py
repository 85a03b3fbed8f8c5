"""The SDK's exceptions: one per error code of the client protocol, under one base.

Every failed request raises a :class:`QueueError` subclass whose ``message``
says what was wrong (the daemon's own words). :class:`ConnectionLost` is the
one error with no code of its own: the daemon could not be reached, or went
away while a request was outstanding. The client also raises some of the
others itself, with the daemon's wording, for what it can judge before
sending (:class:`InvalidArgument`, :class:`MessageTooLarge`,
:class:`TransactionNotFound`, :class:`TransactionUsageError`, ...).
"""

from __future__ import annotations

from typing import Final

from wire.client import ErrorCode


class QueueError(Exception):
    """Base of every error the SDK raises.

    Attributes:
        code: the protocol's error code, or ``None`` for errors made on the
            client side (:class:`ConnectionLost`) and codes this SDK does not know.
        message: what was wrong, in words.
    """

    code: ErrorCode | None = None

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ProtocolViolation(QueueError):
    """A frame was malformed or not allowed; the daemon closes the connection."""

    code = ErrorCode.BAD_REQUEST


class UnsupportedVersion(QueueError):
    """The daemon and this SDK have no protocol version in common."""

    code = ErrorCode.UNSUPPORTED_VERSION


class QueueNotFound(QueueError):
    """No queue has that name."""

    code = ErrorCode.QUEUE_NOT_FOUND


class QueueExists(QueueError):
    """A queue with that name already exists."""

    code = ErrorCode.QUEUE_EXISTS


class InvalidName(QueueError):
    """A queue name or format name is not valid."""

    code = ErrorCode.INVALID_NAME


class MessageTooLarge(QueueError):
    """The message body is over the 4 MB limit."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class QuotaExceeded(QueueError):
    """The queue's byte quota would be exceeded."""

    code = ErrorCode.QUOTA_EXCEEDED


class TransactionUsageError(QueueError):
    """Transactional and non-transactional use were mixed in a way MSMQ forbids.

    For example: a non-transactional send to a transactional queue, a send
    inside a transaction to a non-transactional queue, or a receive inside a
    transaction from a non-transactional queue.
    """

    code = ErrorCode.TRANSACTION_USAGE


class TransactionNotFound(QueueError):
    """The transaction is unknown to the daemon or has already ended.

    For a transaction named by its xid: no transaction with that xid is
    prepared, and the daemon keeps no outcome for it (never prepared, still
    open on its connection, or resolved so long ago that its outcome was
    forgotten).
    """

    code = ErrorCode.TRANSACTION_NOT_FOUND


class TransactionAborted(QueueError):
    """The transaction was aborted (idle timeout, failure); none of it was applied.

    Also raised by a commit of a prepared transaction that was aborted
    before (by ``abort_prepared()`` or ``qmgr tx abort``).
    """

    code = ErrorCode.TRANSACTION_ABORTED


class TransactionCommitted(QueueError):
    """An abort of a prepared transaction that was committed before; it stays committed."""

    code = ErrorCode.TRANSACTION_COMMITTED


class TransactionTooLarge(QueueError):
    """The transaction holds more operations or bytes than the daemon allows."""

    code = ErrorCode.TRANSACTION_TOO_LARGE


class StoreFull(QueueError):
    """The disk, or the configured store size, is full."""

    code = ErrorCode.STORE_FULL


class AccessDenied(QueueError):
    """Not allowed: the principal lacks the right the request needs (a queue's
    access list, an administrator's request), the operation is not allowed on
    the queue (journal and system queues), or a token was not accepted."""

    code = ErrorCode.ACCESS_DENIED


class InvalidArgument(QueueError, ValueError):
    """A value is out of range or of the wrong kind (priority, label length,
    correlation id size, a timeout, an address, ...); also a ``ValueError``."""

    code = ErrorCode.INVALID_ARGUMENT


class NotSupported(QueueError):
    """The request is valid but this queue manager cannot carry it out."""

    code = ErrorCode.NOT_SUPPORTED


class ShuttingDown(QueueError):
    """The queue manager is stopping."""

    code = ErrorCode.SHUTTING_DOWN


class InternalError(QueueError):
    """An unexpected failure inside the daemon; nothing was applied."""

    code = ErrorCode.INTERNAL


class LimitExceeded(QueueError):
    """A limit protecting the queue manager was reached: connections (raised by
    ``connect()`` and ``open_client()`` when the daemon refuses a new
    connection), memory for messages in open transactions, transactions or
    waiting receives per connection. The message says which; retrying later
    may succeed.

    When the daemon closes a connection that was open (idle or too slow, evicted
    to make room, a frame over the budget for frames in progress), the calls
    on it raise :class:`ConnectionLost` instead, with the daemon's reason in
    its message: that connection cannot be used again.
    """

    code = ErrorCode.LIMIT_EXCEEDED


class ConnectionLost(QueueError):
    """The queue manager could not be reached, or the connection to it broke.

    The message says which address and why; when the daemon closed the
    connection and said why (an idle connection, one evicted to make room,
    ...), its words are in the message. After this error the client object
    is unusable: connect again. Requests that were outstanding may or may not
    have been carried out, except that an uncommitted transaction is always
    aborted when its connection ends.
    """


_BY_CODE: Final[dict[int, type[QueueError]]] = {
    cls.code: cls
    for cls in (
        ProtocolViolation,
        UnsupportedVersion,
        QueueNotFound,
        QueueExists,
        InvalidName,
        MessageTooLarge,
        QuotaExceeded,
        TransactionUsageError,
        TransactionNotFound,
        TransactionAborted,
        TransactionCommitted,
        TransactionTooLarge,
        StoreFull,
        AccessDenied,
        InvalidArgument,
        NotSupported,
        ShuttingDown,
        InternalError,
        LimitExceeded,
    )
    if cls.code is not None
}


def error_from_reply(code: int, message: str) -> QueueError:
    """The exception for an error reply with this code and message.

    An unknown code (from a newer daemon) gives a plain :class:`QueueError`
    with ``code`` set when the code is a known :class:`ErrorCode`, else ``None``.
    """
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls(message)
    try:
        known: ErrorCode | None = ErrorCode(code)
    except ValueError:
        known = None
        message = f"{message} (error code {code})"
    return QueueError(message, code=known)
