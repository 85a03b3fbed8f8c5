"""The store operations that put one stamped message where a send sends it.

For each target of a send (``Addressing.destinations``): an ``AppendMessage``
for a local queue (with its deadline, when the message has a time to be
received), an ``AppendOutgoing`` for a queue on another queue manager (with
its deadline to reach the queue), or, for a send that fans out to several
targets (seed 000), the dead-letter copy and acknowledgment of a local queue
that refuses it. Whether a message has time limits is read from its encoded
bytes (``wire/message_layout.py``): this runs for every message sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from storage import AppendMessage, AppendOutgoing
from wire import MessageProperties

from .addressing import MissingTarget, Target
from .outcomes import Outcomes, deadline_of
from .outgoing import EntryOrigin, RemoteDestination
from .sends import refused_copy

__all__ = ["copies_of"]

# Both time limits in an encoded message (0xFFFFFFFF: none).
_TIMERS = slice(32, 40)
_NO_TIMERS: Final = b"\xff" * 8


def copies_of(
    stamped: MessageProperties,
    targets: Sequence[Target],
    *,
    transactional: bool,
    fans_out: bool,
    outcomes: Outcomes,
    wall: float,
) -> list[AppendMessage | AppendOutgoing]:
    """One operation per target (two for a refused one), in target order."""
    payload = stamped.raw
    priority = stamped.priority
    body_size = stamped.body_size
    timed = payload[_TIMERS] != _NO_TIMERS
    deadline = deadline_of(stamped) if timed else None
    appends: list[AppendMessage | AppendOutgoing] = []
    for target in targets:
        refusal = refused_copy(target, transactional=transactional) if fans_out else None
        if refusal is not None:
            # Seed 000: this queue refuses the copy, as it would at arrival.
            appends.extend(outcomes.refusal(stamped, refusal, wall=wall))
        elif isinstance(target, RemoteDestination):
            appends.append(
                target.append_entry(
                    EntryOrigin.LOCAL,
                    payload,
                    body_size,
                    transactional=transactional,
                    recoverable=stamped.delivery == 1,
                    deadline=deadline_of(stamped, reach_only=True) if timed else None,
                )
            )
        elif isinstance(target, MissingTarget):
            pass  # refused_copy() refused it
        elif deadline is None:
            appends.append(AppendMessage(target.queue_id, payload, priority, body_size))
        else:
            appends.append(
                AppendMessage(target.queue_id, payload, priority, body_size, deadline=deadline)
            )
    return appends
