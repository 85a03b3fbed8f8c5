"""The client requests of poison handling and subqueues, and the version 5 additions to replies.

``SetQueueProperties`` changes a queue's poison handling; ``MoveMessages``
moves messages between a queue and its subqueues (one, the next, or all of
them in bounded steps; one in a transaction, moved at its commit). The
core decides (``qmgr.core.poison``); these handlers write its units
through the committer and answer, in the pattern of ``requests``. A
connection that negotiated a version before ``POISON_VERSION`` is refused
these frames by the session, and gets its messages and queues without the
version 5 trailers (counters, retry settings), which only
:meth:`PoisonRequests.message_frame`, :meth:`PoisonRequests.counters_trailer`
and :meth:`PoisonRequests.for_version` add.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import structlog
import trio

import storage
from qmgr.core.errors import (
    InvalidArgument,
    QueueNotFound,
    TransactionUsageError,
    from_store_error,
)
from qmgr.core.transactions import Transaction
from storage import QueueRecord
from wire import client as cf

from .services import Services

__all__ = ["PoisonRequests"]

#: What ``SetQueueProperties.poison`` asks, for ``merge_settings``.
_ENABLED: Final = {
    cf.PoisonHandling.UNCHANGED: None,
    cf.PoisonHandling.ON: True,
    cf.PoisonHandling.OFF: False,
}


def _wire_counters(found: storage.MessageCounters) -> cf.MessageCounters:
    return cf.MessageCounters(
        abort_count=found.abort_count,
        move_count=found.move_count,
        last_move_time=found.last_move_time,
    )


class PoisonRequests(abc.ABC):
    """The poison-handling request handlers of a client session."""

    services: Services
    log: structlog.typing.FilteringBoundLogger
    conn_id: int
    #: The protocol version agreed in the Hello.
    _version: int

    @abc.abstractmethod
    def reply(self, request_id: int, value: cf.ServerReply) -> None:
        """Queue a reply."""

    @abc.abstractmethod
    def transaction(self, tx_id: int) -> Transaction:
        """The open transaction this connection calls ``tx_id``."""

    def poison_handlers(self) -> dict[type[Any], Callable[[int, Any], Awaitable[None] | None]]:
        """The handler of each poison-handling request class."""
        return {
            cf.SetQueueProperties: self._set_queue_properties,
            cf.MoveMessages: self._move_messages,
        }

    # ------------------------------------------------------------------ version 5 replies

    @property
    def _counted(self) -> bool:
        """True when this connection's messages carry their counters (version 5)."""
        return self._version >= cf.POISON_VERSION

    def message_frame(
        self, request_id: int, queue: QueueRecord, lookup_id: int, record: bytes
    ) -> bytes:
        """A Message reply around a stored message; with its counters on a version 5
        connection."""
        counters = None
        if self._counted:
            found = self.services.core.poison.counters(queue.queue_id, (lookup_id,))
            counters = _wire_counters(found.get(lookup_id, storage.NO_COUNTERS))
        return cf.encode_message_reply(
            request_id,
            queue.display_name,
            lookup_id,
            storage.message_arrived_time(record),
            storage.message_payload(record),
            counters,
        )

    def counters_trailer(self, queue: QueueRecord, lookup_ids: Iterable[int]) -> bytes:
        """The counters trailer of a MessageList of these messages (empty before version 5)."""
        if not self._counted:
            return b""
        ids = list(lookup_ids)
        found = self.services.core.poison.counters(queue.queue_id, ids)
        none = storage.NO_COUNTERS
        return b"".join(
            cf.counters_record(_wire_counters(found.get(lookup_id, none))) for lookup_id in ids
        )

    def for_version(self, queues: tuple[cf.QueueInfo, ...]) -> tuple[cf.QueueInfo, ...]:
        """Queue infos as this connection's version has them (no retry settings before 4)."""
        if self._counted or all(info.retry is None for info in queues):
            return queues
        return tuple(dataclasses.replace(info, retry=None) for info in queues)

    # ------------------------------------------------------------------ queue properties

    async def _set_queue_properties(self, request_id: int, request: cf.SetQueueProperties) -> None:
        try:
            enabled = _ENABLED[cf.PoisonHandling(request.poison)]
        except ValueError:
            choices = ", ".join(f"{p.value} ({p.name.lower()})" for p in cf.PoisonHandling)
            msg = f"poison must be {choices}, not {request.poison}"
            raise InvalidArgument(msg) from None
        services = self.services
        poison = services.core.poison
        _, unit = poison.settings_unit(
            request.name,
            enabled=enabled,
            retry_count=request.retry_count,
            retry_cycles=request.retry_cycles,
            retry_delay=request.retry_delay,
        )
        record = poison.settings_set(await self._poison_write(unit))
        settings = record.poison
        self.log.info(
            "queue_properties_set",
            queue=record.name,
            poison_handling=settings is not None,
            retry_count=None if settings is None else settings.retry_count,
            retry_cycles=None if settings is None else settings.retry_cycles,
            retry_delay=None if settings is None else settings.retry_delay,
        )
        self.reply(request_id, cf.Ok(value=record.queue_id))

    async def _poison_write(self, unit: storage.Unit) -> storage.UnitOutcome:
        try:
            return await self.services.committer.submit(unit, source=self.conn_id)
        except storage.StoreError as exc:
            raise from_store_error(exc) from exc

    # ------------------------------------------------------------------ moves

    async def _move_messages(self, request_id: int, request: cf.MoveMessages) -> None:
        core = self.services.core
        source, target = core.poison.move_queues(request.source, request.target)
        if request.all:
            if request.tx_id or request.lookup_id:
                msg = "a move of all messages names no message and is not part of a transaction"
                raise TransactionUsageError(msg) if request.tx_id else InvalidArgument(msg)
            count, last = await self._move_all(source, target, request)
        elif request.tx_id:
            tx = self.transaction(request.tx_id)
            held = core.poison.move_one(
                source, target, lookup_id=request.lookup_id, tx=tx, now=trio.current_time()
            )
            if held is None:
                self._nothing_to_move(source, request.lookup_id)
            count, last = (0, 0) if held is None else (1, 0)
        else:
            count, last = await self._move_one(source, target, request.lookup_id)
        if count and not request.tx_id:
            self.log.info(
                "messages_moved", source=source.name, target=target.name, count=count, last=last
            )
        self.reply(request_id, cf.Moved(count=count, lookup_id=last))

    @staticmethod
    def _nothing_to_move(source: QueueRecord, lookup_id: int) -> None:
        """A move found no message: an error only if it named one.

        Raises:
            QueueNotFound: the message named is not there, or a transaction holds it.
        """
        if lookup_id:
            msg = (
                f"message {lookup_id} is not in {source.display_name!r} (or a transaction holds it)"
            )
            raise QueueNotFound(msg)

    async def _move_one(
        self, source: QueueRecord, target: QueueRecord, lookup_id: int
    ) -> tuple[int, int]:
        services = self.services
        poison = services.core.poison
        held = poison.move_one(source, target, lookup_id=lookup_id, tx=None, now=0.0)
        if held is None:
            self._nothing_to_move(source, lookup_id)
            return 0, 0
        taken, unit = held
        assert unit is not None
        return await self._write_moves(source, [taken], unit)

    async def _move_all(
        self, source: QueueRecord, target: QueueRecord, request: cf.MoveMessages
    ) -> tuple[int, int]:
        core = self.services.core
        through = source.next_lookup_id - 1  # what arrives meanwhile stays
        total = last = 0
        while True:
            source, target = core.poison.move_queues(request.source, request.target)
            step = core.poison.move_step(source, target, through=through)
            if step is None:
                return total, last
            held, unit = step
            moved, newest = await self._write_moves(source, held, unit, step_of_many=True)
            if not moved:
                return total, last  # every move failed: gone meanwhile
            total += moved
            last = newest
            # Let the other connections in between the steps of a long move.
            await trio.lowlevel.checkpoint()

    async def _write_moves(
        self,
        source: QueueRecord,
        held: list[int],
        unit: storage.Unit,
        *,
        step_of_many: bool = False,
    ) -> tuple[int, int]:
        services = self.services
        poison = services.core.poison
        try:
            outcome = await services.committer.submit(unit, source=self.conn_id)
        except BaseException as exc:
            _, _, woken, _ = poison.move_done(source.queue_id, held, exc)
            services.signals.notify(woken)
            if isinstance(exc, storage.StoreError):
                raise from_store_error(exc) from exc
            raise
        moved, last, woken, error = poison.move_done(source.queue_id, held, outcome)
        services.signals.notify(woken)
        if error is not None and not step_of_many:
            raise error
        if error is not None and not moved:
            self.log.info("move_failed", source=source.name, error=error.message)
        return moved, last
