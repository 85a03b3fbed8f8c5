"""A store restored from a backup: what it changes before its first start.

Theory of operation
-------------------
A copy of a store is the same queue manager: its GUID, its message ids and
the sequences of its outgoing queues. A backup put back in place of the
original after the original went on working (a lost disk) is behind what
its peers know of it, in both directions:

* **as a sender**, it would number its next transactional messages to a
  destination from where the backup stood, numbers the destination already
  took from the original: they would be taken for those and dropped, or
  refused for good. :class:`RenewAfterRestore` gives every outgoing queue a
  new sequence timestamp (the stamp counter's next, as for a new queue), so
  that each goes on as a new stream the destination has never seen, from
  the first entry the backup holds; it drops the kept sequences of removed
  queues (``retired_sequences``) so that a queue created again starts a new
  stream too; and it moves the message-id ordinal limit half the ordinal
  space on (2**31), past any id the original can have given since, so that
  no new message id is one a peer still remembers;
* **to its readers**, each queue would number its next messages from where
  the backup stood, lookup ids the original gave since to messages a reader
  has already taken (a Spark query's checkpoint holds the last lookup id it
  read, and reads only above it): the operation moves every queue's next
  lookup id on by :data:`LOOKUP_JUMP`, past any the original can have given
  since (an outgoing queue's entries are numbered from its sequence's base
  and go on as a new stream: it is left as it is);
* **as a receiver**, each incoming stream stands where the backup stood,
  behind what the original took and acknowledged (its senders have
  forgotten those messages): the stream's next message would say it follows
  a number this store never saw, and be refused for good. The operation
  flags every incoming state *resync* (``ops.peering``): the layer above
  takes the stream's next message whatever it says came before it, once.

What cannot be had back is said in ``docs/operations.md``: the messages the
original received after the backup are lost with it, and what the backup
still holds to send may have been delivered by the original already (it
goes again, under the new stream). The operation is meant to run once, on
the restored store, before the queue manager starts: it leaves the setting
:data:`RENEWED`, which the queue manager's first start clears, and changes
nothing while it is there (a second jump of 2**31 would bring the ids back to
where the backup stood).

**One backup restored twice.** A restore that is done again from the same
backup (a first attempt on the wrong host, an automation retrying) starts
from the same stamps and ids as the first, and the first restored run may
have used some already: a second run would go on the first run's streams,
its messages taken for those and dropped, and give ids a peer still
remembers. So each renewal also moves stamps and ids on by an amount of its
own (``spread``, a random number its caller draws): past the day's margin,
up to :data:`STAMP_SPREAD` more seconds of stamps, and up to
:data:`ORDINAL_SPREAD` more ordinals. Two restores of one backup share a
stamp only if they land within the number of streams the first one opened
(about one chance in 200,000 for 40), and an id only if within the ids it
gave.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from ..context import PlanContext
from ..keys import setting_key
from ..records import QueueKind
from ..units import Operation, Result
from .peering import decode_incoming_entry, encode_incoming

__all__ = [
    "LOOKUP_JUMP",
    "LOOKUP_SKIPPED",
    "ORDINAL_JUMP",
    "ORDINAL_SPREAD",
    "RENEWED",
    "STAMP_MARGIN",
    "STAMP_SPREAD",
    "RenewAfterRestore",
    "Renewed",
]

#: How far the message-id ordinal limit moves on: half the 32-bit ordinal space.
ORDINAL_JUMP: Final = 1 << 31
#: How far every queue's next lookup id moves on: more messages than any queue
#: takes between a backup and its restore, and still exact in a JSON reader's
#: doubles after thousands of restores.
LOOKUP_JUMP: Final = 1 << 40
#: The setting, per queue (``lookup-skipped:<queue id>``), of the lookup ids its
#: restores skipped in all: "messages ever added" is its next lookup id less 1
#: and less these.
LOOKUP_SKIPPED: Final = "lookup-skipped:"
#: How far past the wall clock the sequence stamps move (seconds).
STAMP_MARGIN: Final = 86_400.0
#: The range of the further move of the stamps, each restore's own (seconds:
#: about 194 days, which keeps them below 2**32 until about 2105).
STAMP_SPREAD: Final = 1 << 24
#: The range of the further move of the ordinal limit, each restore's own.
ORDINAL_SPREAD: Final = 1 << 30
#: The setting a renewal leaves until the queue manager's first start clears it
#: (the new ordinal limit, as text): a second renewal before then changes nothing.
RENEWED: Final = "restore-renewed"


@dataclass(frozen=True, slots=True)
class Renewed(Result):
    """What :class:`RenewAfterRestore` changed."""

    #: Outgoing queues given a new sequence timestamp.
    outgoing: int
    #: Kept sequences of removed outgoing queues dropped.
    retired: int
    #: Incoming streams flagged for a resync.
    streams: int
    #: The message-id ordinal limit from now on.
    ordinal_limit: int
    #: Queues whose next lookup id moved on by :data:`LOOKUP_JUMP`.
    queues: int = 0
    #: The store was renewed already and has not been started since: nothing
    #: changed (a second renewal would move the ids back where they were).
    already: bool = False


@dataclass(frozen=True, slots=True)
class RenewAfterRestore(Operation):
    """Prepare a store restored from a backup for its first start (see the
    module docstring). It reads the committed ``retired_sequences`` and
    ``incoming``: run it in a batch of its own.

    Raises (when planned):
        InvalidRecord: sequence timestamps are exhausted.
        StoreCorrupt: an incoming state or its key does not decode (see
            ``ops.peering.decode_incoming_entry``).
    """

    #: Unix time: the new sequence timestamps are past ``int(now)`` plus
    #: :data:`STAMP_MARGIN`.
    now: float
    #: A random number drawn for this restore (``secrets.randbits(64)``): it moves
    #: stamps and ids further on by an amount of its own, so that two restores of
    #: one backup do not meet (see the module docstring).
    spread: int = 0

    def plan(self, ctx: PlanContext) -> Result:
        if ctx.txn.get(setting_key(RENEWED), db=ctx.dbs.meta) is not None:
            return Renewed(0, 0, 0, ctx.ordinal_limit(), already=True)
        peering = ctx.peering
        # A first stamp nobody gets: the counter moves a day past the wall clock
        # at least, past what the original can have given queues created since
        # the backup (it gives ``max(int(now), last + 1)``, and its clock may
        # have been ahead of this one), queues here or not.
        peering.next_sequence_stamp(self.now + STAMP_MARGIN + self.spread % STAMP_SPREAD)
        renewed = 0
        for queue_id in peering.outgoing_ids():
            state = peering.outgoing_state(queue_id)
            assert state is not None
            stamp = peering.next_sequence_stamp(self.now)
            peering.set_outgoing_state(dataclasses.replace(state, sequence_timestamp=stamp))
            renewed += 1
        with ctx.txn.cursor(db=ctx.dbs.retired) as cursor:
            retired = [bytes(key) for key in cursor.iternext(keys=True, values=False)]
        for key in retired:
            ctx.write_record(ctx.dbs.retired, key, None)
        with ctx.txn.cursor(db=ctx.dbs.incoming) as cursor:
            incoming = [
                (bytes(key), bytes(value)) for key, value in cursor.iternext(keys=True, values=True)
            ]
        for key, value in incoming:
            stream = decode_incoming_entry(key, value)
            flagged = encode_incoming(
                stream.sequence_id,
                stream.last_number,
                stream.reject_count,
                stream.last_access,
                resync=True,
                via=stream.via,
            )
            ctx.put(ctx.dbs.incoming, key, flagged)
        moved = 0
        for queue_id in ctx.queue_ids():
            if ctx.live_queue(queue_id).record.kind is not QueueKind.OUTGOING:
                ctx.writable(queue_id).next_lookup_id += LOOKUP_JUMP
                key = setting_key(f"{LOOKUP_SKIPPED}{queue_id}")
                before = ctx.txn.get(key, db=ctx.dbs.meta)
                skipped = (0 if before is None else int(bytes(before))) + LOOKUP_JUMP
                ctx.put_meta(key, str(skipped).encode())
                moved += 1
        limit = ctx.ordinal_limit() + ORDINAL_JUMP + (self.spread >> 24) % ORDINAL_SPREAD
        ctx.reserve_ordinals(limit)
        ctx.put_meta(setting_key(RENEWED), str(limit).encode())
        return Renewed(renewed, len(retired), len(incoming), limit, queues=moved)
