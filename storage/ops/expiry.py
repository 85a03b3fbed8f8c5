"""The expiry index: messages with a deadline, in deadline order.

Theory of operation
-------------------
A message appended with a ``deadline`` (``AppendMessage``, ``AppendOutgoing``
or a prepared send) gets a version 3 record that keeps the deadline, and one
key in the ``expiry`` database: the deadline in u64 milliseconds (rounded
up), the queue id and the lookup id. Removing or erasing the message deletes
the key in the same write (the record says which key), so the index holds
exactly the timed messages that are still stored, whatever their queue.

The layer above reads the due keys in deadline order with
:func:`read_due` (a seek and a bounded walk: it never visits a message that
is not due, and opening the store reads none of them), decides what each
expiry means, and removes the message with ordinary operations. A key whose
message is already gone (a purge erases messages in the background) is
dropped with :class:`ForgetExpiry`; nothing else ever has to scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..catalog import Catalog
from ..context import PlanContext
from ..environment import Environment
from ..keys import EXPIRY_KEY_SIZE, decode_expiry_key, expiry_key
from ..units import Done, Removal, Result

__all__ = ["DueMessage", "ForgetExpiry", "read_due"]


class DueMessage(NamedTuple):
    """A key of the expiry index: a stored message and its deadline."""

    deadline: float
    queue_id: int
    lookup_id: int


def read_due(
    env: Environment, catalog: Catalog, *, before: float, limit: int, after: DueMessage | None
) -> list[DueMessage]:
    """At most ``limit`` index entries with a deadline at or before ``before``,
    in deadline order, starting past ``after`` (None: from the first)."""
    if limit <= 0:
        return []
    end = expiry_key(before, 0, 0)[:8]
    found: list[DueMessage] = []
    with env.read("read_due") as txn, txn.cursor(db=catalog.dbs.expiry) as cursor:
        if after is None:
            positioned = cursor.first()
        else:
            start = expiry_key(after.deadline, after.queue_id, after.lookup_id + 1)
            positioned = cursor.set_range(start)
        while positioned and len(found) < limit:
            key = bytes(cursor.key())
            if len(key) != EXPIRY_KEY_SIZE or key[:8] > end:
                break
            found.append(DueMessage(*decode_expiry_key(key)))
            positioned = cursor.next()
    return found


@dataclass(frozen=True, slots=True)
class ForgetExpiry(Removal):
    """Drop index entries whose messages are gone (deleting a key that is not
    there is no error)."""

    entries: tuple[DueMessage, ...]

    def plan(self, ctx: PlanContext) -> Result:
        expiry = ctx.dbs.expiry
        for entry in self.entries:
            ctx.discard(expiry, expiry_key(entry.deadline, entry.queue_id, entry.lookup_id))
        return Done()
