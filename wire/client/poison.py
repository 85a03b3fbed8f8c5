"""The client protocol's frames of poison handling and subqueues (protocol version 5).

Requests:

* :class:`SetQueueProperties` changes a queue's poison handling: its retry
  count, retry cycles and retry delay (WCF's ReceiveRetryCount,
  MaxRetryCycles, RetryCycleDelay), or turns it off; from version 10, its
  quota too (MSMQ's PROPID_Q_QUOTA). The reply is ``Ok``.
* :class:`MoveMessages` moves one message (by LookupId, or the next one) or
  all of them between a queue and one of its subqueues (``NAME;retry``,
  ``NAME;poison``), or between two subqueues of one queue, as MSMQ's
  MQMoveMessage does: the message keeps its id and body and gets a new
  LookupId in its new queue. The same request moves dead letters out of
  ``system$;deadletter`` or ``system$;deadxact`` into an application queue
  of their transactional kind, or, with an empty target, each back to the
  queue it was sent to; they become ordinary messages there again (normal
  class). The reply is :class:`Moved`. With a transaction id (a
  transactional queue), the one message moves when the transaction commits.

Both are answered only on a connection that negotiated ``POISON_VERSION``
(5) or later; a daemon refuses them below it.

Version 5 also adds to existing frames, only on connections that
negotiated it: each is a *trailer* after the body earlier versions have, so
that part is byte for byte what it was (a reader of raw pages, such as
the Spark source, finds its messages where they were):

* ``Message``: the message's counters (:class:`MessageCounters`, 16 bytes:
  abort count u32, move count u32, last move time f64);
* ``MessageList``: one counters record per message, in order, after the
  last message;
* ``QueueList`` and ``StatusInfo``: one retry-settings record per queue
  (17 bytes: present u8, retry count u32, retry cycles u32, retry delay f64),
  in order, at the end of the body;
* ``CreateQueue``: the queue's retry settings (19 bytes: three optional
  values, a presence byte before each).

Version 10 (``QUOTA_VERSION``) adds one more trailer the same way, to a
request: ``SetQueueProperties`` may end with the queue's new quota (9 bytes:
present u8, quota u64; present 0 removes the quota). Without it the quota is
unchanged, so the body is what versions 5 to 9 send. A client sends it only
on a connection of version 10, and a daemon refuses a ``SetQueueProperties``
that carries it on an earlier one (``BAD_REQUEST``, and the connection
closes, as for a request of a later version).

A trailer is there or not as a whole: its length says which (a list's is
exactly one record per element), so a decoder needs no state to read it. The
construct layouts of these frames and trailers are in :mod:`wire.client.layouts`,
their conversions in :mod:`wire.client.trailers`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "POISON_REQUESTS",
    "MessageCounters",
    "MoveMessages",
    "Moved",
    "PoisonHandling",
    "RetrySettings",
    "SetQueueProperties",
]


class PoisonHandling(enum.IntEnum):
    """What :class:`SetQueueProperties` does with poison handling as a whole."""

    UNCHANGED = 0  #: as it is (turned on if a value is given)
    ON = 1  #: on (with WCF's defaults for what was not set)
    OFF = 2  #: off: aborts are still counted, nothing moves


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCounters:
    """What MSMQ counts of a message (PROPID_M_ABORT_COUNT, _MOVE_COUNT, _LAST_MOVE_TIME)."""

    #: Transactions that received it and aborted, since it entered its current queue.
    abort_count: int = 0
    #: Moves between its queue and the queue's subqueues, or out of a dead-letter
    #: queue, in its lifetime.
    move_count: int = 0
    #: Unix seconds of the last move; 0.0 if it never moved.
    last_move_time: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrySettings:
    """A queue's poison handling, in a ``QueueInfo``."""

    retry_count: int
    retry_cycles: int
    #: Seconds.
    retry_delay: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SetQueueProperties:
    """Change a queue's poison handling, and (version 10) its quota.

    ``poison`` is a :class:`PoisonHandling` value. A value given (not None)
    turns poison handling on; what is not given keeps its value, or WCF's
    default (5, 2, 1800 s) if poison handling was off. ``OFF`` takes no value.

    ``quota`` (bytes) replaces the queue's quota; ``no_quota`` removes it;
    neither keeps it (and leaves out the version 10 trailer). Both at once
    cannot be encoded.
    """

    name: str
    poison: int = 0
    retry_count: int | None = None
    retry_cycles: int | None = None
    retry_delay: float | None = None
    quota: int | None = None
    no_quota: bool = False

    @property
    def changes_quota(self) -> bool:
        """True if it carries the version 10 trailer: a new quota, or none."""
        return self.quota is not None or self.no_quota


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveMessages:
    """Move messages from ``source`` to ``target``: a queue and its subqueue (either
    way), two subqueues of one queue, or a dead-letter queue and an application
    queue; ``target`` empty, from a dead-letter queue: each message back to the
    queue it was sent to (one that has none here stays where it is).

    ``lookup_id`` names the message (0: the next one a receive would get);
    with ``all``, every message there when the move begins (``lookup_id``
    0; not in a transaction). ``tx_id`` moves one message in that transaction.
    """

    tx_id: int = 0
    source: str
    target: str
    lookup_id: int = 0
    all: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved:
    """The answer to :class:`MoveMessages`: how many moved (not those a move of
    all passed over), and the LookupId the last one got in its new queue (0 if
    none moved, or in a transaction: the commit gives it)."""

    count: int
    lookup_id: int


#: The requests a daemon answers only on a connection of ``POISON_VERSION`` or later.
POISON_REQUESTS: Final[frozenset[type[object]]] = frozenset({SetQueueProperties, MoveMessages})
