"""Errors of the queue-manager core: what went wrong, in the queue manager's terms.

Each class names one kind of failure; none of them knows how a protocol
carries it. The daemon maps them to the client protocol's error codes in
one table (``qmgr.server.client.error_codes``), and the store's errors become these in
one function, :func:`from_store_error`.
"""

from __future__ import annotations

import storage


class QueueManagerError(Exception):
    """A request could not be carried out; nothing it asked for was applied.

    Attributes:
        message: what was wrong, in words meant for the user.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QueueNotFound(QueueManagerError):
    """No queue has that name (or the message asked for is gone: :class:`MessageNotFound`)."""


class MessageNotFound(QueueNotFound):
    """The queue does not hold the message asked for (gone, never there, or held
    by a transaction). The client protocol carries it as a :class:`QueueNotFound`;
    the HTTP API gives it a code of its own."""


class QueueExists(QueueManagerError):
    """A queue with that name already exists."""


class InvalidName(QueueManagerError):
    """A queue name or format name is not valid."""


class MessageTooLarge(QueueManagerError):
    """The body is over the 4 MB limit."""


class QuotaExceeded(QueueManagerError):
    """A queue's byte quota would be exceeded."""


class TransactionUsageError(QueueManagerError):
    """Transactional and non-transactional operations were mixed in a way MSMQ forbids."""


class TransactionNotFound(QueueManagerError):
    """The transaction id is unknown or the transaction has already ended."""


class TransactionAborted(QueueManagerError):
    """The transaction was aborted; none of its operations took effect."""


class TransactionCommitted(QueueManagerError):
    """The transaction was committed; it cannot be aborted."""


class TransactionTooLarge(QueueManagerError):
    """The transaction holds more operations or bytes than the daemon allows."""


class StoreFull(QueueManagerError):
    """The disk or the configured store size is full."""


class AccessDenied(QueueManagerError):
    """The operation is not allowed on this queue."""


class InvalidArgument(QueueManagerError):
    """A property value is out of range."""


class NotSupported(QueueManagerError):
    """The request is valid but this queue manager cannot carry it out."""


class LimitExceeded(QueueManagerError):
    """A limit that protects the queue manager was reached; the message says which."""


class ShuttingDown(QueueManagerError):
    """The daemon is stopping."""


class InternalError(QueueManagerError):
    """An unexpected failure; nothing was applied."""


def from_store_error(error: BaseException, *, context: str = "") -> QueueManagerError:
    """The core's error for a store error (the one place where they are translated).

    Args:
        error: what the store raised or returned.
        context: words to put before the store's own message, e.g.
            ``"transaction 4 was aborted: "``.
    """
    if isinstance(error, QueueManagerError):
        return error
    text = f"{context}{error}"
    if isinstance(error, storage.QuotaExceeded):
        return QuotaExceeded(text)
    if isinstance(error, storage.QueueMissing):
        if isinstance(error.queue, int):  # a store's number, which means nothing to users
            return QueueNotFound(f"{context}a queue it uses was deleted")
        return QueueNotFound(f"{context}the queue no longer exists ({error})")
    if isinstance(error, storage.MessageMissing):
        return MessageNotFound(f"{context}the message no longer exists ({error})")
    if isinstance(error, storage.StoreFull):
        return StoreFull(f"{context}the store is full: {error}")
    if isinstance(error, storage.QueueExists | storage.ListExists):
        return QueueExists(text)
    if isinstance(error, storage.ListMissing):
        return QueueNotFound(text)
    if isinstance(error, storage.InvalidRecord | storage.InvalidOperation):
        return InvalidArgument(text)
    return InternalError(f"{context}store error: {error}")
