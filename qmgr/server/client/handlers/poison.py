"""The requests of poison handling and subqueues: SetQueueProperties and MoveMessages.

``SetQueueProperties`` changes a queue's poison handling, its quota (version
10), or both in one write; ``MoveMessages``
moves messages between a queue and its subqueues, or out of a dead-letter
queue into an application queue, named or (no target) each message's own
(one, the next, or all of them in bounded steps; one in a transaction,
moved at its commit). The core decides (``qmgr.core.poison``,
``qmgr.core.queue_admin``, ``qmgr.core.moves``); these handlers write its units and answer. A move
back asks the authorization about each message's queue
(``Authorization.move_targets``, once per queue and request): a refusal is
counted and logged (``access_denied``) as the session does for a request.
What version 5 added to other replies (counters, retry settings) is made in
``replies``.
"""

from __future__ import annotations

from typing import Final

import trio

import storage
from qmgr.core.errors import (
    InvalidArgument,
    MessageNotFound,
    QueueManagerError,
    TransactionUsageError,
)
from qmgr.core.moves import Denied
from qmgr.core.permissions import Right
from storage import QueueRecord
from wire import client as cf
from wire import quoted

from ..needs import MOVE_RIGHTS, QueueRight
from ..registry import Registry
from ..request_context import RequestContext, store_failure

__all__ = ["HANDLERS"]

HANDLERS: Final = Registry()

#: What ``SetQueueProperties.poison`` asks, for ``merge_settings``.
_ENABLED: Final = {
    cf.PoisonHandling.UNCHANGED: None,
    cf.PoisonHandling.ON: True,
    cf.PoisonHandling.OFF: False,
}


@HANDLERS.handles(cf.SetQueueProperties, need=QueueRight("name", Right.SET_PROPERTIES))
async def set_queue_properties(
    ctx: RequestContext, request_id: int, request: cf.SetQueueProperties
) -> None:
    """Change a queue's poison handling and/or its quota (answered with its id).

    A request that changes the quota and says nothing of poison handling
    leaves it as it is (nothing of it is written)."""
    try:
        enabled = _ENABLED[cf.PoisonHandling(request.poison)]
    except ValueError:
        choices = ", ".join(f"{p.value} ({p.name.lower()})" for p in cf.PoisonHandling)
        msg = f"poison must be {choices}, not {request.poison}"
        raise InvalidArgument(msg) from None
    core = ctx.services.core
    retry = (request.retry_count, request.retry_cycles, request.retry_delay)
    ops: list[storage.Operation] = []
    if not request.changes_quota or enabled is not None or retry != (None, None, None):
        _, unit = core.poison.settings_unit(
            request.name,
            enabled=enabled,
            retry_count=request.retry_count,
            retry_cycles=request.retry_cycles,
            retry_delay=request.retry_delay,
        )
        ops.extend(unit.ops)
    if request.changes_quota:
        _, unit = core.queues.quota_unit(request.name, request.quota)
        ops.extend(unit.ops)
    record = core.queues.properties_set(await ctx.write(storage.Unit(tuple(ops))))
    settings = record.poison
    ctx.log.info(
        "queue_properties_set",
        queue=record.name,
        poison_handling=settings is not None,
        retry_count=None if settings is None else settings.retry_count,
        retry_cycles=None if settings is None else settings.retry_cycles,
        retry_delay=None if settings is None else settings.retry_delay,
        quota=record.quota,
    )
    ctx.reply(request_id, cf.Ok(value=record.queue_id))


@HANDLERS.handles(cf.MoveMessages, need=MOVE_RIGHTS)
async def move_messages(ctx: RequestContext, request_id: int, request: cf.MoveMessages) -> None:
    """Move one message, or all, between a queue and its subqueues, or out of a
    dead-letter queue (to the target named, or each back to its queue)."""
    moves = ctx.services.core.moves
    source, target = moves.move_queues(request.source, request.target)
    denied = None if target is not None else _denied(ctx, request)
    skipped = 0
    if request.all:
        if request.tx_id or request.lookup_id:
            msg = "a move of all messages names no message and is not part of a transaction"
            raise TransactionUsageError(msg) if request.tx_id else InvalidArgument(msg)
        count, last, skipped = await _move_all(ctx, source, request, denied)
    elif request.tx_id:
        tx = ctx.usable_transaction(request.tx_id)
        held = moves.move_one(
            source,
            target,
            lookup_id=request.lookup_id,
            tx=tx,
            now=trio.current_time(),
            denied=denied,
        )
        if held is None:
            _nothing_to_move(source, request.lookup_id)
        count, last = (0, 0) if held is None else (1, 0)
    else:
        count, last = await _move_one(ctx, source, target, request.lookup_id, denied)
    if (count or skipped) and not request.tx_id:
        ctx.log.info(
            "messages_moved",
            source=source.name,
            target=None if target is None else target.name,
            back=target is None,
            count=count,
            last=last,
            skipped=skipped,
        )
    ctx.reply(request_id, cf.Moved(count=count, lookup_id=last))


def _denied(ctx: RequestContext, request: cf.MoveMessages) -> Denied | None:
    """What the principal may not move messages into, for a move back (each
    queue asked once per request); a refusal is counted and logged."""
    authorization = ctx.services.authorization
    check = None if authorization is None else authorization.move_targets(ctx.principal, request)
    if authorization is None or check is None:
        return None
    answers: dict[int, str | None] = {}

    def denied(target: QueueRecord) -> str | None:
        if target.queue_id in answers:
            return answers[target.queue_id]
        why = answers[target.queue_id] = check(target)
        if why is not None:
            authorization.tally.denied += 1
            ctx.log.warning("access_denied", request="MoveMessages", reason=why)
        return why

    return denied


def _nothing_to_move(source: QueueRecord, lookup_id: int) -> None:
    """A move found no message: an error only if it named one.

    Raises:
        MessageNotFound: the message named is not there, or a transaction holds it.
    """
    if lookup_id:
        msg = (
            f"message {lookup_id} is not in {quoted(source.display_name)} "
            "(or a transaction holds it)"
        )
        raise MessageNotFound(msg)


async def _move_one(
    ctx: RequestContext,
    source: QueueRecord,
    target: QueueRecord | None,
    lookup_id: int,
    denied: Denied | None,
) -> tuple[int, int]:
    held = ctx.services.core.moves.move_one(
        source, target, lookup_id=lookup_id, tx=None, now=0.0, denied=denied
    )
    if held is None:
        _nothing_to_move(source, lookup_id)
        return 0, 0
    taken, unit = held
    assert unit is not None
    return await _write_moves(ctx, source, [taken], unit)


async def _move_all(
    ctx: RequestContext, source: QueueRecord, request: cf.MoveMessages, denied: Denied | None
) -> tuple[int, int, int]:
    """Move every message there now, in steps: ``(moved, the last one's new
    lookup id, messages passed over)``."""
    moves = ctx.services.core.moves
    through = source.next_lookup_id - 1  # what arrives meanwhile stays
    total = last = skipped = after = 0
    while True:
        source, target = moves.move_queues(request.source, request.target)
        step = moves.move_step(source, target, through=through, after=after, denied=denied)
        if step is None:
            return total, last, skipped
        after = step.after
        skipped += step.skipped
        if step.unit is not None:
            moved, newest = await _write_moves(ctx, source, step.held, step.unit, step_of_many=True)
            if not moved and request.target:
                return total, last, skipped  # every move failed: gone meanwhile, or no room
            # Back to their own queues, one target's failure (no room there) is
            # not the others': the next step is tried all the same.
            total += moved
            last = newest
        # Let the other connections in between the steps of a long move.
        await trio.lowlevel.checkpoint()


async def _write_moves(
    ctx: RequestContext,
    source: QueueRecord,
    held: list[int],
    unit: storage.Unit,
    *,
    step_of_many: bool = False,
) -> tuple[int, int]:
    services = ctx.services
    moves = services.core.moves

    def failed(exc: BaseException) -> QueueManagerError | None:
        _, _, woken, _ = moves.move_done(source.queue_id, held, exc)
        services.signals.notify(woken)
        return store_failure(exc)

    outcome = await ctx.write_settled(unit, failed)
    moved, last, woken, error = moves.move_done(source.queue_id, held, outcome)
    services.signals.notify(woken)
    if error is not None and not step_of_many:
        raise error
    if error is not None and not moved:
        ctx.log.info("move_failed", source=source.name, error=error.message)
    return moved, last
