"""Internal transactions: their sends and received messages, in memory until they end.

Theory of operation
-------------------
A transaction is OPEN while its owner sends and receives in it; COMMITTING
once its commit has been handed to the writer; ENDED after. Its sends are
kept here as ready-to-write store operations, and its receives as the
messages it holds (see ``locks``); nothing of it is written before the
commit, so a crash aborts it by forgetting it.

A transaction in which an operation failed is *doomed*: it can only abort.
Clients pipeline their sends and the commit, so the commit may arrive after
a send failed without the client having seen the failure yet; refusing the
commit is what keeps a transaction from ever committing in part. The same
holds when the daemon ends a transaction on its own (an idle timeout, a
queue deleted under it): it is marked aborted, and the owner learns why
when it next uses it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from storage import AppendMessage, AppendOutgoing, Operation

from .errors import QueueManagerError

__all__ = ["Transaction", "TransactionState"]


class TransactionState(enum.Enum):
    """Life of a transaction: OPEN -> COMMITTING -> ENDED, or OPEN -> ENDED on abort."""

    OPEN = "open"
    COMMITTING = "committing"
    ENDED = "ended"


@dataclass(slots=True, eq=False)
class Transaction:
    """An internal transaction: its sends and its held receives."""

    tx_id: int
    owner: object
    #: The id the owning connection knows it by.
    client_id: int
    #: Monotonic seconds.
    started_at: float
    #: Monotonic seconds of the last operation (for the idle timeout).
    last_activity: float
    sends: list[AppendMessage | AppendOutgoing] = field(default_factory=list)
    #: Body bytes of the sends, counted once per destination queue.
    send_bytes: int = 0
    #: Bytes the sends hold in memory (counted against the daemon's budget).
    held_bytes: int = 0
    #: ``(queue_id, lookup_id)`` of every message received in it.
    receives: list[tuple[int, int]] = field(default_factory=list)
    state: TransactionState = TransactionState.OPEN
    #: Why the daemon ended it on its own (idle timeout, queue deleted).
    abort_reason: str | None = None
    #: The first operation that failed in it: it can only abort.
    failure: QueueManagerError | None = None
    #: Receives in it waiting for a message now: it is not idle meanwhile.
    waiting: int = 0
    #: Its global id, if it was begun with one (it can then be prepared).
    xid: str | None = None
    #: The principal that began it ("": none, when clients do not authenticate):
    #: a prepared transaction is kept with it, and only it and administrators
    #: may resolve or list it.
    principal: str = ""
    #: Messages it moves (held like its receives, which they are among):
    #: ``(queue_id, lookup_id)`` -> the queue id they go to at commit.
    moves: dict[tuple[int, int], int] = field(default_factory=dict)
    #: The receives whose messages ask for a report of their fate (an
    #: acknowledgment or journal level): the commit reports them.
    receipts: set[tuple[int, int]] = field(default_factory=set)
    #: Copies its sends to other queue managers keep until confirmed (written
    #: by its commit; ``storage.AddConfirmation``).
    confirmations: list[Operation] = field(default_factory=list)

    @property
    def operations(self) -> int:
        """Sends plus receives so far."""
        return len(self.sends) + len(self.receives)

    def doom(self, error: QueueManagerError) -> None:
        """Record a failed operation (the first one is kept): the transaction can only abort."""
        if self.failure is None:
            self.failure = error
